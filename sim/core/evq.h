/* evq.h - the event queue: a 4-ary min-heap of events ordered by
 * (time, priority, seq).
 *
 * seq is assigned by the queue from a global insertion counter, so two events
 * with equal time and priority pop in insertion order and a run is
 * bit-for-bit deterministic.  The order is defined once, in hs_ev_before(),
 * which both the heap and the tests use.
 *
 * Cancellation is by tombstone: hs_evq_cancel() marks an event id dead and
 * hs_evq_pop() discards dead events without returning them, so the clock
 * never moves for a cancelled event.  Events carry ids and two integer
 * arguments, never owning pointers.
 *
 * Invariants: INV-1 popped times are non-decreasing (asserted in pop);
 * INV-2 the heap property holds (hs_evq_sane, used inside assert). */
#ifndef HS_EVQ_H
#define HS_EVQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/time.h"

/* Named priorities for events at the same instant; lower runs first.
 * Why this order: completions free resources before new work is admitted;
 * transfers land before schedulers look at their queues; arrivals are seen
 * before the step that may batch them; then replica steps. */
enum {
    HS_PRIO_COMPLETE = 0,
    HS_PRIO_TRANSFER = 1,
    HS_PRIO_ARRIVAL = 2,
    HS_PRIO_STEP = 3,
    HS_PRIO_SAMPLE = 4
};

typedef struct hs_event {
    hs_ns time;
    int32_t prio;
    int32_t type;     /* event kind, interpreted by the engine */
    uint64_t seq;     /* assigned by the queue */
    int64_t a, b;     /* arguments (ids, indices), never owning pointers */
} hs_event;

typedef struct hs_evq {
    hs_event *heap;
    size_t len, cap;
    uint64_t next_seq;
    hs_ns now;           /* time of the last popped event */
    uint64_t popped;     /* events delivered (tombstones excluded) */
    /* Tombstones: a sorted-free bitmap over seq would grow with the run, so
     * cancelled seqs are kept in a small open-addressing set instead. */
    uint64_t *dead;
    size_t dead_len, dead_cap;
} hs_evq;

/* Total order of events: 1 when x must pop before y. */
static inline int hs_ev_before(const hs_event *x, const hs_event *y)
{
    if (x->time != y->time) return x->time < y->time;
    if (x->prio != y->prio) return x->prio < y->prio;
    return x->seq < y->seq;
}

int hs_evq_init(hs_evq *q, size_t cap_hint);
void hs_evq_free(hs_evq *q);

/* Pushes an event; returns its seq (the id used to cancel it), or 0 when out
 * of memory (seqs start at 1).  Scheduling in the past is a caller bug:
 * asserted, and clamped to now in release builds. */
uint64_t hs_evq_push(hs_evq *q, hs_ns time, int prio, int type, int64_t a,
                     int64_t b);

/* Pops the next live event into *ev and advances q->now; 0 when empty. */
int hs_evq_pop(hs_evq *q, hs_event *ev);

/* Marks event `seq` cancelled; it will be dropped when it reaches the top.
 * `seq` must still be queued: the tombstone of an event already delivered is
 * never reclaimed (the queue cannot tell without a search).  Returns 0 or
 * HS_ENOMEM. */
int hs_evq_cancel(hs_evq *q, uint64_t seq);

/* Number of queued entries, tombstones included. */
static inline size_t hs_evq_len(const hs_evq *q) { return q->len; }

/* Peek the earliest queued entry's time (tombstones included); HS_NS_MAX
 * when empty. */
static inline hs_ns hs_evq_peek_time(const hs_evq *q)
{
    return q->len ? q->heap[0].time : HS_NS_MAX;
}

/* 1 when the heap property holds (for assert()). */
int hs_evq_sane(const hs_evq *q);

#endif
