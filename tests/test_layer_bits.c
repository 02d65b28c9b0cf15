/* test_layer_bits.c - per-layer bit-widths in the main engine (the layout's
 * layer_bits, LLM-PQ's mixed precision): latency tables (sim/perf/perf.c)
 * and KV blocks (sim/serve/deploy.c hs_layout_kv_blocks).
 *
 * Checked:
 *   - the "table" builder on the tiny-test fixture (tests/fixtures/perf/
 *     tables, copied with 4-bit GEMM rows added: 0.25 (k + 1) (1 + 0.01 T)
 *     + 0.5 us for op k): a stage of one FP16 and one 4-bit layer takes,
 *     at measured T, the embedding + the FP16 layer + the 4-bit layer,
 *     summed op by op from the CSV formulas (4-bit GEMMs, FP16 norms,
 *     adds, rope, act); a later stage has no embedding;
 *   - the roofline on llama-2-7b: a stage of 10 FP16, 4 INT8 and 6 INT4
 *     layers has dense[T] = sum of n_b x one layer at b (one layer: a
 *     uniform stage's dense / its layers), at every T; attention terms
 *     as the uniform stage's;
 *   - stages whose layer_bits all equal their bits are built bit for bit
 *     as without layer_bits (tables and KV blocks);
 *   - KV blocks follow the summed weights: floor((mem * util - (bare
 *     weights + sum_l layer_params * bytes(b_l)) - activation) / (KV per
 *     token * block)) by hand, between the uniform FP16 and INT4 stages';
 *   - an encoder-decoder stage (T5) of mixed decoder widths: dense = the
 *     layers' shares of the uniform stages';
 *   - deployments: layer_bits round-trip through JSON and the engine's
 *     replicas (hs_replicas_build) carry the same tables and blocks; wrong
 *     counts and widths are rejected;
 *   - perf.quant_kernels=lptorch: quantised layers cost what LLM-PQ's cost
 *     model gives them (test_lptorch). */
#include "check.h"
#include "fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llm/quant.h"
#include "perf/perf.h"
#include "perf/qlat.h"
#include "perf/table.h"
#include "serve/deploy.h"

static char tables_root[1024];

static void set_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) setenv("HETSIM_ROOT", env, 1);
}

static double fx16(int op, int tokens) { return (op + 1) * (1 + 0.01 * tokens); }
static double fx4(int op, int tokens) { return 0.25 * (op + 1) * (1 + 0.01 * tokens) + 0.5; }
static int is_gemm(int op)
{
    return op == HS_OP_QKV || op == HS_OP_ATTN_OUT || op == HS_OP_MLP_UP || op == HS_OP_MLP_DOWN;
}

/* A copy of the tiny-test fixture with 4-bit GEMM rows at tp 1. */
static int make_tables(char *tmp, size_t cap)
{
    char cmd[4096], path[2048];
    static const int toks[] = {1, 8, 64, 512};
    FILE *f;
    snprintf(tmp, cap, "/tmp/hs_test_layer_bits_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/a100-80g' && cp -r '%s/tests/fixtures/perf/tables/a100-80g/tiny-test' '%s/a100-80g/'",
             tmp, hs_data_root(), tmp);
    if (system(cmd) != 0) return -1;
    snprintf(path, sizeof path, "%s/a100-80g/tiny-test/dense.csv", tmp);
    if (!(f = fopen(path, "a"))) return -1;
    for (int op = 0; op < HS_OP_COUNT; op++)
        for (size_t i = 0; is_gemm(op) && i < sizeof toks / sizeof toks[0]; i++)
            fprintf(f, "%s,1,4,%d,%.10g\n", hs_op_name(op), toks[i], fx4(op, toks[i]));
    fclose(f);
    snprintf(tables_root, sizeof tables_root, "%s", tmp);
    return 0;
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* One layer at 16 or 4 bits on the fixture, at a measured T, us. */
static double fx_layer(int bits, int t)
{
    double us = 0;
    for (int op = 0; op < HS_OP_COUNT; op++) {
        if (op == HS_OP_EMB || op == HS_OP_LM_HEAD) continue;
        us += (op == HS_OP_NORM || op == HS_OP_ADD ? 2 : 1) *
              (bits == 4 && is_gemm(op) ? fx4(op, t) : fx16(op, t));
    }
    return us;
}

static void test_table_builder(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf p, pu;
    hs_err err = {0};
    char tmp[256];
    hs_layout *l = fx_layout1(1, 2);
    if (make_tables(tmp, sizeof tmp)) SKIP("cannot write a temporary table");
    CHECK_OK(hs_model_find(&m, "tiny-test", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    if (!c) { free(l); rm_rf(tmp); return; }
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "table");
    snprintf(cfg.engine, sizeof cfg.engine, "none");
    if (snprintf(cfg.tables, sizeof cfg.tables, "%s", tables_root) >= (int)sizeof cfg.tables) SKIP("path too long");
    /* one stage: layer 0 FP16, layer 1 INT4 (the stage's bits say 16) */
    l->layer_bits[0] = 16;
    l->layer_bits[1] = 4;
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 600, 8, &err), &err);
    l->layer_bits[1] = 0;
    CHECK_OK(hs_perf_build(&pu, &cfg, &m, c, l, 600, 8, &err), &err);
    if (p.pp == 1 && pu.pp == 1) {
        static const int toks[] = {1, 8, 64, 512};
        for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
            int t = toks[i];
            double want = fx16(HS_OP_EMB, t) + fx_layer(16, t) + fx_layer(4, t);
            CHECK_NEAR(p.stage[0].dense[t], want * 1e3, 1e-6);
            CHECK_NEAR(pu.stage[0].dense[t], (fx16(HS_OP_EMB, t) + 2 * fx_layer(16, t)) * 1e3, 1e-6);
        }
        /* attention and the head do not depend on the weights' width */
        CHECK_NEAR(p.stage[0].dec_ctx, pu.stage[0].dec_ctx, 0);
        CHECK_NEAR(p.stage[0].pre_self, pu.stage[0].pre_self, 0);
        CHECK_NEAR(p.stage[0].head[8], pu.stage[0].head[8], 0);
    }
    hs_perf_free(&p);
    hs_perf_free(&pu);
    /* two stages of one layer: stage 1's only layer at 4 bits, no embedding */
    l->pp = 2;
    l->stage[0].layers = l->stage[1].layers = 1;
    l->stage[1] = l->stage[0];
    l->stage[1].gpus[0] = 1;
    l->layer_bits[0] = 0;
    l->layer_bits[1] = 4;
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 600, 8, &err), &err);
    if (p.pp == 2) {
        CHECK_NEAR(p.stage[0].dense[64], (fx16(HS_OP_EMB, 64) + fx_layer(16, 64)) * 1e3, 1e-6);
        CHECK_NEAR(p.stage[1].dense[64], fx_layer(4, 64) * 1e3, 1e-6);
    }
    hs_perf_free(&p);
    /* a width the table lacks is named */
    l->layer_bits[1] = 8;
    CHECK_INT(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "bits 8") != NULL);
    free(l);
    hs_cluster_destroy(c);
    rm_rf(tmp);
}

static void roof_cfg(hs_perf_cfg *cfg)
{
    hs_perf_cfg_defaults(cfg);
    snprintf(cfg->model, sizeof cfg->model, "roofline");
}

/* Two stages of 20 and 12 llama-2-7b layers on GPUs 0 and 1 at `bits`. */
static hs_layout *pipe2(int bits)
{
    hs_layout *l = calloc(1, sizeof *l);
    if (!l) exit(2);
    l->pp = 2;
    l->kv_bits = 16;
    l->stage[0].tp = l->stage[1].tp = 1;
    l->stage[0].layers = 20;
    l->stage[1].layers = 12;
    l->stage[0].bits = l->stage[1].bits = bits;
    l->stage[1].gpus[0] = 1;
    return l;
}

static int same_tables(const hs_perf *a, const hs_perf *b)
{
    if (a->pp != b->pp) return 0;
    for (int s = 0; s < a->pp; s++) {
        const hs_perf_stage *x = &a->stage[s], *y = &b->stage[s];
        if (memcmp(x->dense, y->dense, sizeof *x->dense * ((size_t)x->max_tokens + 1)) ||
            memcmp(x->head, y->head, sizeof *x->head * ((size_t)x->max_seqs + 1)) ||
            x->dec_fixed != y->dec_fixed || x->dec_seq != y->dec_seq || x->dec_ctx != y->dec_ctx ||
            x->pre_fixed != y->pre_fixed || x->pre_self != y->pre_self ||
            x->pre_cross != y->pre_cross || x->pre_ctx != y->pre_ctx || x->pre_tok != y->pre_tok ||
            x->send_alpha != y->send_alpha || x->send_token != y->send_token)
            return 0;
    }
    return 1;
}

static void test_roofline(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf pm, pb[3], pz;
    hs_err err = {0};
    static const int bits[3] = {16, 8, 4}, n1[3] = {6, 4, 2};
    hs_layout *l = pipe2(16), *lu[3];
    const int MT = 2048;
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    if (!c) { free(l); return; }
    roof_cfg(&cfg);
    /* stage 0: 10 x 16, 6 x 8, 4 x 4 interleaved; stage 1: 6, 4, 2 */
    for (int i = 0; i < 20; i++) l->layer_bits[i] = (unsigned char)(i % 2 == 0 ? 16 : i % 4 == 1 && i < 16 ? 8 : 4);
    {
        int cnt[3] = {0};
        for (int i = 0; i < 20; i++) cnt[l->layer_bits[i] == 16 ? 0 : l->layer_bits[i] == 8 ? 1 : 2]++;
        CHECK_INT(cnt[0], 10);
        CHECK_INT(cnt[1], 4);
        CHECK_INT(cnt[2], 6);
    }
    for (int i = 0, k = 0; k < 3; k++)
        for (int j = 0; j < n1[k]; j++) l->layer_bits[20 + i++] = (unsigned char)bits[k];
    CHECK_OK(hs_perf_build(&pm, &cfg, &m, c, l, MT, 16, &err), &err);
    for (int k = 0; k < 3; k++) {
        lu[k] = pipe2(bits[k]);
        CHECK_OK(hs_perf_build(&pb[k], &cfg, &m, c, lu[k], MT, 16, &err), &err);
    }
    {
        /* the embedding alone: a first stage of no layer */
        hs_layout *le = pipe2(16);
        le->stage[0].layers = 0;
        CHECK_OK(hs_perf_build(&pz, &cfg, &m, c, le, MT, 16, &err), &err);
        free(le);
    }
    if (pm.pp == 2 && pb[0].pp == 2 && pb[1].pp == 2 && pb[2].pp == 2 && pz.pp == 2) {
        int bad0 = 0, bad1 = 0;
        for (int t = 1; t <= MT; t++) {
            /* one layer at b: stage 1 of the uniform pipeline over its 12 layers */
            double one[3], w0, w1;
            for (int k = 0; k < 3; k++) one[k] = pb[k].stage[1].dense[t] / 12;
            w0 = pz.stage[0].dense[t] + 10 * one[0] + 4 * one[1] + 6 * one[2];
            w1 = 6 * one[0] + 4 * one[1] + 2 * one[2];
            bad0 += fabs(pm.stage[0].dense[t] - w0) > 1e-9 * w0;
            bad1 += fabs(pm.stage[1].dense[t] - w1) > 1e-9 * w1;
        }
        CHECK_INT(bad0, 0);
        CHECK_INT(bad1, 0);
        /* by hand at T = 1 (memory bound): every weight byte read once */
        {
            double mem = 2039e9 * 0.8, mat = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008;
            double w = 6 * 2.0 + 4 * (1 + 4.0 / 128) + 2 * (0.5 + 4.0 / 128);
            CHECK(pm.stage[1].dense[1] >= mat * w / mem * 1e9);
            CHECK_REL(pm.stage[1].dense[1], (mat * w / mem + 12 * 10 * 4e-6) * 1e9, 0.10);
        }
        /* widths between the uniform stages' */
        CHECK(pm.stage[1].dense[1] < pb[0].stage[1].dense[1]);
        CHECK(pm.stage[1].dense[1] > pb[2].stage[1].dense[1]);
        /* attention, head and sends as any stage of those layers */
        for (int s = 0; s < 2; s++) {
            CHECK_NEAR(pm.stage[s].dec_ctx, pb[0].stage[s].dec_ctx, 0);
            CHECK_NEAR(pm.stage[s].pre_self, pb[0].stage[s].pre_self, 0);
            CHECK_NEAR(pm.stage[s].send_token, pb[0].stage[s].send_token, 0);
            CHECK_NEAR(pm.stage[s].head[16], pb[0].stage[s].head[16], 0);
        }
        CHECK_NEAR(pm.step_overhead, pb[0].step_overhead, 0);
    }
    hs_perf_free(&pm);
    hs_perf_free(&pz);
    /* uniform layer_bits (all the stage's width): bit for bit as without */
    for (int k = 0; k < 3; k++) {
        hs_perf pe;
        for (int i = 0; i < 32; i++) lu[k]->layer_bits[i] = (unsigned char)bits[k];
        CHECK_OK(hs_perf_build(&pe, &cfg, &m, c, lu[k], MT, 16, &err), &err);
        CHECK(same_tables(&pe, &pb[k]));
        hs_perf_free(&pe);
        hs_perf_free(&pb[k]);
        free(lu[k]);
    }
    /* a whole stage at another width than its bits: as a stage of that width */
    {
        hs_layout *l8 = pipe2(16), *u8 = pipe2(8);
        hs_perf a, b;
        for (int i = 20; i < 32; i++) l8->layer_bits[i] = 8;
        u8->stage[0].bits = 16;
        CHECK_OK(hs_perf_build(&a, &cfg, &m, c, l8, 256, 4, &err), &err);
        CHECK_OK(hs_perf_build(&b, &cfg, &m, c, u8, 256, 4, &err), &err);
        if (a.pp == 2 && b.pp == 2) {
            CHECK_NEAR(a.stage[0].dense[100], b.stage[0].dense[100], 0);
            CHECK_REL(a.stage[1].dense[100], b.stage[1].dense[100], 1e-12);
        }
        hs_perf_free(&a);
        hs_perf_free(&b);
        free(l8);
        free(u8);
    }
    free(l);
    hs_cluster_destroy(c);
}

/* perf.quant_kernels=lptorch: a stage's 8/4/3-bit layers cost what LLM-PQ's
 * cost model (perf/qlat.h, on the same latency model's calibrated FP16
 * layer) gives them, layer by layer, on a T4 (measured table, INT8 tensor
 * cores) and a V100 (transferred, INT8 cast to FP16); its FP16 layers and
 * attention are the builder's; a quantised stage over TP 2, an
 * encoder-decoder model's quantised stage and an unknown value are errors
 * naming the key. */
static void test_lptorch(void)
{
    hs_model m, t5;
    hs_cluster *c = NULL, *dgx = NULL;
    hs_perf_cfg cfg, base;
    hs_perf pl, pm, pz;
    hs_qlat_cal *cal = NULL;
    hs_err err = {0};
    hs_layout *l = pipe2(16), *lz = pipe2(16);
    const int MT = 1024;
    CHECK_OK(hs_model_find(&m, "opt-30b", &err), &err);
    CHECK_OK(hs_model_find(&t5, "t5-11b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "llmpq-c3", &err), &err);   /* 3 T4 (0-2), a V100 (3) */
    CHECK_OK(hs_cluster_find(&dgx, "dgx-a100", &err), &err);
    if (!c || !dgx) goto out;
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.engine, sizeof cfg.engine, "none");
    base = cfg;
    snprintf(cfg.quant_kernels, sizeof cfg.quant_kernels, "lptorch");
    /* stage 0 (T4): 8 FP16, 8 INT8, 4 INT4 layers; stage 1 (V100): 16 INT8, 12 INT3 */
    l->stage[0].layers = 20;
    l->stage[1].layers = 28;
    l->stage[1].gpus[0] = 3;
    for (int i = 0; i < 48; i++)
        l->layer_bits[i] = (unsigned char)(i < 8 ? 16 : i < 16 ? 8 : i < 20 ? 4 : i < 36 ? 8 : 3);
    *lz = *l;
    lz->stage[0].layers = 0;   /* the embedding alone */
    memset(lz->layer_bits, 0, sizeof lz->layer_bits);
    CHECK_OK(hs_perf_build(&pl, &cfg, &m, c, l, MT, 8, &err), &err);
    CHECK_OK(hs_perf_build(&pm, &base, &m, c, l, MT, 8, &err), &err);
    CHECK_OK(hs_perf_build(&pz, &cfg, &m, c, lz, MT, 8, &err), &err);
    CHECK_OK(hs_qlat_cal_build(&cal, &m, c, &cfg, MT, 8, &err), &err);
    CHECK(cal != NULL);   /* perf.model auto: the calibrated layer, else nothing below is checked */
    if (pl.pp == 2 && pm.pp == 2 && pz.pp == 2 && cal) {
        const hs_gpu *t4 = hs_cluster_gpu(c, 0), *v100 = hs_cluster_gpu(c, 3);
        int bad = 0;
        for (int t = 1; t <= MT; t += 13) {
            double w0 = pz.stage[0].dense[t] + 8 * hs_qlat_dense_s(&m, t4, 16, t, &cfg, cal) * 1e9 +
                        8 * hs_qlat_dense_s(&m, t4, 8, t, &cfg, cal) * 1e9 +
                        4 * hs_qlat_dense_s(&m, t4, 4, t, &cfg, cal) * 1e9;
            double w1 = 16 * hs_qlat_dense_s(&m, v100, 8, t, &cfg, cal) * 1e9 +
                        12 * hs_qlat_dense_s(&m, v100, 3, t, &cfg, cal) * 1e9;
            bad += fabs(pl.stage[0].dense[t] - w0) > 1e-6 * w0;
            bad += fabs(pl.stage[1].dense[t] - w1) > 1e-6 * w1;
        }
        CHECK_INT(bad, 0);
        /* LPTorch's INT8 pays its calls, GPTQ's prefill its rows: both far
         * slower than the builder's weight-only kernels */
        CHECK(pl.stage[1].dense[1] > 1.5 * pm.stage[1].dense[1]);
        CHECK(pl.stage[1].dense[512] > 3 * pm.stage[1].dense[512]);
        /* attention, head and sends are the builder's */
        for (int s = 0; s < 2; s++) {
            CHECK_NEAR(pl.stage[s].dec_ctx, pm.stage[s].dec_ctx, 0);
            CHECK_NEAR(pl.stage[s].pre_self, pm.stage[s].pre_self, 0);
            CHECK_NEAR(pl.stage[s].send_token, pm.stage[s].send_token, 0);
            CHECK_NEAR(pl.stage[s].head[8], pm.stage[s].head[8], 0);
        }
    }
    hs_perf_free(&pl);
    hs_perf_free(&pm);
    hs_perf_free(&pz);
    hs_qlat_cal_free(cal);
    {
        /* an FP16 layout is untouched */
        hs_layout *f = pipe2(16);
        hs_perf a, b;
        f->stage[1].gpus[0] = 3;
        CHECK_OK(hs_perf_build(&a, &cfg, &m, c, f, 256, 4, &err), &err);
        CHECK_OK(hs_perf_build(&b, &base, &m, c, f, 256, 4, &err), &err);
        CHECK(same_tables(&a, &b));
        hs_perf_free(&a);
        hs_perf_free(&b);
        /* TP 2 on a quantised stage */
        f->stage[1].bits = 8;
        f->stage[1].tp = 2;
        f->stage[1].gpus[1] = 2;
        CHECK(hs_perf_build(&a, &cfg, &m, c, f, 256, 4, &err) == HS_EINVAL &&
              strstr(err.msg, "perf.quant_kernels") && strstr(err.msg, "TP 2"));
        free(f);
    }
    {
        /* an encoder-decoder model, quantised */
        hs_layout *e = pipe2(8);
        hs_perf a;
        e->stage[0].layers = e->stage[1].layers = t5.layers / 2;
        e->stage[0].enc_layers = e->stage[1].enc_layers = t5.encoder_layers / 2;
        e->enc_set = 1;
        CHECK(hs_perf_build(&a, &cfg, &t5, dgx, e, 256, 4, &err) == HS_EINVAL &&
              strstr(err.msg, "perf.quant_kernels") && strstr(err.msg, "encoder-decoder"));
        free(e);
    }
    {
        /* LLM-PQ's kernels need only FP16 rows: the tiny-test fixture's
         * table (FP16 only) times an INT8 layer under lptorch, not under
         * the table's own kernels */
        hs_model tm;
        hs_perf_cfg tc;
        hs_layout *t8 = fx_layout1(1, 2);
        hs_perf a;
        CHECK_OK(hs_model_find(&tm, "tiny-test", &err), &err);
        hs_perf_cfg_defaults(&tc);
        snprintf(tc.model, sizeof tc.model, "table");
        snprintf(tc.engine, sizeof tc.engine, "none");
        snprintf(tc.tables, sizeof tc.tables, "%s/tests/fixtures/perf/tables", hs_data_root());
        t8->layer_bits[1] = 8;
        CHECK(hs_perf_build(&a, &tc, &tm, dgx, t8, 64, 4, &err) != 0 && strstr(err.msg, "bits 8"));
        snprintf(tc.quant_kernels, sizeof tc.quant_kernels, "lptorch");
        CHECK_OK(hs_perf_build(&a, &tc, &tm, dgx, t8, 64, 4, &err), &err);
        if (a.pp == 1) CHECK(strstr(a.model_name, "+lptorch") != NULL);
        hs_perf_free(&a);
        free(t8);
    }
    {
        hs_perf a;
        snprintf(cfg.quant_kernels, sizeof cfg.quant_kernels, "awq");
        CHECK(hs_perf_build(&a, &cfg, &m, c, l, 256, 4, &err) == HS_EINVAL &&
              strstr(err.msg, "perf.quant_kernels") && strstr(err.msg, "awq"));
    }
out:
    free(l);
    free(lz);
    hs_cluster_destroy(c);
    hs_cluster_destroy(dgx);
}

static void test_kv_blocks(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_engine_cfg ec;
    hs_err err = {0};
    hs_layout *l = pipe2(16), *u16 = pipe2(16), *u4 = pipe2(4);
    const int MT = 4096;
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    if (!c) { free(l); free(u16); free(u4); return; }
    hs_engine_cfg_defaults(&ec);
    /* stage 0: 8 x 16, 12 x 4; stage 1: 12 x 8 */
    for (int i = 0; i < 20; i++) l->layer_bits[i] = (unsigned char)(i < 8 ? 16 : 4);
    for (int i = 20; i < 32; i++) l->layer_bits[i] = 8;
    {
        int64_t got = hs_layout_kv_blocks(&m, c, l, &ec, MT, &err);
        int64_t b16 = hs_layout_kv_blocks(&m, c, u16, &ec, MT, &err);
        int64_t b4 = hs_layout_kv_blocks(&m, c, u4, &ec, MT, &err);
        int64_t want = INT64_MAX;
        for (int s = 0; s < 2; s++) {
            hs_stage_mem mem;
            const hs_gpu *g = hs_cluster_gpu(c, l->stage[s].gpus[0]);
            double lp = hs_model_layer_params(&m), w, avail, b;
            hs_model_stage_mem(&m, l->stage[s].layers, s == 0, s == 1, 1, 16, 16, MT, ec.max_num_seqs, &mem);
            /* the FP16 stage's weights less its layers, plus each at its width */
            w = mem.weights - l->stage[s].layers * lp * 2.0 +
                (s == 0 ? 8 * lp * 2.0 + 12 * lp * (0.5 + 4.0 / 128) : 12 * lp * (1 + 4.0 / 128));
            avail = g->mem_bytes * ec.gpu_mem_util - w - mem.activation;
            b = floor(avail / (mem.kv_per_token * ec.block_size));
            if ((int64_t)b < want) want = (int64_t)b;
        }
        CHECK(got > 0);
        CHECK_INT(got, want);
        CHECK(got > b16 && got < b4);
        /* the per-stage sum itself, by the helper the engine uses */
        {
            int n[HS_NBITS] = {0};
            CHECK_INT(hs_layout_stage_bits(l, 0, n), 1);
            CHECK_INT(n[0], 8);
            CHECK_INT(n[1], 0);
            CHECK_INT(n[2], 12);
            CHECK_INT(n[3], 0);
            CHECK_REL(hs_qmem_layers_engine(&m, n, 1),
                      hs_model_layer_params(&m) * (8 * 2.0 + 12 * (0.5 + 4.0 / 128)), 1e-15);
            CHECK_INT(hs_layout_stage_bits(l, 1, n), 1);
            CHECK_INT(n[1], 12);
        }
    }
    /* uniform layer_bits: identical blocks */
    {
        int64_t b16 = hs_layout_kv_blocks(&m, c, u16, &ec, MT, &err);
        for (int i = 0; i < 32; i++) u16->layer_bits[i] = 16;
        CHECK_INT(hs_layout_kv_blocks(&m, c, u16, &ec, MT, &err), b16);
        CHECK_INT(hs_layout_stage_bits(u16, 0, (int[HS_NBITS]){0}), 0);
    }
    /* a stage that no longer fits is named by the mixed sum, not its bits */
    {
        hs_model big;
        hs_layout *one = fx_layout1(1, 80);
        CHECK_OK(hs_model_find(&big, "llama-2-70b", &err), &err);
        /* 80 layers of llama-2-70b: 4-bit (~36 GB) fits an 80 GB A100, FP16 does not */
        one->stage[0].bits = 4;
        CHECK(hs_layout_kv_blocks(&big, c, one, &ec, 2048, &err) > 0);
        for (int i = 0; i < 80; i++) one->layer_bits[i] = i < 40 ? 16 : 4;
        CHECK_INT(hs_layout_kv_blocks(&big, c, one, &ec, 2048, &err), HS_ENOFIT);
        free(one);
    }
    free(l);
    free(u16);
    free(u4);
    hs_cluster_destroy(c);
}

static void test_encdec(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf pm, p16, p4;
    hs_err err = {0};
    hs_layout *l;
    CHECK_OK(hs_model_find(&m, "t5-11b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    /* t5-11b must stay encoder-decoder, or this test checks nothing */
    CHECK(m.encoder_layers > 0);
    if (!c || !m.encoder_layers) { hs_cluster_destroy(c); return; }
    roof_cfg(&cfg);
    l = calloc(1, sizeof *l);
    if (!l) exit(2);
    l->pp = 2;
    l->kv_bits = 16;
    l->enc_set = 1;
    l->stage[0].tp = l->stage[1].tp = 1;
    l->stage[1].gpus[0] = 1;
    l->stage[0].enc_layers = m.encoder_layers;
    l->stage[0].layers = 0;
    l->stage[1].layers = m.layers;
    l->stage[0].bits = l->stage[1].bits = 16;
    CHECK_OK(hs_perf_build(&p16, &cfg, &m, c, l, 512, 4, &err), &err);
    l->stage[1].bits = 4;
    CHECK_OK(hs_perf_build(&p4, &cfg, &m, c, l, 512, 4, &err), &err);
    l->stage[1].bits = 16;
    for (int i = 0; i < m.layers; i++) l->layer_bits[i] = (unsigned char)(i < m.layers / 4 ? 4 : 16);
    CHECK_OK(hs_perf_build(&pm, &cfg, &m, c, l, 512, 4, &err), &err);
    if (pm.pp == 2 && p16.pp == 2 && p4.pp == 2) {
        double q = (double)(m.layers / 4) / m.layers;
        for (int t = 1; t <= 512; t *= 2) {
            CHECK_REL(pm.stage[1].dense[t], (1 - q) * p16.stage[1].dense[t] + q * p4.stage[1].dense[t], 1e-9);
            /* the cross-attention K/V projection of the prompt too */
            CHECK_REL(pm.stage[1].enc[t], (1 - q) * p16.stage[1].enc[t] + q * p4.stage[1].enc[t], 1e-9);
        }
        CHECK_NEAR(pm.stage[0].enc[100], p16.stage[0].enc[100], 0);
        CHECK_NEAR(pm.stage[1].dec_ctx, p16.stage[1].dec_ctx, 0);
    }
    hs_perf_free(&pm);
    hs_perf_free(&p16);
    hs_perf_free(&p4);
    free(l);
    hs_cluster_destroy(c);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(2); }
    fputs(text, f);
    fclose(f);
}

static void test_deploy(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d, back;
    hs_deploy_replica r;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_err err = {0};
    char path[] = "/tmp/hs_test_layer_bits_XXXXXX";
    int fd;
    hs_layout *l = pipe2(16);
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    fd = c ? mkstemp(path) : -1;
    CHECK(fd >= 0);   /* a skipped deployment round trip is a failure, not a pass */
    if (fd < 0) { free(l); hs_cluster_destroy(c); return; }
    close(fd);
    for (int i = 0; i < 32; i++) l->layer_bits[i] = (unsigned char)(i % 3 == 0 ? 3 : i % 3 == 1 ? 8 : 16);
    memset(&d, 0, sizeof d);
    memset(&r, 0, sizeof r);
    snprintf(d.model, sizeof d.model, "llama-2-7b");
    snprintf(d.cluster, sizeof d.cluster, "dgx-a100");
    snprintf(r.role, sizeof r.role, "colocated");
    r.weight = 1;
    r.layout = *l;
    CHECK_OK(hs_deploy_add(&d, &r, &err), &err);
    CHECK_OK(hs_deploy_check(&d, &m, c, "d", &err), &err);
    CHECK_OK(hs_deploy_write(&d, path, &err), &err);
    CHECK_OK(hs_deploy_read(&back, path, &err), &err);
    if (back.n == 1) {
        CHECK(!memcmp(back.r[0].layout.layer_bits, l->layer_bits, sizeof l->layer_bits));
        /* the engine's replicas: tables and blocks as built directly */
        hs_replica *reps = NULL;
        hs_perf direct;
        hs_engine_cfg_defaults(&ec);
        roof_cfg(&pc);
        CHECK_OK(hs_replicas_build(&reps, &back, &m, c, &ec, &pc, 1024, 2048, &err), &err);
        CHECK_OK(hs_perf_build(&direct, &pc, &m, c, l, 1024, ec.max_num_seqs, &err), &err);
        if (reps) {
            CHECK(same_tables(&reps[0].perf, &direct));
            CHECK_INT(reps[0].kv_blocks, hs_layout_kv_blocks(&m, c, l, &ec, 1024, &err));
            hs_replicas_free(reps, 1);
        }
        hs_perf_free(&direct);
    }
    hs_deploy_free(&back);
    /* without layer_bits nothing is written */
    {
        char *txt;
        memset(d.r[0].layout.layer_bits, 0, sizeof d.r[0].layout.layer_bits);
        txt = hs_deploy_to_json(&d);
        CHECK(txt && !strstr(txt, "layer_bits"));
        free(txt);
    }
    /* bad input */
    write_file(path, "{\"model\": \"llama-2-7b\", \"cluster\": \"dgx-a100\", \"replicas\": [{\"stages\": "
                     "[{\"tp\": 1, \"layers\": 2, \"bits\": 16, \"gpus\": [0], \"layer_bits\": [16]}]}]}");
    CHECK_INT(hs_deploy_read(&back, path, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "stages[0]: layer_bits: expected 2 bit-widths") != NULL);
    write_file(path, "{\"model\": \"llama-2-7b\", \"cluster\": \"dgx-a100\", \"replicas\": [{\"stages\": "
                     "[{\"tp\": 1, \"layers\": 2, \"bits\": 16, \"gpus\": [0], \"layer_bits\": [16, 5]}]}]}");
    CHECK_INT(hs_deploy_read(&back, path, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "layer_bits[1]: not 16, 8, 4 or 3") != NULL);
    d.r[0].layout.layer_bits[3] = 7;
    CHECK_INT(hs_deploy_check(&d, &m, c, "d", &err), HS_ERANGE);
    CHECK(strstr(err.msg, "layer 3: 7 bits") != NULL);
    hs_deploy_free(&d);
    unlink(path);
    free(l);
    hs_cluster_destroy(c);
}

/* A width read from a file: the set's four, nothing else, and no cast of
 * an out-of-range double (UBSan would flag 1e300). */
static void test_bits_of(void)
{
    static const double bad[] = {0, 2, 5, 8.5, 32, -8, 1e300, -1e300, INFINITY};
    CHECK_INT(hs_bits_of(16), 16);
    CHECK_INT(hs_bits_of(8), 8);
    CHECK_INT(hs_bits_of(4), 4);
    CHECK_INT(hs_bits_of(3), 3);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_INT(hs_bits_of(bad[i]), -1);
    CHECK_INT(hs_bits_of(NAN), -1);
}

int main(void)
{
    set_root();
    test_bits_of();
    test_table_builder();
    test_roofline();
    test_lptorch();
    test_kv_blocks();
    test_encdec();
    test_deploy();
    return hs_check_result();
}
