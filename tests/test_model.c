/* test_model.c - model files and the memory model (sim/llm/model.c).
 *
 * Every models/<name>.json loads (the directory is listed) with name equal to the
 * file name, and its computed parameter count is within 5% of params_b
 * (models/README.md).  Hand-computed values for llama-2-7b (MHA) and
 * llama-2-70b (GQA, 8 KV heads): per-layer parameters, KV bytes per token,
 * KV heads per TP rank (split, then replicated past 8 ranks), weight bytes
 * per parameter at 16/8/4/3 bits (GPTQ: FP16 scale + zero per 128 weights),
 * stage weights (embedding on the first stage, LM head and final norm on the
 * last, tied heads), activations linear in max_tokens, and malformed model
 * files rejected with a message naming the file and the key. */
#include "check.h"

#include <dirent.h>
#include <unistd.h>

#include "hw/hw.h"
#include "llm/model.h"

static const char *root;

static const char *write_tmp(const char *text)
{
    return hs_test_tmpfile("model", text);
}

static int msg_has(const hs_err *err, const char *a, const char *b)
{
    int ok = strstr(err->msg, a) != NULL && (b == NULL || strstr(err->msg, b) != NULL);
    if (!ok)
        fprintf(stderr, "  message was: %s\n  wanted: \"%s\" and \"%s\"\n", err->msg, a,
                b ? b : "");
    return ok;
}
#define CHECK_MSG(err, a, b) CHECK(msg_has(&(err), (a), (b)))

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

static void test_all_models(void)
{
    char dir[1200], names[64][64];
    DIR *d;
    struct dirent *e;
    int n = 0, loaded = 0;
    snprintf(dir, sizeof dir, "%s/models", root);
    d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (k <= 5 || strcmp(e->d_name + k - 5, ".json") || n >= 64) continue;
        snprintf(names[n++], 64, "%.*s", (int)(k - 5), e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 64, cmp_name);
    CHECK(n >= 19);
    for (int i = 0; i < n; i++) {
        hs_model m;
        hs_err err = {0};
        int rc = hs_model_find(&m, names[i], &err);
        double p, ratio;
        CHECK_OK(rc, &err);
        if (rc) continue;
        loaded++;
        CHECK_STR(m.name, names[i]);
        p = hs_model_params(&m);
        ratio = p / (m.params_b * 1e9);
        if (fabs(ratio - 1) > 0.05)
            fprintf(stderr, "%s: computed %.4g params vs params_b %.4g (ratio %.4f)\n",
                    names[i], p, m.params_b * 1e9, ratio);
        CHECK_NEAR(ratio, 1.0, 0.05);
        CHECK(m.heads % m.kv_heads == 0);
        CHECK(strcmp(m.arch, "decoder") ? m.encoder_layers > 0 : m.encoder_layers == 0);
        /* the memory model is positive and consistent for a whole-model stage */
        {
            hs_stage_mem sm;
            hs_model_stage_mem(&m, m.layers, 1, 1, 1, 16, 16, 1024, 16, &sm);
            CHECK_REL(sm.weights, 2.0 * p, 0.005);
            CHECK(sm.activation > 0 && sm.kv_per_token > 0);
        }
    }
    CHECK_INT(loaded, n);
}

static void test_llama2_7b(void)
{
    hs_model m;
    hs_err err = {0};
    double layer = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2.0 * 4096;
    double embed = 32000.0 * 4096;
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_INT(m.layers, 32);
    CHECK_INT(m.kv_heads, 32);
    CHECK_NEAR(hs_model_layer_params(&m), layer, 0);
    CHECK_NEAR(hs_model_embed_params(&m), embed, 0);
    CHECK_NEAR(hs_model_head_params(&m), embed, 0);       /* untied */
    CHECK_NEAR(hs_model_params(&m), 32 * layer + 2 * embed + 4096, 0);
    CHECK_REL(hs_model_params(&m), 6.74e9, 0.001);         /* README: 0.9997 */
    CHECK_NEAR(hs_model_enc_layer_params(&m), 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2.0 * 4096, 0);

    /* KV: 2 (K and V) * 32 heads * 128 dims * 2 bytes = 16384 per token-layer */
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 1), 32);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 1, 16), 16384, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 1, 8), 8192, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 2, 16), 8192, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 4, 16), 4096, 0);

    /* stage memory: one stage, whole model, FP16 */
    {
        hs_stage_mem s1, s2, f, l, mid, q4;
        double all = hs_model_params(&m);
        hs_model_stage_mem(&m, 32, 1, 1, 1, 16, 16, 2048, 64, &s1);
        CHECK_REL(s1.weights, 2.0 * all, 0.005);
        CHECK_REL(s1.weights, 2.0 * all, 1e-12);           /* in fact exact */
        CHECK_NEAR(s1.kv_per_token, 32 * 16384.0, 0);
        hs_model_stage_mem(&m, 32, 1, 1, 2, 16, 16, 2048, 64, &s2);
        CHECK_REL(s2.weights, s1.weights / 2, 0.005);      /* TP 2 halves */
        CHECK_NEAR(s2.weights, s1.weights / 2 + 4096, 0);  /* final norm replicated */
        CHECK_NEAR(s2.kv_per_token, s1.kv_per_token / 2, 0);

        /* two pipeline stages of 16 layers */
        hs_model_stage_mem(&m, 16, 1, 0, 1, 16, 16, 2048, 64, &f);
        hs_model_stage_mem(&m, 16, 0, 1, 1, 16, 16, 2048, 64, &l);
        hs_model_stage_mem(&m, 16, 0, 0, 1, 16, 16, 2048, 64, &mid);
        CHECK_NEAR(mid.weights, 16 * layer * 2, 0);
        CHECK_NEAR(f.weights, 16 * layer * 2 + embed * 2, 0);
        CHECK_NEAR(l.weights, 16 * layer * 2 + embed * 2 + 4096 * 2, 0);
        CHECK_NEAR(f.weights + l.weights, s1.weights, 1e-3);
        CHECK_NEAR(f.kv_per_token + l.kv_per_token, s1.kv_per_token, 0);

        /* 4-bit layers, FP16 embedding and head */
        hs_model_stage_mem(&m, 32, 1, 1, 1, 4, 16, 2048, 64, &q4);
        CHECK_NEAR(q4.weights, 32 * layer * (0.5 + 4.0 / 128) + 2 * embed * 2 + 4096 * 2, 1e-3);
        CHECK(q4.weights < s1.weights / 3);
        hs_model_stage_mem(&m, 32, 1, 1, 1, 16, 8, 2048, 64, &q4); /* KV 8 bits */
        CHECK_NEAR(q4.kv_per_token, s1.kv_per_token / 2, 0);
    }

    /* activation: linear in max_tokens; logits only on the last stage */
    {
        hs_stage_mem a0, a1, a2, b1;
        double per_tok = (2.0 * 4096 + 4096 + 2 * 4096 + 2.0 * 11008) * 2; /* 84992 */
        hs_model_stage_mem(&m, 16, 1, 0, 1, 16, 16, 0, 64, &a0);
        hs_model_stage_mem(&m, 16, 1, 0, 1, 16, 16, 1000, 64, &a1);
        hs_model_stage_mem(&m, 16, 1, 0, 1, 16, 16, 2000, 64, &a2);
        CHECK_NEAR(a0.activation, 0, 0);
        CHECK_NEAR(a1.activation, 1000 * per_tok, 1e-6);
        CHECK_NEAR(a2.activation, 2 * a1.activation, 1e-6);
        hs_model_stage_mem(&m, 16, 0, 1, 1, 16, 16, 1000, 64, &b1);
        CHECK_NEAR(b1.activation - a1.activation, 64.0 * 32000 * 4, 1e-6);
        hs_model_stage_mem(&m, 16, 0, 1, 1, 16, 16, 2000, 64, &a2);
        CHECK_NEAR(a2.activation - b1.activation, b1.activation - 64.0 * 32000 * 4, 1e-6);
        /* TP 2 shards Q, KV heads, the MLP intermediate and the logits */
        hs_model_stage_mem(&m, 16, 0, 1, 2, 16, 16, 1000, 64, &a2);
        CHECK_NEAR(a2.activation,
                   1000 * (2.0 * 4096 + 2048 + 2 * 2048 + 2.0 * 5504) * 2 + 64.0 * 16000 * 4, 1e-6);
    }
}

static void test_llama2_70b_gqa(void)
{
    hs_model m;
    hs_err err = {0};
    CHECK_OK(hs_model_find(&m, "llama-2-70b", &err), &err);
    CHECK_INT(m.heads, 64);
    CHECK_INT(m.kv_heads, 8);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 1), 8);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 2), 4);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 4), 2);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 8), 1);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 16), 1);   /* replicated */
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 1, 16), 2 * 8 * 128 * 2, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 4, 16), 2 * 2 * 128 * 2, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 8, 16), 2 * 1 * 128 * 2, 0);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 16, 16), 2 * 1 * 128 * 2, 0);
    /* per-layer: Q and O are 8192x8192, K and V 8192x1024, gated MLP 3x8192x28672 */
    CHECK_NEAR(hs_model_layer_params(&m),
               2.0 * 8192 * 8192 + 2.0 * 8192 * 1024 + 3.0 * 8192 * 28672 + 2 * 8192, 0);
    CHECK_REL(hs_model_params(&m), 68.98e9, 0.001);
    {
        hs_stage_mem s;
        hs_model_stage_mem(&m, 80, 1, 1, 8, 16, 16, 1, 1, &s);
        CHECK_NEAR(s.kv_per_token, 80 * 512.0, 0);
    }
}

static void test_tied_and_encdec(void)
{
    hs_model m;
    hs_err err = {0};
    hs_stage_mem one, f, l;
    double layer, embed;
    /* falcon-7b: MQA, tied head, parallel attention (one norm), layernorm */
    CHECK_OK(hs_model_find(&m, "falcon-7b", &err), &err);
    CHECK_NEAR(hs_model_head_params(&m), 0, 0);
    layer = 4544.0 * (71 * 64 + 2 * 64) + 71 * 64 * 4544.0 + 2.0 * 4544 * 18176 + 2 * 4544;
    embed = 65024.0 * 4544;
    CHECK_NEAR(hs_model_layer_params(&m), layer, 0);
    CHECK_INT(hs_model_kv_heads_per_rank(&m, 4), 1);
    CHECK_NEAR(hs_model_kv_bytes_token_layer(&m, 4, 16), 2 * 64 * 2, 0);
    hs_model_stage_mem(&m, 32, 1, 1, 1, 16, 16, 1, 1, &one);
    CHECK_NEAR(one.weights, (32 * layer + embed + 2 * 4544) * 2, 1e-3); /* embedding once */
    /* split: the last stage needs its own copy of the tied matrix */
    hs_model_stage_mem(&m, 16, 1, 0, 1, 16, 16, 1, 1, &f);
    hs_model_stage_mem(&m, 16, 0, 1, 1, 16, 16, 1, 1, &l);
    CHECK_NEAR(f.weights, (16 * layer + embed) * 2, 1e-3);
    CHECK_NEAR(l.weights, (16 * layer + embed + 2 * 4544) * 2, 1e-3);

    /* opt-13b: learned positions add max_seq_len x hidden to the embedding */
    CHECK_OK(hs_model_find(&m, "opt-13b", &err), &err);
    CHECK_NEAR(hs_model_embed_params(&m), ((double)m.vocab + m.max_seq_len) * m.hidden, 0);

    /* t5-11b: encoder layers live on the first stage */
    CHECK_OK(hs_model_find(&m, "t5-11b", &err), &err);
    CHECK_INT(m.encoder_layers, 24);
    CHECK(hs_model_layer_params(&m) > hs_model_enc_layer_params(&m)); /* cross-attention */
    hs_model_stage_mem(&m, 12, 1, 0, 1, 16, 16, 1, 1, &f);
    hs_model_stage_mem(&m, 12, 0, 1, 1, 16, 16, 1, 1, &l);
    CHECK_NEAR(f.weights - l.weights,
               24 * hs_model_enc_layer_params(&m) * 2 + hs_model_embed_params(&m) * 2 -
                   (hs_model_embed_params(&m) + m.hidden) * 2, 1e-3);
}

static void test_weight_bytes(void)
{
    CHECK_NEAR(hs_weight_bytes_per_param(16), 2.0, 0);
    CHECK_NEAR(hs_weight_bytes_per_param(8), 1.0 + 4.0 / 128, 0);
    CHECK_NEAR(hs_weight_bytes_per_param(4), 0.5 + 4.0 / 128, 0);
    CHECK_NEAR(hs_weight_bytes_per_param(3), 0.375 + 4.0 / 128, 0);
}

/* A good model file with one line replaced (or removed when with == NULL). */
static const char *model_text(const char *key, const char *with)
{
    static const char *lines[] = {
        "\"name\": \"tm\"", "\"display\": \"T\"", "\"source\": \"test\"",
        "\"arch\": \"decoder\"", "\"layers\": 2", "\"encoder_layers\": 0",
        "\"hidden\": 256", "\"heads\": 4", "\"kv_heads\": 2", "\"head_dim\": 64",
        "\"ffn\": 688", "\"ffn_gated\": true", "\"activation\": \"silu\"",
        "\"norm\": \"rmsnorm\"", "\"position\": \"rope\"", "\"parallel_attn\": false",
        "\"vocab\": 1000", "\"max_seq_len\": 2048", "\"tied_embeddings\": false",
        "\"bias\": false", "\"params_b\": 0.001963", NULL};
    return hs_test_json_lines(lines, key, with);
}

static void model_bad(const char *text, int want_rc, const char *want1, const char *want2)
{
    hs_model m;
    hs_err err = {0};
    const char *path = write_tmp(text);
    CHECK_INT(hs_model_load(&m, path, &err), want_rc);
    CHECK_MSG(err, path, want1);
    if (want2) CHECK_MSG(err, path, want2);
}

static void test_bad_models(void)
{
    hs_model m;
    hs_err err = {0};
    const char *p = write_tmp(model_text(NULL, NULL));
    CHECK_OK(hs_model_load(&m, p, &err), &err);
    CHECK_STR(m.name, "tm");
    CHECK_INT(m.kv_heads, 2);

    model_bad(model_text("bias", "\"bias\": false, \"rotary_dim\": 64"), HS_EPARSE,
              "rotary_dim", "unknown key");
    model_bad(model_text("vocab", NULL), HS_EPARSE, "vocab", "missing");
    model_bad(model_text("kv_heads", "\"kv_heads\": 3"), HS_EPARSE, "kv_heads", NULL);
    model_bad(model_text("arch", "\"arch\": \"transformer\""), HS_EPARSE, "arch", "transformer");
    model_bad(model_text("encoder_layers", "\"encoder_layers\": 2"), HS_EPARSE,
              "encoder_layers", NULL);
    model_bad(model_text("norm", "\"norm\": \"batchnorm\""), HS_EPARSE, "norm", NULL);
    model_bad(model_text("activation", "\"activation\": \"tanh\""), HS_EPARSE, "activation", NULL);
    model_bad(model_text("hidden", "\"hidden\": \"256\""), HS_EPARSE, "hidden", NULL);
    model_bad(model_text("ffn_gated", "\"ffn_gated\": \"true\""), HS_EPARSE, "ffn_gated", NULL);
    model_bad(model_text("layers", "\"layers\": 0"), HS_ERANGE, "layers", NULL);
    model_bad(model_text("heads", "\"heads\": 4.5"), HS_ERANGE, "heads", NULL);
    model_bad(model_text("params_b", "\"params_b\": -1"), HS_ERANGE, "params_b", NULL);
    model_bad("{\n  \"name\": \"tm\",\n  \"layers\": 2\n  \"hidden\": 256\n}\n", HS_EPARSE,
              ":4:", NULL);

    CHECK_INT(hs_model_find(&m, "no-such-model", &err), HS_ENOTFOUND);
    CHECK_MSG(err, "no-such-model", NULL);
}

int main(void)
{
    root = hs_test_root();
    test_all_models();
    test_llama2_7b();
    test_llama2_70b_gqa();
    test_tied_and_encdec();
    test_weight_bytes();
    test_bad_models();
    return hs_check_result();
}
