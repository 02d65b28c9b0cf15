/* perf.c - `hetsim perf`: the latency-model tools.
 *   import-vidur VIDUR_DIR OUT_DIR  convert Vidur's published profiles into
 *                                   our table format (profiles/README.md)
 *   fit [DIRS]                      fit the roofline efficiency curves on
 *                                   measured tables and print them
 *   crossval VIDUR_DIR              cross-validate the fitted model on
 *                                   Vidur's A100/A40 tables
 *   compare DIR [options]           error of the roofline (and the fitted
 *                                   model) on one measured table
 *   fit-overhead CSV [options]      fit an engine profile (host cost per
 *                                   iteration) on Vidur's cpu_overheads.csv
 *   step --model M --cluster C ...  one iteration's predicted time, split into
 *                                   dense kernels, LM head, attention and host */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/conf.h"

#include "cli/cli.h"
#include "hw/hw.h"
#include "perf/calib.h"
#include "perf/fitted.h"
#include "perf/overhead.h"
#include "perf/table.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim perf <command>\n"
            "  import-vidur VIDUR_DIR OUT_DIR   convert Vidur profiles (compute/, network/,\n"
            "                                   *_attention_*.csv) to OUT_DIR/<gpu>/<model>/\n"
            "  fit [DIR[,DIR...]]               fit the efficiency curves on measured tables\n"
            "                                   (default: <data root>/profiles) and print them\n"
            "  crossval VIDUR_DIR               fit on Llama-2-7B A100, predict 70B A100; fit on\n"
            "                                   A100, predict A40; error per operator\n"
            "                                   (VIDUR_DIR: Vidur's data folder, compute/ and\n"
            "                                   network/ inside)\n"
            "  compare DIR [--fit DIRS] [--tflops X] [--gbs Y]\n"
            "                                   error per operator of the datasheet roofline\n"
            "                                   (or one on the given ceilings) and, with --fit,\n"
            "                                   of the model fitted on DIRS' tables of other\n"
            "                                   GPUs, against the measured table DIR\n"
            "  calibrate [DIRS] [--out FILE]    fit the shipped calibration on every measured\n"
            "                                   table (default <data root>/profiles) with\n"
            "                                   leave-one-model-out and leave-one-GPU-out errors;\n"
            "                                   writes profiles/calibration.json (or FILE)\n"
            "  step --model M --cluster C [--tp N] [--bits B] [--batch B,...] [--context X,...]\n"
            "       [--prefill C,...] [--set perf.KEY=VALUE ...]\n"
            "                                   one iteration's predicted time on GPUs 0..N-1 of\n"
            "                                   the cluster, split into dense kernels (with TP\n"
            "                                   collectives), LM head, attention, the wait for an\n"
            "                                   eager engine's dispatch and the engine host\n"
            "                                   cost: decode steps of B sequences of X context\n"
            "                                   tokens, or one prompt of C tokens\n"
            "  fit-overhead CSV [--out FILE] [--name N] [--display TEXT] [--source TEXT]\n"
            "               [--licence TEXT] [--collective-launch-us X]\n"
            "                                   fit an engine profile (host cost per iteration:\n"
            "                                   schedule, prepare inputs, sample, process outputs,\n"
            "                                   Ray) on Vidur's cpu_overheads.csv; prints the fit\n"
            "                                   and leave-one-model-out errors; the host launch\n"
            "                                   per TP collective is given (default 0: hidden\n"
            "                                   under CUDA graphs)\n");
}

/* Parses a comma-separated list of integers in [lo, hi] into v (at most
 * cap); returns the count, -1 on a bad list (reported). */
static int int_list(const char *opt, const char *s, long lo, long hi, long *v, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < lo || x > hi || (*end && *end != ',') || n == cap) {
            hs_eprintf("hetsim: perf step: %s \"%s\": expected up to %d integers in %ld..%ld, comma-separated\n",
                    opt, s, cap, lo, hi);
            return -1;
        }
        v[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (!n) hs_eprintf("hetsim: perf step: %s: empty list\n", opt);
    return n ? n : -1;
}

/* One row of `perf step`: the hot path's own sums (hs_perf_stage_ns,
 * hs_perf_step_ns); attention is the stage time less its tabulated dense
 * and head parts, so the columns add up to the total whatever terms the
 * stage time gains. */
static void step_line(const hs_perf *p, const char *kind, const hs_batch_shape *b, long tokens)
{
    const hs_perf_stage *s = &p->stage[0];
    hs_perf bare = *p;  /* shallow: the same tables without the dispatch floor */
    double stage = hs_perf_stage_ns(p, 0, b), host = hs_perf_step_ns(p, b), gpu;
    double dense = s->dense[b->tokens], head = s->head[b->samples];
    bare.stage[0].dispatch_ns = 0;
    gpu = hs_perf_stage_ns(&bare, 0, b);
    /* wait: the GPU idles for the host issuing the layers (overhead.h) */
    printf("%-8s %7d %9ld %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f\n", kind, b->dec_seqs ? b->dec_seqs : b->pre_chunks,
           tokens, dense / 1e6, head / 1e6, (gpu - dense - head) / 1e6, (stage - gpu) / 1e6, host / 1e6,
           (stage + host) / 1e6);
}

/* `hetsim perf step`: the hot path's arithmetic for chosen batches, so
 * users (and tools/bench-fidelity) can see what one iteration costs and
 * where the time goes. */
static int perf_step(int argc, char **argv)
{
    const char *model = NULL, *cluster = NULL;
    long tp = 1, bits = 16, batch[64] = {1, 8, 32, 128}, ctx[64] = {1024}, pre[64];
    int nb = 4, nc = 1, np = 0, rc, maxt = 1, maxs = 1;
    hs_perf_cfg cfg;
    hs_model m;
    hs_cluster *c = NULL;
    hs_layout l;
    hs_perf p;
    hs_err err = {0};
    hs_perf_cfg_defaults(&cfg);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            hs_eprintf("hetsim: perf step: %s needs a value (see hetsim perf --help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--model")) model = argv[++i];
        else if (!strcmp(a, "--cluster")) cluster = argv[++i];
        else if (!strcmp(a, "--tp") || !strcmp(a, "--bits")) {
            long v[1];
            if (int_list(a, argv[++i], a[2] == 't' ? 1 : 3, a[2] == 't' ? HS_MAX_TP : 16, v, 1) < 0) return 2;
            if (a[2] == 't') tp = v[0];
            else bits = v[0];
        } else if (!strcmp(a, "--batch")) {
            if ((nb = int_list(a, argv[++i], 1, 1 << 16, batch, 64)) < 0) return 2;
        } else if (!strcmp(a, "--context")) {
            if ((nc = int_list(a, argv[++i], 0, 1 << 24, ctx, 64)) < 0) return 2;
        } else if (!strcmp(a, "--prefill")) {
            if ((np = int_list(a, argv[++i], 1, 1 << 20, pre, 64)) < 0) return 2;
        } else if (!strcmp(a, "--set")) {
            if (hs_perf_cfg_set_arg(&cfg, argv[++i], &err)) {
                hs_eprintf("hetsim: perf step: %s\n", err.msg);
                return 2;
            }
        } else {
            hs_eprintf("hetsim: perf step: unexpected argument \"%s\" (see hetsim perf --help)\n", a);
            return 2;
        }
    }
    if (!model || !cluster) {
        hs_eprintf("hetsim: perf step: --model and --cluster are required\n");
        return 2;
    }
    if ((rc = hs_model_find(&m, model, &err)) || (rc = hs_cluster_find(&c, cluster, &err))) goto out;
    if (tp > c->n_gpus) {
        rc = hs_errf(&err, HS_ERANGE, "--tp %ld: cluster %s has %d GPUs", tp, c->name, c->n_gpus);
        goto out;
    }
    memset(&l, 0, sizeof l);
    l.pp = 1;
    l.kv_bits = 16;
    l.stage[0].tp = (int)tp;
    l.stage[0].layers = m.layers;
    l.stage[0].bits = (int)bits;
    for (int i = 0; i < tp; i++) l.stage[0].gpus[i] = i;
    for (int i = 0; i < nb; i++) maxs = batch[i] > maxs ? (int)batch[i] : maxs;
    for (int i = 0; i < np; i++) maxt = pre[i] > maxt ? (int)pre[i] : maxt;
    maxt = maxs > maxt ? maxs : maxt;
    if ((rc = hs_perf_build(&p, &cfg, &m, c, &l, maxt, maxs, &err))) goto out;
    printf("%s on %s, TP %ld, %ld-bit: latency model %s, engine %s\n", m.name, c->name, tp, bits,
           p.model_name, p.engine);
    if (p.calib[0]) printf("trust: %s\n", p.calib);
    if (p.stage[0].dispatch_ns > 0)
        printf("dispatch floor: %.1f us per layer (%d operators, engine %s)\n",
               p.stage[0].dispatch_ns / m.layers * 1e-3, hs_model_layer_ops(&m, (int)tp), p.engine);
    /* tokens: the context of each decoding sequence, or the prompt */
    printf("%-8s %7s %9s %9s %9s %9s %9s %9s %10s\n", "kind", "batch", "tokens", "dense_ms", "head_ms",
           "attn_ms", "wait_ms", "host_ms", "total_ms");
    for (int j = 0; j < nc && nb; j++)
        for (int i = 0; i < nb; i++) {
            hs_batch_shape b;
            memset(&b, 0, sizeof b);
            b.tokens = b.samples = b.dec_seqs = (int32_t)batch[i];
            b.dec_ctx = (int64_t)batch[i] * ctx[j];
            step_line(&p, "decode", &b, ctx[j]);
        }
    for (int i = 0; i < np; i++) {
        hs_batch_shape b;
        memset(&b, 0, sizeof b);
        b.tokens = (int32_t)pre[i];
        b.samples = b.pre_chunks = 1;
        b.pre_self = (double)pre[i] * (pre[i] + 1) / 2.0;
        b.pre_tokens = pre[i];
        step_line(&p, "prefill", &b, pre[i]);
    }
    hs_perf_free(&p);
out:
    hs_cluster_destroy(c);
    if (rc) hs_eprintf("hetsim: perf step: %s\n", err.msg);
    return hs_cli_exit_code(rc);
}

int hs_cli_perf(int argc, char **argv)
{
    hs_err err = {0};
    int rc;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "import-vidur")) {
        if (argc != 4) {
            hs_eprintf("hetsim: perf import-vidur: expected VIDUR_DIR OUT_DIR\n");
            return 2;
        }
        rc = hs_vidur_import_all(argv[2], argv[3], stdout, &err);
    } else if (!strcmp(argv[1], "fit")) {
        rc = hs_fit_report(argc > 2 ? argv[2] : NULL, stdout, &err);
    } else if (!strcmp(argv[1], "crossval")) {
        if (argc != 3) {
            hs_eprintf("hetsim: perf crossval: expected VIDUR_DIR (Vidur's data folder)\n");
            return 2;
        }
        rc = hs_perf_crossval(argv[2], stdout, &err);
    } else if (!strcmp(argv[1], "calibrate")) {
        char root[700], outp[760];
        const char *dirs = NULL, *out = NULL;
        static hs_calib cal;
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--out") && i + 1 < argc) {
                out = argv[++i];
            } else if (argv[i][0] == '-' || dirs) {
                hs_eprintf("hetsim: perf calibrate: unexpected argument \"%s\" (see hetsim perf --help)\n", argv[i]);
                return 2;
            } else {
                dirs = argv[i];
            }
        }
        snprintf(root, sizeof root, "%s/profiles", hs_data_root());
        snprintf(outp, sizeof outp, "%s/calibration.json", root);
        rc = hs_calib_build(&cal, dirs ? dirs : root, stdout, &err);
        if (!rc) rc = hs_calib_write(&cal, out ? out : outp, &err);
        if (!rc) printf("wrote %s\n", out ? out : outp);
    } else if (!strcmp(argv[1], "step")) {
        return perf_step(argc, argv);
    } else if (!strcmp(argv[1], "fit-overhead")) {
        hs_ovh_opts o = {0};
        const char *csv = NULL;
        o.collective_launch_us = 0;
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i];
            const char **slot = !strcmp(a, "--out") ? &o.out : !strcmp(a, "--name") ? &o.name
                              : !strcmp(a, "--display") ? &o.display : !strcmp(a, "--source") ? &o.source
                              : !strcmp(a, "--licence") ? &o.licence : NULL;
            if ((slot || !strcmp(a, "--collective-launch-us")) && i + 1 >= argc) {
                hs_eprintf("hetsim: perf fit-overhead: %s needs a value\n", a);
                return 2;
            }
            if (slot) {
                *slot = argv[++i];
            } else if (!strcmp(a, "--collective-launch-us")) {
                char *end;
                double v = strtod(argv[++i], &end);
                if (end == argv[i] || *end || !(v >= 0) || v > 1e5) {
                    hs_eprintf("hetsim: perf fit-overhead: --collective-launch-us \"%s\": expected a number in 0..1e5\n", argv[i]);
                    return 2;
                }
                o.collective_launch_us = v;
            } else if (a[0] == '-' || csv) {
                hs_eprintf("hetsim: perf fit-overhead: unexpected argument \"%s\" (see hetsim perf --help)\n", a);
                return 2;
            } else {
                csv = a;
            }
        }
        if (!csv) {
            hs_eprintf("hetsim: perf fit-overhead: expected Vidur's cpu_overheads.csv\n");
            return 2;
        }
        rc = hs_ovh_report(csv, &o, stdout, NULL, NULL, &err);
    } else if (!strcmp(argv[1], "compare")) {
        hs_compare_opts o = {0};
        const char *dir = NULL;
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i];
            if ((!strcmp(a, "--fit") || !strcmp(a, "--tflops") || !strcmp(a, "--gbs")) && i + 1 >= argc) {
                hs_eprintf("hetsim: perf compare: %s needs a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--fit")) {
                o.fit_dirs = argv[++i];
            } else if (!strcmp(a, "--tflops") || !strcmp(a, "--gbs")) {
                char *end;
                double v = strtod(argv[++i], &end);
                if (end == argv[i] || *end || !(v > 0) || v > 1e7) {
                    hs_eprintf("hetsim: perf compare: %s \"%s\": expected a positive number\n", a, argv[i]);
                    return 2;
                }
                if (a[2] == 't') o.tflops = v;
                else o.gbs = v;
            } else if (a[0] == '-' || dir) {
                hs_eprintf("hetsim: perf compare: unexpected argument \"%s\" (see hetsim perf --help)\n", a);
                return 2;
            } else {
                dir = a;
            }
        }
        if (!dir) {
            hs_eprintf("hetsim: perf compare: expected a table directory (holding meta.json)\n");
            return 2;
        }
        rc = hs_perf_compare(dir, &o, NULL, stdout, &err);
    } else {
        hs_eprintf("hetsim: perf: unknown command \"%s\" (see hetsim perf --help)\n", argv[1]);
        return 2;
    }
    if (rc) hs_eprintf("hetsim: %s\n", err.msg);
    return hs_cli_exit_code(rc);
}
