/* fuzz_sharegpt.c - the ShareGPT conversations JSON reader. */
#include "fuzz.h"

#include "workload/workload_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = hs_fuzz_file(data, size, "sharegpt.json");
    hs__pairs p = {0};
    hs_err err = {0};
    hs_fuzz_check(hs__pairs_load_json(&p, path, 0, &err), &err);
    hs__pairs_free(&p);
    return 0;
}
