/* test_exec_kvpool.c - the paged KV books of replay (kvpool.h): exact
 * block counts (ceil(tokens / block_size)) and conservation after every
 * operation of long random sequences checked against a plain reference;
 * ensure never shrinks; a failed ensure (pool exhausted) changes nothing;
 * release keeps the sequence, forget reuses its slot; the id map survives
 * many insertions and deletions (backward-shift deletion); an unbounded
 * pool's peak is the capacity a bounded pool needs for the same
 * operations; block ids come out in the documented order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kvpool.h"

#define NIDS 300
#define STEPS 6000

static uint64_t rng;
static uint64_t next(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
}

static int64_t blocks_for(int64_t tokens, int bs) { return (tokens + bs - 1) / bs; }

static int64_t ref[NIDS];      /* tokens held per id, -1: absent */

static int64_t ref_used(int bs)
{
    int64_t u = 0;
    for (int i = 0; i < NIDS; i++)
        if (ref[i] > 0) u += blocks_for(ref[i], bs);
    return u;
}

/* A random sequence of ensure / release / forget; counts the ensures that
 * did not fit.  Every step is checked against ref. */
static int random_ops(hs_exec_kvpool *p, int bs, int steps, uint64_t seed)
{
    hs_err err = {0};
    int nofit = 0, bad_used = 0, bad_seq = 0, bad_sane = 0;
    rng = seed;
    for (int i = 0; i < NIDS; i++) ref[i] = -1;
    for (int s = 0; s < steps; s++) {
        int id = (int)(next() % NIDS), op = (int)(next() % 10);
        /* ids spread out, negative ones included */
        int64_t key = (int64_t)id * 1000003 - 150000000;
        if (op < 6) {
            int created;
            int32_t slot = hs_exec_kvpool_seq(p, key, 1, &created, &err);
            int64_t tokens, before = hs_exec_kvpool_used(p);
            CHECK(slot >= 0);
            if (slot < 0) return -1;
            CHECK_INT(created, ref[id] < 0);
            if (ref[id] < 0) ref[id] = 0;
            tokens = next() % 5 ? ref[id] + (int64_t)(next() % 70) : ref[id] / 2;
            if (hs_exec_kvpool_ensure(p, slot, tokens, &err) == 0) {
                if (tokens > ref[id]) ref[id] = tokens;
            } else {
                CHECK_INT(err.code, HS_ENOFIT);
                CHECK_INT(hs_exec_kvpool_used(p), before);
                nofit++;
            }
        } else if (op < 8) {
            int32_t slot = hs_exec_kvpool_seq(p, key, 0, NULL, &err);
            CHECK_INT(slot >= 0, ref[id] >= 0);
            if (slot >= 0) {
                CHECK_INT(hs_exec_kvpool_release(p, slot), blocks_for(ref[id], bs));
                ref[id] = 0;
            }
        } else {
            CHECK_INT(hs_exec_kvpool_forget(p, key), ref[id] > 0 ? blocks_for(ref[id], bs) : 0);
            ref[id] = -1;
        }
        if (hs_exec_kvpool_used(p) != ref_used(bs)) bad_used++;
        if (!hs_exec_kvpool_sane(p)) bad_sane++;
        for (int i = 0; i < NIDS; i += 37) {
            int32_t slot = hs_exec_kvpool_seq(p, (int64_t)i * 1000003 - 150000000, 0, NULL, &err), n = -1;
            if ((slot >= 0) != (ref[i] >= 0)) bad_seq++;
            if (slot < 0) continue;
            hs_exec_kvpool_table(p, slot, &n);
            if (hs_exec_kvpool_tokens(p, slot) != ref[i] || n != blocks_for(ref[i], bs)) bad_seq++;
        }
    }
    CHECK_INT(bad_used, 0);
    CHECK_INT(bad_sane, 0);
    CHECK_INT(bad_seq, 0);
    return nofit;
}

static void test_random(int bs)
{
    hs_err err = {0};
    hs_exec_kvpool *p;
    int64_t peak;
    /* unbounded: counts the peak; ids are minted only when none is free,
     * so the ids minted are the peak */
    CHECK_OK(hs_exec_kvpool_create(&p, bs, 0, &err), &err);
    CHECK_INT(random_ops(p, bs, STEPS, 7), 0);
    peak = hs_exec_kvpool_peak(p);
    CHECK(peak > 0);
    CHECK_INT(hs_exec_kvpool_capacity(p), peak);
    hs_exec_kvpool_destroy(p);
    /* bounded at that peak: the same operations all fit */
    CHECK_OK(hs_exec_kvpool_create(&p, bs, peak, &err), &err);
    CHECK_INT(random_ops(p, bs, STEPS, 7), 0);
    CHECK_INT(hs_exec_kvpool_peak(p), peak);
    hs_exec_kvpool_destroy(p);
    /* bounded at half: some do not fit, nothing leaks */
    CHECK_OK(hs_exec_kvpool_create(&p, bs, peak / 2, &err), &err);
    CHECK(random_ops(p, bs, STEPS, 7) > 0);
    CHECK(hs_exec_kvpool_peak(p) <= peak / 2);
    hs_exec_kvpool_destroy(p);
    printf("block size %d: peak %lld blocks\n", bs, (long long)peak);
}

static void test_order(void)
{
    hs_err err = {0};
    hs_exec_kvpool *p;
    int32_t a, b, c, n;
    const int32_t *t;
    CHECK_OK(hs_exec_kvpool_create(&p, 16, 4, &err), &err);
    a = hs_exec_kvpool_seq(p, 100, 1, NULL, &err);
    b = hs_exec_kvpool_seq(p, 200, 1, NULL, &err);
    CHECK_OK(hs_exec_kvpool_ensure(p, a, 33, &err), &err);          /* 3 blocks: 0, 1, 2 */
    t = hs_exec_kvpool_table(p, a, &n);
    CHECK_INT(n, 3);
    CHECK(n == 3 && t[0] == 0 && t[1] == 1 && t[2] == 2);
    CHECK_OK(hs_exec_kvpool_ensure(p, a, 20, &err), &err);          /* never shrinks */
    CHECK_INT(hs_exec_kvpool_tokens(p, a), 33);
    CHECK_INT(hs_exec_kvpool_ensure(p, b, 17, &err), HS_ENOFIT);    /* 2 needed, 1 free */
    CHECK_INT(hs_exec_kvpool_tokens(p, b), 0);
    CHECK_INT(hs_exec_kvpool_used(p), 3);
    CHECK_INT(hs_exec_kvpool_release(p, a), 3);                     /* preempted: stays */
    CHECK_INT(hs_exec_kvpool_seq(p, 100, 0, NULL, &err), a);
    CHECK_OK(hs_exec_kvpool_ensure(p, b, 17, &err), &err);          /* freed ids reused first */
    t = hs_exec_kvpool_table(p, b, &n);
    CHECK(n == 2 && t[0] == 0 && t[1] == 1);
    CHECK_INT(hs_exec_kvpool_forget(p, 100), 0);
    CHECK_INT(hs_exec_kvpool_seq(p, 100, 0, NULL, &err), -1);
    c = hs_exec_kvpool_seq(p, 300, 1, NULL, &err);
    CHECK_INT(c, a);                                                /* slot reused */
    CHECK_INT(hs_exec_kvpool_forget(p, 200), 2);
    CHECK_INT(hs_exec_kvpool_used(p), 0);
    CHECK_INT(hs_exec_kvpool_peak(p), 3);
    CHECK(hs_exec_kvpool_sane(p));
    hs_exec_kvpool_destroy(p);
    hs_exec_kvpool_destroy(NULL);
    CHECK_INT(hs_exec_kvpool_create(&p, 0, 4, &err), HS_EINVAL);
    CHECK(p == NULL);
}

int main(void)
{
    test_order();
    test_random(16);
    test_random(1);
    test_random(48);
    return hs_check_result();
}
