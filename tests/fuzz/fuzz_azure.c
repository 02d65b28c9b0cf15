/* fuzz_azure.c - the CSV trace reader (Azure 2023/2024, ShareGPT length
 * CSV) as `hetsim trace stats` and `hetsim run --trace` use it: a source of
 * kind azure and sharegpt-csv over the bytes, then the length table. */
#include "fuzz.h"

#include "workload/workload_int.h"

static void source(const char *path, const char *kind)
{
    hs_workload_cfg cfg;
    hs_source *s = NULL;
    hs_trace_stats st;
    hs_err err = {0};
    int rc;
    hs_workload_defaults(&cfg);
    snprintf(cfg.kind, sizeof cfg.kind, "%s", kind);
    snprintf(cfg.path, sizeof cfg.path, "%s", path);
    cfg.max_requests = 0;
    rc = hs_source_open(&s, &cfg, &err);
    if (!rc) rc = hs_trace_stats_compute(s, &st, &err);
    hs_fuzz_check(rc, &err);
    hs_source_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = hs_fuzz_file(data, size, "trace.csv");
    hs__pairs p = {0};
    hs_err err = {0};
    source(path, "azure");
    source(path, "sharegpt-csv");
    hs_fuzz_check(hs__pairs_load_csv(&p, path, 4096, &err), &err);
    hs__pairs_free(&p);
    return 0;
}
