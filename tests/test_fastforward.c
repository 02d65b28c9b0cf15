/* test_fastforward.c - fast-forwarding runs of decode-only steps must not
 * change any result: every record, the ITL distribution and the iteration
 * count are identical with engine.fast_forward on and off, across
 * policies, KV pressure (preemption) and arrivals that cut runs short. */
#include "check.h"
#include "fixture.h"

static int same(const fx_result *a, const fx_result *b)
{
    if (a->n != b->n || a->itl_count != b->itl_count || a->itl_sum_ns != b->itl_sum_ns ||
        a->iterations != b->iterations || a->preemptions != b->preemptions)
        return 0;
    for (int64_t i = 0; i < a->n; i++) {
        const hs_req_record *x = &a->rec[i], *y = &b->rec[i];
        if (x->id != y->id || x->replica != y->replica || x->output != y->output ||
            x->preemptions != y->preemptions || x->dropped != y->dropped ||
            x->first_sched != y->first_sched || x->first_token != y->first_token ||
            x->finish != y->finish)
            return 0;
    }
    return 1;
}

static void compare(const char *what, fx_opts *o)
{
    fx_result a, b;
    hs_err err = {0};
    o->ec.fast_forward = 0;
    CHECK_OK(fx_run(o, &a, &err), &err);
    o->ec.fast_forward = 1;
    CHECK_OK(fx_run(o, &b, &err), &err);
    CHECK(a.n > 0);
    CHECK(same(&a, &b));
    printf("%-32s requests %lld iterations %lld preemptions %lld identical %d\n", what,
           (long long)a.n, (long long)a.iterations, (long long)a.preemptions, same(&a, &b));
    fx_free(&a);
    fx_free(&b);
}

int main(void)
{
    fx_opts o;
    hs_test_root();

    /* Light load: long decode-only runs, cut by Poisson arrivals. */
    fx_defaults(&o);
    o.model = "llama-2-7b";
    o.ec.audit = 1;
    hs_workload_set(&o.wc, "rate", "3", NULL);
    hs_workload_set(&o.wc, "max_requests", "300", NULL);
    compare("vllm light azure-conv", &o);
    o.policy = "sarathi";
    compare("sarathi light azure-conv", &o);

    /* Heavy load on T4s: runs stop where blocks run out (preemption). */
    fx_pressure(&o, "40", 300);
    compare("vllm pressure", &o);
    o.policy = "sarathi";
    compare("sarathi pressure", &o);
    o.router = "rr";
    compare("sarathi pressure rr", &o);

    /* Pipeline replicas do not fast-forward; results must still agree. */
    fx_defaults(&o);
    o.model = "llama-2-13b";
    o.pp = 2;
    hs_workload_set(&o.wc, "max_requests", "200", NULL);
    compare("vllm pp2", &o);
    return hs_check_result();
}
