/* evq.c - 4-ary heap event queue; see evq.h.  A 4-ary heap halves the depth
 * of a binary heap and keeps the children of a node in one cache line. */
#include "core/evq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define D 4

int hs_evq_init(hs_evq *q, size_t cap_hint)
{
    memset(q, 0, sizeof *q);
    q->cap = cap_hint < 16 ? 16 : cap_hint;
    q->heap = malloc(q->cap * sizeof *q->heap);
    q->next_seq = 1;
    return q->heap ? 0 : HS_ENOMEM;
}

void hs_evq_free(hs_evq *q)
{
    free(q->heap);
    free(q->dead);
    memset(q, 0, sizeof *q);
}

static void sift_up(hs_event *h, size_t i)
{
    hs_event e = h[i];
    while (i > 0) {
        size_t p = (i - 1) / D;
        if (!hs_ev_before(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static void sift_down(hs_event *h, size_t n, size_t i)
{
    hs_event e = h[i];
    for (;;) {
        size_t c = i * D + 1, best, end;
        if (c >= n) break;
        best = c;
        end = c + D < n ? c + D : n;
        for (size_t k = c + 1; k < end; k++)
            if (hs_ev_before(&h[k], &h[best])) best = k;
        if (!hs_ev_before(&h[best], &e)) break;
        h[i] = h[best];
        i = best;
    }
    h[i] = e;
}

uint64_t hs_evq_push(hs_evq *q, hs_ns time, int prio, int type, int64_t a,
                     int64_t b)
{
    hs_event *e;
    uint64_t seq;
    assert(time >= q->now);
    if (time < q->now) time = q->now;
    if (q->len == q->cap) {
        size_t nc = q->cap * 2;
        hs_event *nh = realloc(q->heap, nc * sizeof *nh);
        if (!nh) return 0;
        q->heap = nh;
        q->cap = nc;
    }
    e = &q->heap[q->len];
    e->time = time;
    e->prio = prio;
    e->type = type;
    e->seq = seq = q->next_seq++;
    e->a = a;
    e->b = b;
    /* sift_up moves other events into *e: return the saved seq. */
    sift_up(q->heap, q->len++);
    return seq;
}

/* Open-addressing set of cancelled seqs (0 = empty slot). */
static size_t dead_slot(const hs_evq *q, uint64_t seq)
{
    size_t mask = q->dead_cap - 1;
    size_t i = (size_t)(seq * UINT64_C(0x9E3779B97F4A7C15) >> 17) & mask;
    while (q->dead[i] && q->dead[i] != seq) i = (i + 1) & mask;
    return i;
}

static int dead_take(hs_evq *q, uint64_t seq)
{
    size_t i, mask, j;
    if (!q->dead_len) return 0;
    i = dead_slot(q, seq);
    if (!q->dead[i]) return 0;
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    mask = q->dead_cap - 1;
    q->dead[i] = 0;
    q->dead_len--;
    for (j = (i + 1) & mask; q->dead[j]; j = (j + 1) & mask) {
        uint64_t s = q->dead[j];
        size_t k;
        q->dead[j] = 0;
        k = dead_slot(q, s);
        q->dead[k] = s;
    }
    return 1;
}

int hs_evq_cancel(hs_evq *q, uint64_t seq)
{
    size_t i;
    if (seq == 0 || seq >= q->next_seq) return 0;
    if ((q->dead_len + 1) * 2 > q->dead_cap) {
        size_t oc = q->dead_cap, nc = oc ? oc * 2 : 64;
        uint64_t *old = q->dead, *nd = calloc(nc, sizeof *nd);
        if (!nd) return HS_ENOMEM;
        q->dead = nd;
        q->dead_cap = nc;
        for (size_t k = 0; k < oc; k++)
            if (old[k]) q->dead[dead_slot(q, old[k])] = old[k];
        free(old);
    }
    i = dead_slot(q, seq);
    if (!q->dead[i]) {
        q->dead[i] = seq;
        q->dead_len++;
    }
    return 0;
}

int hs_evq_pop(hs_evq *q, hs_event *ev)
{
    while (q->len) {
        *ev = q->heap[0];
        q->heap[0] = q->heap[--q->len];
        if (q->len) sift_down(q->heap, q->len, 0);
        if (dead_take(q, ev->seq)) continue;
        assert(ev->time >= q->now); /* INV-1 */
        q->now = ev->time;
        q->popped++;
        return 1;
    }
    return 0;
}

int hs_evq_sane(const hs_evq *q)
{
    for (size_t i = 1; i < q->len; i++)
        if (hs_ev_before(&q->heap[i], &q->heap[(i - 1) / D])) return 0;
    return 1;
}
