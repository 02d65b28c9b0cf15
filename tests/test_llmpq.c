/* test_llmpq.c - LLM-PQ: memory model against the paper's Fig. 7, latency
 * factor orderings, ILP against brute force on tiny instances, heuristic
 * and PipeEdge feasibility, the planner on real clusters, deployment
 * round trip and the offline pipeline simulation. */
#include "check.h"

#include "hw/hw.h"
#include "llm/quant.h"
#include "perf/qlat.h"
#include "perf/table.h"
#include "plan/llmpq.h"
#include "plan/plan.h"
#include "plan/llmpq_pipe.h"

#define MIB (1024.0 * 1024.0)

/* Fig. 7 reports real and estimated MB (MiB, PyTorch's unit) of weights +
 * KV for OPT-13b/30b/66b, but not the setups: only "prompt length
 * uniform in 128-512, batch 2/4/8, generation 100-200, random precisions".
 * Held out: the setups are drawn from that text with a fixed seed before
 * any comparison, 1000 per model and per reading of "random precisions"
 * (each layer's width uniform over the paper's BITs {16, 8, 4, 3}, or over
 * {16, 8}), and the memory model's spread over them is set beside the
 * measured value.  Without the setups no per-row error can be computed;
 * what can be checked is that each measurement is reachable: it lies
 * inside the predicted spread under one reading.  No single reading holds
 * for all three (OPT-13b and 30b lie above the whole BITs spread, OPT-66b
 * below the whole {16, 8} one): the figure's runs did not share one
 * precision distribution.  The component checks after them pin the
 * formula itself. */
static uint64_t fig7_rng = 0x9e3779b97f4a7c15ULL;
static uint64_t fig7_next(void)
{
    /* splitmix64: a fixed, platform-independent stream */
    uint64_t z = (fig7_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int fig7_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_fig7(void)
{
    static const struct { const char *m; double real; } fx[] = {
        {"opt-13b", 24128.04}, {"opt-30b", 49380.95}, {"opt-66b", 73199.83},
    };
    static const int vs[3] = {2, 4, 8}, bitsets[2][4] = {{16, 8, 4, 3}, {16, 8, 16, 8}};
    enum { NDRAW = 1000 };
    static double tot[NDRAW];
    hs_err err = {0};
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        hs_model m;
        int reachable = 0;
        CHECK_OK(hs_model_find(&m, fx[i].m, &err), &err);
        for (int r = 0; r < 2; r++) {
            double below = 0;
            for (int d = 0; d < NDRAW; d++) {
                int v = vs[fig7_next() % 3], s = 128 + (int)(fig7_next() % 385),
                    n = 100 + (int)(fig7_next() % 101);
                double t = hs_qmem_embed(&m) + m.layers * hs_qmem_kv_layer(&m, v, s, n, 16);
                for (int l = 0; l < m.layers; l++) t += hs_qmem_layer(&m, bitsets[r][fig7_next() % 4]);
                tot[d] = t / MIB;
                below += tot[d] < fx[i].real;
            }
            qsort(tot, NDRAW, sizeof *tot, fig7_cmp);
            printf("fig7 %s, widths %s: predicted %.0f / %.0f / %.0f MiB (min / median / max), "
                   "paper measured %.2f at the %.1f%% point\n", fx[i].m, r ? "{16,8}" : "{16,8,4,3}",
                   tot[0], tot[NDRAW / 2], tot[NDRAW - 1], fx[i].real, 100 * below / NDRAW);
            reachable |= tot[0] <= fx[i].real && fx[i].real <= tot[NDRAW - 1];
        }
        CHECK(reachable);
    }
    /* the paper's formulas by hand for OPT-13b (h1 5120, h2 20480) */
    {
        hs_model m;
        double h = 5120, f = 20480;
        CHECK_OK(hs_model_find(&m, "opt-13b", &err), &err);
        CHECK_NEAR(hs_qmem_layer(&m, 16), (4 * h * h + 2 * h * f) * 2 + 4 * h * 2, 1);
        CHECK_NEAR(hs_qmem_layer(&m, 4), (4 * h * h + 2 * h * f) * 0.5 + 4 * h * 2, 1);
        CHECK_NEAR(hs_qmem_layer(&m, 3), (4 * h * h + 2 * h * f) * 3 / 8.0 + 4 * h * 2, 1);
        CHECK_NEAR(hs_qmem_embed(&m), (50272.0 * h * 2 + 2048 * h) * 2, 1);
        CHECK_NEAR(hs_qmem_kv_layer(&m, 32, 512, 100, 16), 2.0 * 32 * 612 * h * 2, 1);
        /* the authors' estimator's temporaries term by term (b = 32, s = 512,
         * n = 100): a decode step of the whole batch on every stage; the
         * first stage the larger of that and a prefill micro-batch */
        {
            double b = 32, sq = 512, ctx = 612;
            double next_i = b * h * 2 + 4 * b * h * 2 + (b * ctx + b * h) * 2 + b * ctx * 4 +
                            2 * (b * ctx * h) * 2 + b * h * 2 + b * f * 2 + b * (h + f) * 2;
            double prefill = b * sq * h * 2 + 4 * b * sq * h * 2 + b * sq * h * 4 +
                             (b * sq * sq + b * sq * h) * 2 + b * sq * h * 2 + b * sq * f * 2 +
                             b * sq * (h + f) * 2;
            CHECK_NEAR(hs_qmem_temp(&m, 32, 8, 512, 100, 0), next_i, 1);
            CHECK_NEAR(hs_qmem_temp(&m, 32, 1, 512, 100, 0), next_i, 1);
            CHECK_NEAR(hs_qmem_temp(&m, 32, 1, 512, 100, 1), next_i, 1);          /* 388 MiB */
            CHECK_NEAR(hs_qmem_temp(&m, 32, 8, 512, 100, 1), prefill * 8 / 32, 1); /* 724 MiB */
        }
    }
}

/* The kernel facts the paper measured (Fig. 5), as our factors encode them. */
static void test_latency_orderings(void)
{
    hs_err err = {0};
    hs_model m;
    hs_gpu v100, t4;
    hs_perf_cfg pc;
    hs_perf_cfg_defaults(&pc);
    CHECK_OK(hs_model_find(&m, "opt-30b", &err), &err);
    CHECK_OK(hs_gpu_find(&v100, "v100-32g", &err), &err);
    CHECK_OK(hs_gpu_find(&t4, "t4", &err), &err);
    /* V100: INT8 slower than FP16 in both phases */
    CHECK(hs_qlat_prefill_s(&m, &v100, 8, 8, 512, 16, &pc, NULL) > hs_qlat_prefill_s(&m, &v100, 16, 8, 512, 16, &pc, NULL));
    CHECK(hs_qlat_decode_s(&m, &v100, 8, 8, 562, 16, &pc, NULL) > hs_qlat_decode_s(&m, &v100, 16, 8, 562, 16, &pc, NULL));
    /* T4: INT8 prefill within 15% of FP16 (the paper's Fig. 5) */
    CHECK_REL(hs_qlat_prefill_s(&m, &t4, 8, 8, 512, 16, &pc, NULL), hs_qlat_prefill_s(&m, &t4, 16, 8, 512, 16, &pc, NULL), 0.15);
    /* LLM.int8 on INT8 tensor cores reproduces both measurements its two
     * terms come from (qlat.h HS_QLAT_INT8_CALL_S): BLOOM-176B on A100s
     * decodes at 1.25x FP16 per token at batch 1 (1.22-1.29x at 8-32), and
     * Llama-2-7B on an A10G in 164 ms per token (FP16 37 ms); the A10G's
     * FP16 from its measured table (the calibrated layer) */
    {
        hs_model bloom, llama;
        hs_gpu a100;
        hs_cluster *a10 = NULL;
        hs_qlat_cal *cal = NULL;
        CHECK_OK(hs_model_find(&bloom, "bloom-176b", &err), &err);
        CHECK_OK(hs_model_find(&llama, "llama-2-7b", &err), &err);
        CHECK_OK(hs_gpu_find(&a100, "a100-80g", &err), &err);
        CHECK_INT(hs_model_linear_calls(&bloom), 4);
        CHECK_INT(hs_model_linear_calls(&llama), 7);
        CHECK_INT(hs_model_linear_calls(&m), 6);
        {
            double r = hs_qlat_decode_s(&bloom, &a100, 8, 1, 512, 16, &pc, NULL) /
                       hs_qlat_decode_s(&bloom, &a100, 16, 1, 512, 16, &pc, NULL);
            CHECK(r > 1.20 && r < 1.40);   /* 1.34: the roofline's FP16 is 6% under the 230 ms */
        }
        CHECK_OK(hs_cluster_find(&a10, "1xa10", &err), &err);
        if (a10) CHECK_OK(hs_qlat_cal_build(&cal, &llama, a10, &pc, 16, 1, &err), &err);
        if (cal) {
            /* per token, the 32 layers: INT8 within 20% of the 164 ms; FP16's
             * kernels under the 37 ms, which also holds the eager framework's
             * host time (the embedding, the head, Python) */
            const hs_gpu *g = hs_cluster_gpu(a10, 0);
            double i8 = 32 * hs_qlat_decode_s(&llama, g, 8, 1, 256, 16, &pc, cal);
            double f16 = 32 * hs_qlat_decode_s(&llama, g, 16, 1, 256, 16, &pc, cal);
            CHECK(i8 > 0.164 * 0.8 && i8 < 0.164 * 1.2);
            CHECK(f16 > 0.037 * 0.6 && f16 < 0.037);
        }
        hs_qlat_cal_free(cal);
        hs_cluster_destroy(a10);
    }
    /* V100 (no INT8 tensor cores): bitsandbytes casts the weights to FP16
     * first, 3 bytes of traffic per weight before the FP16 GEMM's 2, and
     * pays its host cost per call, so a decode step of 8 sequences
     * (weight-bound) takes 3-5x FP16's, a prefill of 8 x 512 tokens
     * (compute-bound) up to 15% more */
    {
        double rd = hs_qlat_decode_s(&m, &v100, 8, 8, 562, 16, &pc, NULL) / hs_qlat_decode_s(&m, &v100, 16, 8, 562, 16, &pc, NULL);
        double rp = hs_qlat_prefill_s(&m, &v100, 8, 8, 512, 16, &pc, NULL) / hs_qlat_prefill_s(&m, &v100, 16, 8, 512, 16, &pc, NULL);
        CHECK(rd > 3.0 && rd < 5.0);   /* 2.3 without the cost per call */
        CHECK(rp > 1.0 && rp < 1.15);
    }
    /* GPTQ: faster than FP16 for one decode sequence, not in prefill */
    CHECK(hs_qlat_decode_s(&m, &v100, 4, 1, 562, 16, &pc, NULL) < 0.6 * hs_qlat_decode_s(&m, &v100, 16, 1, 562, 16, &pc, NULL));
    CHECK(hs_qlat_prefill_s(&m, &v100, 4, 8, 512, 16, &pc, NULL) > hs_qlat_prefill_s(&m, &v100, 16, 8, 512, 16, &pc, NULL));
    /* GPTQ dequantises and accumulates on CUDA cores: its prefill follows
     * the GPU file's FP32 rate (fp32_tflops), not the FP16 GEMM peak.  On
     * a V100 each row's pass over the packed weights is memory-bound; at a
     * thousandth of the FP32 rate it is compute-bound many times over. */
    {
        hs_gpu slow = v100;
        slow.flops32 = v100.flops32 / 1000;
        CHECK(v100.flops32 > 0);
        CHECK(hs_qlat_prefill_s(&m, &slow, 4, 8, 512, 16, &pc, NULL) > 10 * hs_qlat_prefill_s(&m, &v100, 4, 8, 512, 16, &pc, NULL));
        CHECK_REL(hs_qlat_prefill_s(&m, &slow, 16, 8, 512, 16, &pc, NULL), hs_qlat_prefill_s(&m, &v100, 16, 8, 512, 16, &pc, NULL),
                  1e-12);
    }
    /* prefill grows faster than linearly in s (attention), decode with ctx */
    CHECK(hs_qlat_prefill_s(&m, &v100, 16, 1, 2048, 16, &pc, NULL) > 4 * hs_qlat_prefill_s(&m, &v100, 16, 1, 512, 16, &pc, NULL));
    CHECK(hs_qlat_decode_s(&m, &v100, 16, 8, 1500, 16, &pc, NULL) > hs_qlat_decode_s(&m, &v100, 16, 8, 600, 16, &pc, NULL));
}

/* The calibrated FP16 layer (qlat.h): FP16 is the latency model's, every
 * other width keeps its kernel model's ratio to FP16. */
static void test_qlat_cal(void)
{
    hs_err err = {0};
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg pc, roof;
    hs_qlat_cal *cal = NULL;
    hs_ptable *tab = NULL;
    const hs_gpu *t4 = NULL, *v100 = NULL;
    hs_perf_cfg_defaults(&pc);
    roof = pc;
    snprintf(roof.model, sizeof roof.model, "roofline");
    CHECK_OK(hs_model_find(&m, "opt-30b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "llmpq-c3", &err), &err);   /* 3 x T4 + V100 */
    if (!c) return;
    for (int i = 0; i < c->n_gpus; i++) {
        const hs_gpu *g = hs_cluster_gpu(c, i);
        if (!strcmp(g->name, "t4")) t4 = g;
        if (!strcmp(g->name, "v100-32g")) v100 = g;
    }
    CHECK(t4 && v100);
    if (!t4 || !v100) goto out;
    /* the roofline builds nothing */
    CHECK_OK(hs_qlat_cal_build(&cal, &m, c, &roof, 4096, 8, &err), &err);
    CHECK(cal == NULL);
    CHECK(!strcmp(hs_qlat_cal_source(NULL, NULL), "datasheet roofline"));
    CHECK_INT(hs_qlat_cal_build(&cal, &m, c, &pc, 0, 8, &err), HS_ERANGE);
    CHECK_OK(hs_qlat_cal_build(&cal, &m, c, &pc, 4096, 8, &err), &err);
    if (!cal) goto out;
    {
        double e;
        const char *src = hs_qlat_cal_source(cal, &e);
        /* the T4's OPT-30B table ships; the V100 has none of its own */
        CHECK(strstr(src, "t4: measured table") != NULL);
        CHECK(strstr(src, "v100-32g: transferred") != NULL);
        CHECK(e > 0);
    }
    /* FP16 on the T4 is its measured table: the layer's ops summed (norms
     * and adds twice), where the roofline is far off
     * (a 70 W board at 44% of its datasheet peak, profiles/README.md) */
    {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/profiles/t4/opt-30b", hs_test_root());
        CHECK_OK(hs_ptable_read(&tab, dir, &err), &err);
    }
    if (tab) {
        double us = 0;
        for (int op = 0; op < HS_OP_COUNT; op++) {
            hs_curve cv;
            /* OPT's positions are learned: Vidur's tables time a RoPE it never runs */
            if (op == HS_OP_EMB || op == HS_OP_LM_HEAD || op == HS_OP_ROPE || !hs_ptable_has_op(tab, op, 1, 16))
                continue;
            /* the curve a run reads (outliers smoothed), at a measured count */
            CHECK_OK(hs_ptable_op_curve(tab, op, 1, 16, &cv, &err), &err);
            us += (op == HS_OP_NORM || op == HS_OP_ADD ? 2 : 1) * hs_curve_eval(&cv, 2048);
            hs_curve_free(&cv);
        }
        CHECK(us > 0);
        CHECK_REL(hs_qlat_dense_s(&m, t4, 16, 2048, &pc, cal), us * 1e-6, 1e-6);
        CHECK(hs_qlat_dense_s(&m, t4, 16, 2048, &pc, cal) > 1.5 * hs_qlat_dense_s(&m, t4, 16, 2048, &roof, NULL));
        hs_ptable_destroy(tab);
    }
    /* INT8 keeps its kernel model's ratio to FP16 at every count, on both
     * GPUs (the tensor-core and the cast path); GPTQ (its own kernel) stays
     * on the datasheet; beyond the tabulated counts FP16 keeps the ratio at
     * the last one */
    for (int gi = 0; gi < 2; gi++) {
        const hs_gpu *g = gi ? v100 : t4;
        double rmax = hs_qlat_dense_s(&m, g, 16, 4096, &pc, cal) / hs_qlat_dense_s(&m, g, 16, 4096, &roof, NULL);
        for (int t = 1; t <= 4096; t *= 8) {
            double r16 = hs_qlat_dense_s(&m, g, 16, t, &pc, cal) / hs_qlat_dense_s(&m, g, 16, t, &roof, NULL);
            double call = hs_model_linear_calls(&m) * HS_QLAT_INT8_CALL_S;   /* never scaled */
            CHECK_REL((hs_qlat_dense_s(&m, g, 8, t, &pc, cal) - call) / hs_qlat_dense_s(&m, g, 16, t, &pc, cal),
                      (hs_qlat_dense_s(&m, g, 8, t, &roof, NULL) - call) / hs_qlat_dense_s(&m, g, 16, t, &roof, NULL),
                      1e-9);
            CHECK_REL(hs_qlat_dense_s(&m, g, 4, t, &pc, cal), hs_qlat_dense_s(&m, g, 4, t, &roof, NULL), 1e-12);
            CHECK(r16 > 0.3 && r16 < 3);
        }
        CHECK_REL(hs_qlat_dense_s(&m, g, 16, 8192, &pc, cal), hs_qlat_dense_s(&m, g, 16, 8192, &roof, NULL) * rmax, 1e-9);
        /* attention stays on the roofline: prefill minus its dense ops */
        CHECK_REL(hs_qlat_prefill_s(&m, g, 16, 8, 512, 16, &pc, cal) - hs_qlat_dense_s(&m, g, 16, 4096, &pc, cal),
                  hs_qlat_prefill_s(&m, g, 16, 8, 512, 16, &roof, NULL) - hs_qlat_dense_s(&m, g, 16, 4096, &roof, NULL),
                  1e-9);
        /* the head: tabulated up to max_seqs, on along the last slope beyond */
        CHECK_REL(hs_qlat_head_s(&m, g, 16, &pc, cal),
                  hs_qlat_head_s(&m, g, 8, &pc, cal) +
                      8 * (hs_qlat_head_s(&m, g, 8, &pc, cal) - hs_qlat_head_s(&m, g, 7, &pc, cal)), 1e-9);
        CHECK(hs_qlat_head_s(&m, g, 16, &pc, cal) < 2 * hs_qlat_head_s(&m, g, 8, &pc, cal));
        CHECK(hs_qlat_head_s(&m, g, 8, &pc, cal) > hs_qlat_head_s(&m, g, 1, &pc, cal));
        /* a table of one row grows as the roofline does */
        {
            hs_qlat_cal *one = NULL;
            CHECK_OK(hs_qlat_cal_build(&one, &m, c, &pc, 16, 1, &err), &err);
            if (one)
                CHECK_REL(hs_qlat_head_s(&m, g, 8, &pc, one) / hs_qlat_head_s(&m, g, 1, &pc, one),
                          hs_qlat_head_s(&m, g, 8, &roof, NULL) / hs_qlat_head_s(&m, g, 1, &roof, NULL), 1e-9);
            hs_qlat_cal_free(one);
        }
    }
    /* A GPU whose FP16 is extrapolated (the P100: no tensor cores, priced by
     * the transfer, 3.5x its roofline for one token): GPTQ's prefill stays
     * within 2x of its roofline ratio to FP16 (FP16's one-token ratio on
     * GPTQ made it 22x FP16, against 6x) */
    {
        hs_cluster *c4 = NULL;
        hs_qlat_cal *cal4 = NULL;
        CHECK_OK(hs_cluster_find(&c4, "llmpq-c4", &err), &err);   /* V100 + 3 x P100 */
        if (c4) CHECK_OK(hs_qlat_cal_build(&cal4, &m, c4, &pc, 4096, 8, &err), &err);
        int found = 0;
        for (int i = 0; c4 && cal4 && i < c4->n_gpus && !found; i++) {
            const hs_gpu *g = hs_cluster_gpu(c4, i);
            double rc, rr;
            if (strcmp(g->name, "p100-12g")) continue;
            found = 1;
            rc = hs_qlat_dense_s(&m, g, 4, 4096, &pc, cal4) / hs_qlat_dense_s(&m, g, 16, 4096, &pc, cal4);
            rr = hs_qlat_dense_s(&m, g, 4, 4096, &roof, NULL) / hs_qlat_dense_s(&m, g, 16, 4096, &roof, NULL);
            CHECK(rc < 2 * rr && rc > rr / 2);
        }
        CHECK(found);
        hs_qlat_cal_free(cal4);
        hs_cluster_destroy(c4);
    }
    /* the plan search records where its FP16 times came from */
    {
        hs_pq_cfg cfg;
        hs_pq_plan p;
        hs_pq_cfg_defaults(&cfg);
        cfg.total_limit_s = 2;
        CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &pc, HS_PQ_PIPEEDGE, &p, &err), &err);
        CHECK(strstr(p.latency, "t4: measured table") != NULL);
        CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &roof, HS_PQ_PIPEEDGE, &p, &err), &err);
        CHECK(p.latency[0] == '\0');
    }
out:
    hs_qlat_cal_free(cal);
    hs_cluster_destroy(c);
}

/* xorshift: deterministic instances */
static uint64_t rng = 88172645463325252ULL;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}

static void random_inst(hs_pq_inst *in, int U, int N, int nb, int *usize, double *om)
{
    memset(in, 0, sizeof *in);
    in->U = U;
    in->N = N;
    in->nb = nb;
    in->usize = usize;
    in->omega = om;
    for (int k = 0; k < nb; k++) {
        in->bits[k] = hs_bits_set[k];
        in->mlay[k] = 1.0e9 * in->bits[k] / 16.0 + 0.2e9;
    }
    for (int u = 0; u < U; u++) {
        usize[u] = 1 + (urand() < 0.3);
        for (int k = 0; k < nb; k++) om[u * nb + k] = k ? (0.05 + urand()) * k * k : 0;
    }
    for (int j = 0; j < N; j++) {
        double speed = 0.5 + 2 * urand();
        in->cap[j] = (1.5 + 3 * urand()) * 1e9;
        for (int k = 0; k < nb; k++) {
            in->lpre[j][k] = speed * (1 + 0.3 * k * urand());
            in->ldec[j][k] = speed * 0.05 * (1 - 0.15 * k * urand());
        }
        in->cpre[j] = j ? 0 : 0.1;
        in->cdec[j] = j ? 0 : 0.01;
        in->commpre[j] = N > 1 ? 0.5 * urand() : 0;
        in->commdec[j] = N > 1 ? 0.02 * urand() : 0;
    }
    in->w_pre = 4;
    in->w_dec = 2 * 9;
    in->a_pre = 3;
    in->a_dec = 9;
    in->rounds = 9;
    in->theta = urand() < 0.5 ? 0.1 : 3;
}

static void test_ilp_vs_brute(void)
{
    int agree = 0, infeasible = 0;
    hs_err err = {0};
    for (int t = 0; t < 60; t++) {
        int U = 3 + t % 3, N = 1 + t % 3, nb = 2 + t % 3, usize[8];
        int d1[8], b1[8], d2[8], b2[8], d3[8], b3[8], to = 0, r1, r2, r3;
        double om[8 * HS_NBITS], o1 = 0, o2 = 0, o3 = 0;
        hs_pq_inst in;
        if (N > U) N = U;
        random_inst(&in, U, N, nb, usize, om);
        r1 = hs_pq_brute(&in, d1, b1, &o1);
        r2 = hs_pq_ilp(&in, 0, INFINITY, d2, b2, &o2, &to, &err);
        CHECK_INT(to, 0);
        CHECK_INT(r1 == 0, r2 == 0);
        r3 = hs_pq_heuristic(&in, d3, b3, &o3, &err);
        if (r1) {
            infeasible++;
            CHECK_INT(r1, HS_ENOFIT);
            CHECK_INT(r2, HS_ENOFIT);
            CHECK(r3 != 0);
            continue;
        }
        /* the ILP is optimal and feasible */
        CHECK_REL(o2, o1, 1e-6);
        CHECK(isfinite(hs_pq_eval(&in, d2, b2, NULL)));
        CHECK_REL(hs_pq_eval(&in, d2, b2, NULL), o2, 1e-12);
        agree += fabs(o2 - o1) <= 1e-6 * fabs(o1);
        /* the heuristic, when it finds a plan, is feasible and no better
         * than the optimum */
        if (!r3) {
            CHECK(isfinite(hs_pq_eval(&in, d3, b3, NULL)));
            CHECK(o3 >= o1 - 1e-9 * fabs(o1));
        }
        /* a cut-off at the optimum leaves nothing to find */
        CHECK_INT(hs_pq_ilp(&in, 0, o1 * (1 - 1e-6), d2, b2, &o2, &to, &err), HS_ENOFIT);
        /* PipeEdge's split: uniform bits, feasible, optimal for its
         * bottleneck among splits at that bit-width */
        for (int k = 0; k < nb; k++) {
            double op;
            if (hs_pq_pipeedge_split(&in, k, d3, b3, &op)) continue;
            CHECK(isfinite(op));
            for (int u = 0; u < U; u++) CHECK_INT(b3[u], k);
        }
    }
    printf("ilp vs brute force: %d optimal agreements, %d infeasible instances\n", agree, infeasible);
    CHECK(agree >= 30);
    CHECK(infeasible >= 1);
}

/* A plan from the search respects memory (re-checked with the memory
 * model, not the instance), contiguity and one stage per GPU. */
static void check_plan(const hs_model *m, const hs_cluster *c, const hs_pq_cfg *cfg,
                       const hs_pq_plan *p)
{
    int used[HS_MAX_PP] = {0};
    CHECK_INT(p->ndev, c->n_gpus);
    CHECK_INT(p->first[0], 0);
    CHECK_INT(p->first[p->ndev], m->layers);
    for (int j = 0; j < p->ndev; j++) {
        double mem = j == 0 ? hs_qmem_embed(m) : 0;
        CHECK(p->first[j + 1] > p->first[j]);
        CHECK(!used[p->dev[j]]);
        used[p->dev[j]] = 1;
        for (int l = p->first[j]; l < p->first[j + 1]; l++)
            mem += hs_qmem_layer_total(m, p->bits[l], cfg->B, cfg->s, cfg->n, 16);
        mem += hs_qmem_temp(m, cfg->B, p->eta, cfg->s, cfg->n, j == 0);
        CHECK(mem <= hs_cluster_gpu(c, p->dev[j])->mem_reported_bytes * cfg->mem_frac - cfg->reserve_bytes + 1);
    }
}

static void test_search(void)
{
    hs_err err = {0};
    hs_model m;
    hs_cluster *c = NULL;
    hs_pq_cfg cfg;
    hs_perf_cfg pc;
    hs_pq_plan p, pe, un, back;
    hs_pipe_job jb;
    hs_pipe_result r;
    char *txt;
    const char *path;
    hs_perf_cfg_defaults(&pc);
    hs_pq_cfg_defaults(&cfg);
    cfg.heuristic = 1;
    CHECK_OK(hs_model_find(&m, "opt-30b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "llmpq-c3", &err), &err);
    if (!c) return;
    CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &pc, HS_PQ_LLMPQ, &p, &err), &err);
    CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &pc, HS_PQ_PIPEEDGE, &pe, &err), &err);
    CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &pc, HS_PQ_UNIFORM, &un, &err), &err);
    check_plan(&m, c, &cfg, &p);
    check_plan(&m, c, &cfg, &pe);
    check_plan(&m, c, &cfg, &un);
    /* 3 T4 + 1 V100: the T4s kept together, 2 orders (the authors'
     * code), xi = 8 and eta each divisor of it (1, 2, 4, 8); with
     * all_orders, 4 distinct orders (identical T4s never permuted) */
    CHECK_INT(p.n_inst, 2 * 4);
    for (int j = 1; j < p.ndev - 1; j++)   /* the V100 at either end */
        CHECK(strcmp(hs_cluster_gpu(c, p.dev[j])->name, "v100-32g") != 0);
    {
        hs_pq_cfg all = cfg;
        hs_pq_plan pa;
        all.all_orders = 1;
        CHECK_OK(hs_pq_plan_search(&m, c, &all, &pc, HS_PQ_LLMPQ, &pa, &err), &err);
        CHECK_INT(pa.n_inst, 4 * 4);
        CHECK(pa.obj <= p.obj + 1e-9);   /* a superset of the orders */
        check_plan(&m, c, &all, &pa);
        /* eta is each divisor of xi: 12 has six (1, 2, 3, 4, 6, 12) */
        all = cfg;
        all.xi = 12;
        CHECK_OK(hs_pq_plan_search(&m, c, &all, &pc, HS_PQ_LLMPQ, &pa, &err), &err);
        CHECK_INT(pa.n_inst, 2 * 6);
    }
    /* On a homogeneous cluster Uniform is PipeEdge's plan (C9, 4 T4: the
     * paper's Table 5 gives both one latency): even split, the same width,
     * eta = xi = B/N */
    {
        hs_cluster *c9 = NULL;
        hs_pq_plan u9, p9;
        CHECK_OK(hs_cluster_find(&c9, "llmpq-c9", &err), &err);
        if (c9) {
            CHECK_OK(hs_pq_plan_search(&m, c9, &cfg, &pc, HS_PQ_UNIFORM, &u9, &err), &err);
            CHECK_OK(hs_pq_plan_search(&m, c9, &cfg, &pc, HS_PQ_PIPEEDGE, &p9, &err), &err);
            CHECK_INT(u9.eta, p9.eta);
            CHECK_INT(u9.xi, p9.xi);
            for (int j = 0; j <= u9.ndev; j++) CHECK_INT(u9.first[j], p9.first[j]);
            CHECK(!memcmp(u9.bits, p9.bits, (size_t)m.layers));
            CHECK_NEAR(u9.obj, p9.obj, 1e-9 * p9.obj);
            hs_cluster_destroy(c9);
        }
    }
    CHECK_INT(pe.xi, 8);
    CHECK_INT(pe.eta, 8);
    /* PipeEdge keeps the cluster's GPU order (the authors' adaptation):
     * one order, so one instance per bit-width tried (FP16, then INT8) */
    for (int j = 0; j < pe.ndev; j++) CHECK_INT(pe.dev[j], j);
    CHECK_INT(pe.n_inst, 2);
    /* Uniform: the cluster's order, decode micro-batch ceil(B/N), prefill
     * micro-batch the largest of its divisors 1, 2, 4, 8 that fits (the
     * authors' loop keeps the last that fits) */
    for (int j = 0; j < un.ndev; j++) CHECK_INT(un.dev[j], j);
    CHECK_INT(un.xi, 8);
    CHECK_INT(un.eta, 8);
    CHECK_INT(un.n_inst, 3 * 4);   /* FP16 and INT8 do not fit, 4 bits does */
    CHECK_INT(un.bits[0], 4);
    for (int l = 1; l < m.layers; l++) CHECK_INT(pe.bits[l], pe.bits[0]);
    /* LLM-PQ starts from PipeEdge's split, so its objective is no worse
     * on PipeEdge's own instance and it is found among its instances */
    CHECK(p.obj <= pe.obj + 1e-9);
    /* the deployment JSON round trip keeps order, split, bits and sizes */
    txt = hs_pq_deploy_json(&p, &m, c, &cfg);
    CHECK(txt != NULL);
    path = hs_test_tmpfile("pqplan", txt ? txt : "");
    free(txt);
    CHECK_OK(hs_pq_plan_read(&back, path, &m, c, &err), &err);
    CHECK_INT(back.ndev, p.ndev);
    CHECK_INT(back.eta, p.eta);
    CHECK_INT(back.xi, p.xi);
    for (int j = 0; j <= p.ndev; j++) CHECK_INT(back.first[j], p.first[j]);
    for (int j = 0; j < p.ndev; j++) CHECK_INT(back.dev[j], p.dev[j]);
    CHECK(!memcmp(back.bits, p.bits, (size_t)m.layers));
    {
        hs_deploy d;
        CHECK_OK(hs_deploy_read(&d, path, &err), &err);   /* plain reader accepts it */
        CHECK_OK(hs_deploy_check(&d, &m, c, path, &err), &err);
        hs_deploy_free(&d);
    }
    /* registry entries */
    CHECK(hs_planner_find("llmpq") && hs_planner_find("pipeedge") && hs_planner_find("uniform-pp"));
    /* simulate: throughput is B*n / latency, the pipeline is no faster than
     * its busiest stage */
    memset(&jb, 0, sizeof jb);
    jb.ndev = p.ndev;
    for (int j = 0; j < p.ndev; j++) {
        jb.dev[j] = p.dev[j];
        for (int l = p.first[j]; l < p.first[j + 1]; l++) jb.nbits[j][hs_bits_index(p.bits[l])]++;
    }
    jb.B = cfg.B, jb.s = cfg.s, jb.n = cfg.n, jb.eta = p.eta, jb.xi = p.xi, jb.kv_bits = 16;
    CHECK_OK(hs_pipe_offline(&m, c, &pc, &jb, &r, &err), &err);
    CHECK_REL(r.throughput, cfg.B * cfg.n / r.latency_s, 1e-12);
    for (int j = 0; j < p.ndev; j++) CHECK(r.latency_s >= r.busy_s[j]);
    CHECK(r.prefill_s < r.latency_s);
    /* an impossible fit is one clear error */
    {
        hs_model big;
        CHECK_OK(hs_model_find(&big, "bloom-176b", &err), &err);
        CHECK_INT(hs_pq_plan_search(&big, c, &cfg, &pc, HS_PQ_LLMPQ, &p, &err), HS_ENOFIT);
        CHECK(strstr(err.msg, "does not fit") != NULL);
    }
    hs_cluster_destroy(c);
}

/* The pipeline simulation on one GPU, one sequence: prefill, head, then
 * n-1 decode steps each followed by the head, nothing overlapping. */
static void test_pipe_exact(void)
{
    hs_err err = {0};
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg pc;
    hs_pipe_job jb;
    hs_pipe_result r, r2;
    const hs_gpu *g;
    double want;
    hs_perf_cfg_defaults(&pc);
    CHECK_OK(hs_model_find(&m, "opt-13b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "llmpq-c1", &err), &err);
    if (!c) return;
    g = hs_cluster_gpu(c, 0);
    memset(&jb, 0, sizeof jb);
    jb.ndev = 1;
    jb.nbits[0][hs_bits_index(16)] = 30;
    jb.nbits[0][hs_bits_index(8)] = 10;
    jb.B = 1, jb.s = 64, jb.n = 3, jb.eta = 1, jb.xi = 1, jb.kv_bits = 16;
    /* on the calibrated layer (perf.model auto, the default), then on the
     * roofline: the pipeline sums the per-layer costs exactly */
    for (int roof = 0; roof < 2; roof++) {
        hs_qlat_cal *cal = NULL;
        if (roof) snprintf(pc.model, sizeof pc.model, "roofline");
        CHECK_OK(hs_qlat_cal_build(&cal, &m, c, &pc, 64, 1, &err), &err);
        CHECK(roof ? cal == NULL : cal != NULL);
        CHECK_OK(hs_pipe_offline(&m, c, &pc, &jb, &r, &err), &err);
        CHECK(roof ? r.latency[0] == '\0' : strstr(r.latency, "v100-32g: ") == r.latency);
        want = 30 * hs_qlat_prefill_s(&m, g, 16, 1, 64, 16, &pc, cal) +
               10 * hs_qlat_prefill_s(&m, g, 8, 1, 64, 16, &pc, cal) + hs_qlat_embed_s(&m, g, 64, &pc) +
               hs_qlat_head_s(&m, g, 1, &pc, cal);
        CHECK_NEAR(r.prefill_s, want, 1e-8);
        for (int t = 1; t < 3; t++)
            want += 30 * hs_qlat_decode_s(&m, g, 16, 1, 64 + t, 16, &pc, cal) +
                    10 * hs_qlat_decode_s(&m, g, 8, 1, 64 + t, 16, &pc, cal) + hs_qlat_embed_s(&m, g, 1, &pc) +
                    hs_qlat_head_s(&m, g, 1, &pc, cal);
        CHECK_NEAR(r.latency_s, want, 1e-8);
        CHECK_INT(r.events, 6);
        hs_qlat_cal_free(cal);
    }
    hs_perf_cfg_defaults(&pc);
    /* bigger micro-batches of the same work do not slow one GPU down here */
    jb.B = 8, jb.eta = 1, jb.xi = 8;
    CHECK_OK(hs_pipe_offline(&m, c, &pc, &jb, &r, &err), &err);
    jb.eta = 8;
    CHECK_OK(hs_pipe_offline(&m, c, &pc, &jb, &r2, &err), &err);
    CHECK(r2.latency_s <= r.latency_s);
    /* bad jobs are errors, not crashes */
    jb.xi = 0;
    CHECK_INT(hs_pipe_offline(&m, c, &pc, &jb, &r, &err), HS_EINVAL);
    hs_cluster_destroy(c);
}

/* The baselines' bit-widths against the paper's evidence.  PipeEdge lowers
 * the width from FP16 until the model fits (paper Sec. 6); Table 4/5 give
 * no widths but its PPL: above the model's INT8 PPL (same tables: OPT-13b
 * 11.23, OPT-30b 10.70, OPT-66b 10.34, BLOOM-176b 10.90) it ran below 8
 * bits.  With LLM-PQ's own GPU budget (llmpq.c: 95% of the memory CUDA
 * reports less 1930 MiB, and its estimator's temporaries) our PipeEdge
 * agrees on 9 of the 11 clusters (8 with the nominal memory and our own
 * temporaries, 4 with the former 512 MiB reserve); C2 and C8 differ. */
static void test_baseline_bits(void)
{
    static const struct { int c; const char *m; double ppl, ppl8; } t[] = {
        {1, "opt-13b", 11.78, 11.23}, {2, "opt-13b", 11.38, 11.23}, {3, "opt-30b", 10.70, 10.70},
        {4, "opt-30b", 10.78, 10.70}, {5, "opt-66b", 10.50, 10.34}, {6, "opt-66b", 10.34, 10.34},
        {7, "bloom-176b", 10.97, 10.90}, {8, "bloom-176b", 10.97, 10.90}, {9, "opt-30b", 10.78, 10.70},
        {10, "opt-66b", 10.33, 10.34}, {11, "bloom-176b", 10.90, 10.90},
    };
    hs_err err = {0};
    hs_perf_cfg pc;
    hs_pq_cfg cfg;
    int agree = 0;
    hs_perf_cfg_defaults(&pc);
    hs_pq_cfg_defaults(&cfg);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        hs_model m;
        hs_cluster *c = NULL;
        hs_pq_plan pe;
        char name[32];
        int low_paper = t[i].ppl > t[i].ppl8 + 0.02;
        snprintf(name, sizeof name, "llmpq-c%d", t[i].c);
        CHECK_OK(hs_model_find(&m, t[i].m, &err), &err);
        CHECK_OK(hs_cluster_find(&c, name, &err), &err);
        if (!c) continue;
        CHECK_OK(hs_pq_plan_search(&m, c, &cfg, &pc, HS_PQ_PIPEEDGE, &pe, &err), &err);
        check_plan(&m, c, &cfg, &pe);
        printf("C%d %s PipeEdge: ours %d bits, paper PPL %.2f (INT8 %.2f): %s\n", t[i].c, t[i].m,
               pe.bits[0], t[i].ppl, t[i].ppl8, low_paper ? "below 8 bits" : "8 bits or more");
        agree += (pe.bits[0] < 8) == low_paper;
        hs_cluster_destroy(c);
    }
    printf("PipeEdge widths agreeing with the paper's PPL: %d of 11\n", agree);
    CHECK(agree >= 9);   /* C2 and C8 differ: 8 bits fit ours, the paper's PPL says fewer */
}

int main(void)
{
    hs_test_root();
    test_fig7();
    test_latency_orderings();
    test_qlat_cal();
    test_ilp_vs_brute();
    test_pipe_exact();
    test_search();
    test_baseline_bits();
    return hs_check_result();
}
