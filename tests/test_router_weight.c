/* test_router_weight.c - the router registry, and (review) a replica's
 * routing weight must act the same way under every weight-aware router.
 *
 * 1. Registry: every entry of hs_routers[] has a name, a help line and a
 *    pick, names are unique and hs_router_find returns the entry; an
 *    unknown name gives NULL, and hs_engine_create refuses a NULL router.
 * 2. Weights: lor and lot divide the load by the weight (routers.c); they
 *    once replaced a weight of 0 by 1, so a replica a deployment switched
 *    off (weight 0, which "weighted" never picks) took a full share under
 *    lor/lot while weight 0.001 took almost none.  Lowering a weight to 0
 *    must never raise the replica's share. */
#include "check.h"
#include "fixture.h"

/* Requests routed to replica 1 of two llama-2-7b TP1 replicas, replica 1
 * having weight w. */
static int64_t share(const char *router, double w, int64_t *total)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_replica *reps = NULL;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    fx_result x;
    hs_sink sink = {&x, fx_sink_req, fx_sink_itl};
    hs_err err = {0};
    int64_t n1 = 0;
    int mt;
    memset(&x, 0, sizeof x);
    memset(&d, 0, sizeof d);
    hs_engine_cfg_defaults(&ec);
    hs_perf_cfg_defaults(&pc);
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "rate", "20", NULL);
    hs_workload_set(&wc, "max_requests", "200", NULL);
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    mt = hs_engine_pass_tokens(&ec, hs_policy_find("vllm"), NULL, m.max_seq_len);
    snprintf(d.model, sizeof d.model, "%s", m.name);
    snprintf(d.cluster, sizeof d.cluster, "%s", c->name);
    for (int i = 0; i < 2; i++) {
        hs_deploy_replica r;
        memset(&r, 0, sizeof r);
        snprintf(r.role, sizeof r.role, "colocated");
        r.weight = i == 1 ? w : 1.0;
        r.layout.pp = 1;
        r.layout.kv_bits = 16;
        r.layout.stage[0].tp = 1;
        r.layout.stage[0].layers = m.layers;
        r.layout.stage[0].bits = 16;
        r.layout.stage[0].gpus[0] = i;
        CHECK_OK(hs_deploy_add(&d, &r, &err), &err);
    }
    CHECK_OK(hs_deploy_check(&d, &m, c, "test", &err), &err);
    CHECK_OK(hs_replicas_build(&reps, &d, &m, c, &ec, &pc, mt, m.max_seq_len, &err), &err);
    CHECK_OK(hs_source_open(&src, &wc, &err), &err);
    CHECK(hs_engine_create(&e, &ec, hs_policy_find("vllm"), NULL, NULL, reps, d.n, src, &sink, m.max_seq_len, c,
                           &err) == HS_EINVAL);
    CHECK(e == NULL);
    CHECK_OK(hs_engine_create(&e, &ec, hs_policy_find("vllm"), NULL, hs_router_find(router), reps, d.n, src, &sink,
                              m.max_seq_len, c, &err), &err);
    CHECK_OK(hs_engine_run(e, &err), &err);
    for (int64_t i = 0; i < x.n; i++) n1 += x.rec[i].replica == 1;
    *total = x.n;
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_replicas_free(reps, d.n);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
    fx_free(&x);
    return n1;
}

static void registry(void)
{
    int n = 0;
    for (int i = 0; hs_routers[i]; i++, n++) {
        const hs_router_ops *r = hs_routers[i];
        CHECK(r->name != NULL && r->name[0]);
        CHECK(r->help != NULL && r->help[0]);
        CHECK(r->pick != NULL);
        CHECK(hs_router_find(r->name) == r);
        for (int j = 0; j < i; j++) CHECK(strcmp(hs_routers[j]->name, r->name) != 0);
    }
    CHECK(n >= 4);
    CHECK(hs_router_find("nope") == NULL);
    CHECK(hs_router_find("") == NULL);
}

int main(void)
{
    static const char *const routers[] = {"lor", "lot", "weighted"};
    hs_test_root();
    registry();
    for (int k = 0; k < 3; k++) {
        int64_t n, tiny = share(routers[k], 0.001, &n), zero = share(routers[k], 0, &n);
        printf("router %-8s replica 1 gets %lld of %lld at weight 0.001, %lld at weight 0\n",
               routers[k], (long long)tiny, (long long)n, (long long)zero);
        /* Lowering a weight to 0 must never raise the replica's share. */
        CHECK(zero <= tiny);
    }
    return hs_check_result();
}
