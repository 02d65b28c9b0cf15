/* test_disagg.c - disaggregated prefill/decode serving.
 *
 * 1. Exact timing of one request: prefill on replica 0, its KV (32 layers x
 *    100 tokens x 16 KiB) sent over NVLink to replica 1, two decode steps
 *    there; every time recomputed by hand from the latency model and the
 *    link (latency + bytes / bandwidth, rounded up to the ns).
 * 2. Invariants under KV pressure with the audit on after every event
 *    (blocks held on both sides during a hand-over are in the books):
 *    every arrival ends once, in time order, causally.
 * 3. Fast-forward on the decode replicas changes nothing.
 * 4. Bad deployments are refused with one clear message. */
#include <math.h>

#include "check.h"
#include "fixture.h"

static void exact_one(void)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    hs_model m;
    hs_cluster *c = NULL;
    hs_layout l;
    hs_perf p;
    hs_batch_shape b = {0};
    hs_ns t1, land, e1, e2;
    double bytes, dur;
    const char *trace = hs_test_tmpfile("disagg",
                                        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                        "2024-01-01 00:00:00.0000000,100,3\n");
    fx_defaults(&o);
    o.model = "llama-2-7b";
    o.cluster = "dgx-a100";
    o.max_replicas = 2;
    o.prefill_replicas = 1;
    o.ec.audit = 1;
    hs_workload_set(&o.wc, "kind", "azure", NULL);
    hs_workload_set(&o.wc, "path", trace, NULL);
    CHECK_OK(fx_run(&o, &x, &err), &err);
    CHECK_INT(x.n, 1);
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    memset(&l, 0, sizeof l);
    l.pp = 1;
    l.kv_bits = 16;
    l.stage[0] = (hs_stage_layout){1, 32, 16, {0}, 0};
    CHECK_OK(hs_perf_build(&p, &o.pc, &m, c, &l, 4096, o.ec.max_num_seqs, &err), &err);
    /* prefill on replica 0 */
    b.tokens = 100;
    b.samples = 1;
    b.pre_chunks = 1;
    b.pre_self = 100 * 101 / 2.0;
    b.pre_tokens = 100;
    t1 = fx_step(&p, 0, &b);
    /* KV of 32 layers x 100 tokens x (2 x 32 heads x 128 x 2 bytes) over GPU 0 -> 1 */
    bytes = 32.0 * 100 * 16384;
    dur = bytes * 1e9 / hs_cluster_bw(c, 0, 1);
    land = t1 + hs_ns_from_s(hs_cluster_lat(c, 0, 1)) + (hs_ns)ceil(dur - (dur * 1e-13 + 1e-6));
    /* two decode steps on replica 1 (identical GPU, identical tables) */
    b = (hs_batch_shape){0};
    b.tokens = b.samples = b.dec_seqs = 1;
    b.dec_ctx = 101;
    e1 = fx_step(&p, land, &b);
    b.dec_ctx = 102;
    e2 = fx_step(&p, e1, &b);
    if (x.n == 1) {
        const hs_req_record *r = &x.rec[0];
        CHECK_INT(r->first_token, t1);
        CHECK_INT(r->finish, e2);
        CHECK_INT(r->replica, 1);
        CHECK_INT(r->output, 3);
        CHECK(land > t1 + 100000); /* 52 MB over NVLink: well over 0.1 ms */
    }
    /* ITL: token 2 waits for the hand-over, token 3 one step */
    CHECK_INT(x.itl_count, 2);
    CHECK_NEAR(x.itl_sum_ns, (double)(e2 - t1), 0.5);
    hs_perf_free(&p);
    hs_cluster_destroy(c);
    fx_free(&x);
}

static void check_all(const char *what, const fx_opts *o, int64_t n)
{
    fx_result x;
    hs_err err = {0};
    int64_t bad = 0, seen_dec = 0;
    int rc = fx_run(o, &x, &err);
    if (rc) fprintf(stderr, "%s: %s\n", what, err.msg);
    CHECK_INT(rc, 0);
    CHECK_INT(x.arrivals, n);
    CHECK_INT(x.completed + x.dropped, n);
    CHECK_INT(x.n, n);
    CHECK(!x.clock_back);
    for (int64_t i = 0; i < x.n; i++) {
        const hs_req_record *r = &x.rec[i];
        if (r->dropped) continue;
        bad += !(r->arrival <= r->first_sched && r->first_sched <= r->first_token &&
                 r->first_token <= r->finish);
        seen_dec += r->output > 1 && r->replica >= o->prefill_replicas;
    }
    CHECK_INT(bad, 0);
    CHECK(seen_dec > 0); /* multi-token requests finish on decode replicas */
    printf("%-28s done %lld dropped %lld preemptions %lld\n", what, (long long)x.completed,
           (long long)x.dropped, (long long)x.preemptions);
    fx_free(&x);
}

static void pressure(fx_opts *o)
{
    fx_pressure(o, "30", 300);
    o->prefill_replicas = 2; /* of the four T4s */
}

static int same(const fx_result *a, const fx_result *b)
{
    if (a->n != b->n || a->itl_count != b->itl_count || a->itl_sum_ns != b->itl_sum_ns) return 0;
    for (int64_t i = 0; i < a->n; i++)
        if (a->rec[i].id != b->rec[i].id || a->rec[i].finish != b->rec[i].finish ||
            a->rec[i].first_token != b->rec[i].first_token || a->rec[i].replica != b->rec[i].replica)
            return 0;
    return 1;
}

int main(void)
{
    fx_opts o;
    char what[64];
    hs_test_root();
    exact_one();

    for (int p = 0; p < 2; p++)
        for (int r = 0; hs_routers[r]; r++) {
            pressure(&o);
            o.policy = p ? "sarathi" : "vllm";
            o.router = hs_routers[r]->name;
            snprintf(what, sizeof what, "disagg %s/%s", o.policy, o.router);
            check_all(what, &o, 300);
        }
    /* a two-stage decode replica receives layer by layer from a TP2 prefill */
    fx_defaults(&o);
    o.model = "llama-2-13b";
    o.tp = 2;
    o.prefill_replicas = 2;
    o.ec.audit = 1;
    hs_workload_set(&o.wc, "max_requests", "300", NULL);
    hs_workload_set(&o.wc, "rate", "8", NULL);
    check_all("disagg tp2 llama-2-13b", &o, 300);

    /* fast-forward on the decode side is still exact */
    {
        fx_result a, b;
        hs_err err = {0};
        pressure(&o);
        o.ec.audit = 0;
        o.ec.fast_forward = 0;
        CHECK_OK(fx_run(&o, &a, &err), &err);
        o.ec.fast_forward = 1;
        CHECK_OK(fx_run(&o, &b, &err), &err);
        CHECK(same(&a, &b));
        fx_free(&a);
        fx_free(&b);
    }
    /* refused: no decode replica left, and a policy that cannot hand over */
    {
        fx_result x;
        hs_err err = {0};
        pressure(&o);
        o.prefill_replicas = 4;
        CHECK(fx_run(&o, &x, &err) != 0);
        CHECK(strstr(err.msg, "leaves none to decode") != NULL);
        fx_free(&x);
        pressure(&o);
        o.policy = "static";
        fx_popt(&o, "static_batch", "2"); /* so the T4s hold it and the role check is what fails */
        CHECK(fx_run(&o, &x, &err) != 0);
        CHECK(strstr(err.msg, "cannot run disaggregated") != NULL);
        fx_free(&x);
    }
    return hs_check_result();
}
