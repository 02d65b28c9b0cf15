/* main.c - hetsim-exec, the executor's command line: `profile`, `info` and
 * `replay`.
 * Only this file decides exit codes: 0 success, 2 for every error (one
 * line on stderr naming what is wrong). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "info.h"
#include "layer.h"
#include "llm/model.h"
#include "profile.h"
#include "fingerprint.h"
#include "replay.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim-exec <command> [options]\n"
            "\n"
            "hetsim-exec runs the work of one transformer layer of a model on this\n"
            "machine and measures it, for the simulator's latency tables.\n"
            "\n"
            "commands:\n"
            "  profile   measure per-op tables of a model (dense ops, decode and prefill attention)\n"
            "  info      show the device and its measured GEMM and copy ceilings\n"
            "  replay    execute a schedule exported by `hetsim run --emit-schedule` and time each iteration\n"
            "  fingerprint  measure iServe fingerprints (1- and 2-layer models, one request) for `hetsim iserve`\n"
            "\n"
            "`hetsim-exec <command> --help` describes each command.\n");
}

static void profile_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim-exec profile --model M [options]\n"
            "\n"
            "Measures one transformer layer of model M on one TP rank and writes\n"
            "dense.csv, attn_decode.csv, attn_prefill.csv and meta.json (format in\n"
            "exec/README.md).  Times are medians in microseconds.\n"
            "\n"
            "options:\n"
            "  --model M          model name (models/M.json) or path\n"
            "  --tp T[,T...]      tensor-parallel degrees; each must divide the heads (default 1)\n"
            "  --bits B[,B...]    weight bits of the GEMM ops: 16, 8, 4 (default 16)\n"
            "  --backend NAME     cuda or cpu (default: cuda when a GPU is present, else cpu)\n"
            "  --dtype D          fp16 or bf16 on cuda (default fp16); fp32 on cpu\n"
            "  --out DIR          output folder (default profiles/<device>/<model>/)\n"
            "  --quick            small grids and few repeats (seconds on the CPU with tiny-test)\n"
            "  --tokens N[,N...]  the dense ops' token counts, increasing (default: the backend's\n"
            "                     grid); e.g. 1000,1001,1008 to see what an unaligned count costs\n"
            "  --chunks N[,N...]  prefill attention's chunk lengths, increasing (default: the\n"
            "                     backend's grid); --tokens and --chunks need --out\n"
            "  --timing T         how each op is timed: alone (default), each run by itself;\n"
            "                     cold, queued behind a 256 MiB write; stream, what one more op\n"
            "                     costs in a stream of kernels, behind 128 MiB reads (exec/README.md)\n"
            "  --rest R           after each row, idle R times as long as it ran (R in [0, 10],\n"
            "                     at most 60 s a row), so that a sweep does not hold the GPU at its\n"
            "                     power cap (default 1 on a GPU, 0 on the CPU; 0: back to back)\n"
            "  --kv-pool-gib G    attention rows over a KV pool (K and V) of at least G GiB, as a\n"
            "                     serving step's cache spans (default: what the grid needs)\n"
            "  --clocks           also write clocks.csv: the GPU's SM clock, power and clock-event\n"
            "                     reasons while each row was timed (NVML, from the driver; without\n"
            "                     it a warning, and the tables as usual)\n"
            "  --quiet            no progress lines on stderr\n");
}

static void info_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim-exec info [--backend cuda|cpu] [--dtype fp16|bf16|fp32]\n"
            "\n"
            "Prints the device, its memory, and its measured ceilings: the GEMM\n"
            "throughput of a large square GEMM (FP16/BF16 cuBLAS on a GPU, FP32\n"
            "OpenBLAS sgemm on the CPU) and the copy bandwidth (device-to-device\n"
            "memcpy on a GPU, memcpy on the CPU).\n");
}

static void replay_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim-exec replay FILE [options]\n"
            "\n"
            "Executes the iterations of one replica of a schedule written by\n"
            "`hetsim run --emit-schedule FILE` on this machine and writes the measured\n"
            "time of each: a comment line (device, backend, model, replica, layers_run,\n"
            "scale, pad_tokens, kv_blocks_capacity), the header it,measured_ns, one row\n"
            "per iteration.\n"
            "One TP rank's shapes are run (tp from the schedule): tensor-parallel\n"
            "collectives are not executed and not in measured_ns, nor is the scheduler's\n"
            "per-step overhead.  The KV cache is a real paged pool that grows and frees\n"
            "as the schedule says.  Details in exec/README.md.\n"
            "\n"
            "options:\n"
            "  --backend NAME     cuda or cpu (default: cuda when a GPU is present, else cpu)\n"
            "  --dtype D          fp16 or bf16 on cuda (default fp16); fp32 on cpu\n"
            "  --replica R        replica to replay (default: the first in the file)\n"
            "  --layers K         layers to run; layer time is scaled by layers/K (default: all)\n"
            "  --repeats N        timed runs per iteration, the median is written (default 1)\n"
            "  --out FILE         CSV file (default: stdout)\n"
            "  --clocks FILE      also write the GPU's SM clock, power and clock-event reasons over\n"
            "                     each iteration's timed runs to FILE (it,samples,sm_mhz_mean,...;\n"
            "                     NVML, from the driver; without it a warning and no FILE)\n"
            "  --stamps FILE      also write each iteration's host start and end (it,start_ns,\n"
            "                     end_ns; CLOCK_MONOTONIC, one clock for every process on the host:\n"
            "                     replays run side by side can be lined up) to FILE\n"
            "  --op-times FILE    also run each iteration once more with every op timed by itself\n"
            "                     (the host waits after each) and write it,op,time_ns to FILE: what\n"
            "                     a step pays op by op, to set beside the table's rows\n"
            "  --pad-tokens P     run the GEMMs on the step's tokens rounded up to a multiple of P\n"
            "                     (vLLM v0.1 padded to 8 for the tensor cores); default: unpadded\n"
            "  --check            print the KV pool's books after each iteration on stderr\n"
            "  --progress         a progress line every 2 s (done/total, elapsed, ETA) even when\n"
            "                     stderr is not a terminal (on a terminal it is the default)\n"
            "  --quiet            no notes or summary on stderr (nor progress, unless --progress)\n");
}

static int fail(const hs_err *err)
{
    fprintf(stderr, "hetsim-exec: %s\n", err->msg);
    return 2;
}

/* --clocks: a monitor of the GPU's clocks for the timed work (gpumon.h).
 * The measurement is what was asked for, so a machine without NVML still
 * gets it, with a warning instead of the clocks. */
static void clocks_open(hs_exec *x, int say)
{
    hs_err err = {0};
    /* every 10 ms: NVML's clock and power refresh no faster, and each
     * sample takes the driver's lock (gpumon.h) */
    if (hs_gpumon_open_nvml(&x->mon, x->info.pci_bus_id, 10000, &err))
        fprintf(stderr, "hetsim-exec: warning: --clocks: %s; measuring without clocks\n", err.msg);
    else if (say)
        fprintf(stderr, "hetsim-exec: clocks from %s\n", hs_gpumon_describe(x->mon));
}

static void clocks_close(hs_exec *x)
{
    hs_gpumon_close(x->mon);
    x->mon = NULL;
}

/* Parses "a,b,c" into at most cap ints in [lo, hi]. */
static int parse_list(const char *flag, const char *s, int *out, int cap, int lo, int hi,
                      int *n, hs_err *err)
{
    const char *p = s;
    *n = 0;
    for (;;) {
        char *end;
        long v;
        errno = 0;
        v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ','))
            return hs_errf(err, HS_EINVAL, "%s %s: expected integers in %d..%d separated by commas",
                           flag, s, lo, hi);
        if (*n == cap) return hs_errf(err, HS_EINVAL, "%s %s: at most %d values", flag, s, cap);
        out[(*n)++] = (int)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

static int parse_dtype(const char *s, int *dtype, hs_err *err)
{
    if (!strcmp(s, "fp16")) *dtype = HS_EXEC_FP16;
    else if (!strcmp(s, "bf16")) *dtype = HS_EXEC_BF16;
    else if (!strcmp(s, "fp32")) *dtype = HS_EXEC_FP32;
    else return hs_errf(err, HS_EINVAL, "--dtype %s: not fp16, bf16 or fp32", s);
    return 0;
}

/* Options every command takes. */
typedef struct common {
    const char *backend;
    int dtype;
} common;

/* Takes the value of option argv[*i] of command `cmd`, which must be one of
 * `flags` (NULL-terminated; --backend and --dtype are always accepted and
 * stored in c).  Returns 1 with *val set (and *i advanced) for a
 * command-specific option, 0 when it was a common one, or an error. */
static int take_option(const char *cmd, int argc, char **argv, int *i, const char *const *flags,
                       common *c, const char **val, hs_err *err)
{
    const char *a = argv[*i];
    int known = !strcmp(a, "--backend") || !strcmp(a, "--dtype");
    for (int k = 0; !known && flags[k]; k++) known = !strcmp(a, flags[k]);
    if (!known)
        return hs_errf(err, HS_EINVAL, "%s: unknown option \"%s\" (see hetsim-exec %s --help)", cmd, a, cmd);
    if (*i + 1 >= argc) return hs_errf(err, HS_EINVAL, "%s needs a value", a);
    *val = argv[++*i];
    if (!strcmp(a, "--backend")) {
        c->backend = *val;
        return 0;
    }
    if (!strcmp(a, "--dtype")) return parse_dtype(*val, &c->dtype, err);
    return 1;
}

static int cmd_profile(int argc, char **argv)
{
    hs_err err = {0};
    hs_exec_profile_opts o;
    common c = {NULL, -1};
    const char *model = NULL;
    hs_model m;
    hs_exec x;
    char dir[1024];
    int rc, clocks = 0;
    memset(&o, 0, sizeof o);
    o.tp[0] = 1;
    o.n_tp = 1;
    o.bits[0] = 16;
    o.n_bits = 1;
    o.progress = 1;
    o.rest = -1;
    for (int i = 1; i < argc; i++) {
        static const char *const flags[] = {"--model", "--tp", "--bits", "--out", "--timing", "--kv-pool-gib",
                                            "--tokens", "--chunks", "--rest", NULL};
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            profile_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) { o.quick = 1; continue; }
        if (!strcmp(a, "--quiet")) { o.progress = 0; continue; }
        if (!strcmp(a, "--clocks")) { clocks = 1; continue; }
        if ((rc = take_option("profile", argc, argv, &i, flags, &c, &v, &err)) < 0) return fail(&err);
        if (rc == 0) continue;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--timing")) {
            int mode = hs_exec_timing_parse(v);
            if (mode < 0) {
                hs_errf(&err, HS_EINVAL, "--timing %s: must be alone, cold or stream", v);
                return fail(&err);
            }
            o.timing = (hs_exec_timing_mode)mode;
        } else if (!strcmp(a, "--kv-pool-gib")) {
            char *end;
            double g = strtod(v, &end);
            if (end == v || *end || !(g > 0 && g <= 1e4)) {
                hs_errf(&err, HS_EINVAL, "--kv-pool-gib %s: must be a number of GiB in (0, 10000]", v);
                return fail(&err);
            }
            o.kv_pool_gib = g;
        } else if (!strcmp(a, "--rest")) {
            char *end;
            double r = strtod(v, &end);
            if (end == v || *end || !(r >= 0 && r <= 10)) {
                hs_errf(&err, HS_EINVAL, "--rest %s: must be a number in [0, 10]", v);
                return fail(&err);
            }
            o.rest = r == 0 ? 0 : r;   /* -0 too */
        } else if (!strcmp(a, "--tp")) {
            if (parse_list("--tp", v, o.tp, HS_EXEC_MAX_TPS, 1, 1024, &o.n_tp, &err)) return fail(&err);
        } else if (!strcmp(a, "--tokens") || !strcmp(a, "--chunks")) {
            int tok = !strcmp(a, "--tokens"), *l = tok ? o.tokens : o.chunks;
            int *n = tok ? &o.n_tokens : &o.n_chunks;
            if (parse_list(a, v, l, HS_EXEC_MAX_TOKENS, 1, 1 << 20, n, &err)) return fail(&err);
            for (int t = 1; t < *n; t++)
                if (l[t] <= l[t - 1]) {
                    hs_errf(&err, HS_EINVAL, "%s %s: must be increasing", a, v);
                    return fail(&err);
                }
        } else {
            if (parse_list("--bits", v, o.bits, 3, 1, 64, &o.n_bits, &err)) return fail(&err);
            for (int b = 0; b < o.n_bits; b++)
                if (o.bits[b] != 16 && o.bits[b] != 8 && o.bits[b] != 4) {
                    hs_errf(&err, HS_EINVAL, "--bits %s: each must be 16, 8 or 4", v);
                    return fail(&err);
                }
        }
    }
    if (!model) {
        hs_errf(&err, HS_EINVAL, "profile: --model is required (see hetsim-exec profile --help)");
        return fail(&err);
    }
    if ((o.n_tokens || o.n_chunks) && !o.out) {
        /* a few token counts must not replace the device's table */
        hs_errf(&err, HS_EINVAL, "profile: %s need%s --out DIR (the default is the device's table)",
                o.n_tokens && o.n_chunks ? "--tokens and --chunks" : o.n_tokens ? "--tokens" : "--chunks",
                o.n_tokens && o.n_chunks ? "" : "s");
        return fail(&err);
    }
    if (hs_model_find(&m, model, &err)) return fail(&err);
    for (int i = 0; i < o.n_tp; i++) {
        hs_exec_shape s;
        if (hs_exec_shape_make(&s, &m, o.tp[i], &err)) return fail(&err);
    }
    if (hs_exec_open(&x, c.backend, c.dtype, &err)) return fail(&err);
    if (clocks) clocks_open(&x, o.progress);
    rc = hs_exec_profile(&x, &m, &o, dir, sizeof dir, &err);
    clocks = x.mon != NULL;
    clocks_close(&x);
    hs_exec_close(&x);
    if (rc) return fail(&err);
    printf("wrote %s/{dense.csv,attn_decode.csv,attn_prefill.csv,meta.json%s}\n", dir,
           clocks ? ",clocks.csv" : "");
    return 0;
}

static int cmd_info(int argc, char **argv)
{
    hs_err err = {0};
    common c = {NULL, -1};
    hs_exec x;
    hs_exec_ceilings ce;
    int rc;
    for (int i = 1; i < argc; i++) {
        static const char *const flags[] = {NULL};
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            info_usage(stdout);
            return 0;
        }
        if (take_option("info", argc, argv, &i, flags, &c, &v, &err) < 0) return fail(&err);
    }
    if (hs_exec_open(&x, c.backend, c.dtype, &err)) return fail(&err);
    rc = hs_exec_ceilings_measure(&x, &ce, &err);
    if (!rc) hs_exec_info_print(stdout, &x, &ce);
    hs_exec_close(&x);
    return rc ? fail(&err) : 0;
}

/* Parses an integer option value in [lo, hi]. */
static int parse_int(const char *flag, const char *v, int lo, int hi, int *out, hs_err *err)
{
    char *end;
    long n;
    errno = 0;
    n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi)
        return hs_errf(err, HS_EINVAL, "%s %s: expected an integer in %d..%d", flag, v, lo, hi);
    *out = (int)n;
    return 0;
}

static int cmd_replay(int argc, char **argv)
{
    hs_err err = {0};
    hs_exec_replay_opts o;
    hs_exec_replay *r = NULL;
    common c = {NULL, -1};
    hs_exec x;
    int rc;
    memset(&o, 0, sizeof o);
    o.replica = -1;
    o.repeats = 1;
    for (int i = 1; i < argc; i++) {
        static const char *const flags[] = {"--replica", "--layers", "--repeats", "--out", "--clocks",
                                            "--stamps", "--op-times", "--pad-tokens", NULL};
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            replay_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--check")) { o.check = 1; continue; }
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if (!strcmp(a, "--progress")) { o.progress = 1; continue; }
        if (a[0] != '-' || !a[1]) {
            if (o.path) {
                hs_errf(&err, HS_EINVAL, "replay: one schedule file only (\"%s\" and \"%s\")", o.path, a);
                return fail(&err);
            }
            o.path = a;
            continue;
        }
        if ((rc = take_option("replay", argc, argv, &i, flags, &c, &v, &err)) < 0) return fail(&err);
        if (rc == 0) continue;
        if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--clocks")) o.clocks = v;
        else if (!strcmp(a, "--stamps")) o.stamps = v;
        else if (!strcmp(a, "--op-times")) o.op_times = v;
        else if (!strcmp(a, "--replica")) {
            if (parse_int(a, v, 0, 1000000000, &o.replica, &err)) return fail(&err);
        } else if (!strcmp(a, "--layers")) {
            if (parse_int(a, v, 1, 100000, &o.layers, &err)) return fail(&err);
        } else if (!strcmp(a, "--pad-tokens")) {
            if (parse_int(a, v, 1, 256, &o.pad_tokens, &err)) return fail(&err);
        } else if (parse_int(a, v, 1, 100000, &o.repeats, &err)) {
            return fail(&err);
        }
    }
    if (!o.path) {
        hs_errf(&err, HS_EINVAL, "replay: no schedule file given (see hetsim-exec replay --help)");
        return fail(&err);
    }
    /* progress on a terminal unless --quiet; elsewhere only when asked */
    if (!o.progress && !o.quiet && isatty(2)) o.progress = 1;
    /* The whole file is checked before a device is opened. */
    if (hs_exec_replay_plan(&r, &o, &err)) return fail(&err);
    if (hs_exec_open(&x, c.backend, c.dtype, &err)) {
        hs_exec_replay_free(r);
        return fail(&err);
    }
    if (o.clocks) clocks_open(&x, !o.quiet);
    rc = hs_exec_replay_run(r, &x, &err);
    clocks_close(&x);
    hs_exec_replay_free(r);
    hs_exec_close(&x);
    return rc ? fail(&err) : 0;
}

static void fingerprint_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim-exec fingerprint --model M --outputs O1,O2 [options]\n"
            "\n"
            "Measures iServe's fingerprints of model M on this device: the model reduced\n"
            "to 1 and 2 hidden layers serves one request of --prompt tokens generating\n"
            "each --outputs length alone, replayed with a real paged KV cache.  Writes\n"
            "the fingerprint file `hetsim iserve --fingerprints DIR` reads from\n"
            "DIR/<model>.csv (one row per layers x output; pp 1; latency_ms the sum of\n"
            "the iterations, mem_gib the executor's allocations times tp).  Details in\n"
            "exec/fingerprint.h.\n"
            "\n"
            "options:\n"
            "  --model M          model name (models/M.json)\n"
            "  --outputs O,O..    output lengths, at least two distinct (e.g. 16,64)\n"
            "  --prompt P         prompt tokens (default 128)\n"
            "  --layers K,K..     hidden layers of the fingerprints (default 1,2)\n"
            "  --tp T             run one rank of TP degree T (default 1)\n"
            "  --bits B           weight bits 16, 8 or 4 (default 16)\n"
            "  --repeats N        timed runs per iteration, the median counts (default 3)\n"
            "  --backend NAME     cuda or cpu (default: cuda when a GPU is present, else cpu)\n"
            "  --dtype D          fp16 or bf16 on cuda (default fp16); fp32 on cpu\n"
            "  --out FILE         the fingerprint CSV (default: stdout); written whole or not at all\n"
            "  --quiet            no progress lines on stderr\n");
}

static int cmd_fingerprint(int argc, char **argv)
{
    hs_err err = {0};
    hs_exec_fp_opts o;
    common c = {NULL, -1};
    const char *outp = NULL;
    hs_exec x;
    FILE *out = stdout;
    char tmp[1100];
    int rc;
    memset(&o, 0, sizeof o);
    o.tp = 1;
    o.bits = 16;
    o.kv_bits = 16;
    o.prompt = 128;
    o.repeats = 3;
    o.layers[0] = 1;
    o.layers[1] = 2;
    o.n_layers = 2;
    for (int i = 1; i < argc; i++) {
        static const char *const flags[] = {"--model", "--outputs", "--prompt", "--layers", "--tp", "--bits",
                                            "--repeats", "--out", NULL};
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fingerprint_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if ((rc = take_option("fingerprint", argc, argv, &i, flags, &c, &v, &err)) < 0) return fail(&err);
        if (rc == 0) continue;
        if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--out")) outp = v;
        else if (!strcmp(a, "--outputs")) {
            if (parse_list(a, v, o.outputs, HS_EXEC_FP_MAX, 1, 1 << 20, &o.n_outputs, &err)) return fail(&err);
        } else if (!strcmp(a, "--layers")) {
            if (parse_list(a, v, o.layers, HS_EXEC_FP_MAX, 1, 100000, &o.n_layers, &err)) return fail(&err);
        } else if (!strcmp(a, "--prompt")) {
            if (parse_int(a, v, 1, 1 << 20, &o.prompt, &err)) return fail(&err);
        } else if (!strcmp(a, "--tp")) {
            if (parse_int(a, v, 1, 64, &o.tp, &err)) return fail(&err);
        } else if (!strcmp(a, "--bits")) {
            if (parse_int(a, v, 4, 16, &o.bits, &err)) return fail(&err);
        } else if (parse_int(a, v, 1, 1000, &o.repeats, &err)) {
            return fail(&err);
        }
    }
    if (!o.model) {
        hs_errf(&err, HS_EINVAL, "fingerprint: --model is required (see hetsim-exec fingerprint --help)");
        return fail(&err);
    }
    if (hs_exec_open(&x, c.backend, c.dtype, &err)) return fail(&err);
    x.bytes_alloc = 0;
    if (outp) {
        snprintf(tmp, sizeof tmp, "%s.tmp", outp);
        if (!(out = fopen(tmp, "w"))) {
            hs_exec_close(&x);
            hs_errf(&err, HS_EIO, "%s: cannot write", tmp);
            return fail(&err);
        }
    }
    rc = hs_exec_fingerprint(&o, &x, out, &err);
    hs_exec_close(&x);
    if (outp) {
        if (fclose(out) && !rc) rc = hs_errf(&err, HS_EIO, "%s: write failed", tmp);
        if (!rc && rename(tmp, outp)) rc = hs_errf(&err, HS_EIO, "%s: cannot rename to %s", tmp, outp);
        if (rc) remove(tmp);
    }
    return rc ? fail(&err) : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "hetsim-exec: no command given (see hetsim-exec --help)\n");
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "profile")) return cmd_profile(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "replay")) return cmd_replay(argc - 1, argv + 1);
    if (!strcmp(argv[1], "fingerprint")) return cmd_fingerprint(argc - 1, argv + 1);
    hs_eprintf("hetsim-exec: unknown command \"%s\" (see hetsim-exec --help)\n", argv[1]);
    return 2;
}
