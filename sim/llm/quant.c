/* quant.c - LLM-PQ's memory model; see quant.h. */
#include "llm/quant.h"

#include <math.h>
#include <string.h>

const int hs_bits_set[HS_NBITS] = {16, 8, 4, 3};

int hs_bits_index(int bits)
{
    for (int k = 0; k < HS_NBITS; k++)
        if (hs_bits_set[k] == bits) return k;
    return -1;
}

int hs_bits_of(double v)
{
    return v >= 3 && v <= 16 && v == floor(v) && hs_bits_index((int)v) >= 0 ? (int)v : -1;
}

double hs_qmem_layer_linear(const hs_model *m)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim;
    double kv = (double)m->kv_heads * m->head_dim;
    return h * (q + 2 * kv) + q * h + (m->ffn_gated ? 3.0 : 2.0) * h * m->ffn;
}

double hs_qmem_layer(const hs_model *m, int bits)
{
    /* Two norms (one with parallel attention), weight (+ bias for
     * LayerNorm), FP16. */
    double norms = (m->parallel_attn ? 1.0 : 2.0) * m->hidden *
                   (strcmp(m->norm, "layernorm") ? 1 : 2);
    return hs_qmem_layer_linear(m) * bits / 8.0 + norms * 2.0;
}

double hs_qmem_embed(const hs_model *m)
{
    double pos = strcmp(m->position, "learned") ? 0 : (double)m->max_seq_len;
    return ((double)m->vocab * m->hidden * 2 + pos * m->hidden) * 2.0;
}

double hs_qmem_kv_layer(const hs_model *m, int v, int s, int n, int kv_bits)
{
    return 2.0 * v * (double)(s + n) * m->kv_heads * m->head_dim * kv_bits / 8.0;
}

double hs_qmem_temp(const hs_model *m, int B, int eta, int s, int n, int first)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim;
    double kv = (double)m->kv_heads * m->head_dim, f = m->ffn, ctx = (double)s + n;
    double qkvo = 2.0 * (q + 2 * kv + h);   /* Q, K, V and out-projection outputs, FP16 */
    /* Per prompt token: two LayerNorm outputs, Q/K/V/out, an FP32 softmax
     * counted at the hidden width, the two BMMs' outputs, the MLP's
     * activation and its two GEMMs' outputs. */
    double pre = (double)eta * s * (2 * h + qkvo + 4 * h + 2.0 * s + 2 * h + 2 * h + 2 * f + 2 * (h + f));
    /* Per sequence of a decode step: the same at one token, the scores
     * over the context (FP16 and FP32), and the copy of the layer's past
     * K and V that the runtime's concatenation makes. */
    double dec = (double)B * (2 * h + qkvo + 2 * ctx + 2 * h + 4 * ctx + 4 * ctx * kv + 2 * h + 2 * f + 2 * (h + f));
    double emb = (double)eta * s * 5 * h;   /* counted in elements there */
    if (!first) return dec;
    return fmax(pre, fmax(dec, emb));
}

double hs_qmem_layers_engine(const hs_model *m, const int n[HS_NBITS], int tp)
{
    double w = 0;
    for (int k = 0; k < HS_NBITS; k++)
        w += n[k] * hs_model_layer_params(m) * hs_weight_bytes_per_param(hs_bits_set[k]) / tp;
    return w;
}
