/* fuzz_deploy.c - the deployment JSON reader (hetsim run --deployment). */
#include "fuzz.h"

#include "serve/deploy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hs_deploy d;
    hs_err err = {0};
    int rc = hs_deploy_read(&d, hs_fuzz_file(data, size, "deploy.json"), &err);
    hs_fuzz_check(rc, &err);
    if (!rc) hs_deploy_free(&d);
    return 0;
}
