/* fingerprint.c - iServe fingerprints measured by replaying one-request
 * schedules of a 1- and 2-layer model; see fingerprint.h. */
#include "fingerprint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/model.h"
#include "replay.h"
#include "serve/schedule.h"

#define FP_BLOCK 16

/* Writes the schedule of one request: prefill of P, then O - 1 decoding
 * steps, on a model of K layers. */
static int write_schedule(const char *path, const hs_exec_fp_opts *o, const hs_exec *x, int K, int O,
                          hs_err *err)
{
    hs_sched_writer *w;
    hs_sched_header h;
    hs_sched_request q = {0, 0, 0, o->prompt, O};
    hs_sched_iter it;
    hs_sched_chunk ch = {0, o->prompt, 0, o->prompt};
    hs_sched_dec d = {0, 0};
    int64_t zero = 0;
    int rc, P = o->prompt;
    if ((rc = hs_sched_writer_open(&w, path, NULL, 0, err))) return rc;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "%.47s", o->model);
    snprintf(h.gpu, sizeof h.gpu, "%.31s", x->info.device);
    snprintf(h.perf_model, sizeof h.perf_model, "fingerprint");
    h.tp = o->tp;
    h.pp = 1;
    h.bits = o->bits;
    h.kv_bits = o->kv_bits;
    h.layers = K;
    h.block_size = FP_BLOCK;
    h.kv_blocks = (P + O + FP_BLOCK - 1) / FP_BLOCK + 1;
    hs_sched_write_header(w, &h);
    hs_sched_write_request(w, &q);
    memset(&it, 0, sizeof it);
    it.end = 1;
    it.kv_blocks_used = (P + FP_BLOCK - 1) / FP_BLOCK;
    it.n_pre = 1;
    it.pre = &ch;
    it.n_first = 1;
    it.first = &zero;
    it.n_finished = O == 1;
    it.finished = &zero;
    hs_sched_write_iter(w, &it);
    for (int i = 1; i < O; i++) {
        memset(&it, 0, sizeof it);
        it.start = i;
        it.end = i + 1;
        d.ctx = P + i;   /* the context with the token being written */
        it.kv_blocks_used = (P + i + FP_BLOCK - 1) / FP_BLOCK;
        it.n_dec = 1;
        it.dec = &d;
        it.n_finished = i == O - 1;
        it.finished = &zero;
        hs_sched_write_iter(w, &it);
    }
    return hs_sched_writer_close(w, 0, err);
}

/* Sums measured_ns over the rows of a replay CSV. */
static int sum_csv(const char *path, double *ns, hs_err *err)
{
    FILE *f = fopen(path, "r");
    char line[256];
    int rows = 0;
    *ns = 0;
    if (!f) return hs_errf(err, HS_EIO, "fingerprint: cannot read the replay output %s", path);
    while (fgets(line, sizeof line, f)) {
        long long it, v;
        if (line[0] == '#' || !strncmp(line, "it,", 3)) continue;
        if (sscanf(line, "%lld,%lld", &it, &v) != 2) {
            fclose(f);
            return hs_errf(err, HS_EPARSE, "fingerprint: replay output %s: bad row \"%.40s\"", path, line);
        }
        *ns += (double)v;
        rows++;
    }
    fclose(f);
    return rows ? 0 : hs_errf(err, HS_EPARSE, "fingerprint: replay output %s has no rows", path);
}

static int scratch(char *path, size_t cap, hs_err *err)
{
    const char *dir = getenv("TMPDIR");
    int fd;
    snprintf(path, cap, "%s/hetsim-fp-XXXXXX", dir && *dir ? dir : "/tmp");
    if ((fd = mkstemp(path)) < 0) return hs_errf(err, HS_EIO, "fingerprint: cannot create a scratch file in %s", dir && *dir ? dir : "/tmp");
    close(fd);
    return 0;
}

int hs_exec_fingerprint(const hs_exec_fp_opts *o, hs_exec *x, FILE *out, hs_err *err)
{
    hs_model m;
    char sched[1024], csv[1024];
    int rc, distinct = 0;
    const char *wq = o->bits == 16 ? "fp16" : o->bits == 8 ? "int8" : o->bits == 4 ? "int4" : NULL;
    if (!wq) return hs_errf(err, HS_EINVAL, "fingerprint: --bits %d is not 16, 8 or 4", o->bits);
    if (o->kv_bits != 16) return hs_errf(err, HS_EINVAL, "fingerprint: --kv-bits %d (the executor's cache is 16-bit)", o->kv_bits);
    if (o->prompt < 1) return hs_errf(err, HS_EINVAL, "fingerprint: --prompt %d < 1", o->prompt);
    for (int i = 1; i < o->n_outputs; i++) distinct |= o->outputs[i] != o->outputs[0];
    if (o->n_outputs < 2 || !distinct)
        return hs_errf(err, HS_EINVAL, "fingerprint: --outputs needs two distinct lengths (TTFT and TPOT)");
    if (o->n_layers < 1) return hs_errf(err, HS_EINVAL, "fingerprint: --layers is empty");
    if (strlen(o->model) >= sizeof ((hs_sched_header *)0)->model)
        return hs_errf(err, HS_EINVAL, "fingerprint: --model \"%s\": give a model name from models/", o->model);
    if ((rc = hs_model_find(&m, o->model, err))) return rc;
    for (int k = 0; k < o->n_layers; k++)
        if (o->layers[k] < 1 || o->layers[k] > m.layers)
            return hs_errf(err, HS_EINVAL, "fingerprint: --layers %d (1..%d for %s)", o->layers[k], m.layers, m.name);
    for (int k = 0; k < o->n_outputs; k++)
        if (o->outputs[k] < 1 || o->prompt + o->outputs[k] > m.max_seq_len)
            return hs_errf(err, HS_EINVAL, "fingerprint: prompt %d + output %d exceeds %s's %d-token context",
                           o->prompt, o->outputs[k], m.name, m.max_seq_len);
    /* Private scratch files (mkstemp: no clash, no symlink games in /tmp). */
    if ((rc = scratch(sched, sizeof sched, err))) return rc;
    if ((rc = scratch(csv, sizeof csv, err))) {
        remove(sched);
        return rc;
    }
    fprintf(out, "# hetsim iServe fingerprint v1 (see sim/plan/iserve.h), measured by hetsim-exec on %s (%s)\n",
            x->info.device, x->info.backend);
    fprintf(out, "model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib\n");
    for (int k = 0; k < o->n_layers; k++)
        for (int j = 0; j < o->n_outputs; j++) {
            hs_exec_replay_opts ro;
            hs_exec_replay *r = NULL;
            double ns;
            memset(&ro, 0, sizeof ro);
            ro.path = sched;
            ro.replica = -1;
            ro.repeats = o->repeats > 0 ? o->repeats : 1;
            ro.out = csv;
            ro.quiet = 1;
            if ((rc = write_schedule(sched, o, x, o->layers[k], o->outputs[j], err)) ||
                (rc = hs_exec_replay_plan(&r, &ro, err)))
                goto fail;
            x->bytes_alloc = 0;
            rc = hs_exec_replay_run(r, x, err);
            hs_exec_replay_free(r);
            if (rc || (rc = sum_csv(csv, &ns, err))) goto fail;
            fprintf(out, "%s,%d,%d,1,%s,%d,none,%d,%d,%.6f,%.6f\n", m.name, o->layers[k], o->tp, wq, o->kv_bits,
                    o->prompt, o->outputs[j], ns * 1e-6, x->bytes_alloc * o->tp / 1073741824.0);
            if (!o->quiet)
                fprintf(stderr, "fingerprint: %d layer(s), output %d: %.3f ms, %.3f GiB\n", o->layers[k],
                        o->outputs[j], ns * 1e-6, x->bytes_alloc * o->tp / 1073741824.0);
        }
    rc = ferror(out) ? hs_errf(err, HS_EIO, "fingerprint: write failed") : 0;
fail:
    remove(sched);
    remove(csv);
    return rc;
}
