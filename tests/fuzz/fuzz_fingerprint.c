/* fuzz_fingerprint.c - iServe's fingerprint CSV and the estimator built
 * from it. */
#include "fuzz.h"

#include "plan/iserve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_isv_fp f;
    hs_isv_est e;
    hs_err err = {0};
    int rc = hs_isv_fp_read(&f, hs_fuzz_file(data, size, "fp.csv"), "synthetic", &err);
    hs_fuzz_check(rc, &err);
    if (rc) return 0;
    hs_fuzz_check(hs_isv_estimate(&e, &f, 40, &err), &err);
    hs_isv_fp_free(&f);
    return 0;
}
