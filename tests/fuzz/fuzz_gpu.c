/* fuzz_gpu.c - the GPU datasheet JSON reader (profiles/gpus/). */
#include "fuzz.h"

#include "hw/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_gpu g;
    hs_err err = {0};
    hs_fuzz_check(hs_gpu_load(&g, hs_fuzz_file(data, size, "gpu.json"), &err), &err);
    return 0;
}
