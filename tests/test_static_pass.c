/* test_review_static_pass.c - (review) the static policy's forward-pass
 * size, which sizes the latency tables and the activation memory and so the
 * KV blocks, must follow the batch the policy can actually form.
 *
 * static.c schedule() caps a batch at min(static_batch, max_num_seqs, slots)
 * but pass_tokens() returns static_batch * max_model_len in int:
 *   1. with max_num_seqs below static_batch the pass is overestimated, which
 *      takes KV blocks away (or refuses a deployment that fits);
 *   2. the product overflows int (undefined behaviour) and can wrap to a
 *      plausible positive size that is silently used. */
#include <limits.h>

#include "check.h"
#include "fixture.h"

/* The static policy's options with batch size b. */
static const void *static_opts(hs_popts *all, int b)
{
    char v[32];
    hs_err err = {0};
    hs_policies_opts_defaults(all);
    snprintf(v, sizeof v, "%d", b);
    CHECK_OK(hs_policies_opt_set(all, "static_batch", v, "test", &err), &err);
    return hs_policy_opts_of(all, hs_policy_find("static"));
}

static int pass_tokens(int static_batch, int max_num_seqs, int32_t mml)
{
    hs_engine_cfg c;
    hs_popts all[HS_MAX_POLICIES];
    const void *o = static_opts(all, static_batch);
    hs_engine_cfg_defaults(&c);
    c.max_num_seqs = max_num_seqs;
    return hs_engine_pass_tokens(&c, hs_policy_find("static"), o, mml);
}

/* KV blocks of one llama-2-7b replica on an A100-80G under the static policy. */
static int64_t kv_blocks(int static_batch, int max_num_seqs)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_layout l;
    hs_engine_cfg ec;
    hs_popts all[HS_MAX_POLICIES];
    const void *o = static_opts(all, static_batch);
    hs_err err = {0};
    int64_t b;
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "dgx-a100", &err), &err);
    hs_engine_cfg_defaults(&ec);
    ec.max_num_seqs = max_num_seqs;
    memset(&l, 0, sizeof l);
    l.pp = 1;
    l.kv_bits = 16;
    l.stage[0].tp = 1;
    l.stage[0].layers = m.layers;
    l.stage[0].bits = 16;
    l.stage[0].gpus[0] = 0;
    b = hs_layout_kv_blocks(&m, c, &l, &ec,
                            hs_engine_pass_tokens(&ec, hs_policy_find("static"), o, m.max_seq_len), &err);
    hs_cluster_destroy(c);
    return b;
}

int main(void)
{
    hs_test_root();
    /* A batch never holds more than max_num_seqs sequences of at most
     * max_model_len tokens. */
    CHECK(pass_tokens(64, 8, 4096) <= 8 * 4096);
    /* ... so the memory model must not depend on static_batch beyond that. */
    {
        int64_t b8 = kv_blocks(8, 8), b64 = kv_blocks(64, 8);
        printf("KV blocks: static_batch 8 -> %lld, static_batch 64 (max_num_seqs 8) -> %lld\n",
               (long long)b8, (long long)b64);
        CHECK_INT(b64, b8);
    }
    /* 65536 x 65537 = 2^32 + 65536 wraps to 65536 in int: the pass must be
     * either a clear error or at least one padded context-long prompt per
     * sequence the batch can hold, never a wrapped value. */
    {
        int p = pass_tokens(65536, 256, 65537);
        printf("pass tokens for static_batch 65536, max_model_len 65537: %d\n", p);
        /* 256 slots x 65537 tokens is past HS_MAX_PASS_TOKENS: the error (-1) */
        CHECK_INT(p, -1);
        CHECK_INT(pass_tokens(4, 256, 4096), 4 * 4096);
    }
    return hs_check_result();
}
