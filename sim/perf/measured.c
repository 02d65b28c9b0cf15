/* measured.c - the builders "table" (measured tables), "fitted" (the
 * transfer model of fitted.h) and "auto" (table where one exists, fitted
 * where not, roofline when there is nothing to fit on).
 *
 * A stage is pre-tabulated per GPU type in it and the slowest type wins at
 * every entry (TP ranks run in lockstep):
 *   dense[T] = L * (qkv + rope + attn_out + mlp_up + act + mlp_down
 *                   + 2 norm + 2 add)(T) + emb(T) on the first stage
 *              + L * (1 or 2) * all-reduce(T * hidden * 2 bytes) when tp > 1
 *   head[S]  = lm_head(S) + norm(S) (+ logits gather when tp > 1), last stage
 * Op times come from the table's steffen curve over tokens, or from the
 * fitted model.  rope is counted only for rotary models.  Attention
 * coefficients are the relative least-squares fits of table.c, on the
 * table's rows or on rows synthesised from the fitted model over a grid;
 * with neither, the roofline formula.  All-reduce comes from an
 * allreduce.csv of the GPU type (this model's table first, then the type's
 * other tables) when the whole group sits in one node, else alpha-beta from
 * the topology; the same for the send to the next stage (sendrecv.csv,
 * fitted as alpha + beta * bytes).  Tables hold FP16 KV caches, so a layout
 * with 8-bit KV takes attention from the fitted model.
 *
 * Tables and fits are cached for the process (see cache_*), keyed by path and
 * by the size and mtime of every file read: hs_perf_build runs once per
 * replica, replicas share tables, and a fit costs about half a second.
 * The cache is process state and not thread-safe: builders run on the
 * thread that loads the deployment. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "perf/calib.h"
#include "perf/fitted.h"
#include "perf/perf.h"
#include "perf/table_int.h"

extern const hs_perf_builder hs_perf_roofline;

/* ---- cache ------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Fingerprint of a table directory: name, size and mtime of its files. */
static uint64_t table_print(const char *dir)
{
    static const char *const files[] = {"meta.json", "dense.csv", "attn_decode.csv",
                                        "attn_prefill.csv", "allreduce.csv", "sendrecv.csv"};
    uint64_t h = fnv(14695981039346656037ull, dir, strlen(dir));
    char path[1100];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct stat st;
        int64_t v[3] = {0, 0, 0};
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &st) == 0) {
            v[0] = (int64_t)st.st_size;
            v[1] = (int64_t)st.st_mtim.tv_sec;
            v[2] = (int64_t)st.st_mtim.tv_nsec;
        }
        h = fnv(h, v, sizeof v);
    }
    return h;
}

#define CACHE_TABLES 32
static struct {
    char dir[512];
    uint64_t print;
    hs_ptable *t;
} tcache[CACHE_TABLES];
static int tcache_next;

/* Table at dir (NULL when dir holds no meta.json); owned by the cache. */
static int cache_table(const char *dir, const hs_ptable **out, hs_err *err)
{
    char path[1100];
    uint64_t pr;
    hs_ptable *t;
    int rc, slot;
    *out = NULL;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!hs__is_file(path)) return 0;
    pr = table_print(dir);
    for (int i = 0; i < CACHE_TABLES; i++)
        if (tcache[i].t && tcache[i].print == pr && !strcmp(tcache[i].dir, dir)) {
            *out = tcache[i].t;
            return 0;
        }
    if ((rc = hs_ptable_read(&t, dir, err))) return rc;
    slot = tcache_next;
    tcache_next = (tcache_next + 1) % CACHE_TABLES;
    hs_ptable_destroy(tcache[slot].t);
    snprintf(tcache[slot].dir, sizeof tcache[slot].dir, "%s", dir);
    tcache[slot].print = pr;
    tcache[slot].t = t;
    *out = t;
    return 0;
}

static struct {
    char *key;
    uint64_t print;
    int n_tables;
    hs_fit fit;
} fcache;

/* The fit on the tables named by dirs; *out NULL when there are none. */
static int cache_fit(const char *dirs, const hs_fit **out, hs_err *err)
{
    char **tdirs = NULL;
    int nt = 0, rc;
    uint64_t pr = 14695981039346656037ull;
    hs_fit_data d;
    *out = NULL;
    if ((rc = hs__table_dirs(dirs, &tdirs, &nt, err))) return rc;
    for (int i = 0; i < nt; i++) {
        uint64_t t = table_print(tdirs[i]);
        pr = fnv(pr, &t, sizeof t);
    }
    hs__names_free(tdirs, nt);
    if (!nt) return 0;
    if (fcache.key && fcache.print == pr && !strcmp(fcache.key, dirs)) {
        *out = &fcache.fit;
        return 0;
    }
    if ((rc = hs_fit_data_load(&d, dirs, err))) return rc;
    free(fcache.key);
    fcache.key = NULL;
    rc = hs_fit_run(&fcache.fit, d.in, d.n, err);
    hs_fit_data_free(&d);
    if (rc) return rc;
    if (!(fcache.key = strdup(dirs))) return hs_errf(err, HS_ENOMEM, "out of memory");
    fcache.print = pr;
    *out = &fcache.fit;
    return 0;
}

/* The shipped calibration at path (calib.h), cached by path, size and
 * mtime; *out NULL when the file does not exist. */
static struct {
    char path[1100];
    int64_t size, sec, nsec;
    hs_calib *cal;
} ccache;

static int cache_calib(const char *path, const hs_calib **out, hs_err *err)
{
    struct stat st;
    hs_calib *c;
    int rc;
    *out = NULL;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (ccache.cal && !strcmp(ccache.path, path) && ccache.size == (int64_t)st.st_size &&
        ccache.sec == (int64_t)st.st_mtim.tv_sec && ccache.nsec == (int64_t)st.st_mtim.tv_nsec) {
        *out = ccache.cal;
        return 0;
    }
    if (!(c = malloc(sizeof *c))) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = hs_calib_load(c, path, err))) {
        free(c);
        return rc;
    }
    free(ccache.cal);
    ccache.cal = c;
    snprintf(ccache.path, sizeof ccache.path, "%s", path);
    ccache.size = (int64_t)st.st_size;
    ccache.sec = (int64_t)st.st_mtim.tv_sec;
    ccache.nsec = (int64_t)st.st_mtim.tv_nsec;
    *out = c;
    return 0;
}

void hs_perf_cache_clear(void)
{
    free(ccache.cal);
    ccache.cal = NULL;
    for (int i = 0; i < CACHE_TABLES; i++) {
        hs_ptable_destroy(tcache[i].t);
        tcache[i].t = NULL;
    }
    tcache_next = 0;
    free(fcache.key);
    fcache.key = NULL;
}

/* ---- sources ------------------------------------------------------------------ */

enum { MODE_TABLE, MODE_FITTED, MODE_AUTO };

typedef struct bctx {
    const hs_perf_cfg *cfg;
    const hs_model *m;
    const hs_cluster *c;
    const hs_layout *l;
    int mode;
    char tables[512];         /* tables root */
    const hs_fit *fit;        /* fitted on perf.fit_from, or on the tables when no
                                 calibration ships; NULL: none */
    const hs_calib *cal;      /* the shipped calibration; NULL: none */
    int used_table, used_fit, used_roof;
    char prov[1024];          /* per GPU type: where its numbers came from */
    double exp_err;           /* % expected per layer, max over types; < 0: unknown */
    int uncalibrated;         /* a GPU type runs ops not measured on it */
} bctx;

/* One GPU type of one stage: where each number comes from. */
typedef struct src {
    const hs_gpu *g;
    const hs_ptable *t;       /* this GPU and model; NULL: none */
    const hs_fit *fit;        /* model for what the table lacks; NULL: none */
    const hs_calib_entry *ce; /* calibration entry behind fit; NULL: none */
    const hs_fit *back;       /* dense-op kinds an entry of the GPU's own lacks (its
                                 tables measured only some ops, as the H200's GEMMs):
                                 the same chip's entry, else the transfer; NULL: none */
    const hs_calib_entry *back_ce;
    int sibling;              /* ce is the entry of the GPU named by same_chip_as */
    int n_table, n_fit, n_back;   /* ops served by each */
    hs_curve curve[HS_OP_COUNT]; /* n > 0: from the table */
} src;

static unsigned stage_ops(const hs_model *m, int first, int last)
{
    unsigned ops = 1u << HS_OP_NORM | 1u << HS_OP_QKV | 1u << HS_OP_ATTN_OUT | 1u << HS_OP_MLP_UP |
                   1u << HS_OP_ACT | 1u << HS_OP_MLP_DOWN | 1u << HS_OP_ADD;
    if (!strcmp(m->position, "rope")) ops |= 1u << HS_OP_ROPE;
    if (first) ops |= 1u << HS_OP_EMB;
    if (last) ops |= 1u << HS_OP_LM_HEAD;
    return ops;
}

/* The fit that prices kind k on s: its own; the fallback for a dense op
 * it has no rows of, or for any kind once its own is set aside (a partial
 * entry with a table).  A complete entry keeps its attention (or none: the
 * roofline). */
static const hs_fit *kind_fit(const src *s, int k)
{
    if (s->back && (!s->fit || (k < HS_OP_COUNT && s->fit->k[k].from < 0)) && s->back->k[k].from >= 0)
        return s->back;
    return s->fit;
}

/* Prices everything from the borrowed entry, said as that entry's source
 * (the same chip's, or the transfer). */
static void use_back(src *s)
{
    s->sibling = s->back_ce->gpu[0] != 0;
    s->ce = s->back_ce;
    s->fit = s->back;
    s->back = NULL;
    s->back_ce = NULL;
}

static void src_free(src *s)
{
    for (int op = 0; op < HS_OP_COUNT; op++) hs_curve_free(&s->curve[op]);
}

static int src_init(src *s, bctx *b, const hs_gpu *g, const hs_stage_layout *st, unsigned need,
                    hs_err *err)
{
    char dir[1100];
    int rc;
    memset(s, 0, sizeof *s);
    s->g = g;
    s->fit = b->fit;
    if (b->cal && (s->ce = hs_calib_for(b->cal, g->name))) {
        /* hs_calib_for gives the transfer entry for a GPU without one */
        const hs_calib_entry *sib = g->same_chip_as[0] ? hs_calib_for(b->cal, g->same_chip_as) : NULL;
        if (sib && !sib->gpu[0]) sib = NULL;
        if (!s->ce->gpu[0] && sib) {
            /* no entry of its own: a GPU on the same chip beats the transfer */
            s->ce = sib;
            s->sibling = 1;
        } else if (s->ce->gpu[0]) {
            /* an entry of its own may lack kinds: the same chip, else the transfer */
            s->back_ce = sib ? sib : hs_calib_for(b->cal, "");
            if (s->back_ce == s->ce) s->back_ce = NULL;
            s->back = s->back_ce ? &s->back_ce->fit : NULL;
        }
        s->fit = &s->ce->fit;
    }
    if (b->mode != MODE_FITTED) {
        snprintf(dir, sizeof dir, "%s/%s/%s", b->tables, g->name, b->m->name);
        if ((rc = cache_table(dir, &s->t, err))) return rc;
        if (s->t && (strcmp(s->t->meta.gpu, g->name) || strcmp(s->t->meta.model, b->m->name)))
            return hs_errf(err, HS_EPARSE, "%s/meta.json: names gpu \"%s\", model \"%s\" but sits at %s/%s",
                           dir, s->t->meta.gpu, s->t->meta.model, g->name, b->m->name);
    }
    if (s->back) {
        /* An entry fitted on tables of some ops only (the H200's GEMMs, of
         * two models) is used through its tables alone: its fit, on so few
         * shapes, prices other shapes no better than the same chip's whole
         * entry (leaving one model out: attn_out 32%, mlp_down 18%). */
        int partial = 0;
        for (int op = 0; op < HS_OP_COUNT; op++) partial |= (need & (1u << op)) && s->fit->k[op].from < 0;
        if (partial && !s->t) use_back(s);
        else if (partial) s->fit = NULL;   /* the table's ops, the rest from back (kind_fit) */
    }
    if (b->mode == MODE_TABLE) {
        hs_ptable_need nd = {st->tp, st->bits, 0, 1, 1};
        if (!s->t)
            return hs_errf(err, HS_ENOTFOUND, "perf.model table: no measured table %s (run hetsim-exec profile or perf import-vidur)", dir);
        for (int op = 0; op < HS_OP_COUNT; op++)
            if ((need & (1u << op)) && !hs_ptable_op_bits(s->t, op, st->tp, st->bits)) nd.ops |= 1u << op;
        if ((rc = hs_ptable_check(s->t, &nd, err))) return rc;
        if (b->l->kv_bits != 16)
            return hs_errf(err, HS_EUNSUPPORTED, "perf.model table: %s holds FP16 KV caches, layout has %d-bit KV (use perf.model auto or fitted)",
                           dir, b->l->kv_bits);
    }
    for (int op = 0; op < HS_OP_COUNT; op++) {
        if (!(need & (1u << op))) continue;
        int ob = s->t ? hs_ptable_op_bits(s->t, op, st->tp, st->bits) : 0;
        const hs_fit *f = kind_fit(s, op);
        if (ob) {
            if ((rc = hs_ptable_op_curve(s->t, op, st->tp, ob, &s->curve[op], err))) goto fail;
            b->used_table = 1;
            s->n_table++;
        } else if (f && f->k[op].from >= 0) {
            b->used_fit = 1;
            if (f == s->back) s->n_back++;
            else s->n_fit++;
        } else {
            rc = hs_errf(err, HS_ENOTFOUND, "no table or fit data for op %s on %s at tp %d, bits %d",
                         hs_op_name(op), g->name, st->tp, st->bits);
            goto fail;
        }
    }
    if (s->n_back && !s->n_table && !s->n_fit) {
        /* nothing measured here serves this stage (a TP degree the table
         * lacks): the borrowed entry's, said as such */
        use_back(s);
        s->n_fit = s->n_back;
        s->n_back = 0;
    }
    return 0;
fail:
    src_free(s);
    return rc;
}

/* The error to expect of an entry's predictions, % per layer (< 0:
 * unknown).  For the transfer entry, what one new GPU should expect: the
 * median over the GPUs held out, each counted once (the pooled figure
 * weighs them by rows, half of them the A100's), with their range in
 * range ("" otherwise). */
static double entry_err(const hs_calib_entry *ce, char *range, size_t n)
{
    double lo, hi, e = hs_calib_expected_err(ce, &lo, &hi);
    if (lo >= 0) snprintf(range, n, ", %.0f-%.0f%% by GPU held out", lo, hi);
    return e;
}

/* Records where one GPU type's numbers came from (once per type) and the
 * error cross-validation measured for that source. */
static void note_source(bctx *b, const src *s)
{
    char one[256], from[96] = "", range[48] = "";
    double e = -1;
    int own = s->ce && s->ce->gpu[0];
    if (hs__prov_has(b->prov, s->g->name)) return;
    /* a fit on perf.fit_from (no calibration entry) may include this GPU */
    for (int i = 0; !s->ce && s->fit && i < s->fit->n_gpus; i++) own |= !strcmp(s->fit->gpus[i], s->g->name);
    if (s->n_back) {
        /* a partial entry's table serves some ops, the others are borrowed
         * (n_back > 0 only then): expect the borrowed entry's error */
        char by[64];
        if (s->back_ce->gpu[0])
            snprintf(by, sizeof by, "fitted on %.32s%s", s->back_ce->gpu,
                     strcmp(s->back_ce->gpu, s->g->same_chip_as) ? "" : " (same chip)");
        else
            snprintf(by, sizeof by, "transferred%s",
                     hs_fit_extrapolates_tc(&s->back_ce->fit, s->g) ? ", no tensor cores (extrapolated)" : "");
        e = entry_err(s->back_ce, range, sizeof range);
        snprintf(one, sizeof one, "%.32s: measured table, other ops %s, uncalibrated", s->g->name, by);
        b->uncalibrated = 1;
    } else if (s->t && !s->n_fit) {
        snprintf(one, sizeof one, "%s: measured table", s->g->name);
    } else if (s->fit && s->sibling) {
        e = entry_err(s->ce, range, sizeof range);
        snprintf(one, sizeof one, "%s: fitted on %s (same chip), uncalibrated", s->g->name, s->ce->gpu);
        b->uncalibrated = 1;
    } else if (s->fit && own) {
        e = entry_err(s->ce, range, sizeof range);
        /* one model's table: leaving a model out leaves nothing to fit */
        snprintf(one, sizeof one, "%s: %sfitted on its tables%s", s->g->name, s->t ? "table + " : "",
                 s->ce && s->ce->n_tables == 1 ? " (one model: not cross-validated)" : "");
    } else if (s->fit) {
        for (int i = 0; i < s->fit->n_gpus; i++) {
            size_t l = strlen(from);
            snprintf(from + l, sizeof from - l, "%s%s", i ? "," : "", s->fit->gpus[i]);
        }
        e = entry_err(s->ce, range, sizeof range);
        snprintf(one, sizeof one, "%s: transferred from %s, uncalibrated%s", s->g->name, from,
                 hs_fit_extrapolates_tc(s->fit, s->g) ? ", no tensor cores (extrapolated)" : "");
        b->uncalibrated = 1;
    } else {
        snprintf(one, sizeof one, "%s: datasheet roofline, uncalibrated", s->g->name);
        b->uncalibrated = 1;
    }
    if (e >= 0) {
        size_t l = strlen(one);
        snprintf(one + l, sizeof one - l, " (+-%.0f%% per layer%s)", e, range);
        if (e > b->exp_err) b->exp_err = e;
    }
    hs__prov_append(b->prov, sizeof b->prov, one, strlen(one)); /* many GPU types can fill it */
}

static double op_us(const src *s, const bctx *b, int op, int tp, int bits, double tokens)
{
    if (s->curve[op].n) return hs_curve_eval(&s->curve[op], tokens);
    return hs_fit_op_us(kind_fit(s, op), op, b->m, s->g, tp, bits, tokens);
}

/* Synthesises attention rows from the fitted model over a grid that covers
 * what a replica meets (batches up to max_seqs, contexts up to the model's
 * length, chunks up to max_tokens) and fits the hot-path coefficients. */
static int fit_attn_coef(const src *s, const bctx *b, int kind, int tp, int max_tokens, int max_seqs,
                         double coef[HS_ATTN_NCOEF], hs_err *err)
{
    hs_attn_row rows[2048];
    size_t n = 0;
    int lim_y = b->m->max_seq_len > 16 ? b->m->max_seq_len : 4096;
    int lim_x = kind == HS_ATTN_DECODE ? (max_seqs > 1 ? max_seqs : 1) : (max_tokens > 1 ? max_tokens : 1);
    int fk = kind == HS_ATTN_DECODE ? HS_FK_DECODE : HS_FK_PREFILL;
    for (double x = 1; n < 2048; x *= 1.5) {
        int xi = (int)x;
        if (xi > lim_x) xi = lim_x;
        for (double y = kind == HS_ATTN_DECODE ? 16 : 0; n < 2048; y = y ? y * 1.5 : 16) {
            int yi = (int)y;
            if (yi > lim_y) break;
            rows[n++] = (hs_attn_row){tp, xi, yi,
                                      hs_fit_attn_us(kind_fit(s, fk), fk, b->m, s->g, tp, b->l->kv_bits, xi, yi), 0};
        }
        if (xi >= lim_x) break;
    }
    return hs_attn_coef5_rows(kind, rows, n, coef, NULL, err);
}

/* Attention coefficients of one layer (us) for one GPU type. */
static int attn_coef(const src *s, bctx *b, int kind, int tp, int max_tokens, int max_seqs,
                     double coef[HS_ATTN_NCOEF], hs_err *err)
{
    int fk = kind == HS_ATTN_DECODE ? HS_FK_DECODE : HS_FK_PREFILL;
    if (s->t && b->l->kv_bits == 16 && hs_ptable_has_attn(s->t, kind, tp)) {
        b->used_table = 1;
        return hs_ptable_attn_coef5(s->t, kind, tp, coef, NULL, err);
    }
    const hs_fit *f = kind_fit(s, fk);
    if (f && f->k[fk].from >= 0) {
        b->used_fit = 1;
        return fit_attn_coef(s, b, kind, tp, max_tokens, max_seqs, coef, err);
    }
    /* Nothing measured anywhere: the roofline formula (roofline.c). */
    {
        const hs_perf_cfg *cfg = b->cfg;
        double q = (double)b->m->heads * b->m->head_dim / tp;
        double kvb = hs_model_kv_bytes_token_layer(b->m, tp, b->l->kv_bits);
        double cc = 4.0 * q / (s->g->flops16 * cfg->attn_eff), cm = kvb / (s->g->mem_bw * cfg->mem_eff);
        b->used_roof = 1;
        memset(coef, 0, HS_ATTN_NCOEF * sizeof *coef);
        coef[0] = cfg->launch_us;
        if (kind == HS_ATTN_DECODE) {
            coef[1] = 4.0 * q / (s->g->mem_bw * cfg->mem_eff) * 1e6;
            coef[2] = (cc > cm ? cc : cm) * 1e6;
        } else { /* as roofline.c: the causal triangle at twice a pair, the ramp */
            coef[0] += cc * cfg->attn_knee * 1e6;
            coef[1] = 2 * cc * 1e6;
            coef[2] = cc * 1e6;
            coef[3] = cm * 1e6;
            coef[HS_ATTN_TOK] = cc * cfg->attn_query_keys * 1e6;
        }
    }
    return 0;
}

/* 1 when t has collective rows of kind (all-reduce: for groups of tp). */
static int has_comm(const hs_ptable *t, int kind, int tp)
{
    for (size_t i = 0; i < t->n_comm[kind]; i++)
        if (kind == HS_COMM_SENDRECV || t->comm[kind][i].gpus == tp) return 1;
    return 0;
}

/* The table of GPU type g with measured collectives of kind: this model's
 * first, then the type's other tables in name order (its collectives-only
 * _network table among them); *out NULL when none. */
static int comm_table(const bctx *b, const src *s, int kind, int tp, const hs_ptable **out, hs_err *err)
{
    char gdir[1100], **models = NULL;
    int nm = 0, rc = 0;
    *out = NULL;
    if (b->mode == MODE_FITTED) return 0;
    if (s->t && has_comm(s->t, kind, tp)) {
        *out = s->t;
        return 0;
    }
    snprintf(gdir, sizeof gdir, "%s/%s", b->tables, s->g->name);
    if ((rc = hs__subdirs(gdir, &models, &nm, err))) return rc;
    for (int i = 0; !rc && i < nm && !*out; i++) {
        char dir[1200];
        const hs_ptable *t;
        snprintf(dir, sizeof dir, "%s/%s", gdir, models[i]);
        if ((rc = cache_table(dir, &t, err)) == 0 && t && has_comm(t, kind, tp)) *out = t;
    }
    hs__names_free(models, nm);
    return rc;
}

/* Measured all-reduce curve for `tp` GPUs of type g, or n == 0. */
static int comm_curve(const bctx *b, const src *s, int tp, hs_curve *out, hs_err *err)
{
    const hs_ptable *t;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = comm_table(b, s, HS_COMM_ALLREDUCE, tp, &t, err)) || !t) return rc;
    return hs_ptable_allreduce_curve(t, tp, out, err);
}

static int same_node(const hs_cluster *c, const int *gpus, int n)
{
    for (int i = 1; i < n; i++)
        if (c->gpu_node[gpus[i]] != c->gpu_node[gpus[0]]) return 0;
    return 1;
}

/* ---- the builder ----------------------------------------------------------- */

static int build_stage(bctx *b, hs_perf *p, int s, int max_tokens, int max_seqs, hs_err *err)
{
    const hs_stage_layout *st = &b->l->stage[s];
    const hs_cluster *c = b->c;
    const hs_model *m = b->m;
    hs_perf_stage *ps = &p->stage[s];
    int first = s == 0, last = s == b->l->pp - 1, tp = st->tp, rc = 0, nar;
    double L = st->layers, h = m->hidden;
    unsigned need = stage_ops(m, first, last);
    int types[HS_MAX_TP], nt = 0;
    /* distinct GPU types of the stage, in rank order */
    for (int i = 0; i < tp; i++) {
        int ty = c->gpu_type[st->gpus[i]], seen = 0;
        for (int j = 0; j < nt; j++) seen |= types[j] == ty;
        if (!seen) types[nt++] = ty;
    }
    ps->max_tokens = max_tokens;
    ps->max_seqs = max_seqs;
    ps->dense = calloc((size_t)max_tokens + 1, sizeof *ps->dense);
    ps->head = calloc((size_t)max_seqs + 1, sizeof *ps->head);
    if (!ps->dense || !ps->head) return hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
    nar = m->parallel_attn ? 1 : 2;
    for (int k = 0; k < nt && !rc; k++) {
        src sc;
        hs_curve ar;
        double dc[HS_ATTN_NCOEF], pc[HS_ATTN_NCOEF];
        int group_local = same_node(c, st->gpus, tp);
        if ((rc = src_init(&sc, b, &c->types[types[k]], st, need, err))) break;
        note_source(b, &sc);
        memset(&ar, 0, sizeof ar);
        if (tp > 1 && group_local) rc = comm_curve(b, &sc, tp, &ar, err);
        if (!rc) rc = attn_coef(&sc, b, HS_ATTN_DECODE, tp, max_tokens, max_seqs, dc, err);
        if (!rc) rc = attn_coef(&sc, b, HS_ATTN_PREFILL, tp, max_tokens, max_seqs, pc, err);
        for (int t = 1; !rc && t <= max_tokens; t++) {
            double us = 0, ns;
            for (int op = 0; op < HS_OP_COUNT; op++) {
                int times = op == HS_OP_NORM || op == HS_OP_ADD ? 2 : 1;
                if (!(need & (1u << op)) || op == HS_OP_EMB || op == HS_OP_LM_HEAD) continue;
                us += times * op_us(&sc, b, op, tp, st->bits, t);
            }
            ns = L * us * 1e3;
            if (first) ns += op_us(&sc, b, HS_OP_EMB, tp, st->bits, t) * 1e3;
            if (tp > 1) {
                double bytes = t * h * 2.0;
                if (ar.n) b->used_table = 1;
                ns += L * nar * (ar.n ? hs_curve_eval(&ar, bytes) * 1e3
                                      : hs_allreduce_s(c, st->gpus, tp, bytes, b->cfg->link_eff) * 1e9);
            }
            if (ns > ps->dense[t]) ps->dense[t] = ns;
        }
        for (int k2 = 1; !rc && last && k2 <= max_seqs; k2++) {
            double ns = (op_us(&sc, b, HS_OP_LM_HEAD, tp, 16, k2) + op_us(&sc, b, HS_OP_NORM, tp, st->bits, k2)) * 1e3;
            if (tp > 1) /* gather the vocabulary shards of the logits, as roofline.c */
                ns += hs_allreduce_s(c, st->gpus, tp, k2 * (double)m->vocab / tp * 4.0, b->cfg->link_eff) / 2 * 1e9;
            if (ns > ps->head[k2]) ps->head[k2] = ns;
        }
        if (!rc) {
            const double *d = dc, *q = pc;
            /* per layer -> per stage, us -> ns; max over types term by term
             * (an upper bound when types differ) */
            if (L * d[0] * 1e3 > ps->dec_fixed) ps->dec_fixed = L * d[0] * 1e3;
            if (L * d[1] * 1e3 > ps->dec_seq) ps->dec_seq = L * d[1] * 1e3;
            if (L * d[2] * 1e3 > ps->dec_ctx) ps->dec_ctx = L * d[2] * 1e3;
            if (L * q[0] * 1e3 > ps->pre_fixed) ps->pre_fixed = L * q[0] * 1e3;
            if (L * q[1] * 1e3 > ps->pre_self) ps->pre_self = L * q[1] * 1e3;
            if (L * q[2] * 1e3 > ps->pre_cross) ps->pre_cross = L * q[2] * 1e3;
            if (L * q[3] * 1e3 > ps->pre_ctx) ps->pre_ctx = L * q[3] * 1e3;
            if (L * q[HS_ATTN_TOK] * 1e3 > ps->pre_tok) ps->pre_tok = L * q[HS_ATTN_TOK] * 1e3;
        }
        /* One GPU type timed from its table: the engine reads the decode
         * grid itself (perf.h); mixed types keep the terms' upper bound. */
        if (!rc && nt == 1 && sc.t && b->l->kv_bits == 16 && b->cfg->decode_grid) {
            int gb, gc;
            double *g;
            rc = hs_ptable_decode_grid(sc.t, tp, &gb, &gc, &g, err);
            if (!rc && g) {
                ps->dg_b = g;
                ps->dg_c = g + gb;
                ps->dg_ns = g + gb + gc;
                ps->dg_nb = gb;
                ps->dg_nc = gc;
            }
            /* the kernel's waves, when the table says how it splits */
            if (!rc && g && b->cfg->decode_grid == 2) {
                /* a fit that fails (a singular grid, a zero row) leaves the
                 * grid interpolated rather than failing the build */
                hs_err ignore = {0};
                if (hs_ptable_decode_wave(sc.t, tp, m->heads / tp, &ps->dw, NULL, &ignore))
                    memset(&ps->dw, 0, sizeof ps->dw);
            }
        }
        if (!rc && nt == 1 && sc.t && b->l->kv_bits == 16 && b->cfg->prefill_grid)
            rc = hs_ptable_prefill_grid(sc.t, tp, &ps->pg, err);
        /* the tables' us per layer -> ns of the stage's layers */
        if (!rc && nt == 1) hs_perf_stage_attn_scale(ps, L * 1e3);
        /* the send to the next stage, from rank 0 (whose type is types[0]):
         * measured when both ends share a node and a GPU type */
        if (!rc && !last && k == 0) {
            const hs_stage_layout *nx = &b->l->stage[s + 1];
            int a = st->gpus[0], z = nx->gpus[0];
            double co[2];
            const hs_ptable *net_t = NULL;
            hs_err ignore;
            if (a == z) {
                ps->send_alpha = 0;
                ps->send_token = h * 2.0 / (sc.g->mem_bw * b->cfg->link_eff) * 1e9;
            } else if (c->gpu_node[a] == c->gpu_node[z] && c->gpu_type[a] == c->gpu_type[z] &&
                       (rc = comm_table(b, &sc, HS_COMM_SENDRECV, 2, &net_t, err)) == 0 && net_t &&
                       hs_ptable_sendrecv_coef(net_t, co, NULL, &ignore) == 0) {
                ps->send_alpha = co[0] * 1e3;
                ps->send_token = co[1] * h * 2.0 * 1e3;
                b->used_table = 1;
            } else {
                ps->send_alpha = hs_cluster_lat(c, a, z) * 1e9;
                ps->send_token = h * 2.0 / (hs_cluster_bw(c, a, z) * b->cfg->link_eff) * 1e9;
            }
        }
        hs_curve_free(&ar);
        src_free(&sc);
    }
    return rc;
}

static int build_mode(int mode, hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                      const hs_cluster *c, const hs_layout *l, int max_tokens, int max_seqs,
                      hs_err *err)
{
    bctx b;
    int rc = 0;
    memset(p, 0, sizeof *p);
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    b.m = m;
    b.c = c;
    b.l = l;
    b.mode = mode;
    if (cfg->tables[0]) snprintf(b.tables, sizeof b.tables, "%s", cfg->tables);
    else snprintf(b.tables, sizeof b.tables, "%s/profiles", hs_data_root());
    b.exp_err = -1;
    if (mode != MODE_TABLE && !cfg->fit_from[0]) {
        /* the shipped calibration: fitted once, loaded here (no fit in a run) */
        char cpath[1100];
        snprintf(cpath, sizeof cpath, "%s/calibration.json", b.tables);
        if ((rc = cache_calib(cpath, &b.cal, err))) return rc;
    }
    if (mode != MODE_TABLE && !b.cal) {
        const char *from = cfg->fit_from[0] ? cfg->fit_from : b.tables;
        if ((rc = cache_fit(from, &b.fit, err))) return rc;
        if (!b.fit && mode == MODE_FITTED)
            return hs_errf(err, HS_ENOTFOUND, "perf.model fitted: no measured tables under %s to fit on", from);
        if (!b.fit) { /* auto with nothing measured anywhere */
            rc = hs_perf_roofline.build(p, cfg, m, c, l, max_tokens, max_seqs, err);
            if (!rc) snprintf(p->model_name, sizeof p->model_name, "roofline");
            return rc;
        }
    }
    p->pp = l->pp;
    p->step_overhead = cfg->step_overhead_us * 1e3;
    for (int s = 0; !rc && s < l->pp; s++) rc = build_stage(&b, p, s, max_tokens, max_seqs, err);
    if (rc) {
        hs_perf_free(p);
        return rc;
    }
    snprintf(p->model_name, sizeof p->model_name, "%s%s%s%s%s",
             b.used_table ? "table" : "",
             b.used_table && (b.used_fit || b.used_roof) ? "+" : "",
             b.used_fit ? "fitted" : "",
             b.used_fit && b.used_roof ? "+" : "",
             b.used_roof ? "roofline" : "");
    snprintf(p->calib, sizeof p->calib, "%s", b.prov);
    p->expected_err = b.exp_err;
    p->uncalibrated = b.uncalibrated;
    return 0;
}

static int build_table(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m, const hs_cluster *c,
                       const hs_layout *l, int max_tokens, int max_seqs, hs_err *err)
{
    return build_mode(MODE_TABLE, p, cfg, m, c, l, max_tokens, max_seqs, err);
}

static int build_fitted(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m, const hs_cluster *c,
                        const hs_layout *l, int max_tokens, int max_seqs, hs_err *err)
{
    return build_mode(MODE_FITTED, p, cfg, m, c, l, max_tokens, max_seqs, err);
}

static int build_auto(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m, const hs_cluster *c,
                      const hs_layout *l, int max_tokens, int max_seqs, hs_err *err)
{
    return build_mode(MODE_AUTO, p, cfg, m, c, l, max_tokens, max_seqs, err);
}

const hs_perf_builder hs_perf_table = {
    "table",
    "measured tables profiles/<gpu>/<model>/ (every stage's GPU, TP and bits must be there)",
    build_table,
};

const hs_perf_builder hs_perf_fitted = {
    "fitted",
    "roofline terms with efficiency curves fitted on the measured tables of other GPUs/models",
    build_fitted,
};

const hs_perf_builder hs_perf_auto = {
    "auto",
    "measured table where one exists, else fitted, else roofline (model_name records which)",
    build_auto,
};
