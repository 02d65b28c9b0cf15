/* test_nobatch.c - the nobatch example policy: one request at a time per lane,
 * timed by hand against the latency model, and its time-out option. */
#include "check.h"
#include "fixture.h"

static const char *trace_path;

static void setup(fx_opts *o)
{
    fx_defaults(o);
    o->policy = "nobatch";
    o->model = "llama-2-7b";
    o->cluster = "dgx-a100";
    o->max_replicas = 1;
    o->ec.audit = 1;
    hs_workload_set(&o->wc, "kind", "azure", NULL);
    hs_workload_set(&o->wc, "path", trace_path, NULL);
}

/* The replica's latency tables, as the runtime builds them. */
static void perf_for(const fx_opts *o, hs_perf *p)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_engine_cfg ec = o->ec;
    hs_layout *l;
    hs_err err = {0};
    int mt;
    CHECK_OK(hs_model_find(&m, o->model, &err), &err);
    CHECK_OK(hs_cluster_find(&c, o->cluster, &err), &err);
    mt = hs_engine_pass_tokens(&ec, hs_policy_find("nobatch"), fx_popts(o), hs_model_max_context(&m));
    l = fx_layout1(1, m.layers);
    CHECK_OK(hs_perf_build(p, &o->pc, &m, c, l, mt, ec.max_num_seqs, &err), &err);
    free(l);
    hs_cluster_destroy(c);
}

/* Request of `prompt` tokens and `out` outputs served alone from `start`:
 * sets its first token's time and returns its finish. */
static hs_ns serve_alone(const hs_perf *p, hs_ns start, int prompt, int out, hs_ns *first)
{
    hs_batch_shape b = fx_prefill(1, &prompt, NULL);
    hs_ns t;
    b.samples = 1;
    t = *first = fx_step(p, start, &b);
    for (int k = 1; k < out; k++) t = fx_step(p, t, (b = fx_decode(1, prompt + k), &b));
    return t;
}

/* Three simultaneous arrivals are served one after another, never
 * batched, with or without fast-forward of the decode steps. */
static void one_at_a_time(void)
{
    static const int prompt[3] = {100, 60, 80}, out[3] = {3, 2, 4};
    hs_perf p;
    for (int ff = 0; ff < 2; ff++) {
        fx_opts o;
        fx_result x;
        hs_err err = {0};
        hs_ns t = 0, first;
        setup(&o);
        o.ec.fast_forward = ff;
        CHECK_OK(fx_run(&o, &x, &err), &err);
        perf_for(&o, &p);
        CHECK_INT(x.completed, 3);
        CHECK_INT(x.dropped, 0);
        if (!ff) CHECK_INT(x.iterations, 3 + 2 + 4); /* one pass per token, none shared */
        for (int i = 0; i < 3; i++) {
            const hs_req_record *r = fx_find(&x, i);
            hs_ns fin;
            CHECK(r != NULL);
            if (!r) break;
            fin = serve_alone(&p, t, prompt[i], out[i], &first);
            CHECK_INT(r->first_sched, t); /* starts when the previous one ends */
            CHECK_INT(r->first_token, first);
            CHECK_INT(r->finish, fin);
            CHECK_INT(r->output, out[i]);
            t = fin;
        }
        CHECK(x.clock_back == 0);
        hs_perf_free(&p);
        fx_free(&x);
    }
}

/* engine.nobatch_timeout_s: those still waiting after it when their turn
 * comes are dropped with the reason; the first is served as before. */
static void time_out(void)
{
    fx_opts o;
    fx_result x;
    hs_err err = {0};
    hs_perf p;
    hs_ns first, fin;
    setup(&o);
    fx_popt(&o, "nobatch_timeout_s", "0.000001");
    CHECK_OK(fx_run(&o, &x, &err), &err);
    perf_for(&o, &p);
    fin = serve_alone(&p, 0, 100, 3, &first);
    CHECK_INT(x.completed, 1);
    CHECK_INT(x.dropped, 2);
    CHECK(fx_find(&x, 0) && !fx_find(&x, 0)->dropped && fx_find(&x, 0)->finish == fin);
    for (int i = 1; i < 3; i++) {
        const hs_req_record *r = fx_find(&x, i);
        CHECK(r && r->dropped && r->why && strstr(r->why, "nobatch_timeout_s"));
    }
    hs_perf_free(&p);
    fx_free(&x);
}

/* The key is the policy's: the registry finds it, checks its range, and
 * the engine-wide schema does not know it. */
static void option_registered(void)
{
    hs_popts all[HS_MAX_POLICIES];
    hs_err err = {0};
    const void *obj;
    const hs_field *f;
    hs_policies_opts_defaults(all);
    CHECK(hs_policies_has_opt("nobatch_timeout_s"));
    CHECK(hs_conf_find(hs_engine_cfg_fields, "nobatch_timeout_s") == NULL);
    CHECK(hs_policies_opt_set(all, "nobatch_timeout_s", "-1", "--set engine", &err) == HS_ERANGE);
    CHECK(strstr(err.msg, "nobatch_timeout_s") != NULL);
    CHECK_OK(hs_policies_opt_set(all, "nobatch_timeout_s", "2.5", "--set engine", &err), &err);
    f = hs_policies_opt_field(all, "nobatch_timeout_s", &obj);
    CHECK(f && *(const double *)((const char *)obj + f->offset) == 2.5);
}

int main(void)
{
    hs_test_root();
    trace_path = hs_test_tmpfile("nobatch", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                         "2024-01-01 00:00:00.0000000,100,3\n"
                                         "2024-01-01 00:00:00.0000000,60,2\n"
                                         "2024-01-01 00:00:00.0000000,80,4\n");
    one_at_a_time();
    time_out();
    option_registered();
    return hs_check_result();
}
