/* fuzz_ptable.c - the measured latency tables (profiles/<gpu>/<model>/):
 * the input holds the folder's files, each after a line "//// NAME"
 * (meta.json, dense.csv, attn_prefill.csv, attn_decode.csv, allreduce.csv,
 * sendrecv.csv). */
#include "fuzz.h"

#include "perf/table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_fuzz_check(hs_ptable_read(&t, hs_fuzz_dir(data, size, "meta.json"), &err), &err);
    hs_ptable_destroy(t);
    return 0;
}
