/* vec.c - growing an array by doubling; see vec.h.  On failure nothing
 * changes: the only state written is *p and *cap, after realloc succeeds. */
#include "core/vec.h"

#include <assert.h>
#include <stdlib.h>

#include "core/err.h"

int hs_vec_reserve(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    size_t max, nc;
    void *np;
    assert(elem > 0 && first > 0);
    if (need <= *cap) return 0;
    max = SIZE_MAX / elem; /* most elements whose byte size fits size_t */
    if (need > max) return HS_ENOMEM;
    nc = *cap ? *cap : first;
    if (nc > max) nc = max;
    while (nc < need) nc = nc > max / 2 ? max : 2 * nc;
    np = realloc(*p, nc * elem);
    if (!np) return HS_ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

int hs_vec_reserve_i32(void **p, int32_t *cap, int32_t need, size_t elem, int32_t first)
{
    size_t c;
    int rc;
    assert(*cap >= 0 && first > 0);
    if (need <= *cap) return 0;
    c = (size_t)*cap;
    if ((rc = hs_vec_reserve(p, &c, (size_t)need, elem, (size_t)first))) return rc;
    *cap = c > INT32_MAX ? INT32_MAX : (int32_t)c;
    return 0;
}
