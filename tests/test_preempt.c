/* test_review_preempt.c - (review) recompute preemption, exactly.
 *
 * One vLLM lane with 12 KV blocks of 16 tokens, no watermark.  Requests A
 * and B (prompt 60, output 60) arrive together and prefill together
 * (4 blocks each).  Both need a 5th block at decode step 4, a 6th at step
 * 20, and a 7th at step 36, when none is left: B, the latest admitted, is
 * preempted holding 96 tokens (6 blocks) and 37 generated tokens.  B cannot
 * come back (7 blocks for 97 tokens, 5 free) until A finishes at step 59;
 * then B is re-prefilled with its 60 + 37 tokens, which must produce exactly
 * one new token (its 38th), keep its first-token time, and add one ITL
 * anchored at its last token before the preemption; it then decodes its
 * last 22 tokens alone.  Every end time is recomputed from the latency
 * model as test_engine.c does. */
#include <math.h>

#include "check.h"
#include "fixture.h"

/* One llama-2-7b replica on an A100 whose lane is cut to `blocks` blocks. */
static int run(int fast_forward, int64_t blocks, fx_result *x, hs_perf *perf_out, hs_err *err)
{
    const char *path = hs_test_tmpfile("preempt", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                                  "2024-01-01 00:00:00.0000000,60,60\n"
                                                  "2024-01-01 00:00:00.0000000,60,60\n");
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_replica *reps = NULL;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    hs_plan_req pr;
    hs_sink sink = {x, fx_sink_req, fx_sink_itl};
    const hs_policy_ops *pol = hs_policy_find("vllm");
    int rc, mt;
    int32_t mml = 128;
    memset(x, 0, sizeof *x);
    memset(&d, 0, sizeof d);
    hs_engine_cfg_defaults(&ec);
    ec.watermark = 0;
    ec.audit = 1;
    ec.fast_forward = fast_forward;
    hs_perf_cfg_defaults(&pc);
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "kind", "azure", NULL);
    hs_workload_set(&wc, "path", path, NULL);
    if ((rc = hs_model_find(&m, "llama-2-7b", err))) return rc;
    if ((rc = hs_cluster_find(&c, "dgx-a100", err))) return rc;
    mt = hs_engine_pass_tokens(&ec, pol, NULL, mml);
    memset(&pr, 0, sizeof pr);
    pr.model = &m;
    pr.cluster = c;
    pr.engine = &ec;
    pr.tp = 1;
    pr.pp = 1;
    pr.bits = 16;
    pr.max_replicas = 1;
    pr.max_tokens = mt;
    pr.max_model_len = mml;
    if ((rc = hs_planner_find("uniform")->plan(&pr, &d, err))) goto out;
    if ((rc = hs_replicas_build(&reps, &d, &m, c, &ec, &pc, mt, mml, err))) goto out;
    reps[0].kv_blocks = blocks;
    *perf_out = reps[0].perf;       /* read only, freed with the replicas */
    if ((rc = hs_source_open(&src, &wc, err))) goto out;
    if ((rc = hs_engine_create(&e, &ec, pol, NULL, hs_router_find("lor"), reps, d.n, src, &sink, mml, c, err))) goto out;
    rc = hs_engine_run(e, err);
    x->arrivals = e->arrivals;
    x->completed = e->completed;
    x->preemptions = e->preemptions;
    x->iterations = e->iterations;
    {
        /* the expected times, while the tables are alive */
        hs_perf *p = perf_out;
        hs_batch_shape b;
        hs_ns t, t1, fa, last_b, fb;
        int k;
        b = fx_prefill(2, (int[]){60, 60}, NULL);
        b.samples = 2;
        t1 = t = fx_step(p, 0, &b);
        for (k = 0; k < 36; k++) t = fx_step(p, t, (b = fx_decode(2, 120 + 2 * k + 2), &b));
        last_b = t;                  /* B's 37th token */
        for (; k < 59; k++) t = fx_step(p, t, (b = fx_decode(1, 60 + k + 1), &b));
        fa = t;
        b = fx_prefill(1, (int[]){97}, NULL);
        b.samples = 1;
        t = fx_step(p, t, &b);          /* B's 38th token */
        CHECK_INT(fx_find(x, 1) ? fx_find(x, 1)->first_token : -1, t1);
        for (k = 0; k < 22; k++) t = fx_step(p, t, (b = fx_decode(1, 97 + k + 1), &b));
        fb = t;
        CHECK(fx_find(x, 0) && fx_find(x, 1));
        if (fx_find(x, 0) && fx_find(x, 1)) {
            CHECK_INT(fx_find(x, 0)->first_token, t1);
            CHECK_INT(fx_find(x, 0)->finish, fa);
            CHECK_INT(fx_find(x, 0)->preemptions, 0);
            CHECK_INT(fx_find(x, 0)->output, 60);
            CHECK_INT(fx_find(x, 1)->first_sched, 0);
            CHECK_INT(fx_find(x, 1)->finish, fb);
            CHECK_INT(fx_find(x, 1)->preemptions, 1);
            CHECK_INT(fx_find(x, 1)->output, 60);
        }
        /* one interval per token after the first; per request they add up
         * to finish - first token, so the recompute interval is anchored at
         * B's last token before the preemption */
        CHECK_INT(x->itl_count, 59 + 59);
        CHECK_INT((int64_t)x->itl_sum_ns, (fa - t1) + (fb - t1));
        (void)last_b;
    }
out:
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_replicas_free(reps, d.n);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
    return rc;
}

int main(void)
{
    hs_test_root();
    for (int ff = 0; ff <= 1; ff++) {
        fx_result x;
        hs_perf p;
        hs_err err = {0};
        CHECK_OK(run(ff, 12, &x, &p, &err), &err);
        CHECK_INT(x.completed, 2);
        CHECK_INT(x.preemptions, 1);
        printf("fast_forward %d: iterations %lld, preemptions %lld\n", ff, (long long)x.iterations,
               (long long)x.preemptions);
        fx_free(&x);
    }
    return hs_check_result();
}
