/* gpu.c - GPU spec loading and data-root resolution; see hw.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "hw/hw.h"

#ifndef HS_SOURCE_ROOT
#define HS_SOURCE_ROOT "."
#endif

const char *hs_data_root(void)
{
    const char *r = getenv("HETSIM_ROOT");
    return (r && *r) ? r : HS_SOURCE_ROOT;
}

int hs_resolve(char *buf, size_t cap, const char *dir, const char *name,
               hs_err *err)
{
    size_t n = strlen(name);
    int w;
    if (n == 0) return hs_errf(err, HS_EINVAL, "empty %s name", dir);
    if (strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".json")))
        w = snprintf(buf, cap, "%s", name);
    else
        w = snprintf(buf, cap, "%s/%s/%s.json", hs_data_root(), dir, name);
    if (w < 0 || (size_t)w >= cap)
        return hs_errf(err, HS_ERANGE, "%s: path too long", name);
    return 0;
}

/* The on-disk schema; converted to SI units after loading. */
typedef struct gpu_json {
    char name[32], display[64], price_source[512];
    double fp16_tflops, int8_tops, mem_gib, mem_bw_gbs, nvlink_gbs, pcie_gbs,
        tdp_w, price_per_hour;
    int bf16;
} gpu_json;

static const hs_field gpu_fields[] = {
    HS_FIELD_STR(gpu_json, name, 1, NULL, "GPU name, equals the file name"),
    HS_FIELD_STR(gpu_json, display, 1, NULL, "human-readable name"),
    HS_FIELD_NUM(gpu_json, fp16_tflops, HS_F_DOUBLE, 1, 0, 0.1, 1e5, "dense FP16 TFLOPS"),
    HS_FIELD_NUM(gpu_json, bf16, HS_F_BOOL, 1, 0, 0, 1, "supports BF16"),
    HS_FIELD_NUM(gpu_json, int8_tops, HS_F_DOUBLE, 1, 0, 0, 1e5, "dense INT8 TOPS"),
    HS_FIELD_NUM(gpu_json, mem_gib, HS_F_DOUBLE, 1, 0, 0.5, 4096, "memory, GiB"),
    HS_FIELD_NUM(gpu_json, mem_bw_gbs, HS_F_DOUBLE, 1, 0, 1, 1e5, "memory bandwidth, GB/s"),
    HS_FIELD_NUM(gpu_json, nvlink_gbs, HS_F_DOUBLE, 1, 0, 0, 1e5, "NVLink per direction, GB/s"),
    HS_FIELD_NUM(gpu_json, pcie_gbs, HS_F_DOUBLE, 1, 0, 0.1, 1e4, "PCIe per direction, GB/s"),
    HS_FIELD_NUM(gpu_json, tdp_w, HS_F_DOUBLE, 1, 0, 1, 1e4, "TDP, W"),
    HS_FIELD_NUM(gpu_json, price_per_hour, HS_F_DOUBLE, 1, 0, 0, 1e4, "$ per GPU-hour"),
    HS_FIELD_STR(gpu_json, price_source, 1, NULL, "where the price comes from"),
    {0},
};

int hs_gpu_load(hs_gpu *g, const char *path, hs_err *err)
{
    cJSON *root;
    gpu_json j;
    int rc = hs_json_load(path, &root, err);
    if (rc) return rc;
    hs_conf_defaults(&j, gpu_fields);
    rc = hs_conf_fill(&j, gpu_fields, root, path, err);
    cJSON_Delete(root);
    if (rc) return rc;
    memset(g, 0, sizeof *g);
    memcpy(g->name, j.name, sizeof g->name);
    memcpy(g->display, j.display, sizeof g->display);
    memcpy(g->price_source, j.price_source, sizeof g->price_source);
    g->flops16 = j.fp16_tflops * 1e12;
    g->bf16 = j.bf16;
    g->ops8 = j.int8_tops * 1e12;
    g->mem_bytes = j.mem_gib * 1073741824.0;
    g->mem_bw = j.mem_bw_gbs * 1e9;
    g->nvlink_bw = j.nvlink_gbs * 1e9;
    g->pcie_bw = j.pcie_gbs * 1e9;
    g->tdp_w = j.tdp_w;
    g->price_per_hour = j.price_per_hour;
    return 0;
}

int hs_gpu_find(hs_gpu *g, const char *name, hs_err *err)
{
    char path[1024];
    int rc = hs_resolve(path, sizeof path, "profiles/gpus", name, err);
    if (rc) return rc;
    rc = hs_gpu_load(g, path, err);
    if (rc == HS_EIO)
        return hs_errf(err, HS_ENOTFOUND, "unknown GPU \"%s\" (no %s; see `hetsim list gpus`)",
                       name, path);
    return rc;
}
