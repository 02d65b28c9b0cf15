/* test_perf.c - the roofline latency model (sim/perf/perf.c, perf_base.c, roofline.c).
 *
 * Layouts are built by hand (pp 1 or 2, tp 1..4) over cluster dgx-a100 with
 * llama-2-7b and the default efficiencies (gemm 0.7, attn 0.5, mem 0.8,
 * link 0.8, launch 4 us).  Checked against hand calculations:
 *   - dense[T] is non-decreasing in T;
 *   - T = 1 is memory bound: weight bytes / (bw * mem_eff) + 10 kernel
 *     launches per layer, within 10%;
 *   - large T is compute bound: 2 * T * layer_params / (peak * gemm_eff) per
 *     layer, from above and within 10%;
 *   - TP 2 roughly halves the dense time once its all-reduces are removed;
 *   - dec_ctx = L * kv_bytes_token_layer / (bw * mem_eff) in ns, exactly;
 *   - hs_perf_stage_ns() sums the terms listed in perf.h;
 *   - stage 0 of a pipeline carries the embedding, the last stage the head,
 *     and sends cost lat + h * 2 / (link_bw * link_eff) per token;
 *   - an H100 cluster is faster than an A100 one for the same shape; a mixed
 *     stage runs at its slowest GPU;
 *   - hs_allreduce_s() is 0 for one GPU and 2(n-1) lat + 2(n-1)/n bytes /
 *     (bw * eff) over the slowest link otherwise;
 *   - an unknown builder is an error; hs_perf_free() of NULL or a zeroed
 *     struct is safe;
 *   - hs_perf_scale(f) makes every pass f times as long (roofline, measured
 *     tables, an eager engine's floor, encoder terms). */
#include "check.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"

#define L7 32                    /* llama-2-7b layers */
#define H7 4096.0                /* hidden */
/* llama-2-7b: matrices of one layer (QKV, O, gate+up, down) and norms */
#define MAT7 (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008)
#define LAYER7 (MAT7 + 2.0 * 4096)
#define A100_FLOPS 312e12
#define A100_BW 2039e9
#define NVL_A100 300e9

static void set_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) setenv("HETSIM_ROOT", env, 1);
}

/* pp stages of `layers` each, tp GPUs per stage numbered from gpu0 on. */
static hs_layout *make_layout(int pp, int tp, int layers, int bits, int gpu0)
{
    hs_layout *l = calloc(1, sizeof *l);
    if (!l) exit(2);
    l->pp = pp;
    l->kv_bits = 16;
    for (int s = 0; s < pp; s++) {
        l->stage[s].tp = tp;
        l->stage[s].layers = layers;
        l->stage[s].bits = bits;
        for (int i = 0; i < tp; i++) l->stage[s].gpus[i] = gpu0 + s * tp + i;
    }
    return l;
}

static int count_decreasing(const hs_perf_stage *st)
{
    int bad = 0;
    for (int t = 1; t <= st->max_tokens; t++)
        if (st->dense[t] < st->dense[t - 1]) bad++;
    return bad;
}

/* The roofline builder alone, with the flat host cost these tests were
 * written for (no engine profile, no measured table). */
static void roof_cfg(hs_perf_cfg *cfg)
{
    hs_perf_cfg_defaults(cfg);
    snprintf(cfg->model, sizeof cfg->model, "roofline");
    snprintf(cfg->engine, sizeof cfg->engine, "none");
    cfg->step_overhead_us = 300;
}

static void test_cfg(void)
{
    hs_perf_cfg cfg;
    hs_perf_cfg_defaults(&cfg);
    CHECK_STR(cfg.model, "auto");
    CHECK_NEAR(cfg.gemm_eff, 0.7, 0);
    CHECK_NEAR(cfg.attn_eff, 0.459, 0);
    CHECK_NEAR(cfg.attn_knee, 8.40e4, 0);
    CHECK_NEAR(cfg.attn_query_keys, 650, 0);
    CHECK_NEAR(cfg.mem_eff, 0.8, 0);
    CHECK_NEAR(cfg.link_eff, 0.8, 0);
    CHECK_NEAR(cfg.launch_us, 4, 0);
    CHECK_NEAR(cfg.step_overhead_us, 0, 0);
    CHECK_STR(cfg.engine, "vllm");
    CHECK(hs_perf_find("roofline") != NULL);
    CHECK(hs_perf_find("roofline") == hs_perf_builders[0]);
    CHECK(hs_perf_find("no-such-model") == NULL);
    {
        hs_err err = {0};
        CHECK_INT(hs_conf_set(&cfg, hs_perf_cfg_fields, "gemm_eff", "0", "test", &err), HS_ERANGE);
        CHECK_OK(hs_conf_set(&cfg, hs_perf_cfg_fields, "gemm_eff", "0.6", "test", &err), &err);
        CHECK_NEAR(cfg.gemm_eff, 0.6, 0);
    }
    {
        /* a JSON section with one bad member changes nothing, even the
         * members before it */
        static const char *const bad[] = {
            "{\"gemm_eff\": 0.5, \"engine\": \"none\", \"mem_eff\": 7}",   /* out of range */
            "{\"gemm_eff\": 0.5, \"engine\": \"none\", \"bogus\": 1}",     /* unknown key */
            "{\"gemm_eff\": 0.5, \"engine\": \"none\", \"launch_us\": \"x\"}", /* wrong type */
        };
        static const int code[] = {HS_ERANGE, HS_EPARSE, HS_EPARSE};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            hs_err err = {0};
            hs_perf_cfg before = cfg;
            cJSON *j = cJSON_Parse(bad[i]);
            CHECK(j != NULL);
            if (!j) continue;
            CHECK_INT(hs_conf_fill(&cfg, hs_perf_cfg_fields, j, "test.json", &err), code[i]);
            CHECK(strstr(err.msg, "test.json: ") == err.msg);
            CHECK(memcmp(&before, &cfg, sizeof cfg) == 0);
            cJSON_Delete(j);
        }
        {
            hs_err err = {0};
            cJSON *j = cJSON_Parse("{\"gemm_eff\": 0.5, \"engine\": \"none\"}");
            CHECK_OK(hs_conf_fill(&cfg, hs_perf_cfg_fields, j, "test.json", &err), &err);
            CHECK_NEAR(cfg.gemm_eff, 0.5, 0);
            CHECK_STR(cfg.engine, "none");
            cJSON_Delete(j);
        }
    }
}

static void test_allreduce(const hs_cluster *dgx, const hs_cluster *dgx2)
{
    int g4[4] = {0, 1, 2, 3}, x2[2] = {0, 8}, x3[3] = {0, 1, 8};
    double bytes = 1e8;
    CHECK_NEAR(hs_allreduce_s(dgx, g4, 1, bytes, 0.8), 0, 0);
    CHECK_NEAR(hs_allreduce_s(dgx, g4, 0, bytes, 0.8), 0, 0);
    CHECK_REL(hs_allreduce_s(dgx, g4, 4, bytes, 0.8),
              2.0 * 3 * 3e-6 + 2.0 * 3 / 4 * bytes / (NVL_A100 * 0.8), 1e-9);
    CHECK_REL(hs_allreduce_s(dgx, g4, 2, bytes, 0.5),
              2.0 * 1 * 3e-6 + 2.0 * 1 / 2 * bytes / (NVL_A100 * 0.5), 1e-9);
    /* across nodes: the slowest link (25 GB/s IB) and largest latency (10 us) */
    CHECK_REL(hs_allreduce_s(dgx2, x2, 2, bytes, 0.8),
              2.0 * 10e-6 + bytes / (25e9 * 0.8), 1e-9);
    CHECK_REL(hs_allreduce_s(dgx2, x3, 3, bytes, 0.8),
              2.0 * 2 * 10e-6 + 2.0 * 2 / 3 * bytes / (25e9 * 0.8), 1e-9);
    CHECK_REL(hs_allreduce_s(dgx, g4, 4, 0, 0.8), 2.0 * 3 * 3e-6, 1e-9);
}

static void test_errors_and_free(const hs_model *m, const hs_cluster *c)
{
    hs_perf p, z;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l = make_layout(1, 1, L7, 16, 0);
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "no-such-model");
    memset(&p, 0xAB, sizeof p); /* garbage in: must come back zeroed */
    CHECK_INT(hs_perf_build(&p, &cfg, m, c, l, 16, 4, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "no-such-model") != NULL);
    CHECK_INT(p.pp, 0);
    CHECK(p.stage[0].dense == NULL);
    hs_perf_free(&p);
    hs_perf_free(NULL);
    memset(&z, 0, sizeof z);
    hs_perf_free(&z);
    CHECK_INT(z.pp, 0);
    /* a real build freed twice is safe (free resets pp and pointers) */
    hs_perf_cfg_defaults(&cfg);
    CHECK_OK(hs_perf_build(&p, &cfg, m, c, l, 16, 4, &err), &err);
    CHECK_INT(p.pp, 1);
    hs_perf_free(&p);
    CHECK_INT(p.pp, 0);
    CHECK(p.stage[0].dense == NULL && p.stage[0].head == NULL);
    hs_perf_free(&p);
    free(l);
}

/* One stage, TP 1, whole llama-2-7b on one A100. */
static void test_single_a100(const hs_model *m, const hs_cluster *c)
{
    hs_perf p;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l = make_layout(1, 1, L7, 16, 0);
    const int MT = 4096, MS = 64;
    roof_cfg(&cfg);
    CHECK_OK(hs_perf_build(&p, &cfg, m, c, l, MT, MS, &err), &err);
    if (p.pp != 1) { free(l); return; }
    {
        const hs_perf_stage *st = &p.stage[0];
        double mem = A100_BW * 0.8, flops = A100_FLOPS * 0.7;
        double t1_weights = L7 * MAT7 * 2.0 / mem;         /* s */
        double t1_hand = t1_weights + L7 * 10 * 4e-6;      /* 4 GEMMs, 2 norms, act, 2 adds, rope */
        double tT_hand = L7 * 2.0 * MT * LAYER7 / flops;   /* s */
        double kvb = 2.0 * 32 * 128 * 2;                   /* 16384 bytes */
        double q = 32.0 * 128;
        CHECK_STR(p.model_name, "roofline");
        CHECK_INT(p.pp, 1);
        CHECK_NEAR(p.step_overhead, 300e3, 0);
        CHECK_INT(st->max_tokens, MT);
        CHECK_INT(st->max_seqs, MS);
        CHECK_NEAR(st->dense[0], 0, 0);
        CHECK_NEAR(st->head[0], 0, 0);
        CHECK_INT(count_decreasing(st), 0);
        CHECK(st->dense[MT] > st->dense[1]);

        /* T = 1: memory bound, every weight byte read once */
        CHECK(st->dense[1] >= t1_weights * 1e9);
        CHECK_REL(st->dense[1], t1_hand * 1e9, 0.10);
        /* large T: compute bound, from above */
        CHECK(st->dense[MT] >= tT_hand * 1e9);
        CHECK_REL(st->dense[MT], tT_hand * 1e9, 0.10);
        /* compute grows linearly once compute bound */
        CHECK_REL(st->dense[MT] / st->dense[MT / 2], 2.0, 0.02);

        /* LM head at one sample: reading vocab x hidden FP16 + 2 launches */
        CHECK_REL(st->head[1], (32000.0 * H7 * 2 / mem + 2 * 4e-6) * 1e9, 0.02);
        CHECK(st->head[MS] >= st->head[1]);

        /* decode attention: memory bound here since 4q / (flops * attn_eff)
         * = 1.4e-10 s < kvb / (bw * mem_eff) = 1.0e-8 s per token-layer */
        CHECK(4.0 * q / (A100_FLOPS * 0.459) < kvb / mem);
        CHECK_REL(st->dec_ctx, L7 * kvb / mem * 1e9, 1e-12);
        CHECK_REL(st->dec_seq, L7 * 4.0 * q / mem * 1e9, 1e-12);
        CHECK_REL(st->dec_fixed, L7 * 4e3, 1e-12);
        /* the causal triangle at twice a pair (roofline.c) */
        CHECK_REL(st->pre_self, 2 * L7 * 4.0 * q / (A100_FLOPS * 0.459) * 1e9, 1e-12);
        CHECK_REL(st->pre_cross, st->pre_self / 2, 1e-15); /* one FLOP rate for both in the roofline */
        CHECK_REL(st->pre_ctx, L7 * kvb / mem * 1e9, 1e-12);
        /* a launch and the ramp: attn_knee pairs at attn_eff; each query
         * row attn_query_keys pairs */
        CHECK_REL(st->pre_fixed, L7 * (4e3 + 8.40e4 * 4.0 * q / (A100_FLOPS * 0.459) * 1e9), 1e-12);
        CHECK_REL(st->pre_tok, L7 * 650 * 4.0 * q / (A100_FLOPS * 0.459) * 1e9, 1e-12);
        CHECK_NEAR(st->send_alpha, 0, 0);   /* last stage sends nothing */
        CHECK_NEAR(st->send_token, 0, 0);

        /* hs_perf_stage_ns: the sum documented in perf.h */
        {
            hs_batch_shape b = {0};
            double want;
            b.tokens = 100;
            b.samples = 10;
            b.dec_seqs = 10;
            b.dec_ctx = 5000;
            b.pre_chunks = 2;
            b.pre_self = 1234.5;
            b.pre_cross = 777.25;
            b.pre_prefix = 300;
            want = st->dense[100] + st->head[10] + st->dec_fixed + st->dec_seq * 10 +
                   st->dec_ctx * 5000 + st->pre_fixed + st->pre_self * 1234.5 + st->pre_cross * 777.25 + st->pre_ctx * 300;
            CHECK_REL(hs_perf_stage_ns(&p, 0, &b), want, 1e-12);
            /* no decode sequences: no decode term, even with a stray C */
            b.dec_seqs = 0;
            want -= st->dec_fixed + st->dec_seq * 10 + st->dec_ctx * 5000;
            CHECK_REL(hs_perf_stage_ns(&p, 0, &b), want, 1e-12);
            /* no prefill chunks: no prefill term */
            b.pre_chunks = 0;
            CHECK_REL(hs_perf_stage_ns(&p, 0, &b), st->dense[100] + st->head[10], 1e-12);
            /* empty batch */
            memset(&b, 0, sizeof b);
            CHECK_NEAR(hs_perf_stage_ns(&p, 0, &b), 0, 0);
            /* samples beyond the table clamp to head[max_seqs] */
            b.tokens = 1;
            b.samples = MS + 10;
            CHECK_REL(hs_perf_stage_ns(&p, 0, &b), st->dense[1] + st->head[MS], 1e-12);
            /* tokens beyond the table: linear from the last entry */
            b.tokens = MT + MT / 4;
            b.samples = 0;
            CHECK_REL(hs_perf_stage_ns(&p, 0, &b), st->dense[MT] * 1.25, 1e-12);
        }
    }
    hs_perf_free(&p);

    /* 4-bit weights: T = 1 reads ~0.53 bytes per weight; large T unchanged */
    {
        hs_perf p4, p16;
        hs_layout *l4 = make_layout(1, 1, L7, 4, 0);
        double mem = A100_BW * 0.8;
        CHECK_OK(hs_perf_build(&p4, &cfg, m, c, l4, MT, 1, &err), &err);
        CHECK_OK(hs_perf_build(&p16, &cfg, m, c, l, MT, 1, &err), &err);
        if (p4.pp == 1 && p16.pp == 1) {
            CHECK_REL(p4.stage[0].dense[1],
                      (L7 * MAT7 * (0.5 + 4.0 / 128) / mem + L7 * 10 * 4e-6) * 1e9, 0.10);
            CHECK(p4.stage[0].dense[1] < 0.5 * p16.stage[0].dense[1]);
            CHECK_REL(p4.stage[0].dense[MT], p16.stage[0].dense[MT], 0.01);
            /* KV and attention do not depend on weight bits */
            CHECK_NEAR(p4.stage[0].dec_ctx, p16.stage[0].dec_ctx, 0);
        }
        hs_perf_free(&p4);
        hs_perf_free(&p16);
        free(l4);
    }
    free(l);
}

/* TP 1, 2, 4 on one node: dense halves (plus all-reduce), KV splits. */
static void test_tp(const hs_model *m, const hs_cluster *c)
{
    hs_perf p1, p2, p4;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l1 = make_layout(1, 1, L7, 16, 0), *l2 = make_layout(1, 2, L7, 16, 0),
              *l4 = make_layout(1, 4, L7, 16, 4);
    const int MT = 4096;
    roof_cfg(&cfg);
    CHECK_OK(hs_perf_build(&p1, &cfg, m, c, l1, MT, 8, &err), &err);
    CHECK_OK(hs_perf_build(&p2, &cfg, m, c, l2, MT, 8, &err), &err);
    CHECK_OK(hs_perf_build(&p4, &cfg, m, c, l4, MT, 8, &err), &err);
    if (p1.pp == 1 && p2.pp == 1 && p4.pp == 1) {
        const hs_perf_stage *s1 = &p1.stage[0], *s2 = &p2.stage[0], *s4 = &p4.stage[0];
        /* two all-reduces of T * h FP16 per layer */
        double ar2 = 2 * L7 * hs_allreduce_s(c, l2->stage[0].gpus, 2, MT * H7 * 2, 0.8) * 1e9;
        double ar4 = 2 * L7 * hs_allreduce_s(c, l4->stage[0].gpus, 4, MT * H7 * 2, 0.8) * 1e9;
        double mem = A100_BW * 0.8;
        CHECK_REL(ar2 / (2 * L7), (2 * 3e-6 + MT * H7 * 2 / (NVL_A100 * 0.8)) * 1e9, 1e-9);
        CHECK_INT(count_decreasing(s2), 0);
        CHECK_INT(count_decreasing(s4), 0);
        /* norms and residual adds on T x h are replicated, so a bit over half */
        CHECK((s2->dense[MT] - ar2) / s1->dense[MT] >= 0.5);
        CHECK((s2->dense[MT] - ar2) / s1->dense[MT] <= 0.56);
        CHECK((s4->dense[MT] - ar4) / s1->dense[MT] >= 0.25);
        CHECK((s4->dense[MT] - ar4) / s1->dense[MT] <= 0.31);
        CHECK(s2->dense[MT] < s1->dense[MT] && s4->dense[MT] < s2->dense[MT]);
        /* T = 1: half the weight bytes per rank, same launches, tiny all-reduces */
        CHECK_REL(s2->dense[1],
                  (L7 * MAT7 / mem + L7 * 10 * 4e-6 + 2 * L7 * 2 * 3e-6) * 1e9, 0.10);
        /* decode attention splits with the KV heads (32 heads: 16 and 8 per rank) */
        CHECK_REL(s2->dec_ctx, s1->dec_ctx / 2, 1e-12);
        CHECK_REL(s4->dec_ctx, L7 * (2.0 * 8 * 128 * 2) / mem * 1e9, 1e-12);
        CHECK_REL(s4->pre_self, s1->pre_self / 4, 1e-12);
        CHECK_REL(s4->pre_cross, s1->pre_cross / 4, 1e-12);
        /* the head gathers vocabulary shards: half an all-reduce of the logits */
        CHECK_REL(s2->head[1],
                  (32000.0 / 2 * H7 * 2 / mem + 2 * 4e-6 +
                   hs_allreduce_s(c, l2->stage[0].gpus, 2, 32000.0 / 2 * 4, 0.8) / 2) * 1e9,
                  0.02);
    }
    hs_perf_free(&p1);
    hs_perf_free(&p2);
    hs_perf_free(&p4);
    free(l1);
    free(l2);
    free(l4);
}

/* Two stages of 16 layers: embedding on stage 0, head on stage 1. */
static void test_pp(const hs_model *m, const hs_cluster *c, const hs_cluster *dgx2)
{
    hs_perf p1, p2, px;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l1 = make_layout(1, 1, L7, 16, 0), *l2 = make_layout(2, 1, L7 / 2, 16, 0);
    hs_layout *lx = make_layout(2, 2, L7 / 2, 16, 6); /* gpus 6,7 | 8,9 across nodes */
    const int MT = 512, MS = 16;
    double mem = A100_BW * 0.8;
    roof_cfg(&cfg);
    CHECK_OK(hs_perf_build(&p1, &cfg, m, c, l1, MT, MS, &err), &err);
    CHECK_OK(hs_perf_build(&p2, &cfg, m, c, l2, MT, MS, &err), &err);
    if (p1.pp == 1 && p2.pp == 2) {
        const hs_perf_stage *a = &p2.stage[0], *b = &p2.stage[1], *w = &p1.stage[0];
        int bad_head0 = 0, bad_head1 = 0, bad_emb = 0, bad_sum = 0;
        for (int k = 0; k <= MS; k++) {
            if (a->head[k] != 0) bad_head0++;
            if (fabs(b->head[k] - w->head[k]) > 1e-9 * w->head[k]) bad_head1++;
        }
        for (int t = 1; t <= MT; t++) {
            double emb = (t * H7 * 2 * 2 / mem + 4e-6) * 1e9; /* gather: read + write */
            if (fabs(a->dense[t] - b->dense[t] - emb) > 1e-6 * emb) bad_emb++;
            if (fabs(a->dense[t] + b->dense[t] - w->dense[t]) > 1e-9 * w->dense[t]) bad_sum++;
        }
        CHECK_INT(bad_head0, 0);
        CHECK_INT(bad_head1, 0);
        CHECK_INT(bad_emb, 0);
        CHECK_INT(bad_sum, 0);
        CHECK_REL(a->dec_ctx, w->dec_ctx / 2, 1e-12);
        /* stage 0 sends h FP16 values per token over NVLink */
        CHECK_REL(a->send_alpha, 3e-6 * 1e9, 1e-9);
        CHECK_REL(a->send_token, H7 * 2 / (NVL_A100 * 0.8) * 1e9, 1e-12);
        CHECK_REL(hs_perf_send_ns(&p2, 0, 100), 3e3 + 100 * H7 * 2 / (NVL_A100 * 0.8) * 1e9, 1e-12);
        CHECK_NEAR(hs_perf_send_ns(&p2, 1, 100), 0, 0);
    }
    /* across nodes: InfiniBand for the send, NVLink for the TP all-reduce */
    CHECK_OK(hs_perf_build(&px, &cfg, m, dgx2, lx, MT, MS, &err), &err);
    if (px.pp == 2) {
        CHECK_REL(px.stage[0].send_alpha, 10e-6 * 1e9, 1e-9);
        CHECK_REL(px.stage[0].send_token, H7 * 2 / (25e9 * 0.8) * 1e9, 1e-12);
        CHECK_INT(count_decreasing(&px.stage[0]), 0);
        CHECK_INT(count_decreasing(&px.stage[1]), 0);
    }
    hs_perf_free(&p1);
    hs_perf_free(&p2);
    hs_perf_free(&px);
    free(l1);
    free(l2);
    free(lx);
}

/* Same shape on H100s and on a mixed H100 + A100 stage. */
static void test_gpu_types(const hs_model *m, const hs_cluster *a100)
{
    hs_cluster *h100 = NULL, *mix = NULL;
    hs_perf pa, ph, pm;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l = make_layout(1, 2, L7, 16, 0);
    roof_cfg(&cfg);
    CHECK_OK(hs_cluster_find(&h100, "h100x8", &err), &err);
    CHECK_OK(hs_cluster_find(&mix, "hexgen2-case-h100x4-a100x4", &err), &err);
    if (!h100 || !mix) goto out;
    CHECK_OK(hs_perf_build(&pa, &cfg, m, a100, l, 1024, 8, &err), &err);
    CHECK_OK(hs_perf_build(&ph, &cfg, m, h100, l, 1024, 8, &err), &err);
    if (pa.pp == 1 && ph.pp == 1) {
        int slower = 0;
        for (int t = 1; t <= 1024; t++)
            if (!(ph.stage[0].dense[t] < pa.stage[0].dense[t])) slower++;
        CHECK_INT(slower, 0);
        CHECK(ph.stage[0].head[8] < pa.stage[0].head[8]);
        CHECK_REL(ph.stage[0].dec_ctx, pa.stage[0].dec_ctx * 2039.0 / 3350.0, 1e-9);
        CHECK_REL(ph.stage[0].pre_self, pa.stage[0].pre_self * 312.0 / 989.4, 1e-9);
    }
    /* GPUs 0 (H100) and 4 (A100): lockstep at the A100's FLOP/s and bandwidth */
    CHECK_STR(hs_cluster_gpu(mix, 0)->name, "h100-sxm-80g");
    CHECK_STR(hs_cluster_gpu(mix, 4)->name, "a100-80g");
    l->stage[0].gpus[1] = 4;
    CHECK_OK(hs_perf_build(&pm, &cfg, m, mix, l, 1024, 8, &err), &err);
    if (pm.pp == 1 && pa.pp == 1) {
        CHECK_REL(pm.stage[0].dec_ctx, pa.stage[0].dec_ctx, 1e-12);
        CHECK_REL(pm.stage[0].pre_self, pa.stage[0].pre_self, 1e-12);
        /* and its all-reduce crosses the slow 1.25 GB/s pod link */
        CHECK(pm.stage[0].dense[1024] > pa.stage[0].dense[1024]);
    }
    hs_perf_free(&pa);
    hs_perf_free(&ph);
    hs_perf_free(&pm);
out:
    hs_cluster_destroy(h100);
    hs_cluster_destroy(mix);
    free(l);
}

/* GQA: llama-2-70b at TP 8 holds one KV head per rank. */
static void test_gqa(const hs_cluster *c)
{
    hs_model m70;
    hs_perf p;
    hs_perf_cfg cfg;
    hs_err err = {0};
    hs_layout *l = make_layout(1, 8, 80, 16, 0);
    roof_cfg(&cfg);
    CHECK_OK(hs_model_find(&m70, "llama-2-70b", &err), &err);
    CHECK_OK(hs_perf_build(&p, &cfg, &m70, c, l, 64, 4, &err), &err);
    if (p.pp == 1) {
        CHECK_REL(p.stage[0].dec_ctx, 80 * (2.0 * 1 * 128 * 2) / (A100_BW * 0.8) * 1e9, 1e-12);
        CHECK_REL(p.stage[0].dec_seq, 80 * 4.0 * (64 * 128 / 8) / (A100_BW * 0.8) * 1e9, 1e-12);
        CHECK_INT(count_decreasing(&p.stage[0]), 0);
    }
    hs_perf_free(&p);
    free(l);
}

/* hs_perf_merge_calib: the other build's GPU types join, the ones already
 * named keep their text, the larger expected error and the uncalibrated
 * mark carry over, and a full line ends in "...". */
static void test_merge_calib(void)
{
    static hs_perf a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.calib, sizeof a.calib, "a100-80g: measured table");
    a.expected_err = -1;
    snprintf(b.calib, sizeof b.calib, "p100-12g: transferred, uncalibrated (+-18%% per layer); a100-80g: other");
    b.expected_err = 18;
    b.uncalibrated = 1;
    hs_perf_merge_calib(&a, &b);
    CHECK_STR(a.calib, "a100-80g: measured table; p100-12g: transferred, uncalibrated (+-18% per layer)");
    CHECK_REL(a.expected_err, 18, 1e-12);
    CHECK_INT(a.uncalibrated, 1);
    hs_perf_merge_calib(&a, &b); /* nothing new */
    CHECK_STR(a.calib, "a100-80g: measured table; p100-12g: transferred, uncalibrated (+-18% per layer)");
    memset(a.calib, 'x', sizeof a.calib - 10);
    a.calib[sizeof a.calib - 10] = '\0';
    snprintf(b.calib, sizeof b.calib, "t4: transferred");
    hs_perf_merge_calib(&a, &b);
    CHECK_INT((int)strlen(a.calib), (int)sizeof a.calib - 1);
    CHECK_STR(a.calib + sizeof a.calib - 4, "...");
}

/* hs_perf_scale(f) makes every pass exactly f times as long, whatever
 * builds the stages: the roofline over a pipeline (sends), measured tables
 * (decode grid or waves, prefill grid), an eager engine's dispatch floor,
 * an encoder-decoder model's encoder terms. */
static void test_scale(void)
{
    /* 1xh200 on hetsim-exec's stream tables: the decode kernel's split
     * (waves) and prefill rows at several chunk lengths */
    static const struct { const char *model, *cluster, *builder, *engine; int pp, decode_grid; } cases[] = {
        {"llama-2-7b", "dgx-a100", "roofline", "none", 2, 2},
        {"llama-2-7b", "1xh200", "table", "vllm", 1, 2},
        {"llama-2-7b", "1xh200", "table", "vllm", 1, 1},
        {"llama-2-7b", "dgx-a100", "auto", "vllm-eager", 1, 2},
        {"t5-11b", "dgx-a100", "roofline", "vllm", 2, 2},
    };
    const double f = 2.5;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hs_model m;
        hs_cluster *c = NULL;
        hs_perf_cfg cfg;
        hs_perf p, q;
        hs_err err = {0};
        hs_layout *l;
        hs_batch_shape sh[5];
        int floors = 0;
        CHECK_OK(hs_model_find(&m, cases[i].model, &err), &err);
        CHECK_OK(hs_cluster_find(&c, cases[i].cluster, &err), &err);
        if (!c) continue;
        hs_perf_cfg_defaults(&cfg);
        snprintf(cfg.model, sizeof cfg.model, "%s", cases[i].builder);
        snprintf(cfg.engine, sizeof cfg.engine, "%s", cases[i].engine);
        if (!strcmp(cases[i].cluster, "1xh200")) {
            const char *root = getenv("HETSIM_ROOT");
            snprintf(cfg.tables, sizeof cfg.tables, "%s/profiles/exec/stream", root ? root : ".");
            cfg.prefill_grid = 1;
        }
        cfg.decode_grid = cases[i].decode_grid;
        l = make_layout(cases[i].pp, 1, m.layers / cases[i].pp, 16, 0);
        for (int s = 0; s < l->pp; s++) l->stage[s].enc_layers = m.encoder_layers / l->pp;
        l->enc_set = 1;
        CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 2048, 64, &err), &err);
        CHECK_OK(hs_perf_build(&q, &cfg, &m, c, l, 2048, 64, &err), &err);
        free(l);
        hs_cluster_destroy(c);
        if (!p.pp || !q.pp) continue;
        hs_perf_scale(&q, f);
        memset(sh, 0, sizeof sh);
        /* one sequence's decode step (the eager engine's floor binds here) */
        sh[0].tokens = sh[0].samples = sh[0].dec_seqs = 1;
        sh[0].dec_ctx = 512;
        /* a decode batch */
        sh[1].tokens = sh[1].samples = sh[1].dec_seqs = 37;
        sh[1].dec_ctx = 37 * 900;
        /* one prompt */
        sh[2].tokens = sh[2].pre_tokens = sh[2].samples = 700;
        sh[2].samples = 1;
        sh[2].pre_chunks = 1;
        sh[2].pre_self = 700.0 * 701 / 2;
        /* a chunk beside decodes */
        sh[3] = sh[1];
        sh[3].tokens += 300;
        sh[3].samples += 1;
        sh[3].pre_chunks = 1;
        sh[3].pre_tokens = 300;
        sh[3].pre_self = 300.0 * 301 / 2;
        sh[3].pre_cross = 300.0 * 200;
        sh[3].pre_prefix = 200;
        /* prompts through the encoder (encoder-decoder models) */
        sh[4].enc_tokens = sh[4].enc_new = 600;
        sh[4].enc_seqs = 2;
        sh[4].enc_pairs = 2 * 300.0 * 300;
        for (int k = 0; k < 5; k++) {
            CHECK(hs_perf_pass_ns(&p, &sh[k]) > 0 || k == 4);
            CHECK_REL(hs_perf_pass_ns(&q, &sh[k]), f * hs_perf_pass_ns(&p, &sh[k]), 1e-12);
            for (int s = 0; s < p.pp; s++) floors += hs_perf_stage_ns(&p, s, &sh[k]) == p.stage[s].dispatch_ns;
        }
        /* the cases reach what they are here for */
        if (!strcmp(cases[i].engine, "vllm-eager")) CHECK(floors > 0);
        /* the waves, or the plain grid, and the prefill rows */
        if (!strcmp(cases[i].cluster, "1xh200"))
            CHECK((cases[i].decode_grid == 2 ? p.stage[0].dw.sms != 0 : p.stage[0].dw.sms == 0 && p.stage[0].dg_b) &&
                  p.stage[0].pg.nx);
        if (m.encoder_layers) CHECK(hs_perf_pass_ns(&p, &sh[4]) > hs_perf_pass_ns(&p, &sh[0]));
        hs_perf_free(&p);
        hs_perf_free(&q);
    }
}

int main(void)
{
    hs_model m;
    hs_cluster *dgx = NULL, *dgx2 = NULL;
    hs_err err = {0};
    set_root();
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&dgx, "dgx-a100", &err), &err);
    CHECK_OK(hs_cluster_find(&dgx2, "dgx-a100x2", &err), &err);
    if (!dgx || !dgx2) return hs_check_result();
    test_cfg();
    test_merge_calib();
    test_allreduce(dgx, dgx2);
    test_errors_and_free(&m, dgx);
    test_single_a100(&m, dgx);
    test_tp(&m, dgx);
    test_pp(&m, dgx, dgx2);
    test_gpu_types(&m, dgx);
    test_gqa(dgx);
    test_scale();
    hs_cluster_destroy(dgx);
    hs_cluster_destroy(dgx2);
    return hs_check_result();
}
