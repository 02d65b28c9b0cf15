/* llmpq.c - `hetsim llmpq`: the LLM-PQ planner, its offline pipeline
 * runtime and the omega tool.
 *
 *   hetsim llmpq plan  --model M --cluster C [--planner llmpq|pipeedge|uniform-pp]
 *                      [--B 32 --s 512 --n 100 --theta 1 --group 1 --heuristic --all-orders
 *                       --ilp-limit 10 --limit 60 --eta E --xi X --bits 16,8,4,3
 *                       --omega FILE --out FILE --simulate --set perf.KEY=VALUE]
 *   hetsim llmpq simulate --model M --cluster C --plan FILE [--B --s --n --eta --xi]
 *                      [--set perf.KEY=VALUE]
 *   hetsim llmpq omega (--weights F.safetensors [--calib C.json] [--stochastic]
 *                       | --default --model M) [--model M] --out FILE
 * `plan` writes the deployment JSON (with per-layer bits) and prints one
 * summary line to stdout: planner, order, eta, xi, bits histogram,
 * objective, solver time, and with --simulate the pipeline simulation's
 * latency and throughput; then a `trust` line: where the FP16 layer's
 * times come from (the calibrated latency model unless perf.model is
 * roofline; qlat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/omega.h"
#include "plan/llmpq.h"
#include "plan/llmpq_pipe.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim llmpq plan --model M --cluster C [--planner llmpq|pipeedge|uniform-pp]\n"
            "         [--B 32] [--s 512] [--n 100] [--theta 1] [--group 1] [--heuristic] [--all-orders]\n"
            "         [--ilp-limit 2] [--limit 15] [--mip-gap 0.01] [--eta E] [--xi X] [--bits 16,8,4,3]\n"
            "         [--mem-frac 0.95] [--reserve-mib 1930] [--omega FILE] [--out FILE] [--simulate]\n"
            "         [--set perf.KEY=VALUE ...]\n"
            "       hetsim llmpq simulate --model M --cluster C --plan FILE [--B --s --n --eta --xi]\n"
            "         [--set perf.KEY=VALUE ...]\n"
            "       hetsim llmpq omega (--weights F.safetensors [--calib C.json] [--stochastic]\n"
            "                           | --default --model M) --out FILE\n"
            "The FP16 layer's times are the calibrated latency model's (measured tables, else\n"
            "fitted, else transferred; the trust line names which); --set perf.model=roofline\n"
            "prices every width on the datasheet roofline alone.\n");
}

typedef struct opts {
    const char *model, *cluster, *planner, *omega, *out, *plan, *weights, *calib, *bits;
    int simulate, stochastic, dflt;
    int set_B, set_s, set_n;   /* given on the command line (simulate keeps the plan's otherwise) */
    hs_pq_cfg cfg;
    hs_perf_cfg pc;            /* --set perf.KEY=VALUE */
} opts;

static int num(const char *flag, const char *v, double lo, double hi, double *out, hs_err *err)
{
    char *end;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(x >= lo && x <= hi))
        return hs_errf(err, HS_EINVAL, "%s: expected a number in [%g, %g], got \"%s\"", flag, lo, hi,
                       v ? v : "");
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, opts *o, hs_err *err)
{
    memset(o, 0, sizeof *o);
    hs_pq_cfg_defaults(&o->cfg);
    hs_perf_cfg_defaults(&o->pc);
    o->planner = "llmpq";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        int rc = 0;
#define STR(f, dst) if (!strcmp(a, f)) { if (!v) return hs_errf(err, HS_EINVAL, "%s: needs a value", f); dst = v; i++; continue; }
#define NUM(f, lo, hi, dst) if (!strcmp(a, f)) { if ((rc = num(f, v, lo, hi, &x, err))) return rc; dst = x; i++; continue; }
#define INT(f, lo, hi, dst) if (!strcmp(a, f)) { if ((rc = num(f, v, lo, hi, &x, err))) return rc; \
        if (x != (int)x) { return hs_errf(err, HS_EINVAL, "%s: expected an integer, got \"%s\"", f, v); } \
        dst = (int)x; i++; continue; }
        STR("--model", o->model)
        STR("--cluster", o->cluster)
        STR("--planner", o->planner)
        STR("--omega", o->omega)
        STR("--out", o->out)
        STR("--plan", o->plan)
        STR("--weights", o->weights)
        STR("--calib", o->calib)
        STR("--bits", o->bits)
        if (!strcmp(a, "--B")) o->set_B = 1;
        if (!strcmp(a, "--s")) o->set_s = 1;
        if (!strcmp(a, "--n")) o->set_n = 1;
        INT("--B", 1, 1 << 16, o->cfg.B)
        INT("--s", 1, 1 << 20, o->cfg.s)
        INT("--n", 1, 1 << 20, o->cfg.n)
        NUM("--theta", 0, 1e12, o->cfg.theta)
        INT("--group", 1, 64, o->cfg.group)
        NUM("--ilp-limit", 0.001, 1e6, o->cfg.ilp_limit_s)
        NUM("--limit", 0.001, 1e6, o->cfg.total_limit_s)
        INT("--eta", 1, 1 << 16, o->cfg.eta)
        NUM("--mip-gap", 0, 0.5, o->cfg.mip_gap)
        INT("--xi", 1, 1 << 16, o->cfg.xi)
        NUM("--mem-frac", 0.01, 1, o->cfg.mem_frac)
        if (!strcmp(a, "--reserve-mib")) {
            if ((rc = num(a, v, 0, 1 << 20, &x, err))) return rc;
            o->cfg.reserve_bytes = x * 1024 * 1024;
            i++;
            continue;
        }
        if (!strcmp(a, "--set")) {
            if (!v) return hs_errf(err, HS_EINVAL, "--set: needs perf.KEY=VALUE");
            if ((rc = hs_perf_cfg_set_arg(&o->pc, v, err))) return rc;
            i++;
            continue;
        }
        if (!strcmp(a, "--heuristic")) { o->cfg.heuristic = 1; continue; }
        if (!strcmp(a, "--all-orders")) { o->cfg.all_orders = 1; continue; }
        if (!strcmp(a, "--simulate")) { o->simulate = 1; continue; }
        if (!strcmp(a, "--stochastic")) { o->stochastic = 1; continue; }
        if (!strcmp(a, "--default")) { o->dflt = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        return hs_errf(err, HS_EINVAL, "llmpq: unknown option \"%s\"", a);
#undef STR
#undef NUM
#undef INT
    }
    if (o->bits) {
        char buf[64], *tok, *save;
        snprintf(buf, sizeof buf, "%s", o->bits);
        o->cfg.bits_mask = 0;
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int k = hs_bits_index(atoi(tok));
            if (k < 0) return hs_errf(err, HS_EINVAL, "--bits: \"%s\" is not 16, 8, 4 or 3", tok);
            o->cfg.bits_mask |= 1 << k;
        }
    }
    return 0;
}

static void job_of(const hs_pq_plan *p, const hs_pq_cfg *cfg, hs_pipe_job *jb)
{
    memset(jb, 0, sizeof *jb);
    jb->ndev = p->ndev;
    for (int j = 0; j < p->ndev; j++) {
        jb->dev[j] = p->dev[j];
        for (int l = p->first[j]; l < p->first[j + 1]; l++) jb->nbits[j][hs_bits_index(p->bits[l])]++;
    }
    jb->B = cfg->B;
    jb->s = cfg->s;
    jb->n = cfg->n;
    jb->eta = p->eta;
    jb->xi = p->xi;
    jb->kv_bits = cfg->kv_bits;
}

static void print_plan(const hs_pq_plan *p, const hs_cluster *c, FILE *fp)
{
    int cnt[HS_NBITS] = {0};
    for (int l = 0; l < p->first[p->ndev]; l++) cnt[hs_bits_index(p->bits[l])]++;
    fprintf(fp, "order=");
    for (int j = 0; j < p->ndev; j++)
        fprintf(fp, "%s%s:%d", j ? "," : "", hs_cluster_gpu(c, p->dev[j])->name,
                p->first[j + 1] - p->first[j]);
    fprintf(fp, " eta=%d xi=%d bits16/8/4/3=%d/%d/%d/%d", p->eta, p->xi, cnt[0], cnt[1], cnt[2], cnt[3]);
}

/* The trust line: where the FP16 layer's times come from (each source
 * carries its expected error, as a run's trust line does). */
static void print_trust(const char *src)
{
    printf("trust   %s; attention and embedding on the roofline (eager kernels)\n",
           *src ? src : "datasheet roofline (perf.model roofline)");
}

static int simulate(const hs_model *m, const hs_cluster *c, const hs_pq_plan *p,
                    const hs_pq_cfg *cfg, const hs_perf_cfg *pc, hs_pipe_result *r, hs_err *err)
{
    hs_pipe_job jb;
    int rc;
    job_of(p, cfg, &jb);
    if ((rc = hs_pipe_offline(m, c, pc, &jb, r, err))) return rc;
    printf(" latency_s=%.2f throughput=%.2f prefill_s=%.2f", r->latency_s, r->throughput, r->prefill_s);
    return 0;
}

int hs_llmpq_command(int argc, char **argv)
{
    opts o;
    hs_err err = {0};
    hs_model m;
    hs_cluster *c = NULL;
    double *om = NULL;
    int rc, layers = 0;
    const char *sub = argc > 1 ? argv[1] : "";
    if ((rc = parse(argc, argv, &o, &err)) == 1 || !strcmp(sub, "--help") || !*sub) {
        usage(*sub ? stdout : stderr);
        return *sub ? 0 : 2;
    }
    if (rc) goto fail;
    if (!strcmp(sub, "omega")) {
        if (!o.out) { rc = hs_errf(&err, HS_EINVAL, "omega: --out FILE is required"); goto fail; }
        if (o.weights) {
            if ((rc = hs_omega_from_safetensors(o.weights, o.calib, o.stochastic, &om, &layers, &err))) goto fail;
        } else if (o.dflt && o.model) {
            if ((rc = hs_model_find(&m, o.model, &err))) goto fail;
            layers = m.layers;
            if (!(om = malloc(sizeof *om * layers * HS_NBITS))) { rc = hs_errf(&err, HS_ENOMEM, "out of memory"); goto fail; }
            hs_omega_default(&m, om);
        } else {
            rc = hs_errf(&err, HS_EINVAL, "omega: give --weights F.safetensors, or --default --model M");
            goto fail;
        }
        if ((rc = hs_omega_write(o.out, o.model ? o.model : o.weights, layers, om, &err))) goto fail;
        fprintf(stderr, "wrote omega for %d layers to %s\n", layers, o.out);
        free(om);
        return 0;
    }
    if (strcmp(sub, "plan") && strcmp(sub, "simulate")) {
        rc = hs_errf(&err, HS_EINVAL, "llmpq: unknown subcommand \"%s\" (plan, simulate, omega)", sub);
        goto fail;
    }
    if (!o.model || !o.cluster) { rc = hs_errf(&err, HS_EINVAL, "llmpq %s: --model and --cluster are required", sub); goto fail; }
    if ((rc = hs_model_find(&m, o.model, &err)) || (rc = hs_cluster_find(&c, o.cluster, &err))) goto fail;
    if (!strcmp(sub, "simulate")) {
        hs_pq_plan p;
        if (!o.plan) { rc = hs_errf(&err, HS_EINVAL, "simulate: --plan FILE is required"); goto fail; }
        if ((rc = hs_pq_plan_read(&p, o.plan, &m, c, &err))) goto fail;
        if (o.cfg.eta) p.eta = o.cfg.eta;
        if (o.cfg.xi) p.xi = o.cfg.xi;
        /* The plan's workload unless the command line gives another. */
        if (p.B && !o.set_B) o.cfg.B = p.B;
        if (p.s && !o.set_s) o.cfg.s = p.s;
        if (p.n && !o.set_n) o.cfg.n = p.n;
        if (p.kv_bits) o.cfg.kv_bits = p.kv_bits;
        if (!p.eta || !p.xi) { rc = hs_errf(&err, HS_EINVAL, "%s: no llmpq.eta/xi; give --eta and --xi", o.plan); goto fail; }
        hs_pipe_result r;
        print_plan(&p, c, stdout);
        if ((rc = simulate(&m, c, &p, &o.cfg, &o.pc, &r, &err))) goto fail;
        printf("\n");
        print_trust(r.latency);
    } else {
        hs_pq_plan p;
        int kind = !strcmp(o.planner, "llmpq") ? HS_PQ_LLMPQ
                   : !strcmp(o.planner, "pipeedge") ? HS_PQ_PIPEEDGE
                   : !strcmp(o.planner, "uniform-pp") ? HS_PQ_UNIFORM : -1;
        if (kind < 0) { rc = hs_errf(&err, HS_EINVAL, "--planner: \"%s\" is not llmpq, pipeedge or uniform-pp", o.planner); goto fail; }
        if (o.omega) {
            if (!(om = malloc(sizeof *om * m.layers * HS_NBITS))) { rc = hs_errf(&err, HS_ENOMEM, "out of memory"); goto fail; }
            if ((rc = hs_omega_read(o.omega, m.layers, om, &err))) goto fail;
            o.cfg.omega = om;
        }
        rc = hs_pq_plan_search(&m, c, &o.cfg, &o.pc, kind, &p, &err);
        printf("planner=%s model=%s cluster=%s ", o.planner, m.name, c->name);
        if (rc == HS_ENOFIT) {
            printf("result=oom solve_s=%.3f\n", p.solve_s);
            fprintf(stderr, "hetsim: %s\n", err.msg);
            goto fail_quiet;
        }
        if (rc) { printf("result=error\n"); goto fail; }
        print_plan(&p, c, stdout);
        printf(" objective=%.3f est_s=%.2f quality=%.4f solve_s=%.3f instances=%d ilps=%d limited=%d source=%s",
               p.obj, p.est_s, p.quality, p.solve_s, p.n_inst, p.n_ilp, p.n_timeout,
               kind != HS_PQ_LLMPQ ? "dp" : p.from_ilp ? "ilp" : "heuristic");
        if (o.simulate) {
            hs_pipe_result r;
            if ((rc = simulate(&m, c, &p, &o.cfg, &o.pc, &r, &err))) goto fail;
        }
        printf("\n");
        print_trust(p.latency);
        if (o.out) {
            char *txt = hs_pq_deploy_json(&p, &m, c, &o.cfg);
            FILE *f = txt ? fopen(o.out, "w") : NULL;
            int bad = !f || fputs(txt, f) < 0;
            if (f && fclose(f)) bad = 1;
            if (bad) {
                free(txt);
                if (f) remove(o.out);   /* never leave half a deployment */
                rc = hs_errf(&err, HS_EIO, "%s: cannot write the deployment", o.out);
                goto fail;
            }
            free(txt);
        }
    }
    free(om);
    hs_cluster_destroy(c);
    return 0;
fail:
    fprintf(stderr, "hetsim: %s\n", err.msg);
fail_quiet:
    free(om);
    hs_cluster_destroy(c);
    return hs_exit_code(rc);
}
