/* fuzz_model.c - the model architecture JSON reader (models/). */
#include "fuzz.h"

#include "llm/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_model m;
    hs_err err = {0};
    hs_fuzz_check(hs_model_load(&m, hs_fuzz_file(data, size, "model.json"), &err), &err);
    return 0;
}
