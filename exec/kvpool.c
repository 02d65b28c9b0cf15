/* kvpool.c - paged KV-cache books: free list, block tables, id -> slot map;
 * see kvpool.h for the contract and the two invariants.
 *
 * The free list is a stack (LIFO); a bounded pool starts with ids 0, 1, 2,
 * ... on top, so an empty pool hands out ascending ids.  The id map is
 * open addressing with linear probing over a power-of-two table kept at
 * most half full, with backward-shift deletion (no tombstones). */
#include "kvpool.h"

#include <stdlib.h>
#include <string.h>

typedef struct seq {
    int64_t id;
    int64_t tokens;            /* tokens held */
    int32_t n, cap;            /* blocks held, capacity of `blocks` */
    int32_t *blocks;           /* block table */
    int live;
} seq;

struct hs_exec_kvpool {
    int block_size;            /* tokens */
    int bounded;
    int64_t capacity;          /* bounded: blocks; unbounded: ids minted so far */
    int32_t *free;             /* stack of free block ids */
    int64_t n_free, cap_free;
    int64_t used, peak;        /* blocks held by sequences */
    seq *seqs;                 /* by slot */
    int32_t n_seqs, cap_seqs;  /* slots ever created */
    int32_t *free_slots;       /* stack of dead slots */
    int32_t n_free_slots;
    int32_t *map;              /* slot + 1, 0 empty; [map_cap] */
    int64_t map_cap, map_n;
};

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int hs_exec_kvpool_create(hs_exec_kvpool **out, int block_size, int64_t capacity, hs_err *err)
{
    hs_exec_kvpool *p;
    *out = NULL;
    if (block_size < 1) return hs_errf(err, HS_EINVAL, "KV pool: block size %d", block_size);
    if (capacity < 0 || capacity > INT32_MAX)
        return hs_errf(err, HS_EINVAL, "KV pool: %lld blocks (at most %d)", (long long)capacity,
                       INT32_MAX);
    if (!(p = calloc(1, sizeof *p))) return hs_errf(err, HS_ENOMEM, "out of memory (KV pool)");
    p->block_size = block_size;
    p->bounded = capacity > 0;
    p->map_cap = 64;
    if (!(p->map = calloc((size_t)p->map_cap, sizeof *p->map))) goto nomem;
    if (p->bounded) {
        p->capacity = capacity;
        p->cap_free = capacity;
        if (!(p->free = malloc((size_t)capacity * sizeof *p->free))) goto nomem;
        for (int64_t i = 0; i < capacity; i++) p->free[i] = (int32_t)(capacity - 1 - i);
        p->n_free = capacity;
    }
    *out = p;
    return 0;
nomem:
    hs_exec_kvpool_destroy(p);
    return hs_errf(err, HS_ENOMEM, "out of memory (KV pool of %lld blocks)", (long long)capacity);
}

void hs_exec_kvpool_destroy(hs_exec_kvpool *p)
{
    if (!p) return;
    for (int32_t i = 0; i < p->n_seqs; i++) free(p->seqs[i].blocks);
    free(p->seqs);
    free(p->free_slots);
    free(p->free);
    free(p->map);
    free(p);
}

/* ---- id -> slot map ---- */

static int64_t map_find(const hs_exec_kvpool *p, int64_t id)
{
    int64_t mask = p->map_cap - 1, i = (int64_t)(mix64((uint64_t)id) & (uint64_t)mask);
    for (; p->map[i]; i = (i + 1) & mask)
        if (p->seqs[p->map[i] - 1].id == id) return i;
    return -1 - i;             /* the empty cell where it would go */
}

static int map_grow(hs_exec_kvpool *p)
{
    int64_t cap = p->map_cap * 2, mask = cap - 1;
    int32_t *m = calloc((size_t)cap, sizeof *m);
    if (!m) return HS_ENOMEM;
    for (int64_t j = 0; j < p->map_cap; j++) {
        int64_t i;
        if (!p->map[j]) continue;
        i = (int64_t)(mix64((uint64_t)p->seqs[p->map[j] - 1].id) & (uint64_t)mask);
        while (m[i]) i = (i + 1) & mask;
        m[i] = p->map[j];
    }
    free(p->map);
    p->map = m;
    p->map_cap = cap;
    return 0;
}

/* Backward-shift deletion of cell i. */
static void map_delete(hs_exec_kvpool *p, int64_t i)
{
    int64_t mask = p->map_cap - 1, j = i;
    p->map[i] = 0;
    for (;;) {
        int64_t home;
        j = (j + 1) & mask;
        if (!p->map[j]) break;
        home = (int64_t)(mix64((uint64_t)p->seqs[p->map[j] - 1].id) & (uint64_t)mask);
        /* move j to i when its home is not cyclically within (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            p->map[i] = p->map[j];
            p->map[j] = 0;
            i = j;
        }
    }
    p->map_n--;
}

int32_t hs_exec_kvpool_seq(hs_exec_kvpool *p, int64_t id, int create, int *created, hs_err *err)
{
    int64_t cell = map_find(p, id);
    int32_t slot;
    if (created) *created = 0;
    if (cell >= 0) return p->map[cell] - 1;
    if (!create) return -1;
    if (2 * (p->map_n + 1) > p->map_cap) {
        if (map_grow(p)) goto nomem;
        cell = map_find(p, id);
    }
    if (p->n_free_slots) {
        slot = p->free_slots[--p->n_free_slots];
    } else {
        if (p->n_seqs == p->cap_seqs) {
            int32_t cap = p->cap_seqs ? 2 * p->cap_seqs : 64;
            seq *s = realloc(p->seqs, (size_t)cap * sizeof *s);
            int32_t *fs;
            if (!s) goto nomem;
            p->seqs = s;
            if (!(fs = realloc(p->free_slots, (size_t)cap * sizeof *fs))) goto nomem;
            p->free_slots = fs;
            p->cap_seqs = cap;
        }
        slot = p->n_seqs++;
        memset(&p->seqs[slot], 0, sizeof p->seqs[slot]);
    }
    p->seqs[slot].id = id;
    p->seqs[slot].tokens = 0;
    p->seqs[slot].n = 0;
    p->seqs[slot].live = 1;
    p->map[-1 - cell] = slot + 1;
    p->map_n++;
    if (created) *created = 1;
    return slot;
nomem:
    hs_errf(err, HS_ENOMEM, "out of memory (KV pool sequences)");
    return -1;
}

/* ---- blocks ---- */

int hs_exec_kvpool_ensure(hs_exec_kvpool *p, int32_t slot, int64_t tokens, hs_err *err)
{
    seq *s = &p->seqs[slot];
    int64_t need = (tokens + p->block_size - 1) / p->block_size, more;
    if (tokens <= s->tokens) return 0;
    if (need > INT32_MAX) return hs_errf(err, HS_ERANGE, "request %lld: %lld tokens", (long long)s->id,
                                         (long long)tokens);
    more = need - s->n;
    if (more > 0 && p->bounded && more > p->n_free)
        return hs_errf(err, HS_ENOFIT,
                       "request %lld: needs %lld more KV blocks, %lld of %lld are free",
                       (long long)s->id, (long long)more, (long long)p->n_free,
                       (long long)p->capacity);
    if (need > s->cap) {
        int32_t cap = s->cap ? s->cap : 4;
        int32_t *b;
        while (cap < need) cap = cap > INT32_MAX / 2 ? INT32_MAX : 2 * cap;
        if (!(b = realloc(s->blocks, (size_t)cap * sizeof *b)))
            return hs_errf(err, HS_ENOMEM, "out of memory (block table)");
        s->blocks = b;
        s->cap = cap;
    }
    if (!p->bounded && more > p->n_free && p->capacity + (more - p->n_free) > INT32_MAX)
        return hs_errf(err, HS_ERANGE, "KV pool: more than %d blocks", INT32_MAX);
    if (!p->bounded && more > p->n_free && p->capacity + more > p->cap_free) {
        /* unbounded: the free stack must hold every id ever minted */
        int64_t cap = p->cap_free ? p->cap_free : 64;
        int32_t *f;
        while (cap < p->capacity + more) cap *= 2;
        if (!(f = realloc(p->free, (size_t)cap * sizeof *f)))
            return hs_errf(err, HS_ENOMEM, "out of memory (KV free list)");
        p->free = f;
        p->cap_free = cap;
    }
    for (int64_t k = 0; k < more; k++) {
        int32_t id;
        if (p->n_free) id = p->free[--p->n_free];
        else id = (int32_t)p->capacity++;     /* unbounded: mint */
        s->blocks[s->n++] = id;
    }
    if (more > 0) {
        p->used += more;
        if (p->used > p->peak) p->peak = p->used;
    }
    s->tokens = tokens;
    return 0;
}

int64_t hs_exec_kvpool_release(hs_exec_kvpool *p, int32_t slot)
{
    seq *s = &p->seqs[slot];
    int64_t n = s->n;
    /* room: n_free + held <= capacity <= cap_free (ensure grows cap_free
     * before minting) */
    for (int32_t k = s->n - 1; k >= 0; k--) p->free[p->n_free++] = s->blocks[k];
    p->used -= n;
    s->n = 0;
    s->tokens = 0;
    return n;
}

int64_t hs_exec_kvpool_forget(hs_exec_kvpool *p, int64_t id)
{
    int64_t cell = map_find(p, id), n;
    int32_t slot;
    if (cell < 0) return 0;
    slot = p->map[cell] - 1;
    n = hs_exec_kvpool_release(p, slot);
    p->seqs[slot].live = 0;
    map_delete(p, cell);
    p->free_slots[p->n_free_slots++] = slot;
    return n;
}

const int32_t *hs_exec_kvpool_table(const hs_exec_kvpool *p, int32_t slot, int32_t *n_blocks)
{
    *n_blocks = p->seqs[slot].n;
    return p->seqs[slot].blocks;
}

int64_t hs_exec_kvpool_tokens(const hs_exec_kvpool *p, int32_t slot) { return p->seqs[slot].tokens; }
int64_t hs_exec_kvpool_used(const hs_exec_kvpool *p) { return p->used; }
int64_t hs_exec_kvpool_peak(const hs_exec_kvpool *p) { return p->peak; }
int64_t hs_exec_kvpool_capacity(const hs_exec_kvpool *p) { return p->capacity; }
int32_t hs_exec_kvpool_slots(const hs_exec_kvpool *p) { return p->n_seqs; }

int hs_exec_kvpool_sane(const hs_exec_kvpool *p)
{
    unsigned char *mark = calloc((size_t)(p->capacity ? p->capacity : 1), 1);
    int64_t held = 0, live = 0;
    int ok = mark != NULL;
    for (int64_t i = 0; ok && i < p->n_free; i++) {
        int32_t b = p->free[i];
        if (b < 0 || b >= p->capacity || mark[b]++) ok = 0;
    }
    for (int32_t s = 0; ok && s < p->n_seqs; s++) {
        const seq *q = &p->seqs[s];
        int64_t cell;
        if (!q->live) {
            if (q->n) ok = 0;
            continue;
        }
        live++;
        /* INV blocks_for: exactly ceil(tokens / block_size) blocks */
        if (q->n != (q->tokens + p->block_size - 1) / p->block_size) ok = 0;
        for (int32_t k = 0; ok && k < q->n; k++) {
            int32_t b = q->blocks[k];
            if (b < 0 || b >= p->capacity || mark[b]++) ok = 0;
        }
        held += q->n;
        cell = map_find(p, q->id);
        if (cell < 0 || p->map[cell] - 1 != s) ok = 0;
    }
    /* INV conservation: every id free or held by exactly one sequence */
    if (ok && (held != p->used || held + p->n_free != p->capacity)) ok = 0;
    if (ok && live != p->map_n) ok = 0;
    free(mark);
    return ok;
}
