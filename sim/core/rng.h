/* rng.h - the simulator's one seeded pseudo-random generator, hs_rng:
 * xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift
 * generators, scrambled", 2016), 64 bits of state, period 2^64 - 1.
 *
 * Ownership: the caller owns the struct (on its stack or inside its own
 * state) and seeds it with hs_rng_seed; nothing is allocated and there is no
 * global state, so two streams never interfere and a result depends only on
 * its seed.  Copying the struct forks the stream.
 *
 * Users: the planners' randomised searches and the multi-model runner's
 * thinning and model choice (sim/plan).  The workload generators keep
 * GSL's generators (sim/workload): their streams define every synthetic
 * trace, and they need GSL's distributions anyway.
 *
 * Why xorshift64* and this seeding: they are the generator and seed the
 * first randomised planner used, so its plans stayed identical when the
 * tree's generators became this one.  Seeds are spread by the
 * golden-ratio Weyl step, so consecutive seeds start far apart; the state is
 * never 0 (the one fixed point of xorshift).  The low output bits are the
 * weakest (bit 0 is a linear recurrence): hs_rng_uniform takes the high 53. */
#ifndef HS_RNG_H
#define HS_RNG_H

#include <stdint.h>

typedef struct hs_rng {
    uint64_t s;   /* state, never 0 once seeded */
} hs_rng;

/* Starts the stream of `seed` (any value, 0 included). */
void hs_rng_seed(hs_rng *r, uint64_t seed);

/* Next 64-bit output.  Inline: the GA search draws in its inner loop. */
static inline uint64_t hs_rng_u64(hs_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * UINT64_C(0x2545F4914F6CDD1D);
}

/* Uniform in [0, 1) on a 2^-53 grid, from one draw's high 53 bits. */
double hs_rng_uniform(hs_rng *r);

/* Uniform integer in [0, n), n >= 1, from one draw (always exactly one, so
 * a stream's position does not depend on n).  Modulo reduction: the bias is
 * below n / 2^64, nothing at the sizes drawn here. */
uint64_t hs_rng_below(hs_rng *r, uint64_t n);

#endif
