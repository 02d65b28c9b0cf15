/* net.c - fluid max-min fair transfers between GPUs; see net.h for the model,
 * the invariants and how an event loop drives it.
 *
 * State.  Flows live in `slots` (reused through a free list); a live slot is
 * in exactly one of three lists according to its phase: `lat` (latency
 * phase), `xfer` (transferring) or the done queue (completed, not popped),
 * and `pos` is its index there.  All remaining-byte figures are as of
 * net->now.  `next_change` caches the earliest latency end or predicted
 * completion (HS_NS_MAX when none).
 *
 * Rates: progressive filling.  All unfrozen flows rise together at a common
 * water level; a resource with remaining capacity rem and n unfrozen flows
 * saturates at level rem/n, a capped flow freezes at its pair cap.  A heap of
 * these levels (stale entries skipped by a per-resource version) gives the
 * next event of the filling; freezing a flow at level L takes L from each of
 * its resources and re-keys them.  Per-resource scratch is reset lazily by
 * an epoch stamp, so an update touches only the resources of transferring
 * flows: O(F k log F), independent of the cluster size. */
#include "hw/net.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_BITS 24
#define SLOT_MASK ((UINT64_C(1) << SLOT_BITS) - 1)
#define SLOT_MAX ((int)SLOT_MASK)          /* slot index < 2^24 */
#define SERIAL_MAX (UINT64_C(1) << (64 - SLOT_BITS))
#define BYTES_MAX 1e18                     /* bytes, per flow */
#define LOAD_TOL 1e-9                      /* relative, NET-1 */

typedef struct net_slot {
    uint64_t id;          /* 0 when free */
    int64_t tag;
    int src, dst;
    int res[2], nres;     /* resources used */
    int capped;           /* pair cap below every resource's capacity */
    int phase;            /* 0 free, HS_NET_* */
    int pos;              /* index in its list; next free slot when free */
    double cap;           /* bytes/s, bw(src,dst) */
    double bytes, rem;    /* bytes */
    double rate;          /* bytes/s */
    hs_ns t_start, t_ready, t_fin, t_done; /* ns */
    uint64_t frozen;      /* epoch of the update that fixed its rate */
} net_slot;

typedef struct net_done_ent {
    hs_ns t;              /* ns */
    uint64_t id;
    int slot;
} net_done_ent;

typedef struct net_heap_ent {
    double level;         /* bytes/s */
    uint64_t key;         /* flow id (kind 0) or resource index (kind 1) */
    int kind, idx;        /* idx: slot or resource */
    uint32_t ver;         /* resource version when pushed */
} net_heap_ent;

struct hs_net {
    int n_gpus, n_nodes;
    int *node, *local;    /* [n_gpus] node and index within the node */
    int *node_k;          /* [n_nodes] GPUs per node */
    int *link_base;       /* [n_nodes] first link resource of the node */
    int nic_base;         /* first NIC resource, -1 with one node */
    int n_res;
    double *res_cap;      /* [n_res] bytes/s */
    double *bw;           /* [n_gpus^2] bytes/s */
    hs_ns *lat;           /* [n_gpus^2] ns */

    /* per-resource scratch of the rate update, valid when stamp == epoch */
    uint64_t epoch, *rs_stamp;
    double *rs_rem;       /* bytes/s left */
    int *rs_n, *rs_off, *rs_fill;
    uint32_t *rs_ver;

    net_slot *slots;
    int slot_cap, free_head, slots_used;
    int *lat_list, n_lat;
    int *xfer, n_xfer;
    net_done_ent *done;
    int done_head, done_len;   /* entries in [head, len) */
    int *touched, *csr;        /* [2 slot_cap] */
    net_heap_ent *heap;        /* [5 slot_cap] */
    int heap_len;

    hs_ns now, next_change;    /* ns */
    uint64_t serial;
    hs_net_stats st;
};

/* ---- small helpers ------------------------------------------------------ */

static double eps_bytes(double bytes) { return bytes * 1e-12 + 1e-9; }

/* ns to move `rem` bytes at `rate`, rounded up (a hair of tolerance absorbs
 * floating-point noise in rem, so an exact 1.0e6 is not taken as 1000001). */
static hs_ns dur_ns(double rem, double bytes, double rate)
{
    double x;
    if (rem <= eps_bytes(bytes)) return 0;
    if (!(rate > 0)) return HS_NS_MAX;
    x = rem * 1e9 / rate;
    if (!(x < 9e18)) return HS_NS_MAX;
    x = ceil(x - (x * 1e-13 + 1e-6));
    return x < 0 ? 0 : (hs_ns)x;
}

static hs_ns add_ns(hs_ns a, hs_ns b)
{
    return b >= HS_NS_MAX - a ? HS_NS_MAX : a + b;
}

static int heap_before(const net_heap_ent *x, const net_heap_ent *y)
{
    if (x->level != y->level) return x->level < y->level;
    if (x->kind != y->kind) return x->kind < y->kind;
    return x->key < y->key;
}

static void heap_push(hs_net *net, double level, int kind, uint64_t key, int idx,
                      uint32_t ver)
{
    net_heap_ent e = {level, key, kind, idx, ver};
    int i = net->heap_len++;
    assert(net->heap_len <= 5 * net->slot_cap);
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!heap_before(&e, &net->heap[p])) break;
        net->heap[i] = net->heap[p];
        i = p;
    }
    net->heap[i] = e;
}

static net_heap_ent heap_pop(hs_net *net)
{
    net_heap_ent top = net->heap[0], e = net->heap[--net->heap_len];
    int n = net->heap_len, i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&net->heap[c + 1], &net->heap[c])) c++;
        if (!heap_before(&net->heap[c], &e)) break;
        net->heap[i] = net->heap[c];
        i = c;
    }
    if (n > 0) net->heap[i] = e;
    return top;
}

static net_slot *lookup(const hs_net *net, uint64_t id)
{
    uint64_t s = id & SLOT_MASK;
    if (id == 0 || s >= (uint64_t)net->slot_cap) return NULL;
    if (net->slots[s].id != id || net->slots[s].phase == 0) return NULL;
    return &net->slots[s];
}

/* ---- create / destroy --------------------------------------------------- */

int hs_net_create(hs_net **out, const hs_cluster *c, hs_err *err)
{
    hs_net *net;
    int n, links = 0;
    *out = NULL;
    if (!c || c->n_gpus < 1 || c->n_nodes < 1)
        return hs_errf(err, HS_EINVAL, "net: cluster has no GPUs");
    n = c->n_gpus;
    for (int i = 0; i < n; i++) {
        if (c->gpu_node[i] < 0 || c->gpu_node[i] >= c->n_nodes)
            return hs_errf(err, HS_EINVAL, "net: %s: GPU %d has node %d of %d", c->name,
                           i, c->gpu_node[i], c->n_nodes);
        for (int j = 0; j < n; j++) {
            double b = hs_cluster_bw(c, i, j), l = hs_cluster_lat(c, i, j);
            if (i != j && !(isfinite(b) && b > 0))
                return hs_errf(err, HS_EINVAL, "net: %s: bandwidth %d->%d is %g",
                               c->name, i, j, b);
            if (!(isfinite(l) && l >= 0 && l <= 1e6))
                return hs_errf(err, HS_EINVAL, "net: %s: latency %d->%d is %g s",
                               c->name, i, j, l);
        }
    }
    net = calloc(1, sizeof *net);
    if (!net) goto nomem;
    net->n_gpus = n;
    net->n_nodes = c->n_nodes;
    net->node = malloc((size_t)n * sizeof *net->node);
    net->local = malloc((size_t)n * sizeof *net->local);
    net->node_k = calloc((size_t)c->n_nodes, sizeof *net->node_k);
    net->link_base = calloc((size_t)c->n_nodes, sizeof *net->link_base);
    net->bw = malloc((size_t)n * (size_t)n * sizeof *net->bw);
    net->lat = malloc((size_t)n * (size_t)n * sizeof *net->lat);
    if (!net->node || !net->local || !net->node_k || !net->link_base || !net->bw ||
        !net->lat)
        goto nomem;
    for (int i = 0; i < n; i++) {
        net->node[i] = c->gpu_node[i];
        net->local[i] = net->node_k[c->gpu_node[i]]++;
        for (int j = 0; j < n; j++) {
            net->bw[(size_t)i * n + j] = i == j ? 0 : hs_cluster_bw(c, i, j);
            net->lat[(size_t)i * n + j] = hs_ns_from_s(hs_cluster_lat(c, i, j));
        }
    }
    for (int g = 0; g < c->n_nodes; g++) {
        net->link_base[g] = links;
        links += net->node_k[g] * net->node_k[g];
    }
    net->nic_base = c->n_nodes > 1 ? links : -1;
    net->n_res = links + (c->n_nodes > 1 ? 2 * n : 0);
    {
        size_t r = (size_t)(net->n_res > 0 ? net->n_res : 1);
        net->res_cap = calloc(r, sizeof *net->res_cap);
        net->rs_stamp = calloc(r, sizeof *net->rs_stamp);
        net->rs_rem = calloc(r, sizeof *net->rs_rem);
        net->rs_n = calloc(r, sizeof *net->rs_n);
        net->rs_off = calloc(r, sizeof *net->rs_off);
        net->rs_fill = calloc(r, sizeof *net->rs_fill);
        net->rs_ver = calloc(r, sizeof *net->rs_ver);
        if (!net->res_cap || !net->rs_stamp || !net->rs_rem || !net->rs_n ||
            !net->rs_off || !net->rs_fill || !net->rs_ver)
            goto nomem;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double b = net->bw[(size_t)i * n + j];
            if (i == j) continue;
            if (net->node[i] == net->node[j]) {
                net->res_cap[hs_net_res_link(net, i, j)] = b;
            } else {
                double *e = &net->res_cap[net->nic_base + i];
                double *g = &net->res_cap[net->nic_base + n + j];
                if (b > *e) *e = b;
                if (b > *g) *g = b;
            }
        }
    net->free_head = -1;
    net->next_change = HS_NS_MAX;
    net->serial = 1;
    net->st.n_resources = net->n_res;
    *out = net;
    return 0;
nomem:
    hs_net_destroy(net);
    return hs_errf(err, HS_ENOMEM, "net: out of memory for %d GPUs", n);
}

void hs_net_destroy(hs_net *net)
{
    if (!net) return;
    free(net->node);
    free(net->local);
    free(net->node_k);
    free(net->link_base);
    free(net->res_cap);
    free(net->bw);
    free(net->lat);
    free(net->rs_stamp);
    free(net->rs_rem);
    free(net->rs_n);
    free(net->rs_off);
    free(net->rs_fill);
    free(net->rs_ver);
    free(net->slots);
    free(net->lat_list);
    free(net->xfer);
    free(net->done);
    free(net->touched);
    free(net->csr);
    free(net->heap);
    free(net);
}

/* Doubles every slot-sized array; on failure the capacity is unchanged (some
 * arrays may already be larger, which is harmless). */
static int grow(hs_net *net)
{
    int cap = net->slot_cap ? 2 * net->slot_cap : 16;
    void *p;
    if (net->slot_cap >= SLOT_MAX) return HS_ERANGE;
    if (cap > SLOT_MAX) cap = SLOT_MAX;
#define GROW(field, count)                                              \
    do {                                                                \
        p = realloc(net->field, (size_t)(count) * sizeof *net->field);  \
        if (!p) return HS_ENOMEM;                                       \
        net->field = p;                                                 \
    } while (0)
    GROW(slots, cap);
    GROW(lat_list, cap);
    GROW(xfer, cap);
    GROW(done, cap);
    GROW(touched, 2 * cap);
    GROW(csr, 2 * cap);
    GROW(heap, 5 * cap);
#undef GROW
    /* new slots go on the free list, lowest index first */
    for (int i = cap - 1; i >= net->slot_cap; i--) {
        memset(&net->slots[i], 0, sizeof net->slots[i]);
        net->slots[i].pos = net->free_head;
        net->free_head = i;
    }
    net->slot_cap = cap;
    net->st.slot_cap = cap;
    return 0;
}

/* ---- resources ---------------------------------------------------------- */

int hs_net_n_resources(const hs_net *net) { return net->n_res; }

int hs_net_res_link(const hs_net *net, int i, int j)
{
    int g;
    if (i < 0 || j < 0 || i >= net->n_gpus || j >= net->n_gpus || i == j) return -1;
    g = net->node[i];
    if (net->node[j] != g) return -1;
    return net->link_base[g] + net->local[i] * net->node_k[g] + net->local[j];
}

int hs_net_res_egress(const hs_net *net, int i)
{
    if (net->nic_base < 0 || i < 0 || i >= net->n_gpus) return -1;
    return net->nic_base + i;
}

int hs_net_res_ingress(const hs_net *net, int i)
{
    if (net->nic_base < 0 || i < 0 || i >= net->n_gpus) return -1;
    return net->nic_base + net->n_gpus + i;
}

double hs_net_res_capacity(const hs_net *net, int res)
{
    return res >= 0 && res < net->n_res ? net->res_cap[res] : 0;
}

int hs_net_route(const hs_net *net, int src, int dst, int res[2])
{
    if (src < 0 || dst < 0 || src >= net->n_gpus || dst >= net->n_gpus || src == dst)
        return 0;
    if (net->node[src] == net->node[dst]) {
        res[0] = hs_net_res_link(net, src, dst);
        return 1;
    }
    res[0] = hs_net_res_egress(net, src);
    res[1] = hs_net_res_ingress(net, dst);
    return 2;
}

double hs_net_link_load(const hs_net *net, int res)
{
    double sum = 0;
    for (int k = 0; k < net->n_xfer; k++) {
        const net_slot *s = &net->slots[net->xfer[k]];
        for (int q = 0; q < s->nres; q++)
            if (s->res[q] == res) sum += s->rate;
    }
    return sum;
}

/* ---- lists -------------------------------------------------------------- */

static void list_remove(hs_net *net, int *list, int *len, int slot)
{
    int p = net->slots[slot].pos, last = list[--*len];
    assert(list[p] == slot);
    list[p] = last;
    net->slots[last].pos = p;
}

static void list_add(hs_net *net, int *list, int *len, int slot)
{
    net->slots[slot].pos = *len;
    list[(*len)++] = slot;
}

static void slot_free(hs_net *net, int slot)
{
    net_slot *s = &net->slots[slot];
    s->id = 0;
    s->phase = 0;
    s->pos = net->free_head;
    net->free_head = slot;
    net->slots_used--;
}

/* Appends a completion keeping the queue in (t, id) order; the queue holds at
 * most slot_cap entries (one per DONE slot), so compaction always makes room. */
static void done_push(hs_net *net, int slot, hs_ns t)
{
    net_slot *s = &net->slots[slot];
    net_done_ent e = {t, s->id, slot};
    int i;
    if (net->done_len == net->slot_cap) {
        int n = net->done_len - net->done_head;
        memmove(net->done, net->done + net->done_head, (size_t)n * sizeof *net->done);
        net->done_head = 0;
        net->done_len = n;
    }
    assert(net->done_len < net->slot_cap);
    i = net->done_len++;
    while (i > net->done_head &&
           (net->done[i - 1].t > t || (net->done[i - 1].t == t && net->done[i - 1].id > e.id))) {
        net->done[i] = net->done[i - 1];
        i--;
    }
    net->done[i] = e;
    s->phase = HS_NET_DONE;
    s->t_done = t;
    s->rem = 0;
    s->rate = 0;
    net->st.completed++;
    net->st.bytes_completed += s->bytes;
}

static void done_remove(hs_net *net, int slot)
{
    for (int i = net->done_head; i < net->done_len; i++)
        if (net->done[i].slot == slot) {
            memmove(net->done + i, net->done + i + 1,
                    (size_t)(net->done_len - i - 1) * sizeof *net->done);
            net->done_len--;
            return;
        }
    assert(0);
}

static void refresh_next(hs_net *net)
{
    hs_ns t = HS_NS_MAX;
    for (int k = 0; k < net->n_lat; k++)
        if (net->slots[net->lat_list[k]].t_ready < t) t = net->slots[net->lat_list[k]].t_ready;
    for (int k = 0; k < net->n_xfer; k++)
        if (net->slots[net->xfer[k]].t_fin < t) t = net->slots[net->xfer[k]].t_fin;
    net->next_change = t;
}

/* ---- rates -------------------------------------------------------------- */

static void freeze(hs_net *net, net_slot *s, double level, int skip)
{
    s->rate = level;
    s->frozen = net->epoch;
    for (int q = 0; q < s->nres; q++) {
        int r = s->res[q];
        net->rs_rem[r] -= level;
        if (net->rs_rem[r] < 0) net->rs_rem[r] = 0;
        net->rs_n[r]--;
        net->rs_ver[r]++;
        if (r != skip && net->rs_n[r] > 0)
            heap_push(net, net->rs_rem[r] / net->rs_n[r], 1, (uint64_t)r, r, net->rs_ver[r]);
    }
}

/* Max-min fair rates of the transferring flows (progressive filling), then
 * their predicted completion times. */
static void rates_update(hs_net *net)
{
    uint64_t E = ++net->epoch;
    int nt = 0, off = 0, left = net->n_xfer;
    net->st.rate_updates++;
    for (int k = 0; k < net->n_xfer; k++) {
        net_slot *s = &net->slots[net->xfer[k]];
        for (int q = 0; q < s->nres; q++) {
            int r = s->res[q];
            if (net->rs_stamp[r] != E) {
                net->rs_stamp[r] = E;
                net->rs_rem[r] = net->res_cap[r];
                net->rs_n[r] = 0;
                net->rs_ver[r] = 0;
                net->touched[nt++] = r;
            }
            net->rs_n[r]++;
        }
    }
    for (int t = 0; t < nt; t++) {
        int r = net->touched[t];
        net->rs_off[r] = net->rs_fill[r] = off;
        off += net->rs_n[r];
    }
    for (int k = 0; k < net->n_xfer; k++) {
        net_slot *s = &net->slots[net->xfer[k]];
        for (int q = 0; q < s->nres; q++) net->csr[net->rs_fill[s->res[q]]++] = net->xfer[k];
    }
    net->heap_len = 0;
    for (int t = 0; t < nt; t++) {
        int r = net->touched[t];
        heap_push(net, net->rs_rem[r] / net->rs_n[r], 1, (uint64_t)r, r, 0);
    }
    for (int k = 0; k < net->n_xfer; k++) {
        net_slot *s = &net->slots[net->xfer[k]];
        if (s->capped) heap_push(net, s->cap, 0, s->id, net->xfer[k], 0);
    }
    while (left > 0 && net->heap_len > 0) {
        net_heap_ent e = heap_pop(net);
        if (e.kind == 0) {
            net_slot *s = &net->slots[e.idx];
            if (s->frozen == E) continue;
            freeze(net, s, e.level, -1);
            left--;
        } else {
            int r = e.idx;
            if (e.ver != net->rs_ver[r] || net->rs_n[r] == 0) continue;
            for (int i = net->rs_off[r]; i < net->rs_fill[r]; i++) {
                net_slot *s = &net->slots[net->csr[i]];
                if (s->frozen == E) continue;
                freeze(net, s, e.level, r);
                left--;
            }
        }
    }
    assert(left == 0);
    for (int k = 0; k < net->n_xfer; k++) {
        net_slot *s = &net->slots[net->xfer[k]];
        s->t_fin = add_ns(net->now, dur_ns(s->rem, s->bytes, s->rate));
    }
    assert(hs__net_sane(net)); /* NET-1 */
}

/* ---- time --------------------------------------------------------------- */

static void move_to(hs_net *net, hs_ns t)
{
    hs_ns dt = t - net->now;
    if (dt <= 0) return;
    for (int k = 0; k < net->n_xfer; k++) {
        net_slot *s = &net->slots[net->xfer[k]];
        s->rem -= s->rate * (double)dt / 1e9;
        if (s->rem < 0) s->rem = 0; /* NET-3 */
    }
    net->now = t;
}

/* Processes, in time order, every latency end and completion up to `now`,
 * then moves the remaining bytes to `now`.  Each pass changes at least one
 * flow's phase, so the loop ends. */
static void run_to(hs_net *net, hs_ns now)
{
    if (now < net->now) return;
    while (net->next_change <= now) {
        hs_ns t = net->next_change;
        int changed = 0;
        move_to(net, t);
        for (int k = 0; k < net->n_xfer;) {
            int slot = net->xfer[k];
            net_slot *s = &net->slots[slot];
            if (s->t_fin <= t || s->rem <= eps_bytes(s->bytes)) {
                list_remove(net, net->xfer, &net->n_xfer, slot);
                done_push(net, slot, t);
                changed = 1;
            } else {
                k++;
            }
        }
        for (int k = 0; k < net->n_lat;) {
            int slot = net->lat_list[k];
            net_slot *s = &net->slots[slot];
            if (s->t_ready > t) {
                k++;
                continue;
            }
            list_remove(net, net->lat_list, &net->n_lat, slot);
            if (s->bytes <= eps_bytes(s->bytes)) {
                done_push(net, slot, t);
            } else {
                s->phase = HS_NET_XFER;
                s->rem = s->bytes;
                list_add(net, net->xfer, &net->n_xfer, slot);
                changed = 1;
            }
        }
        if (changed) rates_update(net);
        refresh_next(net);
        assert(net->next_change >= t);
    }
    move_to(net, now);
}

void hs_net_advance(hs_net *net, hs_ns now) { run_to(net, now); }

hs_ns hs_net_now(const hs_net *net) { return net->now; }

hs_ns hs_net_next_event(const hs_net *net)
{
    hs_ns t = net->next_change;
    if (net->done_head < net->done_len && net->done[net->done_head].t < t)
        t = net->done[net->done_head].t;
    return t;
}

/* ---- flows -------------------------------------------------------------- */

int hs_net_start(hs_net *net, hs_ns now, int src, int dst, double bytes,
                 int64_t tag, uint64_t *flow_id, hs_err *err)
{
    int slot, rc;
    net_slot *s;
    if (src < 0 || dst < 0 || src >= net->n_gpus || dst >= net->n_gpus || src == dst)
        return hs_errf(err, HS_EINVAL, "net: flow %d -> %d: GPUs must differ and lie in [0, %d)",
                       src, dst, net->n_gpus);
    if (!(isfinite(bytes) && bytes >= 0 && bytes <= BYTES_MAX))
        return hs_errf(err, HS_EINVAL, "net: flow %d -> %d: %g bytes outside [0, %g]", src,
                       dst, bytes, BYTES_MAX);
    if (now < net->now)
        return hs_errf(err, HS_EINVAL, "net: start at %lld ns is before the network time %lld ns",
                       (long long)now, (long long)net->now);
    if (net->serial >= SERIAL_MAX)
        return hs_errf(err, HS_ERANGE, "net: flow ids exhausted");
    if (net->free_head < 0 && (rc = grow(net)) != 0)
        return hs_errf(err, rc, "net: cannot grow to more than %d concurrent flows",
                       net->slot_cap);
    run_to(net, now);
    slot = net->free_head;
    s = &net->slots[slot];
    net->free_head = s->pos;
    net->slots_used++;
    memset(s, 0, sizeof *s);
    s->id = (net->serial++ << SLOT_BITS) | (uint64_t)slot;
    s->tag = tag;
    s->src = src;
    s->dst = dst;
    s->nres = hs_net_route(net, src, dst, s->res);
    s->cap = net->bw[(size_t)src * net->n_gpus + dst];
    s->capped = s->nres == 2 && s->cap < net->res_cap[s->res[0]] &&
                s->cap < net->res_cap[s->res[1]];
    s->bytes = s->rem = bytes;
    s->t_start = now;
    s->t_ready = add_ns(now, net->lat[(size_t)src * net->n_gpus + dst]);
    s->t_fin = s->t_done = HS_NS_MAX;
    s->phase = HS_NET_LATENCY;
    list_add(net, net->lat_list, &net->n_lat, slot);
    if (s->t_ready < net->next_change) net->next_change = s->t_ready;
    net->st.started++;
    net->st.bytes_started += bytes;
    if (flow_id) *flow_id = s->id;
    run_to(net, now); /* a zero latency starts transferring at once */
    return 0;
}

int hs_net_pop_done(hs_net *net, hs_ns now, int64_t *tag, hs_net_done *info)
{
    net_done_ent e;
    net_slot *s;
    run_to(net, now);
    if (net->done_head >= net->done_len || net->done[net->done_head].t > now) return 0;
    e = net->done[net->done_head++];
    if (net->done_head == net->done_len) net->done_head = net->done_len = 0;
    s = &net->slots[e.slot];
    assert(s->id == e.id && s->phase == HS_NET_DONE); /* NET-4 */
    if (tag) *tag = s->tag;
    if (info) {
        info->id = s->id;
        info->tag = s->tag;
        info->src = s->src;
        info->dst = s->dst;
        info->bytes = s->bytes;
        info->t_start = s->t_start;
        info->t_done = s->t_done;
    }
    slot_free(net, e.slot);
    return 1;
}

int hs_net_cancel(hs_net *net, hs_ns now, uint64_t flow_id, double *sent)
{
    net_slot *s;
    int slot, phase;
    run_to(net, now);
    s = lookup(net, flow_id);
    if (!s) return HS_ENOTFOUND;
    slot = (int)(flow_id & SLOT_MASK);
    if (sent) *sent = s->phase == HS_NET_LATENCY ? 0 : s->bytes - s->rem;
    phase = s->phase;
    switch (phase) {
    case HS_NET_LATENCY:
        list_remove(net, net->lat_list, &net->n_lat, slot);
        break;
    case HS_NET_XFER:
        list_remove(net, net->xfer, &net->n_xfer, slot);
        break;
    default:
        done_remove(net, slot);
        net->st.completed--;
        net->st.bytes_completed -= s->bytes;
        break;
    }
    slot_free(net, slot);
    if (phase == HS_NET_XFER) rates_update(net);
    refresh_next(net);
    net->st.cancelled++;
    return 0;
}

int hs_net_flow_get(const hs_net *net, uint64_t flow_id, hs_net_flow *out)
{
    const net_slot *s = lookup(net, flow_id);
    if (!s) return HS_ENOTFOUND;
    out->id = s->id;
    out->tag = s->tag;
    out->src = s->src;
    out->dst = s->dst;
    out->phase = s->phase;
    out->bytes = s->bytes;
    out->remaining = s->phase == HS_NET_DONE ? 0 : s->rem;
    out->rate = s->phase == HS_NET_XFER ? s->rate : 0;
    out->cap = s->cap;
    out->t_start = s->t_start;
    out->t_ready = s->t_ready;
    out->t_done = s->phase == HS_NET_DONE ? s->t_done
                : s->phase == HS_NET_XFER ? s->t_fin : HS_NS_MAX;
    return 0;
}

void hs_net_get_stats(const hs_net *net, hs_net_stats *out)
{
    *out = net->st;
    out->n_latency = net->n_lat;
    out->n_xfer = net->n_xfer;
    out->n_done = net->done_len - net->done_head;
}

int hs__net_sane(const hs_net *net)
{
    int live = 0;
    for (int k = 0; k < net->n_lat; k++) {
        const net_slot *s = &net->slots[net->lat_list[k]];
        if (s->phase != HS_NET_LATENCY || s->pos != k) return 0;
    }
    for (int k = 0; k < net->n_xfer; k++) {
        const net_slot *s = &net->slots[net->xfer[k]];
        if (s->phase != HS_NET_XFER || s->pos != k) return 0;
        if (!(s->rate > 0) || s->rem < 0 || s->rem > s->bytes) return 0;
        if (s->rate > s->cap * (1 + LOAD_TOL)) return 0;
    }
    for (int i = net->done_head; i < net->done_len; i++) {
        const net_slot *s = &net->slots[net->done[i].slot];
        if (s->phase != HS_NET_DONE || s->id != net->done[i].id) return 0;
        if (i > net->done_head && net->done[i - 1].t > net->done[i].t) return 0;
    }
    for (int i = 0; i < net->slot_cap; i++) live += net->slots[i].phase != 0;
    if (live != net->slots_used ||
        live != net->n_lat + net->n_xfer + net->done_len - net->done_head)
        return 0;
    /* NET-1: per-resource load, accumulated in a scratch copy */
    if (net->n_xfer > 0) {
        double *acc = calloc((size_t)net->n_res, sizeof *acc);
        int ok = 1;
        if (!acc) return 1; /* cannot check without memory */
        for (int k = 0; k < net->n_xfer; k++) {
            const net_slot *s = &net->slots[net->xfer[k]];
            for (int q = 0; q < s->nres; q++) acc[s->res[q]] += s->rate;
        }
        for (int r = 0; r < net->n_res; r++)
            if (acc[r] > net->res_cap[r] * (1 + LOAD_TOL)) ok = 0;
        free(acc);
        return ok;
    }
    return 1;
}
