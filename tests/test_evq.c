/* test_evq.c - the event queue (sim/core/evq.c).
 *
 * Checks the delivery order against a reference built on the same
 * comparison, hs_ev_before(): random pushes popped in sorted order, ties on
 * (time, prio) in insertion order, tombstone cancellation (cancelled events
 * never pop and never move the clock; cancelling a popped or unknown seq is
 * harmless), clock monotonicity under interleaved push/pop/cancel checked
 * step by step against a naive reference queue, heap sanity (INV-2) after
 * every operation, a 1e6-event stress case with exact counts, and that the
 * tombstone set drains as cancelled events reach the top.
 * Random numbers come from a fixed-seed splitmix64, so runs are repeatable. */
#include "check.h"

#include "core/err.h"
#include "core/evq.h"

static uint64_t rng_state = UINT64_C(0x2545F4914F6CDD1D);

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int64_t rnd_below(int64_t n) { return (int64_t)(rnd() % (uint64_t)n); }

/* Pushes and returns the seq the queue assigned (next_seq before the push,
 * per evq.h "seq is assigned by the queue from a global insertion counter").
 * A push whose return value differs from it is counted in bad_return, which
 * each test asserts to be 0, so the order and cancellation checks below stay
 * meaningful on their own even if hs_evq_push() returned the wrong id. */
static long bad_return;

static uint64_t push(hs_evq *q, hs_ns t, int prio, int type, int64_t a, int64_t b)
{
    uint64_t want = q->next_seq, got = hs_evq_push(q, t, prio, type, a, b);
    if (got != want) {
        if (!bad_return)
            fprintf(stderr, "hs_evq_push returned seq %llu, assigned %llu\n",
                    (unsigned long long)got, (unsigned long long)want);
        bad_return++;
    }
    return want;
}

static int cmp_ev(const void *x, const void *y)
{
    const hs_event *a = x, *b = y;
    if (hs_ev_before(a, b)) return -1;
    if (hs_ev_before(b, a)) return 1;
    return 0;
}

static int same_event(const hs_event *a, const hs_event *b)
{
    return a->time == b->time && a->prio == b->prio && a->type == b->type &&
           a->seq == b->seq && a->a == b->a && a->b == b->b;
}

/* The comparison itself: time, then prio, then seq; irreflexive. */
static void test_before(void)
{
    hs_event x = {10, 2, 0, 5, 0, 0}, y = x;
    CHECK(!hs_ev_before(&x, &y));
    y.time = 11;
    CHECK(hs_ev_before(&x, &y) && !hs_ev_before(&y, &x));
    y = x;
    y.prio = 1;                 /* lower prio first at the same time */
    CHECK(hs_ev_before(&y, &x) && !hs_ev_before(&x, &y));
    y = x;
    y.seq = 4;                  /* earlier insertion first */
    CHECK(hs_ev_before(&y, &x) && !hs_ev_before(&x, &y));
    y = x;
    y.time = 9;
    y.prio = 4;
    y.seq = 100;                /* time dominates prio and seq */
    CHECK(hs_ev_before(&y, &x));
}

static void test_empty(void)
{
    hs_evq q;
    hs_event ev;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    CHECK_INT(q.cap, 16);
    CHECK_INT(hs_evq_len(&q), 0);
    CHECK(hs_evq_peek_time(&q) == HS_NS_MAX);
    CHECK_INT(hs_evq_pop(&q, &ev), 0);
    CHECK_INT(q.now, 0);
    CHECK_INT(q.popped, 0);
    CHECK(hs_evq_sane(&q));
    /* seqs start at 1 and increase by one per push */
    CHECK_INT(hs_evq_push(&q, 5, HS_PRIO_STEP, 1, 0, 0), 1);
    CHECK_INT(hs_evq_push(&q, 3, HS_PRIO_STEP, 1, 0, 0), 2);
    CHECK_INT(hs_evq_peek_time(&q), 3);
    CHECK_INT(hs_evq_len(&q), 2);
    hs_evq_free(&q);
    CHECK(q.heap == NULL && q.dead == NULL && q.len == 0);
    hs_evq_free(&q); /* freeing a freed (zeroed) queue is harmless */
}

/* The id returned by push is the new event's seq, even when the new event
 * moves up the heap; cancelling by that id cancels that event. */
static void test_push_returns_own_seq(void)
{
    hs_evq q;
    hs_event ev;
    uint64_t late, early;
    int i, wrong = 0;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    for (i = 0; i < 100; i++) /* descending times: every push sifts up */
        if (hs_evq_push(&q, 1000 - i, HS_PRIO_STEP, 0, i, 0) != (uint64_t)i + 1) wrong++;
    CHECK_INT(wrong, 0);
    hs_evq_free(&q);

    CHECK_INT(hs_evq_init(&q, 0), 0);
    late = hs_evq_push(&q, 5, HS_PRIO_STEP, 0, 5, 0);
    early = hs_evq_push(&q, 3, HS_PRIO_STEP, 0, 3, 0);
    CHECK(late != early);
    CHECK_INT(hs_evq_cancel(&q, early), 0);
    CHECK(hs_evq_pop(&q, &ev));
    CHECK_INT(ev.a, 5);   /* the t=3 event was cancelled, t=5 survives */
    CHECK_INT(ev.seq, late);
    CHECK_INT(hs_evq_pop(&q, &ev), 0);
    hs_evq_free(&q);
}

/* n random pushes, then pop everything: exactly the sorted order. */
static void test_random_order(int n, int64_t tmax, int nprio)
{
    hs_evq q;
    hs_event *ref = malloc((size_t)n * sizeof *ref), ev;
    int i, bad = 0, first_bad = -1;
    hs_ns last = -1;
    CHECK(ref != NULL);
    if (!ref) return;
    CHECK_INT(hs_evq_init(&q, 4), 0);
    for (i = 0; i < n; i++) {
        hs_ns t = rnd_below(tmax);
        int prio = (int)rnd_below(nprio), type = (int)rnd_below(7);
        int64_t b = (int64_t)rnd_below(1000) - 500;
        uint64_t seq = push(&q, t, prio, type, i, b);
        if (seq != (uint64_t)i + 1) bad++;
        ref[i] = (hs_event){t, prio, type, seq, i, b};
    }
    CHECK_INT(bad, 0);
    CHECK_INT(hs_evq_len(&q), n);
    CHECK(hs_evq_sane(&q));
    qsort(ref, (size_t)n, sizeof *ref, cmp_ev);
    CHECK_INT(hs_evq_peek_time(&q), ref[0].time);
    for (i = 0; i < n; i++) {
        if (!hs_evq_pop(&q, &ev) || !same_event(&ev, &ref[i]) || q.now != ev.time ||
            ev.time < last) {
            if (first_bad < 0) first_bad = i;
            bad++;
        }
        last = ev.time;
    }
    if (first_bad >= 0)
        fprintf(stderr, "first out-of-order pop at index %d of %d\n", first_bad, n);
    CHECK_INT(bad, 0);
    CHECK_INT(hs_evq_pop(&q, &ev), 0);
    CHECK_INT(q.popped, n);
    CHECK_INT(hs_evq_len(&q), 0);
    CHECK_INT(q.now, ref[n - 1].time);
    hs_evq_free(&q);
    free(ref);
}

/* Equal time and prio: insertion order, whatever the heap shape. */
static void test_ties(void)
{
    hs_evq q;
    hs_event ev;
    int i, bad = 0;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    for (i = 0; i < 1000; i++) push(&q, 42, HS_PRIO_ARRIVAL, 0, i, 0);
    for (i = 0; i < 1000; i++)
        if (!hs_evq_pop(&q, &ev) || ev.a != i || ev.time != 42) bad++;
    CHECK_INT(bad, 0);
    CHECK_INT(q.now, 42);

    /* Same instant, mixed priorities pushed in reverse: prio first, then
     * insertion order within one prio. */
    for (i = 0; i < 50; i++) {
        int prio = 4 - i % 5;
        push(&q, 100, prio, 0, i, prio);
    }
    {
        int last_prio = -1, last_a = -1;
        for (i = 0; i < 50; i++) {
            if (!hs_evq_pop(&q, &ev)) { bad++; break; }
            if (ev.b != last_prio) { last_a = -1; }
            if (ev.b < last_prio || ev.a <= last_a || ev.b != ev.prio) bad++;
            last_prio = (int)ev.b;
            last_a = (int)ev.a;
        }
        CHECK_INT(bad, 0);
        CHECK_INT(last_prio, 4);
    }
    /* A COMPLETE at the same time as an earlier-pushed STEP pops first. */
    push(&q, 200, HS_PRIO_STEP, 1, 0, 0);
    push(&q, 200, HS_PRIO_COMPLETE, 2, 0, 0);
    CHECK(hs_evq_pop(&q, &ev) && ev.type == 2);
    CHECK(hs_evq_pop(&q, &ev) && ev.type == 1);
    CHECK_INT(q.popped, 1052);
    hs_evq_free(&q);
}

static void test_cancel(void)
{
    hs_evq q;
    hs_event ev;
    uint64_t s5, s10, s20, s30, s40;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    s5 = push(&q, 5, HS_PRIO_STEP, 0, 5, 0);
    s10 = push(&q, 10, HS_PRIO_STEP, 0, 10, 0);
    s20 = push(&q, 20, HS_PRIO_STEP, 0, 20, 0);
    s30 = push(&q, 30, HS_PRIO_STEP, 0, 30, 0);
    CHECK_INT(hs_evq_cancel(&q, s5), 0);   /* the current top */
    CHECK_INT(hs_evq_cancel(&q, s20), 0);
    CHECK_INT(hs_evq_cancel(&q, s30), 0);
    CHECK_INT(hs_evq_cancel(&q, s30), 0);  /* twice: still one tombstone */
    CHECK_INT(q.dead_len, 3);
    CHECK_INT(hs_evq_len(&q), 4);          /* tombstones stay queued */
    CHECK_INT(hs_evq_peek_time(&q), 5);    /* and are visible to peek */
    CHECK(hs_evq_pop(&q, &ev) && ev.seq == s10 && ev.time == 10);
    CHECK_INT(q.now, 10);                  /* the cancelled t=5 did not set the clock */
    CHECK_INT(q.dead_len, 2);              /* s5's tombstone was consumed */
    CHECK_INT(hs_evq_pop(&q, &ev), 0);     /* only tombstones were left */
    CHECK_INT(q.now, 10);                  /* t=20, t=30 never moved the clock */
    CHECK_INT(q.popped, 1);
    CHECK_INT(q.dead_len, 0);
    CHECK_INT(hs_evq_len(&q), 0);

    /* Unknown seqs (0, not yet issued) are ignored, popped ones harmless. */
    CHECK_INT(hs_evq_cancel(&q, 0), 0);
    CHECK_INT(hs_evq_cancel(&q, q.next_seq), 0);
    CHECK_INT(hs_evq_cancel(&q, UINT64_MAX), 0);
    CHECK_INT(q.dead_len, 0);
    s40 = q.next_seq;                      /* will be the next push's seq */
    CHECK_INT(hs_evq_cancel(&q, s40), 0);  /* cancel before push: no effect */
    CHECK_INT(hs_evq_cancel(&q, s10), 0);  /* already delivered */
    CHECK_INT(hs_evq_push(&q, 40, HS_PRIO_STEP, 0, 40, 0), s40); /* empty heap */
    push(&q, 50, HS_PRIO_STEP, 0, 50, 0);
    CHECK(hs_evq_pop(&q, &ev) && ev.seq == s40 && ev.a == 40);
    CHECK(hs_evq_pop(&q, &ev) && ev.a == 50);
    CHECK_INT(q.now, 50);
    CHECK_INT(q.popped, 3);
    CHECK_INT(hs_evq_pop(&q, &ev), 0);
    hs_evq_free(&q);
}

/* Naive reference: a pending array; pop takes the hs_ev_before-minimum. */
typedef struct ref_q {
    hs_event *v;
    int n;
} ref_q;

static int ref_pop(ref_q *r, hs_event *out)
{
    int best = -1;
    for (int i = 0; i < r->n; i++)
        if (best < 0 || hs_ev_before(&r->v[i], &r->v[best])) best = i;
    if (best < 0) return 0;
    *out = r->v[best];
    r->v[best] = r->v[--r->n];
    return 1;
}

static int ref_remove(ref_q *r, uint64_t seq)
{
    for (int i = 0; i < r->n; i++)
        if (r->v[i].seq == seq) {
            r->v[i] = r->v[--r->n];
            return 1;
        }
    return 0;
}

/* Interleaved push (at >= now), pop and cancel, compared step by step. */
static void test_interleaved(int ops)
{
    hs_evq q;
    ref_q r = {malloc((size_t)ops * sizeof(hs_event)), 0};
    uint64_t *issued = malloc((size_t)ops * sizeof *issued);
    int nissued = 0, mismatch = 0, insane = 0, backwards = 0, pops = 0, live_cancels = 0;
    hs_ns prev_now = 0;
    hs_event ev, rv;
    CHECK(r.v && issued);
    if (!r.v || !issued) return;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    for (int i = 0; i < ops; i++) {
        int op = (int)rnd_below(10);
        if (op < 5) {
            hs_ns t = q.now + rnd_below(50);
            int prio = (int)rnd_below(5);
            uint64_t s = push(&q, t, prio, op, i, -i);
            r.v[r.n++] = (hs_event){t, prio, op, s, i, -i};
            issued[nissued++] = s;
        } else if (op < 8) {
            int got = hs_evq_pop(&q, &ev), want = ref_pop(&r, &rv);
            if (got != want || (got && !same_event(&ev, &rv))) mismatch++;
            if (got) pops++;
        } else if (nissued) {
            /* any issued seq: live, already cancelled, or already popped */
            uint64_t s = issued[rnd_below(nissued)];
            if (hs_evq_cancel(&q, s) != 0) mismatch++;
            live_cancels += ref_remove(&r, s);
        }
        if (!hs_evq_sane(&q)) insane++;
        if (q.now < prev_now) backwards++;
        prev_now = q.now;
    }
    /* drain */
    for (;;) {
        int got = hs_evq_pop(&q, &ev), want = ref_pop(&r, &rv);
        if (got != want || (got && !same_event(&ev, &rv))) mismatch++;
        if (!got) break;
        pops++;
        if (q.now < prev_now) backwards++;
        prev_now = q.now;
    }
    CHECK_INT(mismatch, 0);
    CHECK_INT(insane, 0);
    CHECK_INT(backwards, 0);
    CHECK_INT(q.popped, pops);
    CHECK_INT(pops + live_cancels, nissued); /* every push popped or cancelled */
    CHECK(live_cancels > 0 && pops > 0);
    CHECK_INT(hs_evq_len(&q), 0);
    hs_evq_free(&q);
    free(r.v);
    free(issued);
}

/* Cancel half of n events; the other half pops in order; the tombstone set
 * only holds cancelled events still queued and is empty at the end. */
static void test_cancel_heavy(int n)
{
    hs_evq q;
    hs_event *ref = malloc((size_t)n * sizeof *ref), ev;
    char *cancelled = calloc((size_t)n + 1, 1); /* by seq */
    int i, k = 0, bad = 0, dead_bad = 0;
    size_t dead_in_heap;
    CHECK(ref && cancelled);
    if (!ref || !cancelled) return;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    for (i = 0; i < n; i++) {
        hs_ns t = rnd_below(n / 4 + 1);
        int prio = (int)rnd_below(5);
        uint64_t s = push(&q, t, prio, 0, i, 0);
        ref[i] = (hs_event){t, prio, 0, s, i, 0};
    }
    for (i = 0; i < n; i += 2) {
        CHECK_INT(hs_evq_cancel(&q, (uint64_t)i + 1), 0);
        cancelled[i + 1] = 1;
    }
    dead_in_heap = (size_t)(n + 1) / 2;
    CHECK_INT(q.dead_len, dead_in_heap);
    qsort(ref, (size_t)n, sizeof *ref, cmp_ev);
    for (i = 0; i < n; i++) {
        if (cancelled[ref[i].seq]) continue;
        if (!hs_evq_pop(&q, &ev) || !same_event(&ev, &ref[i])) bad++;
        k++;
        /* every tombstone that sorted before ev has been consumed */
        if (k % 97 == 0) {
            size_t still = 0;
            for (int j = i + 1; j < n; j++) still += cancelled[ref[j].seq];
            if (q.dead_len != still) dead_bad++;
        }
    }
    CHECK_INT(bad, 0);
    CHECK_INT(dead_bad, 0);
    CHECK_INT(k, n / 2);
    CHECK_INT(hs_evq_pop(&q, &ev), 0);
    CHECK_INT(q.popped, n / 2);
    CHECK_INT(q.dead_len, 0);
    CHECK_INT(hs_evq_len(&q), 0);
    hs_evq_free(&q);
    free(ref);
    free(cancelled);
}

/* A timer workload: each step re-arms a far timeout and cancels the old one,
 * as an engine does.  The dead set stays bounded by the queued tombstones
 * (here at most one per step since the last timeout that reached the top). */
static void test_timer_rearm(void)
{
    hs_evq q;
    hs_event ev;
    uint64_t timeout;
    int steps = 0, fired = 0, bad = 0;
    size_t max_dead = 0;
    CHECK_INT(hs_evq_init(&q, 0), 0);
    timeout = push(&q, 1000, HS_PRIO_SAMPLE, 9, 0, 0);
    push(&q, 1, HS_PRIO_STEP, 1, 0, 0);
    while (hs_evq_pop(&q, &ev)) {
        if (ev.type == 9) { fired++; continue; }
        if (++steps >= 20000) continue;
        push(&q, q.now + 1, HS_PRIO_STEP, 1, 0, 0);
        hs_evq_cancel(&q, timeout);
        timeout = push(&q, q.now + 1000, HS_PRIO_SAMPLE, 9, 0, 0);
        if (q.dead_len > max_dead) max_dead = q.dead_len;
        if (!hs_evq_sane(&q)) bad++;
    }
    CHECK_INT(steps, 20000);
    CHECK_INT(fired, 1);           /* only the last timeout survives */
    CHECK_INT(q.now, 19999 + 1000);
    CHECK(max_dead <= 1000);       /* tombstones drain as time passes */
    CHECK_INT(q.dead_len, 0);
    CHECK_INT(bad, 0);
    hs_evq_free(&q);
}

int main(void)
{
    test_before();
    test_empty();
    test_random_order(1, 10, 5);
    test_random_order(1000, 1 << 30, 5);  /* distinct times */
    test_random_order(5000, 20, 5);       /* many ties on time and prio */
    test_random_order(1000000, 1000000, 5); /* stress, exact counts */
    test_ties();
    test_cancel();
    test_interleaved(20000);
    test_cancel_heavy(100001);
    test_timer_rearm();
    test_push_returns_own_seq();
    CHECK_INT(bad_return, 0); /* every push above returned the assigned seq */
    return hs_check_result();
}
