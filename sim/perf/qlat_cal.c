/* qlat_cal.c - the calibrated FP16 layer of LLM-PQ's cost model (qlat.h):
 * one FP16 layer per GPU type, built by the latency model (hs_perf_build). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"
#include "perf/qlat.h"
#include "perf/qlat_int.h"

int hs_qlat_cal_build(hs_qlat_cal **out, const hs_model *m, const hs_cluster *c,
                      const hs_perf_cfg *pc, int max_tokens, int max_seqs, hs_err *err)
{
    hs_perf_cfg cfg = *pc;
    hs_qlat_cal *q;
    int rc = 0;
    *out = NULL;
    if (!strcmp(pc->model, "roofline")) return 0;
    if (max_tokens < 1 || max_seqs < 1)
        return hs_errf(err, HS_ERANGE, "calibrated layer: need max_tokens and max_seqs >= 1 (got %d, %d)",
                       max_tokens, max_seqs);
    /* the kernels alone: a serving engine's host cost is not LPTorch's */
    snprintf(cfg.engine, sizeof cfg.engine, "none");
    if (!(q = calloc(1, sizeof *q)) || !(q->t = calloc((size_t)c->n_types, sizeof *q->t)) ||
        !(q->prov = calloc(1, sizeof *q->prov))) {
        hs_qlat_cal_free(q);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    q->max_tokens = max_tokens;
    q->max_seqs = max_seqs;
    q->prov->expected_err = -1;
    for (int k = 0; k < c->n_types && !rc; k++) {
        hs_layout l;
        hs_perf p;
        int id = 0;
        while (c->gpu_type[id] != k) id++;
        /* two stages on the GPU: the first holds only the embedding, the
         * second one layer and, in its head array, the LM head */
        memset(&l, 0, sizeof l);
        l.pp = 2;
        l.kv_bits = 16;
        for (int s = 0; s < 2; s++) {
            l.stage[s].tp = 1;
            l.stage[s].layers = s;      /* the first holds only the embedding */
            l.stage[s].bits = 16;
            l.stage[s].gpus[0] = id;
        }
        if ((rc = hs_perf_build(&p, &cfg, m, c, &l, max_tokens, max_seqs, err))) break;
        snprintf(q->t[k].gpu, sizeof q->t[k].gpu, "%s", c->types[k].name);
        q->t[k].dense = p.stage[1].dense;
        q->t[k].head = p.stage[1].head;
        p.stage[1].dense = p.stage[1].head = NULL;
        q->n = k + 1;
        hs_perf_merge_calib(q->prov, &p);
        hs_perf_free(&p);
    }
    if (rc) {
        hs_qlat_cal_free(q);
        return rc;
    }
    *out = q;
    return 0;
}
