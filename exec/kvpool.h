/* kvpool.h - the host-side books of a paged KV cache: a free list of block
 * ids and, per sequence, the list of blocks it holds (its block table).
 * `hetsim-exec replay` keeps one to place the K/V of the requests of a
 * schedule in a real device pool, so that block tables are as scattered
 * and reuse as fragmented as the schedule makes them.
 *
 * Blocks hold `block_size` tokens.  A sequence holding `tokens` tokens has
 * exactly ceil(tokens / block_size) blocks (INV: blocks_for); ensure only
 * grows a sequence, release gives all its blocks back.  Every block id in
 * [0, capacity) is either on the free list or held by exactly one sequence
 * (INV: conservation); hs_exec_kvpool_sane checks both.
 *
 * Capacity: a fixed number of blocks, or 0 for "unbounded", where ensure
 * never fails and new ids are minted when the free list is empty; the peak
 * is then the number of blocks a pool must have to replay the same
 * sequence of operations (replay's sizing pass).
 *
 * Sequences are named by int64 ids and get a slot: a small integer, stable
 * while the sequence exists and reused after hs_exec_kvpool_forget, so a
 * caller can keep per-sequence data in arrays indexed by slot. */
#ifndef HS_EXEC_KVPOOL_H
#define HS_EXEC_KVPOOL_H

#include <stdint.h>

#include "core/err.h"

typedef struct hs_exec_kvpool hs_exec_kvpool;

/* capacity: blocks (>= 1), or 0 for unbounded.  block_size: tokens (>= 1).
 * Errors: HS_EINVAL, HS_ENOMEM. */
int hs_exec_kvpool_create(hs_exec_kvpool **out, int block_size, int64_t capacity, hs_err *err);
void hs_exec_kvpool_destroy(hs_exec_kvpool *p);     /* NULL: no-op */

/* Slot of sequence id; creates it (no blocks, 0 tokens) when absent and
 * `create` is set, setting *created.  Returns the slot, or -1 when absent
 * and not created, or when out of memory with create set (HS_ENOMEM in
 * err). */
int32_t hs_exec_kvpool_seq(hs_exec_kvpool *p, int64_t id, int create, int *created, hs_err *err);

/* Grows sequence `slot` to hold `tokens` tokens: takes blocks from the free
 * list until it has ceil(tokens / block_size).  Never shrinks.  Errors:
 * HS_ENOFIT when the free list runs out (nothing taken), HS_ENOMEM. */
int hs_exec_kvpool_ensure(hs_exec_kvpool *p, int32_t slot, int64_t tokens, hs_err *err);

/* Gives all blocks of `slot` back to the free list (most recently freed
 * first out, as vLLM's v0 allocator); the sequence stays, with 0 tokens.
 * Returns the blocks released. */
int64_t hs_exec_kvpool_release(hs_exec_kvpool *p, int32_t slot);
/* Releases and removes the sequence; its slot may be reused.  Unknown id:
 * no-op, returns 0; else the blocks released. */
int64_t hs_exec_kvpool_forget(hs_exec_kvpool *p, int64_t id);

/* The block table of `slot` (valid until the next call that changes the
 * pool) and its length; tokens held. */
const int32_t *hs_exec_kvpool_table(const hs_exec_kvpool *p, int32_t slot, int32_t *n_blocks);
int64_t hs_exec_kvpool_tokens(const hs_exec_kvpool *p, int32_t slot);

int64_t hs_exec_kvpool_used(const hs_exec_kvpool *p);   /* blocks held by sequences */
int64_t hs_exec_kvpool_peak(const hs_exec_kvpool *p);   /* most ever held at once */
int64_t hs_exec_kvpool_capacity(const hs_exec_kvpool *p); /* blocks; unbounded: ids minted */
int32_t hs_exec_kvpool_slots(const hs_exec_kvpool *p);  /* slots ever created (bound on slot) */

/* 1 when both invariants hold (O(capacity + sequences); for assert and
 * replay --check). */
int hs_exec_kvpool_sane(const hs_exec_kvpool *p);

#endif
