/* vec.h - growing an array by doubling, the one helper behind every
 * "append to a heap-allocated array" in hetsim.
 *
 * An array is a pointer and a capacity in elements kept by the caller; its
 * length stays the caller's too.  Growth starts at a first capacity and
 * doubles until the need fits, so n appends cost O(n) copying in all.
 * Invariant: on failure nothing changes (the pointer, the capacity and the
 * contents are as before), so a caller can report the error and go on
 * freeing what it holds. */
#ifndef HS_VEC_H
#define HS_VEC_H

#include <stddef.h>
#include <stdint.h>

/* Makes *p (an array of *cap elements of elem bytes, NULL when *cap is 0)
 * hold at least need elements.  Nothing happens when need <= *cap;
 * otherwise the new capacity is first (when *cap is 0) or *cap, doubled
 * until it reaches need, and *p is reallocated to it (existing elements
 * kept, new ones uninitialised).  A capacity whose byte size would overflow
 * size_t is cut to the largest that does not; a need that does not fit at
 * all is refused.  elem > 0 and first > 0.
 * Returns 0, or HS_ENOMEM (out of memory or size overflow) with *p and *cap
 * unchanged.  Writes no message: callers that report one add their own. */
int hs_vec_reserve(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/* hs_vec_reserve for a capacity kept in an int32_t field: the same growth,
 * with a capacity past INT32_MAX recorded as INT32_MAX (the array is then
 * larger than *cap says, which is harmless).  need <= 0 does nothing;
 * *cap >= 0 and first > 0.  Returns 0 or HS_ENOMEM, *p and *cap unchanged
 * on failure. */
int hs_vec_reserve_i32(void **p, int32_t *cap, int32_t need, size_t elem, int32_t first);

#endif
