/* test_net.c - fluid max-min fair GPU transfers (sim/hw/net.c).
 *
 * Hand-computed cases with exact ns finish times: one flow takes
 * lat + bytes/bw; two flows on one link halve it and finish together; a short
 * and a long flow (the long one re-dated when the short one starts and again
 * when it ends); cross-node flows sharing a NIC egress while an intra-node
 * flow is unaffected; a classic three-flows-over-two-resources max-min
 * example and a pair-cap bottleneck on a hand-written 4-GPU cluster; cancel
 * freeing bandwidth; id reuse.  Then a property check over many random flows
 * on dgx-a100x2 and hetis-mixed12, driven like the engine will drive it,
 * checking after every event: NET-1 (no resource over capacity, no flow over
 * its pair cap), NET-2 (every flow has a bottleneck), NET-3 (integrated rate
 * equals the bytes of each flow, total delivered equals total started), NET-4
 * (completion order, never before lat + bytes/cap); and determinism.  A
 * micro-benchmark prints rate updates per second with 64 concurrent flows
 * (not asserted). */
#include "check.h"

#include <time.h>

#include "hw/hw.h"
#include "hw/net.h"

static hs_cluster *load(const char *name)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_cluster_find(&c, name, &err), &err);
    return c;
}

static hs_net *mknet(const hs_cluster *c)
{
    hs_net *net = NULL;
    hs_err err = {0};
    CHECK_OK(hs_net_create(&net, c, &err), &err);
    return net;
}

static uint64_t start(hs_net *net, hs_ns now, int src, int dst, double bytes, int64_t tag)
{
    uint64_t id = 0;
    hs_err err = {0};
    CHECK_OK(hs_net_start(net, now, src, dst, bytes, tag, &id, &err), &err);
    return id;
}

static double rate_of(const hs_net *net, uint64_t id)
{
    hs_net_flow f;
    if (hs_net_flow_get(net, id, &f) != 0) return -1;
    return f.rate;
}

static hs_ns done_of(const hs_net *net, uint64_t id)
{
    hs_net_flow f;
    if (hs_net_flow_get(net, id, &f) != 0) return -1;
    return f.t_done;
}

/* Pops exactly one completion at `now`; returns its tag (-1 if none). */
static int64_t pop1(hs_net *net, hs_ns now, hs_ns *t_done)
{
    int64_t tag = -1;
    hs_net_done d;
    if (!hs_net_pop_done(net, now, &tag, &d)) return -1;
    if (t_done) *t_done = d.t_done;
    return tag;
}

/* ---- hand-computed cases ------------------------------------------------ */

static void test_single(void)
{
    hs_cluster *c = load("dgx-a100"), *c2 = load("dgx-a100x2");
    hs_net *net;
    hs_ns t = 0;
    uint64_t id;
    if (!c || !c2) return;
    net = mknet(c);
    if (!net) return;
    CHECK_INT(hs_net_next_event(net), HS_NS_MAX);
    CHECK_INT(hs_net_res_egress(net, 0), -1); /* one node: no NIC */
    CHECK_REL(hs_net_res_capacity(net, hs_net_res_link(net, 0, 1)), 300e9, 1e-15);
    /* 300 MB over NVLink 300 GB/s after 3 us: 3,000 + 1,000,000 ns */
    id = start(net, 0, 0, 1, 300e6, 7);
    CHECK_INT(hs_net_next_event(net), 3000);
    CHECK_INT(rate_of(net, id), 0); /* latency phase: no bandwidth */
    CHECK_INT(hs_net_link_load(net, hs_net_res_link(net, 0, 1)), 0);
    hs_net_advance(net, 3000);
    CHECK_REL(rate_of(net, id), 300e9, 1e-15);
    CHECK_INT(hs_net_next_event(net), 1003000);
    CHECK_INT(pop1(net, 1002999, NULL), -1); /* never early */
    CHECK_INT(pop1(net, 1003000, &t), 7);
    CHECK_INT(t, 1003000);
    CHECK_INT(hs_net_next_event(net), HS_NS_MAX);
    CHECK_INT(hs_net_flow_get(net, id, &(hs_net_flow){0}), HS_ENOTFOUND);
    /* a non-integral time rounds up: 1 GB / 300 GB/s = 3,333,333.3 ns */
    id = start(net, 2000000, 2, 3, 1e9, 8);
    hs_net_advance(net, 2003000);
    CHECK_INT(done_of(net, id), 2003000 + 3333334);
    CHECK_INT(pop1(net, 2003000 + 3333334, &t), 8);
    CHECK_INT(t, 2003000 + 3333334);
    /* zero bytes: done when the latency ends */
    start(net, 10000000, 4, 5, 0, 9);
    CHECK_INT(hs_net_next_event(net), 10003000);
    CHECK_INT(pop1(net, 10003000, &t), 9);
    CHECK_INT(t, 10003000);
    hs_net_destroy(net);

    /* across nodes: 25 MB at 25 GB/s after 10 us */
    net = mknet(c2);
    if (net) {
        int res[2];
        CHECK_INT(hs_net_route(net, 0, 8, res), 2);
        CHECK_INT(res[0], hs_net_res_egress(net, 0));
        CHECK_INT(res[1], hs_net_res_ingress(net, 8));
        CHECK_REL(hs_net_res_capacity(net, res[0]), 25e9, 1e-15);
        CHECK_INT(hs_net_res_link(net, 0, 8), -1);
        start(net, 0, 0, 8, 25e6, 1);
        CHECK_INT(hs_net_next_event(net), 10000);
        hs_net_advance(net, 10000);
        CHECK_INT(hs_net_next_event(net), 1010000);
        CHECK_INT(pop1(net, 1010000, &t), 1);
        CHECK_INT(t, 1010000);
        hs_net_destroy(net);
    }
    hs_cluster_destroy(c);
    hs_cluster_destroy(c2);
}

static void test_bad_args(void)
{
    hs_cluster *c = load("dgx-a100");
    hs_net *net;
    hs_err err = {0};
    uint64_t id = 0;
    if (!c || !(net = mknet(c))) return;
    CHECK_INT(hs_net_start(net, 0, 1, 1, 1, 0, &id, &err), HS_EINVAL);
    CHECK(strstr(err.msg, "1 -> 1") != NULL);
    CHECK_INT(hs_net_start(net, 0, 0, 8, 1, 0, &id, &err), HS_EINVAL);
    CHECK_INT(hs_net_start(net, 0, -1, 2, 1, 0, &id, &err), HS_EINVAL);
    CHECK_INT(hs_net_start(net, 0, 0, 1, -1, 0, &id, &err), HS_EINVAL);
    CHECK_INT(hs_net_start(net, 0, 0, 1, NAN, 0, &id, &err), HS_EINVAL);
    CHECK_INT(hs_net_start(net, 0, 0, 1, INFINITY, 0, &id, &err), HS_EINVAL);
    hs_net_advance(net, 100);
    CHECK_INT(hs_net_start(net, 99, 0, 1, 1, 0, &id, &err), HS_EINVAL);
    CHECK(strstr(err.msg, "before") != NULL);
    CHECK_INT(hs_net_cancel(net, 100, 12345, NULL), HS_ENOTFOUND);
    CHECK_INT(hs_net_cancel(net, 100, 0, NULL), HS_ENOTFOUND);
    CHECK_INT(hs_net_next_event(net), HS_NS_MAX);
    hs_net_destroy(net);
    hs_net_destroy(NULL);
    hs_cluster_destroy(c);
}

static void test_two_equal(void)
{
    hs_cluster *c = load("dgx-a100");
    hs_net *net;
    uint64_t a, b;
    hs_ns t = 0;
    if (!c || !(net = mknet(c))) return;
    a = start(net, 0, 0, 1, 300e6, 1);
    b = start(net, 0, 0, 1, 300e6, 2);
    CHECK(a < b);
    hs_net_advance(net, 3000);
    CHECK_REL(rate_of(net, a), 150e9, 1e-15);
    CHECK_REL(rate_of(net, b), 150e9, 1e-15);
    CHECK_REL(hs_net_link_load(net, hs_net_res_link(net, 0, 1)), 300e9, 1e-15);
    CHECK_INT(hs_net_link_load(net, hs_net_res_link(net, 1, 0)), 0); /* other direction */
    /* 300 MB at 150 GB/s: 2 ms, together, in id order */
    CHECK_INT(hs_net_next_event(net), 2003000);
    CHECK_INT(pop1(net, 2003000, &t), 1);
    CHECK_INT(t, 2003000);
    CHECK_INT(pop1(net, 2003000, &t), 2);
    CHECK_INT(t, 2003000);
    CHECK_INT(pop1(net, 2003000, &t), -1);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

static void test_short_long(void)
{
    hs_cluster *c = load("dgx-a100");
    hs_net *net;
    uint64_t l, s;
    hs_ns t = 0;
    if (!c || !(net = mknet(c))) return;
    /* Long: 900 MB at t=0, ready at 3,000, alone at 300 GB/s: predicted
     * 3,003,000.  Short: 300 MB at 1,000,000, ready at 1,003,000; by then the
     * long one has sent 300 MB.  Both at 150 GB/s: the short one needs 2 ms
     * (done 3,003,000) while the long one sends 300 MB more; its last 300 MB
     * alone take 1 ms: done 4,003,000. */
    l = start(net, 0, 0, 1, 900e6, 1);
    hs_net_advance(net, 3000);
    CHECK_INT(done_of(net, l), 3003000);
    s = start(net, 1000000, 0, 1, 300e6, 2);
    CHECK_INT(hs_net_next_event(net), 1003000);
    hs_net_advance(net, 1003000);
    CHECK_REL(rate_of(net, l), 150e9, 1e-15);
    CHECK_REL(rate_of(net, s), 150e9, 1e-15);
    {
        hs_net_flow f;
        CHECK_OK(hs_net_flow_get(net, l, &f), &(hs_err){0});
        CHECK_REL(f.remaining, 600e6, 1e-12);
        CHECK_INT(f.phase, HS_NET_XFER);
    }
    CHECK_INT(done_of(net, l), 5003000); /* re-dated: 600 MB at 150 GB/s */
    CHECK_INT(done_of(net, s), 3003000);
    CHECK_INT(hs_net_next_event(net), 3003000);
    CHECK_INT(pop1(net, 3003000, &t), 2);
    CHECK_INT(t, 3003000);
    CHECK_REL(rate_of(net, l), 300e9, 1e-15); /* speeds up */
    CHECK_INT(done_of(net, l), 4003000);
    CHECK_INT(hs_net_next_event(net), 4003000);
    CHECK_INT(pop1(net, 4003000, &t), 1);
    CHECK_INT(t, 4003000);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

static void test_nic_sharing(void)
{
    hs_cluster *c = load("dgx-a100x2");
    hs_net *net;
    uint64_t a, b, in, d, e;
    if (!c || !(net = mknet(c))) return;
    a = start(net, 0, 0, 8, 1e9, 1);   /* egress 0 */
    b = start(net, 0, 0, 9, 1e9, 2);   /* egress 0 */
    in = start(net, 0, 0, 1, 1e9, 3);  /* NVLink 0->1 */
    d = start(net, 0, 3, 10, 1e9, 4);  /* its own NIC */
    hs_net_advance(net, 10000);
    CHECK_REL(rate_of(net, a), 12.5e9, 1e-12);
    CHECK_REL(rate_of(net, b), 12.5e9, 1e-12);
    CHECK_REL(rate_of(net, in), 300e9, 1e-15);
    CHECK_REL(rate_of(net, d), 25e9, 1e-15);
    CHECK_REL(hs_net_link_load(net, hs_net_res_egress(net, 0)), 25e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_ingress(net, 8)), 12.5e9, 1e-12);
    /* a flow into GPU 8 from another node-0 GPU: ingress 8 holds a (12.5,
     * frozen by egress 0) and e, which takes the leftover 12.5 */
    e = start(net, 10000, 5, 8, 1e9, 5);
    hs_net_advance(net, 20000);
    CHECK_REL(rate_of(net, e), 12.5e9, 1e-12);
    CHECK_REL(rate_of(net, a), 12.5e9, 1e-12);
    CHECK_REL(rate_of(net, in), 300e9, 1e-15);
    CHECK_REL(hs_net_link_load(net, hs_net_res_ingress(net, 8)), 25e9, 1e-12);
    /* cancel b: a is now limited by ingress 8 shared with e: 12.5 each */
    CHECK_INT(hs_net_cancel(net, 30000, b, NULL), 0);
    CHECK_REL(rate_of(net, a), 12.5e9, 1e-12);
    CHECK_REL(rate_of(net, e), 12.5e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_egress(net, 0)), 12.5e9, 1e-12);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

/* 4 single-GPU nodes, GB/s (symmetric):
 *        0   1   2   3
 *   0 [  0, 10,  4,  3]    NIC caps: egress/ingress 0: 10, 1: 10, 2: 4, 3: 8
 *   1 [ 10,  0,  4,  8]
 *   2 [  4,  4,  0,  4]
 *   3 [  3,  8,  4,  0]                                                    */
static const char *classic_json =
    "{\"name\": \"tc\", \"description\": \"max-min test\", \"source\": \"test\",\n"
    " \"nodes\": [{\"name\": \"a\", \"gpu\": \"a100-80g\", \"count\": 1},\n"
    "           {\"name\": \"b\", \"gpu\": \"a100-80g\", \"count\": 1},\n"
    "           {\"name\": \"c\", \"gpu\": \"a100-80g\", \"count\": 1},\n"
    "           {\"name\": \"d\", \"gpu\": \"a100-80g\", \"count\": 1}],\n"
    " \"bandwidth_gbs\": [[0, 10, 4, 3], [10, 0, 4, 8], [4, 4, 0, 4], [3, 8, 4, 0]],\n"
    " \"latency_us\": [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]]\n}\n";

static void test_classic(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    hs_net *net;
    uint64_t a, b, cc, d;
    hs_ns t = 0;
    CHECK_OK(hs_cluster_load(&c, hs_test_tmpfile("net", classic_json), &err), &err);
    if (!c || !(net = mknet(c))) {
        hs_cluster_destroy(c);
        return;
    }
    CHECK_REL(hs_net_res_capacity(net, hs_net_res_egress(net, 0)), 10e9, 1e-15);
    CHECK_REL(hs_net_res_capacity(net, hs_net_res_ingress(net, 2)), 4e9, 1e-15);
    CHECK_REL(hs_net_res_capacity(net, hs_net_res_ingress(net, 3)), 8e9, 1e-15);
    /* A 0->1 and B 0->2 share egress 0 (10); B and C 1->2 share ingress 2 (4).
     * Water rises to 2 where ingress 2 saturates: B = C = 2 (bottlenecked
     * there); egress 0 has 10 - 2 = 8 left for A alone: A = 8. */
    a = start(net, 0, 0, 1, 80e6, 1);
    b = start(net, 0, 0, 2, 20e6, 2);
    cc = start(net, 0, 1, 2, 40e6, 3);
    hs_net_advance(net, 1000);
    CHECK_REL(rate_of(net, a), 8e9, 1e-12);
    CHECK_REL(rate_of(net, b), 2e9, 1e-12);
    CHECK_REL(rate_of(net, cc), 2e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_egress(net, 0)), 10e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_ingress(net, 2)), 4e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_ingress(net, 1)), 8e9, 1e-12);
    /* A: 80 MB at 8 GB/s and B: 20 MB at 2 GB/s both end at 1,000 + 10 ms.
     * C then has 20 MB left alone on ingress 2 at 4 GB/s: 5 ms more. */
    CHECK_INT(done_of(net, a), 10001000);
    CHECK_INT(done_of(net, b), 10001000);
    CHECK_INT(pop1(net, 10001000, &t), 1);
    CHECK_INT(pop1(net, 10001000, &t), 2);
    CHECK_INT(t, 10001000);
    CHECK_REL(rate_of(net, cc), 4e9, 1e-12);
    CHECK_INT(done_of(net, cc), 15001000);
    CHECK_INT(pop1(net, 15001000, &t), 3);
    CHECK_INT(t, 15001000);

    /* Pair cap: D 0->3 is capped at bw(0,3) = 3 although egress 0 (10) and
     * ingress 3 (8) have room; A 0->1 takes the leftover 7 of egress 0. */
    a = start(net, 20000000, 0, 1, 1e9, 4);
    d = start(net, 20000000, 0, 3, 1e9, 5);
    hs_net_advance(net, 20001000);
    CHECK_REL(rate_of(net, d), 3e9, 1e-12);
    CHECK_REL(rate_of(net, a), 7e9, 1e-12);
    CHECK_REL(hs_net_link_load(net, hs_net_res_egress(net, 0)), 10e9, 1e-12);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

static void test_cancel(void)
{
    hs_cluster *c = load("dgx-a100");
    hs_net *net;
    hs_net_stats st;
    uint64_t a, b, prev = 0;
    double sent = -1;
    hs_ns t = 0;
    if (!c || !(net = mknet(c))) return;
    /* two 600 MB flows at 150 GB/s; cancelling b at 2,003,000 (a has 300 MB
     * left) gives a the whole link: done 1 ms later */
    a = start(net, 0, 0, 1, 600e6, 1);
    b = start(net, 0, 0, 1, 600e6, 2);
    hs_net_advance(net, 3000);
    CHECK_INT(done_of(net, a), 4003000);
    CHECK_INT(hs_net_cancel(net, 2003000, b, &sent), 0);
    CHECK_REL(sent, 300e6, 1e-12);
    CHECK_REL(rate_of(net, a), 300e9, 1e-15);
    CHECK_INT(done_of(net, a), 3003000);
    CHECK_INT(hs_net_cancel(net, 2003000, b, NULL), HS_ENOTFOUND);
    CHECK_INT(hs_net_next_event(net), 3003000);
    CHECK_INT(pop1(net, 3003000, &t), 1);
    CHECK_INT(t, 3003000);
    CHECK_INT(pop1(net, 3500000, NULL), -1); /* b is never reported */
    CHECK_INT(hs_net_cancel(net, 3003000, a, NULL), HS_ENOTFOUND); /* popped */

    /* cancel in the latency phase, and a completed flow not yet popped */
    a = start(net, 4000000, 2, 3, 1e6, 3);
    CHECK_INT(hs_net_cancel(net, 4001000, a, &sent), 0);
    CHECK_NEAR(sent, 0, 0);
    CHECK_INT(hs_net_next_event(net), HS_NS_MAX);
    a = start(net, 5000000, 2, 3, 1e6, 4);
    hs_net_advance(net, 6000000);
    CHECK_INT(hs_net_next_event(net), 5000000 + 3000 + 3334);
    CHECK_INT(hs_net_cancel(net, 6000000, a, &sent), 0);
    CHECK_REL(sent, 1e6, 1e-15);
    CHECK_INT(pop1(net, 6000000, NULL), -1);
    CHECK_INT(hs_net_next_event(net), HS_NS_MAX);

    /* ids stay unique while slots are reused: memory follows active flows */
    for (int i = 0; i < 1000; i++) {
        uint64_t id = start(net, 7000000 + i, i % 8, (i + 1) % 8, 1e6, i);
        CHECK(id > prev);
        prev = id;
        if (i % 3 != 2) CHECK_INT(hs_net_cancel(net, 7000000 + i, id, NULL), 0);
    }
    hs_net_get_stats(net, &st);
    CHECK(st.slot_cap <= 512);
    hs_net_advance(net, 100000000);
    while (hs_net_pop_done(net, 100000000, NULL, NULL)) {}
    hs_net_get_stats(net, &st);
    CHECK_INT(st.n_latency + st.n_xfer + st.n_done, 0);
    CHECK_INT(st.completed, 1 + 333);
    CHECK_INT(st.started, st.completed + st.cancelled);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

/* ---- property check over random flows ---------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double rnd01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

typedef struct tflow {
    int src, dst;
    double bytes;
    hs_ns t0;
    uint64_t id;
    double integ, rate;  /* bytes integrated from observed rates; last rate */
    hs_ns t_done;
    int state;           /* 0 not started, 1 live, 2 done */
} tflow;

static int cmp_t0(const void *x, const void *y)
{
    const tflow *a = x, *b = y;
    return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

#define NMAX 600

/* Runs n random flows; fills order[] with the tags in completion order and
 * times[] with their finish times.  Returns the number of events. */
static long run_random(const hs_cluster *c, uint64_t seed, int n, int64_t *order,
                       hs_ns *times, int check)
{
    static tflow f[NMAX];
    hs_net *net = mknet(c);
    hs_ns now = 0, prev = 0;
    double started = 0, delivered = 0;
    int next = 0, ndone = 0, live[NMAX], nlive = 0, bad_load = 0, bad_mm = 0, bad_int = 0;
    int bad_early = 0, bad_order = 0, peak = 0;
    long events = 0;
    int64_t last_tag = -1;
    hs_ns last_t = -1;
    double *load, *fastest;
    if (!net) return 0;
    load = calloc((size_t)hs_net_n_resources(net), sizeof *load);
    fastest = calloc((size_t)hs_net_n_resources(net), sizeof *fastest);
    if (!load || !fastest) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    rng_state = seed;
    for (int i = 0; i < n; i++) {
        f[i].src = (int)(rnd() % (uint64_t)c->n_gpus);
        do f[i].dst = (int)(rnd() % (uint64_t)c->n_gpus); while (f[i].dst == f[i].src);
        f[i].bytes = rnd() % 8 == 0 ? 0 : 1e5 + rnd01() * 5e8;
        f[i].t0 = (hs_ns)(rnd01() * 20e6);
        if (i % 10 == 0 && i > 0) f[i].t0 = f[i - 1].t0; /* simultaneous starts */
        f[i].integ = f[i].rate = 0;
        f[i].state = 0;
    }
    qsort(f, (size_t)n, sizeof f[0], cmp_t0);
    for (;;) {
        hs_ns tn = hs_net_next_event(net), ts = next < n ? f[next].t0 : HS_NS_MAX;
        int64_t tag;
        hs_net_done d;
        now = tn < ts ? tn : ts;
        if (now == HS_NS_MAX) break;
        events++;
        for (int k = 0; k < nlive; k++) f[live[k]].integ += f[live[k]].rate * (double)(now - prev) / 1e9;
        prev = now;
        hs_net_advance(net, now);
        while (hs_net_pop_done(net, now, &tag, &d)) {
            tflow *x = &f[tag];
            double lone = hs_cluster_lat(c, x->src, x->dst) + x->bytes / hs_cluster_bw(c, x->src, x->dst);
            if (d.t_done != now || d.t_done < last_t || (d.t_done == last_t && (int64_t)d.id < last_tag))
                bad_order++;
            last_t = d.t_done;
            last_tag = (int64_t)d.id;
            if ((double)(d.t_done - x->t0) < lone * 1e9 * (1 - 1e-12) - 1) bad_early++;
            /* the last partial ns is rounded up: up to 1 ns of the rate */
            if (fabs(x->integ - x->bytes) > 1e-9 * x->bytes + x->rate * 1e-9 + 1e-6) {
                if (bad_int++ < 5)
                    fprintf(stderr, "flow %lld: integrated %.17g of %.17g bytes (rate %g)\n",
                            (long long)tag, x->integ, x->bytes, x->rate);
            }
            x->state = 2;
            x->t_done = d.t_done;
            delivered += d.bytes;
            if (order) order[ndone] = tag;
            if (times) times[ndone] = d.t_done;
            ndone++;
            for (int k = 0; k < nlive; k++)
                if (live[k] == tag) { live[k] = live[--nlive]; break; }
        }
        while (next < n && f[next].t0 == now) {
            f[next].id = start(net, now, f[next].src, f[next].dst, f[next].bytes, next);
            f[next].state = 1;
            started += f[next].bytes;
            live[nlive++] = next++;
        }
        if (nlive > peak) peak = nlive;
        for (int k = 0; k < nlive; k++) f[live[k]].rate = rate_of(net, f[live[k]].id);
        if (!check) continue;
        /* NET-1: no resource over capacity, no flow over its pair cap */
        for (int r = 0; r < hs_net_n_resources(net); r++) {
            load[r] = hs_net_link_load(net, r);
            fastest[r] = 0;
            if (load[r] > hs_net_res_capacity(net, r) * (1 + 1e-9)) bad_load++;
        }
        for (int k = 0; k < nlive; k++) {
            tflow *x = &f[live[k]];
            int res[2], nr = hs_net_route(net, x->src, x->dst, res);
            for (int q = 0; q < nr; q++)
                if (x->rate > fastest[res[q]]) fastest[res[q]] = x->rate;
        }
        /* NET-2: each transferring flow is at its pair cap or crosses a
         * saturated resource on which no flow is faster */
        for (int k = 0; k < nlive; k++) {
            tflow *x = &f[live[k]];
            int res[2], nr = hs_net_route(net, x->src, x->dst, res), ok = 0;
            double cap = hs_cluster_bw(c, x->src, x->dst);
            if (x->rate == 0) continue; /* latency phase */
            if (x->rate > cap * (1 + 1e-9)) bad_load++;
            if (x->rate >= cap * (1 - 1e-9)) ok = 1;
            for (int q = 0; q < nr && !ok; q++)
                if (load[res[q]] >= hs_net_res_capacity(net, res[q]) * (1 - 1e-9) &&
                    x->rate >= fastest[res[q]] * (1 - 1e-9))
                    ok = 1;
            if (!ok) bad_mm++;
        }
    }
    if (check) {
        hs_net_stats st;
        CHECK_INT(bad_load, 0);
        CHECK_INT(bad_mm, 0);
        CHECK_INT(bad_int, 0);
        CHECK_INT(bad_early, 0);
        CHECK_INT(bad_order, 0);
        CHECK_INT(ndone, n);
        CHECK_INT(nlive, 0);
        CHECK_REL(delivered, started, 1e-12);
        hs_net_get_stats(net, &st);
        CHECK_INT(st.started, n);
        CHECK_INT(st.completed, n);
        CHECK_REL(st.bytes_completed, st.bytes_started, 1e-12);
        CHECK(st.slot_cap <= 2 * peak || st.slot_cap == 16); /* follows concurrency */
        CHECK(hs__net_sane(net));
        printf("random %s: %d flows, %ld events, %llu rate updates, peak %d live, %d slots\n",
               c->name, n, events, (unsigned long long)st.rate_updates, peak, st.slot_cap);
    }
    free(load);
    free(fastest);
    hs_net_destroy(net);
    return events;
}

static void test_random(void)
{
    const char *names[] = {"dgx-a100x2", "hetis-mixed12"};
    for (int k = 0; k < 2; k++) {
        hs_cluster *c = load(names[k]);
        static int64_t o1[NMAX], o2[NMAX];
        static hs_ns t1[NMAX], t2[NMAX];
        long e1, e2;
        if (!c) continue;
        e1 = run_random(c, 0x9e3779b97f4a7c15ULL + (uint64_t)k, 500, o1, t1, 1);
        e2 = run_random(c, 0x9e3779b97f4a7c15ULL + (uint64_t)k, 500, o2, t2, 0);
        /* determinism: same inputs, same events, order and times */
        CHECK_INT(e1, e2);
        CHECK(memcmp(o1, o2, sizeof o1) == 0);
        CHECK(memcmp(t1, t2, sizeof t1) == 0);
        hs_cluster_destroy(c);
    }
}

/* ---- micro-benchmark (printed, not asserted) --------------------------- */

static void bench(void)
{
    hs_cluster *c = load("dgx-a100x2");
    hs_net *net;
    hs_net_stats s0, s1;
    struct timespec w0, w1;
    hs_ns now = 0;
    int64_t tag;
    long events = 0;
    double wall;
    if (!c || !(net = mknet(c))) return;
    rng_state = 42;
    for (int i = 0; i < 64; i++) {
        int s = (int)(rnd() % 16), d = (int)((s + 1 + rnd() % 15) % 16);
        start(net, 0, s, d, 1e6 + rnd01() * 1e8, i);
    }
    hs_net_get_stats(net, &s0);
    clock_gettime(CLOCK_MONOTONIC, &w0);
    while (events < 50000) {
        now = hs_net_next_event(net);
        hs_net_advance(net, now);
        while (hs_net_pop_done(net, now, &tag, NULL)) {
            int s = (int)(rnd() % 16), d = (int)((s + 1 + rnd() % 15) % 16);
            uint64_t id;
            hs_net_start(net, now, s, d, 1e6 + rnd01() * 1e8, tag, &id, NULL);
        }
        events++;
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    hs_net_get_stats(net, &s1);
    wall = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
    CHECK_INT(s1.n_latency + s1.n_xfer + s1.n_done, 64);
    printf("bench: 64 concurrent flows on dgx-a100x2: %llu rate updates in %.3f s = %.0f updates/s "
           "(%.2f us each, %ld events)\n",
           (unsigned long long)(s1.rate_updates - s0.rate_updates), wall,
           (double)(s1.rate_updates - s0.rate_updates) / wall,
           1e6 * wall / (double)(s1.rate_updates - s0.rate_updates), events);
    hs_net_destroy(net);
    hs_cluster_destroy(c);
}

int main(void)
{
    hs_test_root();
    test_single();
    test_bad_args();
    test_two_equal();
    test_short_long();
    test_nic_sharing();
    test_classic();
    test_cancel();
    test_random();
    bench();
    return hs_check_result();
}
