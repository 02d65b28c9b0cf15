/* fuzz_vidur.c - Vidur's profiling CSVs imported as a latency table: the
 * input holds mlp.csv, attention.csv, all_reduce.csv and send_recv.csv,
 * each after a line "//// NAME", for the tiny-test model. */
#include "fuzz.h"

#include "perf/table.h"
#include "perf/vidur_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *const attn[] = {"attention.csv"};
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs__vidur_src s = {.root = hs_fuzz_dir(data, size, "mlp.csv"), .gpu = "a100", .model = "tiny-test",
                       .layout = "", .mlp = "mlp.csv", .mlp_note = "", .attn = attn, .n_attn = 1,
                       .net = {"all_reduce.csv", "send_recv.csv"}};
    hs_fuzz_check(hs__vidur_import_src(&t, &s, 0, NULL, &err), &err);
    hs_ptable_destroy(t);
    return 0;
}
