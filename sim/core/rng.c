/* rng.c - seeding and derived draws of hs_rng; see rng.h. */
#include "core/rng.h"

#include <assert.h>

void hs_rng_seed(hs_rng *r, uint64_t seed)
{
    r->s = seed * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x2545F4914F6CDD1D);
    if (!r->s) r->s = 1; /* 0 would repeat forever */
}

double hs_rng_uniform(hs_rng *r)
{
    return (double)(hs_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t hs_rng_below(hs_rng *r, uint64_t n)
{
    assert(n >= 1);
    return n ? hs_rng_u64(r) % n : 0;
}
