/* test_determinism.c - same seed, same run: every request record is
 * identical field by field (INV-DET); a different seed changes them.  Runs
 * under KV pressure so preemption order is covered too. */
#include "check.h"
#include "fixture.h"

static void setup(fx_opts *o, const char *policy, const char *seed)
{
    fx_defaults(o);
    o->model = "llama-2-7b";
    o->cluster = "llmpq-c9";
    o->max_model_len = 2048;
    o->policy = policy;
    fx_popt(o, "static_batch", "2"); /* padded prefills of 8 x 2048 tokens would not leave a T4 any KV room */
    hs_workload_set(&o->wc, "rate", "30", NULL);
    hs_workload_set(&o->wc, "max_requests", "300", NULL);
    hs_workload_set(&o->wc, "prompt.max", "1500", NULL);
    hs_workload_set(&o->wc, "seed", seed, NULL);
}

static int same(const fx_result *a, const fx_result *b)
{
    if (a->n != b->n || a->itl_count != b->itl_count || a->itl_sum_ns != b->itl_sum_ns)
        return 0;
    for (int64_t i = 0; i < a->n; i++) {
        const hs_req_record *x = &a->rec[i], *y = &b->rec[i];
        if (x->id != y->id || x->replica != y->replica || x->prompt != y->prompt ||
            x->output != y->output || x->preemptions != y->preemptions ||
            x->dropped != y->dropped || x->arrival != y->arrival ||
            x->first_sched != y->first_sched || x->first_token != y->first_token ||
            x->finish != y->finish)
            return 0;
    }
    return 1;
}

int main(void)
{
    static const char *const policies[] = {"vllm", "sarathi", "static"};
    hs_test_root();
    for (int p = 0; p < 3; p++) {
        fx_opts o;
        fx_result a, b, c;
        hs_err err = {0};
        setup(&o, policies[p], "7");
        CHECK_OK(fx_run(&o, &a, &err), &err);
        CHECK_OK(fx_run(&o, &b, &err), &err);
        setup(&o, policies[p], "8");
        CHECK_OK(fx_run(&o, &c, &err), &err);
        CHECK(a.n == 300);
        CHECK(same(&a, &b));
        CHECK(!same(&a, &c));
        if (p == 0) CHECK(a.preemptions > 0);
        fx_free(&a);
        fx_free(&b);
        fx_free(&c);
    }
    return hs_check_result();
}
