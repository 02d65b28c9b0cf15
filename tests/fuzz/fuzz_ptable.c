/* fuzz_ptable.c - the measured latency tables (profiles/<gpu>/<model>/):
 * the input holds the folder's files, each after a line "//// NAME"
 * (meta.json, dense.csv, attn_prefill.csv, attn_decode.csv, allreduce.csv,
 * sendrecv.csv). */
#include "fuzz.h"

#include <stdlib.h>

#include "perf/table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    int rc = hs_ptable_read(&t, hs_fuzz_dir(data, size, "meta.json"), &err);
    hs_fuzz_check(rc, &err);
    if (!rc && t) {
        /* whatever rows were read: a full grid or none, never a crash */
        for (int tp = 1; tp <= 8; tp *= 2) {
            double *g = NULL;
            int nb, nc;
            hs_err e2 = {0};
            hs_fuzz_check(hs_ptable_decode_grid(t, tp, &nb, &nc, &g, &e2), &e2);
            if (g && (nb < 1 || nc < 2)) __builtin_trap();
            free(g);
        }
    }
    hs_ptable_destroy(t);
    return 0;
}
