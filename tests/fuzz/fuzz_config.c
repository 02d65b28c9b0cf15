/* fuzz_config.c - the run configuration JSON reader (hetsim run --config). */
#include "fuzz.h"

#include "cli/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hs_run_cfg c; /* large: off the stack */
    hs_err err = {0};
    hs_run_cfg_defaults(&c);
    hs_fuzz_check(hs_run_cfg_load(&c, hs_fuzz_file(data, size, "run.json"), &err), &err);
    return 0;
}
