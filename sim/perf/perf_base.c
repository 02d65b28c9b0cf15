/* perf_base.c - what every latency-model builder shares (perf.h): the
 * configuration, freeing the tables, provenance text, collectives.  Kept
 * apart from perf.c, the registry, so that the registry depends on the
 * builders (roofline.c, measured.c) and they on this file, never back. */
#include "perf/perf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "perf/table_int.h"

/* Defaults of the plain roofline (the last resort: perf.model auto uses
 * measured tables and the shipped calibration first): efficiencies typical
 * of FP16 inference kernels on NVIDIA data centre GPUs (cuBLAS reaches
 * 70-80% of dense peak on large GEMMs; HBM copies 80-90%; NCCL ring
 * all-reduce about 80% of link bandwidth), and attention's fitted on the
 * one measured attention table (roofline.c). */
void hs_perf_cfg_defaults(hs_perf_cfg *c)
{
    hs_conf_defaults(c, hs_perf_cfg_fields);
}

const hs_field hs_perf_cfg_fields[] = {
    HS_FIELD_STR(hs_perf_cfg, model, 0, "auto", "latency model: auto (measured table, else fitted, else roofline), table, fitted, roofline"),
    HS_FIELD_NUM(hs_perf_cfg, gemm_eff, HS_F_DOUBLE, 0, 0.7, 0.01, 1, "GEMM fraction of peak FLOP/s"),
    HS_FIELD_NUM(hs_perf_cfg, attn_eff, HS_F_DOUBLE, 0, 0.459, 0.01, 1, "attention fraction of peak FLOP/s (0.459: fitted with attn_knee and attn_query_keys on Vidur's A100 FlashAttention prefill table, `hetsim perf compare`)"),
    HS_FIELD_NUM(hs_perf_cfg, attn_knee, HS_F_DOUBLE, 0, 8.40e4, 0, 1e9, "prefill attention's ramp, in query-key pairs: a kernel call costs (pairs + attn_knee) at attn_eff (8.40e4: fitted with attn_eff)"),
    HS_FIELD_NUM(hs_perf_cfg, attn_query_keys, HS_F_DOUBLE, 0, 650, 0, 1e6, "prefill attention's cost per query row, in query-key pairs at attn_eff (650: fitted with attn_eff)"),
    HS_FIELD_NUM(hs_perf_cfg, mem_eff, HS_F_DOUBLE, 0, 0.8, 0.01, 1, "fraction of memory bandwidth"),
    HS_FIELD_NUM(hs_perf_cfg, link_eff, HS_F_DOUBLE, 0, 0.8, 0.01, 1, "fraction of link bandwidth"),
    HS_FIELD_NUM(hs_perf_cfg, launch_us, HS_F_DOUBLE, 0, 4, 0, 1e4, "per kernel launch, us"),
    HS_FIELD_STR(hs_perf_cfg, engine, 0, "vllm", "serving engine's host cost per iteration: a profile in profiles/engines (or a path), none: only perf.step_overhead_us"),
    HS_FIELD_NUM(hs_perf_cfg, step_overhead_us, HS_F_DOUBLE, 0, 0, 0, 1e6, "per iteration, us, added to the engine profile's cost"),
    HS_FIELD_STR(hs_perf_cfg, tables, 0, "", "measured tables root (empty: <data root>/profiles)"),
    HS_FIELD_NUM(hs_perf_cfg, prefill_grid, HS_F_BOOL, 0, 1, 0, 1, "prefill attention from a measured table's chunk x prefix rows, interpolated, where one GPU type times the stage (0: its 5-term fit, the form planners use)"),
    HS_FIELD_NUM(hs_perf_cfg, decode_grid, HS_F_INT, 0, 2, 0, 2, "decode attention from a measured table: 2 the kernel's waves fitted on its batch x context grid where meta.json gives the kernel's split, else 1; 1 the grid interpolated; 0 its linear fit, the form planners use (9% median off on Vidur's A100 table)"),
    HS_FIELD_STR(hs_perf_cfg, fit_from, 0, "", "comma-separated table dirs or roots the fitted model learns from (empty: perf.tables)"),
    HS_FIELD_STR(hs_perf_cfg, quant_kernels, 0, "model", "kernels of 8/4/3-bit layers: model (the latency model's own: weight-only kernels at the packed width, or measured rows) or lptorch (LLM-PQ's runtime: bitsandbytes LLM.int8, GPTQ vecquant; one GPU per stage)"),
    {0},
};

int hs_perf_check_kernels(const char *name, const char *key, hs_err *err)
{
    if (!strcmp(name, "model") || !strcmp(name, "lptorch")) return 0;
    return hs_errf(err, HS_EINVAL, "%s: \"%s\" is not model or lptorch", key ? key : "perf.quant_kernels", name);
}

int hs_perf_cfg_set_arg(hs_perf_cfg *c, const char *kv, hs_err *err)
{
    const char *eq = strchr(kv, '=');
    char key[64];
    if (!eq || strncmp(kv, "perf.", 5) || (size_t)(eq - kv - 5) >= sizeof key) {
        char e[128];
        hs_err_escape(e, sizeof e, kv, strlen(kv));
        return hs_errf(err, HS_EPARSE, "--set \"%s\": expected perf.KEY=VALUE", e);
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv - 5), kv + 5);
    return hs_conf_set(c, hs_perf_cfg_fields, key, eq + 1, "--set", err);
}

void hs_perf_free(hs_perf *p)
{
    if (!p) return;
    for (int s = 0; s < p->pp; s++) {
        free(p->stage[s].dense);
        free(p->stage[s].head);
        free(p->stage[s].enc);
        free(p->stage[s].dg_b);
        free(p->stage[s].pg.x);
        p->stage[s].dense = p->stage[s].head = p->stage[s].enc = NULL;
        p->stage[s].dg_b = p->stage[s].dg_c = p->stage[s].dg_ns = NULL;
        memset(&p->stage[s].pg, 0, sizeof p->stage[s].pg);
    }
    p->pp = 0;
}

/* Index of the segment [a[i], a[i + 1]] holding v (the first or last one
 * outside the axis) and v's fraction along it. */
static int seg(const double *a, int n, double v, double *f)
{
    int lo = 0, hi = n - 1;
    if (n < 2) {
        *f = 0;
        return 0;
    }
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (a[mid] <= v) lo = mid;
        else hi = mid;
    }
    *f = (v - a[lo]) / (a[lo + 1] - a[lo]);
    return lo;
}

double hs_perf_dec_grid_ns(const hs_perf_stage *st, int32_t b, int64_t ctx)
{
    const int nc = st->dg_nc;
    double fb, fc, mean = (double)ctx / (b > 0 ? b : 1), v;
    int i, j;
    if (b <= 0) return 0;
    if (mean < st->dg_c[0]) mean = st->dg_c[0];   /* a launch's floor: no cheaper below */
    i = seg(st->dg_b, st->dg_nb, (double)b, &fb);
    j = seg(st->dg_c, nc, mean, &fc);
    if (fb < 0) fb = 0;
    if (st->dg_nb < 2) { /* one batch size measured: time per sequence */
        const double *r = st->dg_ns;
        v = nc < 2 ? r[0] : r[j] + fc * (r[j + 1] - r[j]);
        return v * b / st->dg_b[0];
    }
    {
        const double *r0 = st->dg_ns + (size_t)i * nc, *r1 = r0 + nc;
        double a0 = nc < 2 ? r0[0] : r0[j] + fc * (r0[j + 1] - r0[j]);
        double a1 = nc < 2 ? r1[0] : r1[j] + fc * (r1[j + 1] - r1[j]);
        v = a0 + fb * (a1 - a0);
    }
    return v > 0 ? v : 0;
}

/* The last slot to finish, when nf blocks of cost cf then nl of cost cl
 * are issued in order onto S slots, each to the earliest free one: its
 * full and last blocks (kf, kl).  The full blocks fill q rounds on every
 * slot and one more on rf of them; the last blocks then go, one round at a
 * time, to the group of slots free first.  The j-th end time on the q
 * group is q cf + j cl, on the q + 1 group (q + 1) cf + j cl; the makespan
 * is the nl-th smallest of them, or the full blocks' own end. */
static void wave_slot(int64_t nf, int64_t nl, int64_t S, double cf, double cl, int64_t *kf, int64_t *kl)
{
    const int64_t q = nf / S, rf = nf % S, na = S - rf;
    int64_t best_j = -1, best_g = 0;
    double best = -1;
    /* na jA + rf jB >= nl with q cf + jA cl = (q + 1) cf + jB cl: count
     * the blocks ended by time T on both groups; search jA on the first */
    for (int g = 0; g < 2; g++) {
        const int64_t n_own = g ? rf : na, n_other = g ? na : rf;
        const double shift = g ? -cf : cf;   /* the other group's start minus this one's */
        int64_t lo = 1, hi;
        double end;
        if (n_own == 0) continue;
        hi = nl / n_own + 1;
        while (lo < hi) {   /* smallest j with the blocks ended by this end >= nl */
            int64_t j = lo + (hi - lo) / 2;
            double t = j * cl;
            int64_t other = cl > 0 ? (int64_t)floor((t - shift) / cl + 1e-9) : (t >= shift ? nl : 0);
            if (other < 0) other = 0;
            if (n_own * j + n_other * other >= nl) hi = j;
            else lo = j + 1;
        }
        end = (double)(q + g) * cf + lo * cl;
        if (best < 0 || end < best) {
            best = end;
            best_j = lo;
            best_g = g;
        }
    }
    *kf = q + best_g;
    *kl = best_j;
    if (rf && (double)(q + 1) * cf > best) { /* the full blocks end last */
        *kf = q + 1;
        *kl = 0;
    }
}

double hs_dec_wave_time(const hs_dec_wave *w, int64_t b, double ctx_mean, double k[4])
{
    const int64_t base = (int64_t)w->heads * b, want = (int64_t)w->fill * w->sms;
    const int64_t S = (int64_t)w->sms * w->resident;
    int64_t ctx = (int64_t)ceil(ctx_mean - 1e-9), len = w->part_max, parts, r, kf, kl;
    double kk[4];
    if (!k) k = kk;
    k[0] = k[1] = k[2] = k[3] = 0;
    if (b <= 0 || S <= 0) return 0;
    if (ctx < 1) ctx = 1;
    if (base < want) {
        int64_t split = (want + base - 1) / base, al = w->part_align > 0 ? w->part_align : 1;
        len = (ctx + split - 1) / split;
        len = (len + al - 1) / al * al;
        if (len < w->part_min) len = w->part_min;
        if (len > w->part_max) len = w->part_max;
    }
    if (len < 1) len = 1;
    parts = (ctx + len - 1) / len;
    r = ctx - (parts - 1) * len;
    wave_slot((parts - 1) * base, base, S, w->a + w->b * (double)len, w->a + w->b * (double)r, &kf, &kl);
    k[0] = 1;
    k[1] = (double)(kf + kl);
    k[2] = (double)kf * (double)len + (double)kl * (double)r;
    k[3] = parts > 1 ? (double)(base * parts) / (double)S : 0;
    return w->c0 + w->a * k[1] + w->b * k[2] + w->cm * k[3];
}

/* Along chunk row j: linear between its prefixes, its first value below
 * the first (a table's rows start at prefix 0); < 0 past its last. */
static double pre_row(const hs_pre_grid *g, int j, double y)
{
    const double *py = g->y + g->off[j], *pn = g->ns + g->off[j];
    int n = g->off[j + 1] - g->off[j], i;
    double f;
    if (n < 1 || y > py[n - 1]) return -1;
    if (n < 2 || y <= py[0]) return pn[0];
    i = seg(py, n, y, &f);
    return pn[i] + f * (pn[i + 1] - pn[i]);
}

double hs_pre_grid_ns(const hs_pre_grid *g, double x, double y)
{
    double f, a, b;
    int j;
    if (g->nx < 2 || x < g->x[0] || x > g->x[g->nx - 1]) return -1;
    j = seg(g->x, g->nx, x, &f);
    if (f == 1) return pre_row(g, j + 1, y);   /* the last chunk exactly */
    a = pre_row(g, j, y);
    if (f == 0) return a;
    b = pre_row(g, j + 1, y);
    return a < 0 || b < 0 ? -1 : a + f * (b - a);
}

double hs_perf_pre_scaled(const hs_perf_stage *st, const hs_batch_shape *b, double pre)
{
    double x = (double)b->pre_tokens / b->pre_chunks, y = (double)b->pre_prefix / b->pre_chunks;
    double one = hs_perf_pre_fit_ns(st, x * (x + 1) / 2, x * y, y, x);
    double g = hs_pre_grid_ns(&st->pg, x, y);
    return g > 0 && one > 0 ? pre * g / one : pre;
}

void hs_perf_stage_attn_scale(hs_perf_stage *st, double f)
{
    for (int i = 0; st->dg_ns && i < st->dg_nb * st->dg_nc; i++) st->dg_ns[i] *= f;
    st->dw.c0 *= f;
    st->dw.a *= f;
    st->dw.b *= f;
    st->dw.cm *= f;
    for (int i = 0; st->pg.nx && i < st->pg.off[st->pg.nx]; i++) st->pg.ns[i] *= f;
}

void hs_perf_scale(hs_perf *p, double f)
{
    p->step_overhead *= f;
    p->step_seq *= f;
    p->step_tok *= f;
    for (int s = 0; s < p->pp; s++) {
        hs_perf_stage *st = &p->stage[s];
        for (int t = 0; st->dense && t <= st->max_tokens; t++) st->dense[t] *= f;
        for (int t = 0; st->enc && t <= st->max_tokens; t++) st->enc[t] *= f;
        for (int k = 0; st->head && k <= st->max_seqs; k++) st->head[k] *= f;
        st->dec_fixed *= f;
        st->dec_seq *= f;
        st->dec_ctx *= f;
        st->pre_fixed *= f;
        st->pre_self *= f;
        st->pre_cross *= f;
        st->pre_ctx *= f;
        st->pre_tok *= f;
        st->send_alpha *= f;
        st->send_token *= f;
        st->enc_fixed *= f;
        st->enc_pair *= f;
        st->dispatch_ns *= f;
        hs_perf_stage_attn_scale(st, f);
    }
}

int hs_layout_stage_bits(const hs_layout *l, int s, int n[HS_NBITS])
{
    int first = 0, mixed = 0, own = hs_bits_index(l->stage[s].bits);
    for (int k = 0; k < HS_NBITS; k++) n[k] = 0;
    for (int r = 0; r < s; r++) first += l->stage[r].layers;
    for (int i = first; i < first + l->stage[s].layers; i++) {
        int b = i < HS_MAX_LAYERS && l->layer_bits[i] ? l->layer_bits[i] : l->stage[s].bits;
        int k = hs_bits_index(b);
        /* a width outside the set is the deployment check's to reject;
         * here it counts as the stage's own */
        if (k < 0) k = own;
        if (k < 0) continue;
        n[k]++;
        mixed |= k != own;
    }
    return mixed;
}

int hs_layout_stage_quant(const hs_layout *l, int s)
{
    int n[HS_NBITS], q = 0;
    hs_layout_stage_bits(l, s, n);
    for (int k = 0; k < HS_NBITS; k++) q |= n[k] && hs_bits_set[k] != 16;
    return q;
}

int hs_layout_check_lptorch(const hs_model *m, const hs_layout *l, hs_err *err)
{
    for (int s = 0; s < l->pp; s++) {
        /* its quantised decoder layers, or encoder layers at its bits */
        if (!hs_layout_stage_quant(l, s) && !(l->stage[s].enc_layers && l->stage[s].bits != 16)) continue;
        if (m->encoder_layers)
            return hs_errf(err, HS_EINVAL, "lptorch times decoder-only models (%s is encoder-decoder)", m->name);
        if (l->stage[s].tp != 1)
            return hs_errf(err, HS_EINVAL, "lptorch runs one GPU per stage; stage %d has TP %d", s, l->stage[s].tp);
    }
    return 0;
}

int hs__prov_has(const char *prov, const char *gpu)
{
    size_t n = strlen(gpu);
    for (const char *seg = prov; *seg; ) {
        const char *end = strstr(seg, "; ");
        if (!strncmp(seg, gpu, n) && seg[n] == ':') return 1;
        if (!end) break;
        seg = end + 2;
    }
    return 0;
}

void hs__prov_append(char *prov, size_t cap, const char *seg, size_t n)
{
    size_t len = strlen(prov);
    if (snprintf(prov + len, cap - len, "%s%.*s", len ? "; " : "", (int)n, seg) >= (int)(cap - len))
        memcpy(prov + cap - 4, "...", 4);
}

void hs_perf_merge_calib(hs_perf *into, const hs_perf *from)
{
    for (const char *seg = from->calib; *seg;) {
        const char *end = strstr(seg, "; "), *colon = strchr(seg, ':');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        char gpu[64];
        if (colon && colon < seg + n && (size_t)(colon - seg) < sizeof gpu) {
            memcpy(gpu, seg, (size_t)(colon - seg));
            gpu[colon - seg] = '\0';
            if (!hs__prov_has(into->calib, gpu)) hs__prov_append(into->calib, sizeof into->calib, seg, n);
        }
        if (!end) break;
        seg = end + 2;
    }
    if (from->expected_err > into->expected_err) into->expected_err = from->expected_err;
    into->uncalibrated |= from->uncalibrated;
}

double hs_allreduce_s(const hs_cluster *c, const int *gpus, int n,
                      double bytes, double link_eff)
{
    double bw = 0, lat = 0;
    if (n <= 1) return 0;
    /* A ring is as fast as its slowest hop; NCCL picks the ring, so we take
     * the slowest link and highest latency among the members. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double b, a;
            if (i == j) continue;
            b = hs_cluster_bw(c, gpus[i], gpus[j]);
            a = hs_cluster_lat(c, gpus[i], gpus[j]);
            if (bw == 0 || b < bw) bw = b;
            if (a > lat) lat = a;
        }
    return 2.0 * (n - 1) * lat + 2.0 * (n - 1) / n * bytes / (bw * link_eff);
}
