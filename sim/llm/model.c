/* model.c - model loading and the memory model; see model.h. */
#include "llm/model.h"

#include <math.h>
#include <string.h>

#include "core/conf.h"
#include "hw/hw.h"

#define F(m, t, lo, hi, h) HS_FIELD_NUM(hs_model, m, t, 1, 0, lo, hi, h)
static const hs_field model_fields[] = {
    HS_FIELD_STR(hs_model, name, 1, NULL, "model name, equals the file name"),
    HS_FIELD_STR(hs_model, display, 1, NULL, "human-readable name"),
    HS_FIELD_STR(hs_model, source, 1, NULL, "where the numbers come from"),
    HS_FIELD_STR(hs_model, arch, 1, NULL, "decoder or encoder-decoder"),
    F(layers, HS_F_INT, 1, 1000, "decoder layers"),
    F(encoder_layers, HS_F_INT, 0, 1000, "encoder layers"),
    F(hidden, HS_F_INT, 1, 1 << 20, "hidden size"),
    F(heads, HS_F_INT, 1, 4096, "query heads"),
    F(kv_heads, HS_F_INT, 1, 4096, "key/value heads"),
    F(head_dim, HS_F_INT, 1, 4096, "per-head dimension"),
    F(ffn, HS_F_INT, 1, 1 << 22, "intermediate size"),
    F(ffn_gated, HS_F_BOOL, 0, 1, "gated MLP (3 matrices)"),
    HS_FIELD_STR(hs_model, activation, 1, NULL, "silu, gelu or relu"),
    HS_FIELD_STR(hs_model, norm, 1, NULL, "rmsnorm or layernorm"),
    HS_FIELD_STR(hs_model, position, 1, NULL, "rope, learned, alibi, relative"),
    F(parallel_attn, HS_F_BOOL, 0, 1, "attention and MLP in parallel"),
    HS_FIELD_NUM(hs_model, qkv_fused, HS_F_BOOL, 0, 0, 0, 1, "Q, K and V one linear layer in the reference implementation"),
    F(vocab, HS_F_INT, 1, 1 << 24, "vocabulary size"),
    F(max_seq_len, HS_F_INT, 1, 1 << 24, "context window, tokens"),
    F(tied_embeddings, HS_F_BOOL, 0, 1, "LM head shares the embedding"),
    F(bias, HS_F_BOOL, 0, 1, "linear layers have biases"),
    F(params_b, HS_F_DOUBLE, 1e-9, 1e5, "published parameters, billions"),
    {0},
};
#undef F

int hs_model_load(hs_model *m, const char *path, hs_err *err)
{
    cJSON *root;
    int rc = hs_json_load(path, &root, err);
    if (rc) return rc;
    hs_conf_defaults(m, model_fields);
    rc = hs_conf_fill(m, model_fields, root, path, err);
    cJSON_Delete(root);
    if (rc) return rc;
    if (strcmp(m->arch, "decoder") && strcmp(m->arch, "encoder-decoder"))
        return hs_errf(err, HS_EPARSE, "%s: arch: \"%s\" is not decoder or encoder-decoder",
                       path, m->arch);
    if (!strcmp(m->arch, "decoder") && m->encoder_layers)
        return hs_errf(err, HS_EPARSE, "%s: encoder_layers: must be 0 for a decoder model", path);
    if (!strcmp(m->arch, "encoder-decoder") && !m->encoder_layers)
        return hs_errf(err, HS_EPARSE, "%s: encoder_layers: an encoder-decoder model needs at least one", path);
    if (strcmp(m->position, "rope") && strcmp(m->position, "learned") &&
        strcmp(m->position, "alibi") && strcmp(m->position, "relative"))
        return hs_errf(err, HS_EPARSE, "%s: position: \"%s\" is not rope, learned, alibi or relative",
                       path, m->position);
    if (m->heads % m->kv_heads)
        return hs_errf(err, HS_EPARSE, "%s: kv_heads: %d does not divide heads %d",
                       path, m->kv_heads, m->heads);
    if (strcmp(m->norm, "rmsnorm") && strcmp(m->norm, "layernorm"))
        return hs_errf(err, HS_EPARSE, "%s: norm: \"%s\" is not rmsnorm or layernorm", path, m->norm);
    if (strcmp(m->activation, "silu") && strcmp(m->activation, "gelu") &&
        strcmp(m->activation, "relu"))
        return hs_errf(err, HS_EPARSE, "%s: activation: \"%s\" is not silu, gelu or relu",
                       path, m->activation);
    return 0;
}

int hs_model_find(hs_model *m, const char *name, hs_err *err)
{
    char path[1024], dym[160];
    int rc = hs_resolve(path, sizeof path, "models", name, err);
    if (rc) return rc;
    rc = hs_model_load(m, path, err);
    if (rc == HS_EIO)
        return hs_errf(err, HS_ENOTFOUND, "unknown model \"%s\"%s (no %s; see `hetsim list models`)",
                       name, hs_suggest_file(dym, sizeof dym, "models", name), path);
    return rc;
}

static double attn_params(const hs_model *m)
{
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double p = (double)m->hidden * (q + 2 * kv) + q * m->hidden;
    if (m->bias) p += q + 2 * kv + m->hidden;
    return p;
}

static double mlp_params(const hs_model *m)
{
    double p = (m->ffn_gated ? 3.0 : 2.0) * m->hidden * m->ffn;
    if (m->bias) p += m->ffn + m->hidden;
    return p;
}

static double norm_params(const hs_model *m, int n)
{
    return (double)n * m->hidden * (strcmp(m->norm, "layernorm") ? 1 : 2);
}

int hs_model_linear_calls(const hs_model *m)
{
    return (m->qkv_fused ? 1 : 3) + 1 + (m->ffn_gated ? 3 : 2);
}

double hs_model_layer_params(const hs_model *m)
{
    double p = attn_params(m) + mlp_params(m) + norm_params(m, m->parallel_attn ? 1 : 2);
    if (m->encoder_layers) p += attn_params(m) + norm_params(m, 1); /* cross-attention */
    return p;
}

double hs_model_enc_layer_params(const hs_model *m)
{
    return attn_params(m) + mlp_params(m) + norm_params(m, 2);
}

double hs_model_embed_params(const hs_model *m)
{
    double p = (double)m->vocab * m->hidden;
    if (!strcmp(m->position, "learned")) p += (double)m->max_seq_len * m->hidden;
    return p;
}

double hs_model_head_params(const hs_model *m)
{
    return m->tied_embeddings ? 0 : (double)m->vocab * m->hidden;
}

double hs_model_params(const hs_model *m)
{
    return m->layers * hs_model_layer_params(m) +
           m->encoder_layers * hs_model_enc_layer_params(m) +
           hs_model_embed_params(m) + hs_model_head_params(m) + norm_params(m, 1);
}

double hs_model_dec_ratio(const hs_model *m)
{
    double q = (double)m->heads * m->head_dim;
    return m->encoder_layers ? 1 + 2.0 * m->hidden * q / hs_model_enc_layer_params(m) : 1;
}

int hs_model_max_context(const hs_model *m)
{
    return m->encoder_layers ? 2 * m->max_seq_len : m->max_seq_len;
}

double hs_model_cross_kv_ratio(const hs_model *m)
{
    double kv = (double)m->kv_heads * m->head_dim;
    return m->encoder_layers ? 2.0 * m->hidden * kv / hs_model_enc_layer_params(m) : 0;
}

double hs_weight_bytes_per_param(int bits)
{
    if (bits >= 16) return 2.0;
    /* FP16 scale + FP16 zero point per 128-weight group. */
    return bits / 8.0 + 4.0 / 128.0;
}

int hs_model_kv_heads_per_rank(const hs_model *m, int tp)
{
    return (m->kv_heads + tp - 1) / tp;
}

int hs_model_layer_ops(const hs_model *m, int tp)
{
    int norms = m->parallel_attn ? 1 : 2, reduces = tp > 1 ? (m->parallel_attn ? 1 : 2) : 0;
    int ops = norms * (strcmp(m->norm, "rmsnorm") ? 2 : 1);
    ops += 1 + (strcmp(m->position, "rope") ? 0 : 1) + 2 + 1 + 3;
    ops += reduces * (m->bias ? 2 : 1);
    return ops;
}

double hs_model_kv_bytes_token_layer(const hs_model *m, int tp, int kv_bits)
{
    return 2.0 * hs_model_kv_heads_per_rank(m, tp) * m->head_dim * (kv_bits / 8.0);
}

void hs_model_stage_mem(const hs_model *m, int layers, int first, int last,
                        int tp, int bits, int kv_bits, int max_tokens,
                        int max_seqs, hs_stage_mem *out)
{
    hs_model_stage_mem_enc(m, layers, first ? m->encoder_layers : 0, first, last, tp, bits,
                           kv_bits, max_tokens, max_seqs, out);
}

void hs_model_stage_mem_enc(const hs_model *m, int layers, int enc_layers, int first,
                            int last, int tp, int bits, int kv_bits, int max_tokens,
                            int max_seqs, hs_stage_mem *out)
{
    double wb = hs_weight_bytes_per_param(bits);
    double q = (double)m->heads * m->head_dim / tp;
    double kv = (double)hs_model_kv_heads_per_rank(m, tp) * m->head_dim;
    double w = layers * hs_model_layer_params(m) * wb / tp;
    /* Embeddings and the LM head stay FP16 (as LLM-PQ and most quantisers do). */
    if (first) w += hs_model_embed_params(m) * 2.0 / tp;
    if (last) {
        w += (m->tied_embeddings && !first ? hs_model_embed_params(m)
                                           : hs_model_head_params(m)) * 2.0 / tp;
        w += norm_params(m, 1) * 2.0;
    }
    w += enc_layers * hs_model_enc_layer_params(m) * wb / tp;
    out->weights = w;
    /* Peak of one layer's forward pass: the residual stream and its normed
     * copy, the QKV output, and the MLP intermediate (two of them when
     * gated), FP16; plus FP32 logits for the sampled sequences. */
    out->activation = (double)max_tokens *
                          (2.0 * m->hidden + q + 2 * kv +
                           (m->ffn_gated ? 2.0 : 1.0) * m->ffn / tp) * 2.0 +
                      (last ? (double)max_seqs * m->vocab * 4.0 / tp : 0);
    out->kv_per_token = layers * hs_model_kv_bytes_token_layer(m, tp, kv_bits);
    if (!layers && enc_layers) out->kv_per_token = m->hidden * 2.0;
}
