/* test_fitted.c - the fitted transfer model (sim/perf/fitted.c) and the
 * cross-validation on Vidur's data (sim/perf/crossval.c).
 *
 * Synthetic truth: tables generated from the model itself with known
 * parameters (below) for two GPUs (A100-like 312 TFLOP/s, 2039 GB/s;
 * A40-like 149.7 TFLOP/s, 696 GB/s) and two models (llama-2-7b,
 * llama-2-70b), tp 1/2/4/8, tokens 1..4096, attention over batches,
 * contexts, chunks and prefixes.  Checked:
 *   - the fit recovers every generating parameter (within 1%; the corner
 *     position th and sharpness p within 5%) and reproduces the training
 *     rows within 0.1%;
 *   - predictions for a held-out GPU (H100-like 989 TFLOP/s, 3350 GB/s) and
 *     a held-out model (llama-2-13b) are within 1% of the truth for every op
 *     and both attention kinds;
 *   - a kind without rows borrows (lm_head <- mlp_up); no rows at all is
 *     HS_ENOTFOUND; two fits of the same data are bit-identical;
 *   - with noisy rows and a fifth of them from a GPU twice as slow, the
 *     robust fit predicts a held-out GPU within 2% (least squares: 12-25%
 *     off on the good GPUs' own rows);
 *   - the "fitted" builder on the unit-test table fixture names itself, and
 *     the `perf fit` report lists the table and every kind;
 *   - `perf compare` on tables made from the roofline times 1.25: every
 *     row, precision, attention kind and the layer read 20% error and -20%
 *     bias; the fitted column leaves the target's GPU out of its training;
 *     the roofline's attention times equal its builder's hot path;
 *   - with $HS_SHARED_DATA: the cross-validation of the brief (7B A100 ->
 *     70B A100; A100 -> A40) keeps every operator's median error under 10%
 *     for A and the GEMMs' and the whole layer's under 10% for B (the
 *     memory-bound ops of B are reported, not asserted: see crossval.c). */
#include "check.h"

#include "perf/fitted.h"
#include "perf/perf.h"
#include "perf/table.h"

/* truth: c0, ec, th, p, em_inf, k_c, b_c */
static const double gemm_par[HS_FP_COUNT] = {6.0, 0.75, 50.0, 4.0, 0.85, 0, 1e7, 1};
static const double mem_par[HS_FP_COUNT] = {3.0, 0.7, 16.0, 4.0, 0.6, 2e6, 4e6, 1};
static const double dec_par[HS_FP_COUNT] = {12.0, 0.05, 400.0, 3.0, 0.8, 0, 1e7, 1};
static const double pre_par[HS_FP_COUNT] = {9.0, 0.45, 2000.0, 2.5, 0.5, 0, 1e7, 1};
/* the cross-GPU memory form: c0, bytes per SM cycle, -, p (fixed 4), em_inf */
static double sm_par[HS_FP_COUNT] = {2.5, 4.0, 1.0, 4.0, 0.8, 0, 1.0, 1}; /* HBM factor set by test_sm_form */
static int sm_truth; /* memory-only ops follow sm_par (test_sm_form) */

static const double *truth(int kind, const hs_model *m)
{
    hs_work w;
    if (kind == HS_FK_DECODE) return dec_par;
    if (kind == HS_FK_PREFILL) return pre_par;
    hs_fit_op_work(kind, m, 1, 16, 1, &w);
    return w.flops > 0 ? gemm_par : mem_par;
}

static hs_gpu mk_gpu(const char *name, double tflops, double gbs)
{
    hs_gpu g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "%s", name);
    g.flops16 = tflops * 1e12;
    g.mem_bw = gbs * 1e9;
    return g;
}

static double true_us(int kind, const hs_model *m, const hs_gpu *g, int tp, double x, double y)
{
    hs_work w;
    if (kind < HS_OP_COUNT) hs_fit_op_work(kind, m, tp, 16, x, &w);
    else hs_fit_attn_work(kind, m, tp, 16, x, y, &w);
    if (sm_truth && kind < HS_OP_COUNT && w.flops == 0) {
        /* the HBM factor is emb's alone (fitted.h) */
        double p[HS_FP_COUNT];
        memcpy(p, sm_par, sizeof p);
        if (kind != HS_OP_EMB) p[HS_FP_HBM] = 1;
        return hs_fit_eval_sm(p, &w, g);
    }
    return hs_fit_eval(truth(kind, m), &w, g);
}

/* A table of the truth; lm_head left out when skip_head. */
static hs_ptable *synth(const hs_model *m, const hs_gpu *g, int skip_head)
{
    static const int toks[] = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096};
    hs_ptable *t = NULL;
    hs_err err = {0};
    if (hs_ptable_create(&t, &err)) exit(2);
    for (int op = 0; op < HS_OP_COUNT; op++) {
        if (op == HS_OP_LM_HEAD && skip_head) continue;
        for (int tp = 1; tp <= 8; tp *= 2)
            for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++)
                if (hs_ptable_add_dense(t, op, tp, 16, toks[i], true_us(op, m, g, tp, toks[i], 0), &err)) exit(2);
    }
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int b = 1; b <= 256; b *= 2)
            for (int c = 32; c <= 4096; c *= 2)
                if (hs_ptable_add_attn(t, HS_ATTN_DECODE, tp, b, c, true_us(HS_FK_DECODE, m, g, tp, b, c), &err))
                    exit(2);
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int c = 16; c <= 4096; c *= 2)
            for (int p = 0; p + c <= 4096; p = p ? p * 2 : 64)
                if (hs_ptable_add_attn(t, HS_ATTN_PREFILL, tp, c, p, true_us(HS_FK_PREFILL, m, g, tp, c, p), &err))
                    exit(2);
    if (hs_ptable_sort(t, &err)) exit(2);
    return t;
}

static void check_par(int kind, const hs_kindfit *kf, const double *want)
{
    static const double tol[HS_FP_COUNT] = {0.01, 0.01, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01};
    hs_work w;
    int memory = 0;
    if (kind < HS_OP_COUNT) {
        hs_model dummy;
        memset(&dummy, 0, sizeof dummy);
        dummy.hidden = dummy.heads = dummy.kv_heads = dummy.head_dim = dummy.ffn = dummy.vocab = 8;
        hs_fit_op_work(kind, &dummy, 1, 16, 1, &w);
        memory = w.flops == 0;
    }
    for (int i = 0; i < HS_FP_COUNT; i++) {
        int used = memory ? (i == HS_FP_C0 || i == HS_FP_EMI || i == HS_FP_KC || i == HS_FP_BC)
                          : (i != HS_FP_KC && i != HS_FP_BC);
        if (!used) continue;
        if (fabs(kf->par[i] - want[i]) <= tol[i] * fabs(want[i])) {
            hs__check_pass++;
        } else {
            hs__check_fail++;
            fprintf(stderr, "%s:%d: %s parameter %d: fitted %.6g, truth %.6g\n", __FILE__, __LINE__,
                    hs_fit_kind_name(kind), i, kf->par[i], want[i]);
        }
    }
}

/* Whether hs_fit_print's report of f contains want. */
static int print_has(const hs_fit *f, const char *want)
{
    char buf[4096] = "";
    size_t n;
    FILE *out = tmpfile();
    if (!out) return 0;
    hs_fit_print(f, out);
    rewind(out);
    n = fread(buf, 1, sizeof buf - 1, out);
    buf[n] = '\0';
    fclose(out);
    return strstr(buf, want) != NULL;
}

static void test_recovery(const hs_model *m7, const hs_model *m70, const hs_model *m13)
{
    hs_gpu a100 = mk_gpu("a100-like", 312, 2039), a40 = mk_gpu("a40-like", 149.7, 696);
    hs_gpu h100 = mk_gpu("h100-like", 989.4, 3350);
    hs_ptable *t[4] = {synth(m7, &a100, 0), synth(m70, &a100, 1), synth(m7, &a40, 0), synth(m70, &a40, 1)};
    hs_fit_input in[4] = {{t[0], m7, &a100}, {t[1], m70, &a100}, {t[2], m7, &a40}, {t[3], m70, &a40}};
    hs_fit f, f2;
    hs_err err = {0};
    CHECK_OK(hs_fit_run(&f, in, 4, &err), &err);
    CHECK_INT(f.n_inputs, 4);
    for (int k = 0; k < HS_FK_COUNT; k++) {
        CHECK_INT(f.k[k].from, k);
        CHECK(f.k[k].rows > 0);
        check_par(k, &f.k[k], truth(k, m7));
        CHECK(f.k[k].st.max_ape < 0.1);
    }
    /* By default a memory-only op on a GPU the fit never saw is timed by the
     * datasheet roofline (its DRAM efficiency does not transfer). */
    {
        hs_perf_cfg dc;
        hs_perf_cfg_defaults(&dc);
        CHECK_INT(f.n_gpus, 2);
        CHECK_NEAR(hs_fit_op_us(&f, HS_OP_ADD, m13, &h100, 1, 16, 512),
                   hs_roofline_op_us(HS_OP_ADD, m13, &h100, 1, 16, 512, &dc), 1e-12);
        CHECK(fabs(hs_fit_op_us(&f, HS_OP_ADD, m13, &a40, 1, 16, 512) -
                   hs_roofline_op_us(HS_OP_ADD, m13, &a40, 1, 16, 512, &dc)) > 1e-9);
    }
    /* held out: a faster GPU and a model never seen, every op and kind; the
     * synthetic truth does transfer, so the fit machinery must too */
    f.memory_transfers = 1;
    {
        int bad = 0, n = 0;
        double worst = 0;
        for (int tp = 1; tp <= 2; tp++)
            for (int tok = 1; tok <= 4096; tok = tok * 3 + 1) {
                for (int op = 0; op < HS_OP_COUNT; op++) {
                    double p = hs_fit_op_us(&f, op, m13, &h100, tp, 16, tok);
                    double want = true_us(op, m13, &h100, tp, tok, 0), e = fabs(p / want - 1);
                    if (e > worst) worst = e;
                    bad += e > 0.01;
                    n++;
                }
                for (int y = 0; y <= 2048; y += 512) {
                    double p = hs_fit_attn_us(&f, HS_FK_DECODE, m13, &h100, tp, 16, tok < 300 ? tok : 300, y + 1);
                    double want = true_us(HS_FK_DECODE, m13, &h100, tp, tok < 300 ? tok : 300, y + 1);
                    double q = hs_fit_attn_us(&f, HS_FK_PREFILL, m13, &h100, tp, 16, tok, y);
                    double wq = true_us(HS_FK_PREFILL, m13, &h100, tp, tok, y);
                    double e1 = fabs(p / want - 1), e2 = fabs(q / wq - 1);
                    if (e1 > worst) worst = e1;
                    if (e2 > worst) worst = e2;
                    bad += (e1 > 0.01) + (e2 > 0.01);
                    n += 2;
                }
            }
        CHECK_INT(bad, 0);
        if (bad) fprintf(stderr, "held-out worst error %.3f%% over %d predictions\n", worst * 100, n);
    }
    /* deterministic */
    CHECK_OK(hs_fit_run(&f2, in, 4, &err), &err);
    f2.memory_transfers = f.memory_transfers;
    CHECK(memcmp(&f, &f2, sizeof f) == 0);
    /* borrowing: without any lm_head rows the head takes mlp_up's parameters */
    {
        hs_fit_input no_head[2] = {{t[1], m70, &a100}, {t[3], m70, &a40}};
        CHECK_OK(hs_fit_run(&f2, no_head, 2, &err), &err);
        CHECK_INT(f2.k[HS_OP_LM_HEAD].from, HS_OP_MLP_UP);
        CHECK_INT(f2.k[HS_OP_LM_HEAD].rows, 0);
        CHECK(memcmp(f2.k[HS_OP_LM_HEAD].par, f2.k[HS_OP_MLP_UP].par, sizeof f2.k[0].par) == 0);
        /* and still predicts the head within 1%: the truth shares GEMM parameters */
        CHECK_REL(hs_fit_op_us(&f2, HS_OP_LM_HEAD, m13, &h100, 1, 16, 64),
                  true_us(HS_OP_LM_HEAD, m13, &h100, 1, 64, 0), 0.01);
    }
    /* a table without attention: the attention kinds stay unfitted */
    {
        hs_ptable *d = NULL;
        hs_fit_input one = {NULL, m7, &a100};
        CHECK_OK(hs_ptable_create(&d, &err), &err);
        for (int tok = 1; tok <= 4096; tok *= 2)
            hs_ptable_add_dense(d, HS_OP_ADD, 1, 16, tok, true_us(HS_OP_ADD, m7, &a100, 1, tok, 0), &err);
        hs_ptable_sort(d, &err);
        one.t = d;
        CHECK_OK(hs_fit_run(&f2, &one, 1, &err), &err);
        CHECK_INT(f2.k[HS_FK_DECODE].from, -1);
        CHECK_NEAR(hs_fit_attn_us(&f2, HS_FK_DECODE, m7, &a100, 1, 16, 1, 100), 0, 0);
        CHECK_INT(f2.k[HS_OP_NORM].from, HS_OP_ADD);
        CHECK_INT(f2.k[HS_OP_QKV].from, -1); /* no GEMM rows anywhere */
        CHECK_NEAR(hs_fit_op_us(&f2, HS_OP_QKV, m7, &a100, 1, 16, 8), 0, 0);
        hs_ptable_destroy(d);
        CHECK_INT(hs_fit_run(&f2, NULL, 0, &err), HS_ENOTFOUND);
    }
    CHECK(print_has(&f, "attn_prefill"));
    CHECK(print_has(&f, "mlp_down"));
    for (int i = 0; i < 4; i++) hs_ptable_destroy(t[i]);
}

/* Robust fitting (fitted.c robust_pass): two GPUs measured with +-2%
 * noise and a third, with a fifth of the rows, twice as slow as the model
 * says (a power-capped board).  Least squares, tried when this test was
 * written, lands in another basin (c0 and th at their floor, a soft corner)
 * and predicts the two good GPUs' rows 12-25% slow; Huber's weights from
 * each start keep a held-out GPU within 2% of the truth (1.5% measured).
 * Still deterministic. */
static void test_robust(const hs_model *m7)
{
    static const int toks[] = {1, 4, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096};
    hs_gpu good[2] = {mk_gpu("a100-like", 312, 2039), mk_gpu("a40-like", 149.7, 696)};
    hs_gpu slow = mk_gpu("t4-like", 65, 320), h100 = mk_gpu("h100-like", 989.4, 3350);
    hs_ptable *t[3] = {NULL, NULL, NULL};
    hs_fit_input in[3];
    hs_fit f, f2;
    hs_err err = {0};
    int row = 0, ntok = (int)(sizeof toks / sizeof toks[0]);
    for (int g = 0; g < 3; g++) {
        const hs_gpu *gpu = g < 2 ? &good[g] : &slow;
        if (hs_ptable_create(&t[g], &err)) exit(2);
        for (int tp = 1; tp <= (g < 2 ? 8 : 2); tp *= 2)
            for (int i = 0; i < ntok; i++) {
                double us = true_us(HS_OP_MLP_UP, m7, gpu, tp, toks[i], 0) * (g < 2 ? 1 + 0.02 * sin(1.7 * row++) : 2.0);
                if (hs_ptable_add_dense(t[g], HS_OP_MLP_UP, tp, 16, toks[i], us, &err)) exit(2);
            }
        if (hs_ptable_sort(t[g], &err)) exit(2);
        in[g].t = t[g];
        in[g].m = m7;
        in[g].g = gpu;
    }
    CHECK_OK(hs_fit_run(&f, in, 3, &err), &err);
    CHECK_INT(f.k[HS_OP_MLP_UP].rows, 2 * 4 * ntok + 2 * ntok);
    CHECK_INT(f.k[HS_OP_MLP_UP].unsettled, 0);
    for (int i = 0; i < ntok; i++)
        CHECK_REL(hs_fit_op_us(&f, HS_OP_MLP_UP, m7, &h100, 1, 16, toks[i]),
                  true_us(HS_OP_MLP_UP, m7, &h100, 1, toks[i], 0), 0.02);
    CHECK_OK(hs_fit_run(&f2, in, 3, &err), &err);
    CHECK(memcmp(&f, &f2, sizeof f) == 0);
    for (int g = 0; g < 3; g++) hs_ptable_destroy(t[g]);
}

/* Memory-only ops timed by DRAM or SM issue, whichever binds: a fit on two
 * chips with different bytes per SM cycle (A100-like 13.4, A40-like 4.8)
 * recovers c0, ec and em_inf and predicts a third chip and an unseen
 * model; a fit on one chip keeps the per-chip form; a GPU without SM
 * figures falls back to the roofline. */
static void test_sm_form(const hs_model *m7, const hs_model *m70, const hs_model *m13)
{
    hs_gpu a100 = mk_gpu("a100-like", 312, 2039), a40 = mk_gpu("a40-like", 149.7, 696);
    hs_gpu h100 = mk_gpu("h100-like", 989.4, 3350), bare;
    hs_ptable *t[4];
    hs_fit f;
    hs_err err = {0};
    a100.sm_rate = 108 * 1410e6;
    a40.sm_rate = 84 * 1740e6;
    h100.sm_rate = 132 * 1980e6;
    sm_truth = 1;
    t[0] = synth(m7, &a100, 0);
    t[1] = synth(m70, &a100, 1);
    t[2] = synth(m7, &a40, 0);
    t[3] = synth(m70, &a40, 1);
    {
        hs_fit_input in[4] = {{t[0], m7, &a100}, {t[1], m70, &a100}, {t[2], m7, &a40}, {t[3], m70, &a40}};
        int bad = 0;
        CHECK_OK(hs_fit_run(&f, in, 4, &err), &err);
        for (int k = 0; k < HS_OP_COUNT; k++) {
            const hs_kindfit *kf = &f.k[k];
            if (!kf->memory_only) {
                CHECK_INT(kf->sm_term, 0);
                continue;
            }
            CHECK_INT(kf->sm_term, 1);
            CHECK_REL(kf->par[HS_FP_C0], sm_par[HS_FP_C0], 0.01);
            CHECK_REL(kf->par[HS_FP_EC], sm_par[HS_FP_EC], 0.01);
            CHECK_REL(kf->par[HS_FP_EMI], sm_par[HS_FP_EMI], 0.01);
            CHECK(kf->par[HS_FP_EMI] <= 0.9);
        }
        for (int op = 0; op < HS_OP_COUNT; op++)
            for (int tp = 1; tp <= 2; tp++)
                for (int tok = 1; tok <= 4096; tok = tok * 3 + 1) {
                    double p = hs_fit_op_us(&f, op, m13, &h100, tp, 16, tok);
                    bad += fabs(p / true_us(op, m13, &h100, tp, tok, 0) - 1) > 0.01;
                }
        CHECK_INT(bad, 0);
        /* no SM figures: the roofline, as for a per-chip fit */
        bare = h100;
        bare.sm_rate = 0;
        {
            hs_perf_cfg dc;
            hs_perf_cfg_defaults(&dc);
            CHECK_NEAR(hs_fit_op_us(&f, HS_OP_ACT, m13, &bare, 1, 16, 512),
                       hs_roofline_op_us(HS_OP_ACT, m13, &bare, 1, 16, 512, &dc), 1e-12);
        }
        CHECK(print_has(&f, "bytes per SM cycle"));
    }
    /* emb on HBM GPUs gathers at 0.8 of the SM rate (as the A100's against
     * the A40's): fitted on an HBM and a GDDR chip, emb's factor moves off
     * 1 (its value trades with em_inf on rows DRAM binds), the other kinds
     * keep 1, and a third, HBM chip is predicted within 1% (at factor 1:
     * up to 25% off) */
    {
        hs_ptable *u[4];
        hs_fit_input in[4] = {{NULL, m7, &a100}, {NULL, m70, &a100}, {NULL, m7, &a40}, {NULL, m70, &a40}};
        int bad = 0;
        sm_par[HS_FP_HBM] = 0.8;
        a100.hbm = h100.hbm = 1;
        u[0] = synth(m7, &a100, 0);
        u[1] = synth(m70, &a100, 1);
        u[2] = synth(m7, &a40, 0);
        u[3] = synth(m70, &a40, 1);
        for (int i = 0; i < 4; i++) in[i].t = u[i];
        CHECK_OK(hs_fit_run(&f, in, 4, &err), &err);
        for (int k = 0; k < HS_OP_COUNT; k++)
            if (f.k[k].sm_term) CHECK(k == HS_OP_EMB ? f.k[k].par[HS_FP_HBM] < 0.95 : f.k[k].par[HS_FP_HBM] == 1);
        for (int op = 0; op < HS_OP_COUNT; op++)
            for (int tok = 1; tok <= 4096; tok = tok * 3 + 1)
                bad += fabs(hs_fit_op_us(&f, op, m13, &h100, 1, 16, tok) / true_us(op, m13, &h100, 1, tok, 0) - 1) > 0.01;
        CHECK_INT(bad, 0);
        CHECK(print_has(&f, "on HBM GPUs ec times"));
        sm_par[HS_FP_HBM] = 1;
        a100.hbm = h100.hbm = 0;
        for (int i = 0; i < 4; i++) hs_ptable_destroy(u[i]);
    }
    /* one chip: the per-chip form, which the truth does not follow, so only
     * its shape is checked */
    {
        hs_fit_input in[2] = {{t[0], m7, &a100}, {t[1], m70, &a100}};
        CHECK_OK(hs_fit_run(&f, in, 2, &err), &err);
        CHECK_INT(f.k[HS_OP_ADD].memory_only, 1);
        CHECK_INT(f.k[HS_OP_ADD].sm_term, 0);
    }
    sm_truth = 0;
    for (int i = 0; i < 4; i++) hs_ptable_destroy(t[i]);
}

static void test_builder(const hs_model *m7)
{
    char tables[1024];
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf p;
    hs_err err = {0};
    hs_layout *l = calloc(1, sizeof *l);
    if (!l) exit(2);
    if (hs_cluster_find(&c, "dgx-a100", &err)) {
        CHECK_OK(1, &err);
        free(l);
        return;
    }
    l->pp = 2;
    l->kv_bits = 16;
    for (int s = 0; s < 2; s++) {
        l->stage[s].tp = 2;
        l->stage[s].layers = 16;
        l->stage[s].bits = 16;
        l->stage[s].gpus[0] = 2 * s;
        l->stage[s].gpus[1] = 2 * s + 1;
    }
    snprintf(tables, sizeof tables, "%s/tests/fixtures/perf/tables", hs_data_root());
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "fitted");
    if (snprintf(cfg.tables, sizeof cfg.tables, "%s", tables) >= (int)sizeof cfg.tables) SKIP("path too long");
    CHECK_OK(hs_perf_build(&p, &cfg, m7, c, l, 256, 16, &err), &err);
    CHECK_STR(p.model_name, "fitted");
    CHECK_INT(p.pp, 2);
    if (p.pp == 2) {
        CHECK(p.stage[0].dense[256] > p.stage[1].dense[256]); /* the embedding */
        CHECK(p.stage[1].head[16] > 0 && p.stage[0].head[16] == 0);
        CHECK(p.stage[0].send_token > 0 && p.stage[1].send_token == 0);
        CHECK(p.stage[0].dec_ctx > 0 && p.stage[0].pre_self > 0 && p.stage[0].pre_cross > 0);
        hs_perf_free(&p);
    }
    /* fit_from names the tables explicitly (a table directory this time) */
    snprintf(cfg.fit_from, sizeof cfg.fit_from, "%.400s/a100-80g/tiny-test", tables);
    CHECK_OK(hs_perf_build(&p, &cfg, m7, c, l, 64, 8, &err), &err);
    CHECK_STR(p.model_name, "fitted");
    hs_perf_free(&p);
    snprintf(cfg.fit_from, sizeof cfg.fit_from, "/nonexistent-hetsim-dir");
    CHECK_INT(hs_perf_build(&p, &cfg, m7, c, l, 64, 8, &err), HS_ENOTFOUND);
    /* the report behind `hetsim perf fit` */
    {
        FILE *out = tmpfile();
        if (out) {
            char buf[8192];
            size_t n;
            CHECK_OK(hs_fit_report(tables, out, &err), &err);
            rewind(out);
            n = fread(buf, 1, sizeof buf - 1, out);
            buf[n] = '\0';
            CHECK(strstr(buf, "fitted latency model on 1 table:") != NULL);
            CHECK(strstr(buf, "(tiny-test on a100-80g, cpu): 80 dense, 12 decode, 12 prefill rows") != NULL);
            CHECK(strstr(buf, "attn_decode") != NULL);
            fclose(out);
        }
        CHECK_INT(hs_fit_report("/nonexistent-hetsim-dir", stdout, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "no measured tables") != NULL);
    }
    hs_perf_cache_clear();
    hs_cluster_destroy(c);
    free(l);
}

static void test_crossval(void)
{
    const char *shared = hs_shared_data();
    static const int gemm[] = {HS_OP_QKV, HS_OP_ATTN_OUT, HS_OP_MLP_UP, HS_OP_MLP_DOWN};
    char vd[1024];
    hs_crossval r;
    hs_err err = {0};
    FILE *out;
    if (!shared) {
        printf("HS_SHARED_DATA not set: skipping the cross-validation on Vidur's profiles\n");
        return;
    }
    snprintf(vd, sizeof vd, "%s/profiles/vidur", shared);
    out = tmpfile();
    CHECK_OK(hs_perf_crossval_run(vd, &r, out, &err), &err);
    for (int op = 0; op < HS_OP_COUNT; op++) {
        if (op == HS_OP_LM_HEAD) {
            CHECK_INT(r.op[0][op].n, 0); /* Vidur does not time the LM head */
            continue;
        }
        CHECK_INT(r.op[0][op].n, 1036);
        CHECK_INT(r.op[1][op].n, 2072);
        CHECK(r.op[0][op].med_ape < 10);
        if (r.op[0][op].med_ape >= 10) fprintf(stderr, "A %s median %.2f%%\n", hs_op_name(op), r.op[0][op].med_ape);
    }
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++) {
        CHECK(r.op[1][gemm[i]].med_ape < 10);
        if (r.op[1][gemm[i]].med_ape >= 10)
            fprintf(stderr, "B %s median %.2f%%\n", hs_op_name(gemm[i]), r.op[1][gemm[i]].med_ape);
    }
    CHECK(r.layer[0].med_ape < 10 && r.layer[1].med_ape < 10);
    CHECK(r.layer[0].p90_ape < 15 && r.layer[1].p90_ape < 15);
    if (out) {
        char buf[16384];
        size_t n;
        rewind(out);
        n = fread(buf, 1, sizeof buf - 1, out);
        buf[n] = '\0';
        CHECK(strstr(buf, "overall") != NULL);
        CHECK(strstr(buf, "mlp_down") != NULL);
        CHECK(strstr(buf, "interpolation over tokens") != NULL);
        fclose(out);
    }
}

/* A table of llama-2-7b on gpu g whose times are the roofline's times k12
 * at tp 1 and 2, and k4 at tp 4; every GEMM also at 8 bits. */
static int write_scaled(const char *root, const hs_gpu *g, const hs_model *m, double k12, double k4,
                        hs_err *err)
{
    static const int toks[] = {1, 8, 64, 256, 1024};
    char dir[1200];
    hs_ptable *t = NULL;
    hs_perf_cfg cfg;
    int rc;
    hs_perf_cfg_defaults(&cfg);
    if ((rc = hs_ptable_create(&t, err))) return rc;
    snprintf(t->meta.gpu, sizeof t->meta.gpu, "%s", g->name);
    snprintf(t->meta.model, sizeof t->meta.model, "%s", m->name);
    for (int tp = 1; !rc && tp <= 4; tp *= 2)
        for (int op = 0; !rc && op < HS_OP_COUNT; op++)
            for (size_t i = 0; !rc && i < sizeof toks / sizeof toks[0]; i++) {
                double k = tp == 4 ? k4 : k12;
                rc = hs_ptable_add_dense(t, op, tp, 16, toks[i],
                                         k * hs_roofline_op_us(op, m, g, tp, 16, toks[i], &cfg), err);
                if (!rc && (op == HS_OP_QKV || op == HS_OP_ATTN_OUT || op == HS_OP_MLP_UP ||
                            op == HS_OP_MLP_DOWN)) /* INT8 GEMMs; the other ops at 16 bits serve */
                    rc = hs_ptable_add_dense(t, op, tp, 8, toks[i],
                                             k * hs_roofline_op_us(op, m, g, tp, 8, toks[i], &cfg), err);
            }
    for (int a = 1; !rc && a <= 64; a *= 4)
        for (int b = 0; !rc && b <= 2048; b += 512) {
            rc = hs_ptable_add_attn(t, HS_ATTN_DECODE, 1, a, b,
                                    k12 * hs_roofline_attn_us(HS_ATTN_DECODE, m, g, 1, 16, a, b, &cfg), err);
            if (!rc)
                rc = hs_ptable_add_attn(t, HS_ATTN_PREFILL, 1, a * 16, b,
                                        k12 * hs_roofline_attn_us(HS_ATTN_PREFILL, m, g, 1, 16, a * 16, b, &cfg),
                                        err);
        }
    snprintf(dir, sizeof dir, "%s/%s/%s", root, g->name, m->name);
    if (!rc) rc = hs_ptable_sort(t, err);
    if (!rc) rc = hs_ptable_write(t, dir, err);
    hs_ptable_destroy(t);
    return rc;
}

static void test_compare(const hs_model *m7)
{
    char root[64] = "/tmp/hs_test_compare_XXXXXX", target[200], own[200], cmd[300];
    hs_gpu a100, a40;
    hs_compare r;
    hs_compare_opts o = {0};
    hs_err err = {0};
    if (hs_gpu_find(&a100, "a100-80g", &err) || hs_gpu_find(&a40, "a40", &err) || !mkdtemp(root)) {
        CHECK_OK(1, &err);
        return;
    }
    /* measured = 1.25 x predicted (|1/1.25 - 1| = 20%) at tp 1 and 2, 2 x
     * (50%) at tp 4: ten rows of 20% and five of 50% per op and precision */
    CHECK_OK(write_scaled(root, &a100, m7, 1.25, 2.0, &err), &err);
    CHECK_OK(write_scaled(root, &a40, m7, 1.0, 1.0, &err), &err);
    snprintf(target, sizeof target, "%s/a100-80g/llama-2-7b", root);
    {
        /* which rows serve a precision: GEMMs only their own, other ops the
         * 16-bit rows, the embedding always 16 */
        hs_ptable *t = NULL;
        CHECK_OK(hs_ptable_read(&t, target, &err), &err);
        if (t) {
            const hs_dense_row *d;
            CHECK((d = hs_ptable_dense_at(t, HS_OP_QKV, 2, 8, 64)) && d->bits == 8 && d->tokens == 64);
            CHECK((d = hs_ptable_dense_at(t, HS_OP_NORM, 2, 8, 64)) && d->bits == 16 && d->tp == 2);
            CHECK((d = hs_ptable_dense_at(t, HS_OP_EMB, 1, 4, 8)) && d->bits == 16);
            CHECK(hs_ptable_dense_at(t, HS_OP_QKV, 2, 4, 64) == NULL);   /* no INT4 GEMM rows */
            CHECK(hs_ptable_dense_at(t, HS_OP_QKV, 2, 8, 65) == NULL);   /* no such token count */
            CHECK_INT(hs_ptable_op_bits(t, HS_OP_ACT, 4, 4), 16);
            CHECK_INT(hs_ptable_op_bits(t, HS_OP_MLP_UP, 4, 4), 0);
            CHECK_INT(hs_ptable_op_bits(t, HS_OP_MLP_UP, 3, 16), 0);     /* no tp 3 */
            hs_ptable_destroy(t);
        }
    }
    o.fit_dirs = root;
    CHECK_OK(hs_perf_compare(target, &o, &r, NULL, &err), &err);
    CHECK_INT(r.n_pred, 2);
    for (int slot = 0; slot < HS_CMP_N; slot++) {
        int op = slot / 4, gemm = op == HS_OP_QKV || op == HS_OP_ATTN_OUT || op == HS_OP_MLP_UP ||
                                   op == HS_OP_MLP_DOWN;
        int want = slot >= HS_CMP_DECODE || slot % 4 == 0 || (slot % 4 == 1 && gemm);
        CHECK_INT(r.st[0][slot].n > 0, want);
        if (!want) continue;
        CHECK_NEAR(r.st[0][slot].med_ape, 20.0, 1e-6);
        /* attention rows are all at tp 1 (20%); the rest reach 50% at p90 */
        CHECK_NEAR(r.st[0][slot].p90_ape, slot == HS_CMP_DECODE || slot == HS_CMP_PREFILL ? 20.0 : 50.0, 1e-6);
        CHECK_NEAR(r.bias[0][slot], -20.0, 1e-6);
        /* the fitted column exists for dense rows (attention too: the A40
         * table has attention rows to fit on) */
        CHECK(r.st[1][slot].n == r.st[0][slot].n);
    }
    /* (tp, tokens) at 16 and at 8 bits: the INT8 layer takes the norms,
     * rope, act and adds from the 16-bit rows */
    CHECK_INT(r.st[0][HS_CMP_LAYER].n, 2 * 3 * 5);
    CHECK_INT(r.st[0][HS_CMP_ALL].n, 3 * 5 * (HS_OP_COUNT + 4));    /* + four INT8 GEMMs */
    /* given ceilings replace the datasheet's: twice the bandwidth halves
     * memory-bound times, so the error moves off 20% */
    o.gbs = a100.mem_bw / 1e9 * 2;
    o.fit_dirs = NULL;
    CHECK_OK(hs_perf_compare(target, &o, &r, NULL, &err), &err);
    CHECK_INT(r.n_pred, 1);
    CHECK_INT(r.st[1][HS_CMP_ALL].n, 0);
    CHECK(r.bias[0][HS_OP_ADD * 4] < -21);
    CHECK(r.bias[0][HS_CMP_DECODE] < -21);
    /* the fitted column never trains on the target's own GPU */
    snprintf(own, sizeof own, "%s/a100-80g/llama-2-7b", root); /* the target itself */
    o = (hs_compare_opts){own, 0, 0};
    CHECK_INT(hs_perf_compare(target, &o, &r, NULL, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "no table of a GPU other than a100-80g") != NULL);
    o = (hs_compare_opts){"/nonexistent-hetsim-dir", 0, 0};
    CHECK_INT(hs_perf_compare(target, &o, &r, NULL, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "no measured tables") != NULL);
    /* the output names every row kind */
    {
        FILE *out = tmpfile();
        if (out) {
            char buf[8192];
            size_t n;
            o = (hs_compare_opts){root, 0, 0};
            CHECK_OK(hs_perf_compare(target, &o, NULL, out, &err), &err);
            rewind(out);
            n = fread(buf, 1, sizeof buf - 1, out);
            buf[n] = '\0';
            CHECK(strstr(buf, "fitted: trained on 1 table of other GPUs: a40/llama-2-7b") != NULL);
            CHECK(strstr(buf, "qkv/int8") != NULL && strstr(buf, "attn_prefill") != NULL);
            CHECK(strstr(buf, "datasheet 312.0 TFLOP/s and 2039 GB/s") != NULL);
            /* the roofline's prefill knobs refitted on the table (1.25x
             * the defaults' times, launch and prefix reads included): the
             * refit closes most of the 20% */
            {
                const char *d0 = strstr(buf, "  defaults: attn_eff"), *d1 = strstr(buf, "  refit:    attn_eff");
                double e0 = 0, e1 = 0, med0 = -1, med1 = -1;
                CHECK(d0 && d1);
                if (d0 && d1) {
                    CHECK_INT(sscanf(d0, "  defaults: attn_eff %lf %*s %*s %*s %*s median %lf", &e0, &med0), 2);
                    CHECK_INT(sscanf(d1, "  refit:    attn_eff %lf %*s %*s %*s %*s median %lf", &e1, &med1), 2);
                    CHECK_NEAR(med0, 20.0, 0.01);
                    CHECK(med1 >= 0 && med1 < 2.0);
                    /* about 1/1.25 of the default; a little lower, since the
                     * launch and the prefix reads do not scale with it */
                    CHECK(e1 < e0 / 1.2 && e1 > e0 / 1.5);
                }
            }
            fclose(out);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    /* the roofline's attention times are its builder's hot-path terms */
    {
        hs_cluster *c = NULL;
        hs_perf_cfg cfg;
        hs_perf p;
        hs_layout *l = calloc(1, sizeof *l);
        if (!l || hs_cluster_find(&c, "dgx-a100", &err)) {
            CHECK_OK(1, &err);
            free(l);
            return;
        }
        l->pp = 1;
        l->kv_bits = 16;
        l->stage[0] = (hs_stage_layout){.tp = 2, .layers = 1, .bits = 16, .gpus = {0, 1}};
        hs_perf_cfg_defaults(&cfg);
        snprintf(cfg.model, sizeof cfg.model, "roofline");
        CHECK_OK(hs_perf_build(&p, &cfg, m7, c, l, 64, 8, &err), &err);
        if (p.pp == 1) {
            const hs_perf_stage *s = &p.stage[0];
            CHECK_REL(hs_roofline_attn_us(HS_ATTN_DECODE, m7, &c->types[0], 2, 16, 8, 700, &cfg) * 1e3,
                      s->dec_fixed + s->dec_seq * 8 + s->dec_ctx * 8 * 700, 1e-12);
            CHECK_REL(hs_roofline_attn_us(HS_ATTN_PREFILL, m7, &c->types[0], 2, 16, 300, 900, &cfg) * 1e3,
                      s->pre_fixed + s->pre_self * 300 * 301 / 2 + s->pre_cross * 300 * 900 + s->pre_ctx * 900 +
                          s->pre_tok * 300,
                      1e-12);
            hs_perf_free(&p);
        }
        hs_cluster_destroy(c);
        free(l);
    }
}

/* A fit of tensor-core GPUs is an extrapolation on a GPU without them
 * (the P100), not on one with them, and not once a GPU without them is
 * among those fitted on. */
static void test_extrapolates_tc(void)
{
    hs_fit f;
    hs_gpu p100, a100, custom;
    hs_err err = {0};
    memset(&f, 0, sizeof f);
    CHECK_OK(hs_gpu_find(&p100, "p100-12g", &err), &err);
    CHECK_OK(hs_gpu_find(&a100, "a100-80g", &err), &err);
    CHECK(!hs_gpu_tensor_cores(&p100) && hs_gpu_tensor_cores(&a100));
    f.n_gpus = 2;
    snprintf(f.gpus[0], sizeof f.gpus[0], "a100-80g");
    snprintf(f.gpus[1], sizeof f.gpus[1], "no-such-gpu"); /* not found: counts as having them */
    CHECK_INT(hs_fit_extrapolates_tc(&f, &p100), 1);
    CHECK_INT(hs_fit_extrapolates_tc(&f, &a100), 0);
    snprintf(f.gpus[1], sizeof f.gpus[1], "p100-12g");
    CHECK_INT(hs_fit_extrapolates_tc(&f, &p100), 0);
    /* a GPU file without an FP32 rate is taken to have tensor cores */
    custom = p100;
    custom.flops32 = 0;
    CHECK(hs_gpu_tensor_cores(&custom));
    CHECK_INT(hs_fit_extrapolates_tc(&f, &custom), 0);
}

int main(void)
{
    hs_model m7, m70, m13;
    hs_err err = {0};
    const char *env = getenv("HS_ROOT");
    if (env && *env) setenv("HETSIM_ROOT", env, 1);
    if (hs_model_find(&m7, "llama-2-7b", &err) || hs_model_find(&m70, "llama-2-70b", &err) ||
        hs_model_find(&m13, "llama-2-13b", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_recovery(&m7, &m70, &m13);
    test_sm_form(&m7, &m70, &m13);
    test_robust(&m7);
    test_builder(&m7);
    test_compare(&m7);
    test_crossval();
    test_extrapolates_tc();
    return hs_check_result();
}
