/* test_engine.c - exact timing of the serving runtime on hand-made traces.
 *
 * Each case writes a tiny Azure-format trace, runs one replica, and
 * recomputes every iteration's end time from the latency model by hand
 * (end = ceil(start + step_overhead + stage time)), so any change in how the
 * runtime composes batches (prefill batching, decode context, chunking,
 * static slots, preemption) shows up as a mismatch in ns. */
#include <math.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"

static const char *trace_path;

static void write_trace(const char *rows)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "TIMESTAMP,ContextTokens,GeneratedTokens\n%s", rows);
    trace_path = hs_test_tmpfile("engine", buf);
}

static void base(fx_opts *o)
{
    fx_defaults(o);
    o->model = "llama-2-7b";
    o->cluster = "dgx-a100";
    o->max_replicas = 1;
    o->ec.audit = 1;
    hs_workload_set(&o->wc, "kind", "azure", NULL);
    hs_workload_set(&o->wc, "path", trace_path, NULL);
}

/* The replica's latency tables, built exactly as the runtime builds them. */
static void perf_for(const fx_opts *o, hs_perf *p, int max_tokens)
{
    hs_model m;
    hs_cluster *c;
    hs_layout l;
    hs_err err = {0};
    hs_model_find(&m, o->model, &err);
    hs_cluster_find(&c, o->cluster, &err);
    memset(&l, 0, sizeof l);
    l.pp = 1;
    l.kv_bits = 16;
    l.stage[0].tp = 1;
    l.stage[0].layers = m.layers;
    l.stage[0].bits = 16;
    l.stage[0].gpus[0] = 0;
    CHECK_OK(hs_perf_build(p, &o->pc, &m, c, &l, max_tokens, o->ec.max_num_seqs, &err), &err);
    hs_cluster_destroy(c);
}

/* vLLM: two simultaneous arrivals share one prefill, then decode together;
 * the shorter one leaves and the other decodes alone. */
static void vllm_two(void)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    hs_perf p;
    hs_batch_shape b;
    int lens[2] = {100, 60};
    hs_ns t, f0, f1;
    write_trace("2024-01-01 00:00:00.0000000,100,3\n2024-01-01 00:00:00.0000000,60,5\n");
    base(&o);
    CHECK_OK(fx_run(&o, &x, &err), &err);
    perf_for(&o, &p, 4096);
    b = fx_prefill(2, lens, NULL);
    b.samples = 2;
    t = fx_step(&p, 0, &b);                         /* both first tokens */
    CHECK_INT(fx_find(&x, 0)->first_token, t);
    CHECK_INT(fx_find(&x, 1)->first_token, t);
    CHECK_INT(fx_find(&x, 0)->first_sched, 0);
    /* decode steps: cached 100+k and 60+k tokens, plus the new token each */
    t = fx_step(&p, t, (b = fx_decode(2, 160 + 2), &b));
    t = fx_step(&p, t, (b = fx_decode(2, 162 + 2), &b));
    f0 = t;                                      /* request 0: 3 tokens */
    t = fx_step(&p, t, (b = fx_decode(1, 62 + 1), &b));
    t = fx_step(&p, t, (b = fx_decode(1, 63 + 1), &b));
    f1 = t;
    CHECK_INT(fx_find(&x, 0)->finish, f0);
    CHECK_INT(fx_find(&x, 1)->finish, f1);
    CHECK_INT(fx_find(&x, 0)->output, 3);
    CHECK_INT(fx_find(&x, 1)->output, 5);
    /* ITL: 2 + 4 intervals */
    CHECK_INT(x.itl_count, 6);
    hs_perf_free(&p);
    fx_free(&x);
}

/* Sarathi: a 1000-token prompt in chunks of 512 while an earlier request
 * decodes in the same iterations. */
static void sarathi_chunks(void)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    hs_perf p;
    hs_batch_shape b;
    hs_ns t, t1;
    int l0[1] = {100};
    write_trace("2024-01-01 00:00:00.0000000,100,4\n2024-01-01 00:00:00.0000010,1000,2\n");
    base(&o);
    o.policy = "sarathi";
    fx_popt(&o, "chunk_size", "512");
    CHECK_OK(fx_run(&o, &x, &err), &err);
    perf_for(&o, &p, 512);
    b = fx_prefill(1, l0, NULL);
    b.samples = 1;
    t = fx_step(&p, 0, &b);                          /* req 0 prefill alone */
    CHECK_INT(fx_find(&x, 0)->first_token, t);
    /* iteration 2: decode of req 0 (ctx 101) + chunk 511 of req 1 */
    {
        int len = 511;
        b = fx_prefill(1, &len, NULL);
        b.tokens += 1;
        b.samples = 1;
        b.dec_seqs = 1;
        b.dec_ctx = 101;
    }
    t = fx_step(&p, t, &b);
    /* iteration 3: decode (ctx 102) + remaining 489 tokens after prefix 511 */
    {
        int len = 489, pre = 511;
        b = fx_prefill(1, &len, &pre);
        b.tokens += 1;
        b.samples = 2;
        b.dec_seqs = 1;
        b.dec_ctx = 102;
    }
    t = fx_step(&p, t, &b);
    t1 = t;
    CHECK_INT(fx_find(&x, 1)->first_token, t1);
    /* iteration 4: both decode: req 0 ctx 103, req 1 ctx 1001 -> finishes
     * req 0 (4 tokens) and req 1 (2 tokens) */
    t = fx_step(&p, t, (b = fx_decode(2, 102 + 1000 + 2), &b));
    CHECK_INT(fx_find(&x, 0)->finish, t);
    CHECK_INT(fx_find(&x, 1)->finish, t);
    hs_perf_free(&p);
    fx_free(&x);
}

/* Static batching: the first request runs alone; the next two share a
 * batch whose slots stay busy until the longest output is done.  Its
 * prompt pass runs its GEMMs on the prompts' own 130 tokens (FT's
 * remove_padding; 160 with static_padded=1) and its attention on both
 * padded to 80, as do its decode steps. */
static void static_slots(int padded)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    hs_perf p;
    hs_batch_shape b;
    hs_ns t;
    int one[1] = {100};
    write_trace("2024-01-01 00:00:00.0000000,100,2\n"
                "2024-01-01 00:00:00.0000010,50,2\n"
                "2024-01-01 00:00:00.0000020,80,4\n");
    base(&o);
    o.policy = "static";
    fx_popt(&o, "static_batch", "2");
    if (padded) fx_popt(&o, "static_padded", "1");
    CHECK_OK(fx_run(&o, &x, &err), &err);
    perf_for(&o, &p, 2 * 4096);
    b = fx_prefill(1, one, NULL);
    b.samples = 1;
    t = fx_step(&p, 0, &b);
    t = fx_step(&p, t, (b = fx_decode(1, 100 + 1), &b));
    CHECK_INT(fx_find(&x, 0)->finish, t);
    /* batch of 2: prompts of 50 and 80 tokens, or both padded to 80 */
    b = (hs_batch_shape){0};
    b.tokens = b.pre_tokens = padded ? 160 : 130;
    b.samples = 2;
    b.pre_chunks = 2;
    b.pre_self = 2.0 * 80 * 81 / 2.0;
    t = fx_step(&p, t, &b);
    CHECK_INT(fx_find(&x, 1)->first_token, t);
    CHECK_INT(fx_find(&x, 1)->first_sched, fx_find(&x, 0)->finish);
    t = fx_step(&p, t, (b = fx_decode(2, 2 * 81), &b));
    CHECK_INT(fx_find(&x, 1)->finish, t);
    /* request 1 is done, but its slot keeps stepping */
    t = fx_step(&p, t, (b = fx_decode(2, 2 * 82), &b));
    t = fx_step(&p, t, (b = fx_decode(2, 2 * 83), &b));
    CHECK_INT(fx_find(&x, 2)->finish, t);
    hs_perf_free(&p);
    fx_free(&x);
}

/* Context limit: a prompt at the limit is dropped with a reason, a prompt
 * that would overrun it has its output truncated. */
static void context_limit(void)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    write_trace("2024-01-01 00:00:00.0000000,5000,10\n2024-01-01 00:00:01.0000000,4000,500\n");
    base(&o);
    CHECK_OK(fx_run(&o, &x, &err), &err);
    CHECK_INT(x.dropped, 1);
    CHECK(fx_find(&x, 0)->dropped && fx_find(&x, 0)->why != NULL);
    CHECK_INT(fx_find(&x, 1)->output, 4096 - 4000);
    CHECK_INT(x.truncated, 1);
    fx_free(&x);
}

int main(void)
{
    hs_test_root();
    vllm_two();
    sarathi_chunks();
    static_slots(0);
    static_slots(1);
    context_limit();
    return hs_check_result();
}
