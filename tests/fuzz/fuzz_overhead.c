/* fuzz_overhead.c - the engine overhead profile JSON (profiles/engines/)
 * and Vidur's cpu_overheads.csv; an input starting with '{' is the JSON. */
#include "fuzz.h"

#include <stdlib.h>

#include "perf/overhead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_err err = {0};
    if (size && data[0] == '{') {
        hs_ovh_profile p;
        hs_fuzz_check(hs_ovh_load(&p, hs_fuzz_file(data, size, "engine.json"), &err), &err);
    } else {
        hs_ovh_sample *s = NULL;
        int n = 0;
        hs_fuzz_check(hs_ovh_read_vidur(hs_fuzz_file(data, size, "cpu_overheads.csv"), &s, &n, &err), &err);
        free(s);
    }
    return 0;
}
