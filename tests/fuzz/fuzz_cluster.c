/* fuzz_cluster.c - the cluster topology JSON reader (profiles/clusters/);
 * GPU names resolve against the tree's profiles/gpus. */
#include "fuzz.h"

#include "hw/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    hs_fuzz_check(hs_cluster_load(&c, hs_fuzz_file(data, size, "cluster.json"), &err), &err);
    hs_cluster_destroy(c);
    return 0;
}
