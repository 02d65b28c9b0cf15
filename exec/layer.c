/* layer.c - per-rank layer shapes; see layer.h. */
#include "layer.h"

#include <string.h>

int hs_exec_shape_make(hs_exec_shape *s, const hs_model *m, int tp, hs_err *err)
{
    memset(s, 0, sizeof *s);
    if (tp < 1) return hs_errf(err, HS_EINVAL, "--tp %d: must be at least 1", tp);
    if (m->heads % tp)
        return hs_errf(err, HS_EINVAL, "--tp %d: does not divide the %d attention heads of %s",
                       tp, m->heads, m->name);
    if (m->head_dim > HS_EXEC_MAX_HEAD_DIM)
        return hs_errf(err, HS_EINVAL, "%s: head_dim %d is above the %d the attention kernels take",
                       m->name, m->head_dim, HS_EXEC_MAX_HEAD_DIM);
    s->tp = tp;
    s->hidden = m->hidden;
    s->heads = m->heads / tp;
    s->kv_heads = hs_model_kv_heads_per_rank(m, tp);
    s->head_dim = m->head_dim;
    s->qkv_n = (s->heads + 2 * s->kv_heads) * s->head_dim;
    s->attn_k = s->heads * s->head_dim;
    s->ffn = (m->ffn + tp - 1) / tp;
    s->gated = m->ffn_gated;
    s->up_n = s->ffn * (s->gated ? 2 : 1);
    s->vocab = (m->vocab + tp - 1) / tp;
    s->act = !strcmp(m->activation, "silu") ? HS_EXEC_SILU
             : !strcmp(m->activation, "gelu") ? HS_EXEC_GELU : HS_EXEC_RELU;
    s->norm = !strcmp(m->norm, "layernorm") ? HS_EXEC_LAYERNORM : HS_EXEC_RMSNORM;
    s->rope = !strcmp(m->position, "rope");
    s->learned_pos = !strcmp(m->position, "learned");
    s->max_pos = m->max_seq_len;
    s->norm_eps = 1e-5f;
    s->rope_theta = 10000.0f;
    if (s->rope && s->head_dim % 2)
        return hs_errf(err, HS_EINVAL, "%s: rotary embedding needs an even head_dim, not %d",
                       m->name, s->head_dim);
    return 0;
}
