/* gpu.c - GPU spec loading and data-root resolution; see hw.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include "core/conf.h"
#include "core/str.h"
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
    char name[32], display[64], price_source[512], same_chip_as[32], memory[16];
    double fp16_tflops, fp32_tflops, int8_tops, mem_gib, mem_reported_gib, mem_bw_gbs, nvlink_gbs, pcie_gbs,
        tdp_w, price_per_hour, boost_mhz, intra_bw_gbs, intra_latency_us, inter_bw_gbs, inter_latency_us;
    int bf16, sms;
} gpu_json;

static const hs_field gpu_fields[] = {
    HS_FIELD_STR(gpu_json, name, 1, NULL, "GPU name, equals the file name"),
    HS_FIELD_STR(gpu_json, display, 1, NULL, "human-readable name"),
    HS_FIELD_NUM(gpu_json, fp16_tflops, HS_F_DOUBLE, 1, 0, 0.1, 1e5, "dense FP16 TFLOPS"),
    /* Optional: CUDA-core FP32 (GPTQ's dequantising kernels, perf/qlat.c). */
    HS_FIELD_NUM(gpu_json, fp32_tflops, HS_F_DOUBLE, 0, 0, 0, 1e5, "FP32 TFLOPS (CUDA cores, not tensor)"),
    HS_FIELD_NUM(gpu_json, bf16, HS_F_BOOL, 1, 0, 0, 1, "supports BF16"),
    HS_FIELD_NUM(gpu_json, int8_tops, HS_F_DOUBLE, 1, 0, 0, 1e5, "dense INT8 TOPS"),
    HS_FIELD_NUM(gpu_json, mem_gib, HS_F_DOUBLE, 1, 0, 0.5, 4096, "memory, GiB"),
    /* Optional: planners that budget what CUDA reports (LLM-PQ's) read it. */
    HS_FIELD_NUM(gpu_json, mem_reported_gib, HS_F_DOUBLE, 0, 0, 0.5, 4096,
                 "memory CUDA reports as the device's total (ECC and driver reservations off the nominal), GiB"),
    HS_FIELD_NUM(gpu_json, mem_bw_gbs, HS_F_DOUBLE, 1, 0, 1, 1e5, "memory bandwidth, GB/s"),
    /* Optional: the memory-bound ops' transfer model needs them (perf/fitted.h). */
    HS_FIELD_NUM(gpu_json, sms, HS_F_INT, 0, 0, 0, 10000, "streaming multiprocessors"),
    HS_FIELD_NUM(gpu_json, boost_mhz, HS_F_DOUBLE, 0, 0, 0, 1e5, "boost clock, MHz"),
    HS_FIELD_NUM(gpu_json, nvlink_gbs, HS_F_DOUBLE, 1, 0, 0, 1e5, "NVLink per direction, GB/s"),
    HS_FIELD_NUM(gpu_json, pcie_gbs, HS_F_DOUBLE, 1, 0, 0.1, 1e4, "PCIe per direction, GB/s"),
    HS_FIELD_NUM(gpu_json, tdp_w, HS_F_DOUBLE, 1, 0, 1, 1e4, "TDP, W"),
    HS_FIELD_NUM(gpu_json, price_per_hour, HS_F_DOUBLE, 1, 0, 0, 1e4, "$ per GPU-hour"),
    HS_FIELD_STR(gpu_json, price_source, 1, NULL, "where the price comes from"),
    /* The links a cluster shorthand (4x8xh100-sxm-80g) gives this GPU's
     * nodes; 0: the defaults in hw.h. */
    HS_FIELD_NUM(gpu_json, intra_bw_gbs, HS_F_DOUBLE, 0, 0, 0, 1e6, "GPU-to-GPU bandwidth inside a typical node, GB/s per direction"),
    HS_FIELD_NUM(gpu_json, intra_latency_us, HS_F_DOUBLE, 0, 0, 0, 1e7, "GPU-to-GPU latency inside a typical node, us"),
    HS_FIELD_NUM(gpu_json, inter_bw_gbs, HS_F_DOUBLE, 0, 0, 0, 1e6, "network bandwidth per GPU between nodes, GB/s per direction"),
    HS_FIELD_NUM(gpu_json, inter_latency_us, HS_F_DOUBLE, 0, 0, 0, 1e7, "network latency between nodes, us"),
    /* A GPU built on the same chip (same SMs, clocks and tensor cores) as
     * another: with no measurement of its own it borrows that GPU's
     * calibration, evaluated with its own datasheet figures. */
    HS_FIELD_STR(gpu_json, same_chip_as, 0, "", "GPU profile with the same chip, whose calibration it borrows"),
    /* Optional: the memory-bound ops' transfer model scales by it (perf/fitted.h). */
    HS_FIELD_STR(gpu_json, memory, 0, "", "memory technology: HBM2, HBM2e, HBM3, HBM3e, GDDR5, GDDR5X, GDDR6, GDDR6X or GDDR7"),
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
    memcpy(g->same_chip_as, j.same_chip_as, sizeof g->same_chip_as);
    if (g->same_chip_as[0]) {
        char sib[1024], dym[160];
        if (!strcmp(g->same_chip_as, g->name))
            return hs_errf(err, HS_EPARSE, "%s: same_chip_as: names the GPU itself", path);
        /* a typo would silently fall back to the transfer model */
        if (strchr(g->same_chip_as, '/') ||
            snprintf(sib, sizeof sib, "%s/profiles/gpus/%s.json", hs_data_root(), g->same_chip_as) >= (int)sizeof sib ||
            access(sib, R_OK) != 0)
            return hs_errf(err, HS_EPARSE, "%s: same_chip_as: unknown GPU \"%s\"%s", path, g->same_chip_as,
                           hs_suggest_file(dym, sizeof dym, "profiles/gpus", g->same_chip_as));
    }
    if ((j.sms > 0) != (j.boost_mhz > 0))
        return hs_errf(err, HS_EPARSE, "%s: %s: give sms and boost_mhz together (or neither)", path,
                       j.sms > 0 ? "boost_mhz" : "sms");
    if (j.memory[0]) {
        static const char *const known[] = {"HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5", "GDDR5X", "GDDR6", "GDDR6X", "GDDR7"};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= !strcmp(j.memory, known[i]);
        if (!ok)
            return hs_errf(err, HS_EPARSE, "%s: memory: \"%s\" is not HBM2, HBM2e, HBM3, HBM3e, GDDR5, GDDR5X, GDDR6, GDDR6X or GDDR7",
                           path, j.memory);
    }
    g->hbm = !strncmp(j.memory, "HBM", 3);
    g->sm_rate = j.sms * j.boost_mhz * 1e6;
    g->flops16 = j.fp16_tflops * 1e12;
    g->flops32 = j.fp32_tflops * 1e12;
    if (j.fp32_tflops > j.fp16_tflops)
        return hs_errf(err, HS_EPARSE, "%s: fp32_tflops: %g above fp16_tflops %g (FP16 GEMMs run at least at the FP32 rate)",
                       path, j.fp32_tflops, j.fp16_tflops);
    g->bf16 = j.bf16;
    g->ops8 = j.int8_tops * 1e12;
    if (j.mem_reported_gib > j.mem_gib)
        return hs_errf(err, HS_EPARSE, "%s: mem_reported_gib: %g above mem_gib %g (CUDA reports at most the nominal memory)",
                       path, j.mem_reported_gib, j.mem_gib);
    g->mem_bytes = j.mem_gib * 1073741824.0;
    g->mem_reported_bytes = (j.mem_reported_gib > 0 ? j.mem_reported_gib : j.mem_gib) * 1073741824.0;
    g->mem_bw = j.mem_bw_gbs * 1e9;
    g->nvlink_bw = j.nvlink_gbs * 1e9;
    g->pcie_bw = j.pcie_gbs * 1e9;
    g->tdp_w = j.tdp_w;
    g->price_per_hour = j.price_per_hour;
    /* Defaults: PCIe inside the node, a 100 Gb/s network between nodes,
     * with the latencies profiles/README.md gives for those links. */
    g->intra_bw = (j.intra_bw_gbs > 0 ? j.intra_bw_gbs : j.pcie_gbs) * 1e9;
    g->intra_lat = (j.intra_bw_gbs > 0 ? j.intra_latency_us : 5) * 1e-6;
    g->inter_bw = (j.inter_bw_gbs > 0 ? j.inter_bw_gbs : 12.5) * 1e9;
    g->inter_lat = (j.inter_bw_gbs > 0 ? j.inter_latency_us : 20) * 1e-6;
    return 0;
}

int hs_gpu_find(hs_gpu *g, const char *name, hs_err *err)
{
    char path[1024], dym[160];
    int rc = hs_resolve(path, sizeof path, "profiles/gpus", name, err);
    if (rc) return rc;
    rc = hs_gpu_load(g, path, err);
    if (rc == HS_EIO)
        return hs_errf(err, HS_ENOTFOUND, "unknown GPU \"%s\"%s (no %s; see `hetsim list gpus`)",
                       name, hs_suggest_file(dym, sizeof dym, "profiles/gpus", name), path);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *hs_suggest_file(char *buf, size_t cap, const char *dir, const char *name)
{
    char path[1024], **names = NULL;
    int n = 0;
    DIR *d;
    struct dirent *de;
    if (cap) buf[0] = '\0';
    /* A path is the user's own file: nothing to suggest from our folders. */
    if (strchr(name, '/')) return buf;
    snprintf(path, sizeof path, "%s/%s", hs_data_root(), dir);
    if (!(d = opendir(path))) return buf;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        char *s;
        if (l <= 5 || strcmp(de->d_name + l - 5, ".json")) continue;
        if (!(s = malloc(l - 4))) break;
        memcpy(s, de->d_name, l - 5);
        s[l - 5] = '\0';
        if (hs_ptrs_push(&names, &n, s)) {
            free(s);
            break;
        }
    }
    closedir(d);
    /* Sorted: the suggestion must not depend on the directory's order. */
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_name);
    hs_str_did_you_mean(buf, cap, name, (const char *const *)names, n);
    hs_strs_free(names, n);
    return buf;
}
