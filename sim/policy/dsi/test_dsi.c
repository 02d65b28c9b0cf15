/* test_dsi.c - the simulated DeepSpeed-Inference baseline (dsi.c) against
 * the analytic one of the ExeGPT estimator (hs_exegpt_dsi): a batch of the
 * longest prompt and output, for several prompt / generation micro-batch
 * counts, on a 4-stage pipeline (OPT-13B, 4 A40s, task S) and on one TP
 * stage, within 5%. */
#include <math.h>

#include "check.h"
#include "fixture.h"
#include "plan/exegpt.h"

typedef struct est {
    hs_model m;
    hs_cluster *c;
    hs_workload_cfg wc;
    hs_exegpt_dist din, dout;
    hs_exegpt_opts eo;
    hs_exegpt *x;
} est;

static void est_open(est *f)
{
    hs_err err = {0};
    memset(f, 0, sizeof *f);
    CHECK_OK(hs_model_find(&f->m, "opt-13b", &err), &err);
    CHECK_OK(hs_cluster_find(&f->c, "exegpt-a40x4", &err), &err);
    hs_workload_defaults(&f->wc);
    hs_workload_set(&f->wc, "preset", "S", NULL);
    CHECK_OK(hs_exegpt_dist_from_lendist(&f->din, &f->wc.prompt, &err), &err);
    CHECK_OK(hs_exegpt_dist_from_lendist(&f->dout, &f->wc.output, &err), &err);
    hs_exegpt_opts_defaults(&f->eo);
    CHECK_OK(hs_exegpt_create(&f->x, &f->m, f->c, &f->din, &f->dout, &f->eo, &err), &err);
}

static void est_close(est *f)
{
    hs_exegpt_destroy(f->x);
    hs_exegpt_dist_free(&f->din);
    hs_exegpt_dist_free(&f->dout);
    hs_cluster_destroy(f->c);
}

/* The longest batch time of 1 + b queries of the longest lengths under dsi
 * (the first batch holds the one query there when the lane wakes). */
static double sim_batch(const est *f, int tp, int pp, int b, int me, int md, int64_t *iters)
{
    fx_opts o;
    fx_result r;
    hs_err err = {0};
    char v[32];
    double lat = 0;
    fx_defaults(&o);
    o.policy = "dsi";
    o.model = "opt-13b";
    o.cluster = "exegpt-a40x4";
    o.tp = tp;
    o.pp = pp;
    o.max_replicas = 1;
    o.max_model_len = f->din.max + f->dout.max;
    o.ec.audit = 1;
    o.pc = f->eo.perf;
    hs_workload_set(&o.wc, "preset", "", NULL);
    hs_workload_set(&o.wc, "kind", "synthetic", NULL);
    hs_workload_set(&o.wc, "arrival", "constant", NULL);
    hs_workload_set(&o.wc, "rate", "1000000", NULL);
    hs_workload_set(&o.wc, "prompt.kind", "fixed", NULL);
    snprintf(v, sizeof v, "%d", f->din.max);
    hs_workload_set(&o.wc, "prompt.mean", v, NULL);
    hs_workload_set(&o.wc, "output.kind", "fixed", NULL);
    snprintf(v, sizeof v, "%d", f->dout.max);
    hs_workload_set(&o.wc, "output.mean", v, NULL);
    o.wc.max_requests = b + 1;
    snprintf(v, sizeof v, "%d", b);
    fx_popt(&o, "dsi_batch", v);
    snprintf(v, sizeof v, "%d", me);
    fx_popt(&o, "dsi_prompt_mb", v);
    snprintf(v, sizeof v, "%d", md);
    fx_popt(&o, "dsi_gen_mb", v);
    CHECK_OK(fx_run(&o, &r, &err), &err);
    CHECK(r.completed == b + 1 && r.dropped == 0 && r.preemptions == 0);
    for (int64_t i = 0; i < r.n; i++)
        lat = fmax(lat, (r.rec[i].finish - r.rec[i].first_sched) * 1e-9);
    *iters = r.iterations;
    fx_free(&r);
    return lat;
}

/* Simulated within 5% of analytic where both apply, and micro-batching
 * behaves as a pipeline does: on one stage more micro-batches only add
 * passes; on four, prompt micro-batches overlap the stages. */
static void test_dsi_vs_analytic(void)
{
    static const struct { int tp, pp, b, me, md; } c[] = {
        {1, 4, 16, 1, 1}, {1, 4, 16, 4, 1}, {1, 4, 16, 4, 2}, {1, 4, 16, 4, 4}, {1, 4, 32, 8, 4},
        {1, 4, 12, 3, 2}, {4, 1, 16, 1, 1}, {4, 1, 16, 2, 2},
    };
    est f;
    double lat[sizeof c / sizeof c[0]];
    est_open(&f);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        hs_err err = {0};
        double thr, alat;
        int fits;
        int64_t iters;
        CHECK_OK(hs_exegpt_dsi(f.x, c[i].tp, c[i].tp > 1 ? 1 : 0, c[i].b, c[i].me, c[i].md, &thr, &alat, &fits,
                               &err), &err);
        CHECK(fits);
        lat[i] = sim_batch(&f, c[i].tp, c[i].pp, c[i].b, c[i].me, c[i].md, &iters);
        printf("DSI TP%d PP%d b=%d m=%d/%d: analytic %.3f s, simulated %.3f s (%+.2f%%), %lld iterations\n",
               c[i].tp, c[i].pp, c[i].b, c[i].me, c[i].md, alat, lat[i], 100 * (lat[i] - alat) / alat,
               (long long)iters);
        CHECK_REL(lat[i], alat, 0.05);
        /* one lane runs the batch: a prompt pass and the decoding steps of
         * two batches (1 query, then b) */
        CHECK(iters == 2 * (int64_t)f.dout.max);
    }
    CHECK(lat[1] < lat[0]);   /* 4 prompt micro-batches fill the 4 stages */
    CHECK(lat[2] < lat[1]);   /* and 2 decode micro-batches overlap there */
    CHECK(lat[7] >= lat[6]);  /* one stage: micro-batches only add passes */
    est_close(&f);
}

int main(void)
{
    hs_test_root();
    test_dsi_vs_analytic();
    return hs_check_result();
}
