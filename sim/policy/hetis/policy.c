/* policy.c - the `hetis` runtime policy: continuous batching (as `vllm`)
 * whose decode attention runs on the head placement of hetis.h; the
 * dispatcher is hetis.c, its min-max program hetis_lp.c.
 *
 * Each lane step: the head books are synced (members that left are
 * dropped, joiners dispatched), memory pressure is relieved and the
 * compute balance checked (hs_hetis_prepare); then waiting requests are
 * admitted first-come first-served as under `vllm`, with one more condition:
 * every stage's devices must have room for the prompt's groups; then the
 * books are synced again (preemption may have evicted members).
 * Replicas without Hetis state behave exactly as under `vllm`. */
#include "serve/plugin.h"
#include "policy/hetis/hetis.h"

/* Admission also needs room for the prompt's heads on the devices. */
static int heads_fit(void *ctx, hs_engine *e, hs_lane *l, int32_t r, const char **why)
{
    (void)ctx;
    if (hs_hetis_admit_ok(e, l, r)) return HS_ADMIT_OK;
    /* Nothing holds cache on the replica's devices and still no room: the
     * prompt can never be placed. */
    if (l->n_dec == 0 && l->prefilling.len == 0 && l->it.n_chunks == 0 && hs_hetis_idle(e, l)) {
        *why = "prompt exceeds the free cache of the replica's devices";
        return HS_ADMIT_DROP;
    }
    return HS_ADMIT_STOP;
}

static int schedule(hs_engine *e, hs_lane *l)
{
    if (hs_hetis_prepare(e, l)) return 0; /* it stopped the run (hs__engine_fail) */
    if (!hs_lane_continuous(e, l, 0, heads_fit, NULL)) return 0;
    hs_hetis_resync(e, l);
    return l->it.n_chunks > 0 || l->it.decode;
}

/* A completion hook (even the default one) keeps fast-forward off: every
 * step must pass through the head books. */
static void complete(hs_engine *e, hs_lane *l)
{
    hs_lane_complete(e, l);
}

const hs_policy_ops hs_policy_hetis = {
    .name = "hetis",
    .help = "continuous batching with Hetis head-level attention offload to attention workers (needs a hetis deployment)",
    .schedule = schedule,
    .complete = complete,
    .opts = hs_hetis_cfg_fields,
    .opts_size = sizeof(hs_hetis_cfg),
    .replicas_setup = hs_hetis_setup,
    .stage_ns = hs_hetis_stage_ns,
    .report = hs_hetis_report,
    .disagg = 1,   /* complete is hs_lane_complete's, hand-overs included */
    .attn_offload = 1,
};
