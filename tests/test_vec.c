/* test_vec.c - growing an array by doubling (sim/core/vec.c).
 *
 * Checks the capacity sequence the callers rely on for identical results:
 * growth from an empty array to the first size, doubling one append at a
 * time with the contents kept, a need far past the capacity (several
 * doublings at once), an exact need (no growth), a first size smaller than
 * the need, a zero need (nothing allocated); that a need whose byte size
 * overflows size_t is refused with HS_ENOMEM and the array left exactly as
 * it was; and the int32_t wrapper.  (Its clamp at INT32_MAX would take a
 * 2 GiB allocation to reach, too much for a unit test.) */
#include "check.h"

#include "core/err.h"
#include "core/vec.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAS_ASAN 1
#endif
#endif
#ifndef HAS_ASAN
#define HAS_ASAN 0
#endif

static void test_from_empty_and_doubling(void)
{
    int32_t *a = NULL;
    size_t cap = 0;
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 1, sizeof *a, 16), 0);
    CHECK(a != NULL);
    CHECK_INT(cap, 16);
    /* append 1000 elements one at a time: 16, 32, ..., 1024, contents kept */
    size_t seen[8], n_seen = 0, last = cap;
    for (int32_t i = 0; i < 1000; i++) {
        CHECK_INT(hs_vec_reserve((void **)&a, &cap, (size_t)i + 1, sizeof *a, 16), 0);
        if (cap != last && n_seen < 8) seen[n_seen++] = cap;
        last = cap;
        a[i] = 7 * i;
    }
    CHECK_INT(cap, 1024);
    CHECK_INT(n_seen, 6);
    for (size_t k = 0; k < n_seen; k++) CHECK_INT(seen[k], (size_t)32 << k);
    int bad = 0;
    for (int32_t i = 0; i < 1000; i++) bad += a[i] != 7 * i;
    CHECK_INT(bad, 0);
    free(a);
}

static void test_exact_and_jump(void)
{
    double *a = NULL;
    size_t cap = 0;
    /* the first size may be below the need: it doubles from there */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 100, sizeof *a, 16), 0);
    CHECK_INT(cap, 128);
    double *before = a;
    /* a need equal to the capacity, or below it, changes nothing */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 128, sizeof *a, 16), 0);
    CHECK_INT(cap, 128);
    CHECK(a == before);
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 3, sizeof *a, 16), 0);
    CHECK_INT(cap, 128);
    /* one past it: one doubling */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 129, sizeof *a, 16), 0);
    CHECK_INT(cap, 256);
    /* far past it: doubled from the capacity until it fits, not to the need */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 3000, sizeof *a, 16), 0);
    CHECK_INT(cap, 4096);
    a[4095] = 1.5;
    free(a);
}

static void test_first_size(void)
{
    static const size_t first[] = {1, 16, 64, 256, 1000};
    for (size_t k = 0; k < sizeof first / sizeof *first; k++) {
        char *a = NULL;
        size_t cap = 0;
        CHECK_INT(hs_vec_reserve((void **)&a, &cap, 1, 1, first[k]), 0);
        CHECK_INT(cap, first[k]);
        /* the next growth doubles the first size, whatever it was */
        CHECK_INT(hs_vec_reserve((void **)&a, &cap, first[k] + 1, 1, first[k]), 0);
        CHECK_INT(cap, 2 * first[k]);
        free(a);
    }
}

static void test_zero(void)
{
    int64_t *a = NULL;
    size_t cap = 0;
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 0, sizeof *a, 64), 0);
    CHECK(a == NULL);
    CHECK_INT(cap, 0);
    int32_t *b = NULL, cap32 = 0;
    CHECK_INT(hs_vec_reserve_i32((void **)&b, &cap32, 0, sizeof *b, 64), 0);
    CHECK_INT(hs_vec_reserve_i32((void **)&b, &cap32, -5, sizeof *b, 64), 0);
    CHECK(b == NULL);
    CHECK_INT(cap32, 0);
}

static void test_overflow_refused(void)
{
    int64_t *a = NULL;
    size_t cap = 0;
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, 10, sizeof *a, 16), 0);
    for (int i = 0; i < 10; i++) a[i] = i;
    int64_t *before = a;
    /* a need whose byte size does not fit size_t */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, SIZE_MAX / sizeof *a + 1, sizeof *a, 16), HS_ENOMEM);
    CHECK(a == before);
    CHECK_INT(cap, 16);
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, SIZE_MAX, sizeof *a, 16), HS_ENOMEM);
    CHECK(a == before);
    CHECK_INT(cap, 16);
    int bad = 0;
    for (int i = 0; i < 10; i++) bad += a[i] != i;
    CHECK_INT(bad, 0);
#if !HAS_ASAN
    /* a need that fits size_t but not memory: realloc fails, nothing changes
     * (the doubled capacity is cut to SIZE_MAX / elem rather than wrap).
     * AddressSanitizer aborts on such a request instead of returning NULL. */
    CHECK_INT(hs_vec_reserve((void **)&a, &cap, SIZE_MAX / sizeof *a / 2 + 1, sizeof *a, 16),
              HS_ENOMEM);
    CHECK(a == before);
    CHECK_INT(cap, 16);
#endif
    free(a);
    /* an empty array stays empty */
    char *c = NULL;
    size_t cc = 0;
    CHECK_INT(hs_vec_reserve((void **)&c, &cc, SIZE_MAX, 2, 16), HS_ENOMEM);
    CHECK(c == NULL);
    CHECK_INT(cc, 0);
}

static void test_i32(void)
{
    int32_t *a = NULL, cap = 0;
    CHECK_INT(hs_vec_reserve_i32((void **)&a, &cap, 1, sizeof *a, 64), 0);
    CHECK_INT(cap, 64);
    CHECK_INT(hs_vec_reserve_i32((void **)&a, &cap, 65, sizeof *a, 64), 0);
    CHECK_INT(cap, 128);
    CHECK_INT(hs_vec_reserve_i32((void **)&a, &cap, 1000, sizeof *a, 64), 0);
    CHECK_INT(cap, 1024);
    free(a);
}

int main(void)
{
    test_from_empty_and_doubling();
    test_exact_and_jump();
    test_first_size();
    test_zero();
    test_overflow_refused();
    test_i32();
    return hs_check_result();
}
