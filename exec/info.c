/* info.c - `hetsim-exec info`; see info.h.  These are the ceilings the
 * device really reaches, to set beside the datasheet figures of
 * profiles/gpus (the roofline's efficiency factors are their ratio). */
#include "info.h"

#include <string.h>

#include "profile.h"

typedef struct gemm_job {
    void *y, *in;
    hs_exec_weight *w;
    int m;
} gemm_job;

static int run_gemm(hs_exec *x, void *ctx, hs_err *err)
{
    gemm_job *j = ctx;
    return x->ops->gemm(x, j->y, j->in, j->w, j->m, err);
}

typedef struct copy_job {
    void *dst, *src;
    size_t bytes;
} copy_job;

static int run_copy(hs_exec *x, void *ctx, hs_err *err)
{
    copy_job *j = ctx;
    return x->ops->copy(x, j->dst, j->src, j->bytes, err);
}

int hs_exec_ceilings_measure(hs_exec *x, hs_exec_ceilings *c, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    int cpu = !strcmp(x->info.backend, "cpu"), n = cpu ? 1024 : 8192, rc;
    size_t es = (size_t)x->info.elem_bytes, nn = (size_t)n * n;
    hs_exec_timing t = cpu ? (hs_exec_timing){1, 5, 20, 500000, 0, HS_EXEC_TIME_ALONE, 0}
                           : (hs_exec_timing){3, 10, 50, 300000, 0, HS_EXEC_TIME_ALONE, 0};
    hs_exec_weight w;
    gemm_job g = {NULL, NULL, &w, n};
    copy_job cp = {NULL, NULL, cpu ? (size_t)128 << 20 : (size_t)1 << 30};
    memset(c, 0, sizeof *c);
    memset(&w, 0, sizeof w);
    c->gemm_n = n;
    if ((rc = o->alloc(x, &g.y, nn * es, err)) || (rc = o->alloc(x, &g.in, nn * es, err)) ||
        (rc = hs_exec_weight_alloc(x, &w, n, n, 16, err)) ||
        (rc = o->fill_random(x, g.in, nn, 1, 1.0f, err)) ||
        (rc = hs_exec_weight_random(x, &w, 2, 0.01f, err)) ||
        (rc = hs_exec_measure(x, &t, run_gemm, &g, &c->gemm_us, err)))
        goto out;
    c->gemm_tflops = 2.0 * n * (double)n * n / (c->gemm_us * 1e-6) / 1e12;
    o->free(x, g.y);
    o->free(x, g.in);
    hs_exec_weight_free(x, &w);
    g.y = g.in = NULL;
    if ((rc = o->alloc(x, &cp.src, cp.bytes, err)) || (rc = o->alloc(x, &cp.dst, cp.bytes, err)) ||
        (rc = o->fill_bytes(x, cp.src, cp.bytes, 3, err)) ||
        (rc = o->fill_bytes(x, cp.dst, cp.bytes, 4, err)) ||
        (rc = hs_exec_measure(x, &t, run_copy, &cp, &c->copy_us, err)))
        goto out;
    c->copy_bytes = (double)cp.bytes;
    c->copy_gbs = 2.0 * cp.bytes / (c->copy_us * 1e-6) / 1e9;
out:
    o->free(x, g.y);
    o->free(x, g.in);
    hs_exec_weight_free(x, &w);
    o->free(x, cp.src);
    o->free(x, cp.dst);
    return rc;
}

void hs_exec_info_print(FILE *fp, const hs_exec *x, const hs_exec_ceilings *c)
{
    const hs_exec_info *i = &x->info;
    char dir[160];
    hs_exec_device_dirname(i, dir, sizeof dir);
    fprintf(fp, "backend: %s\n", i->backend);
    fprintf(fp, "device: %s\n", i->device);
    fprintf(fp, "profile name: %s\n", dir);
    fprintf(fp, "detail: %s\n", i->detail);
    fprintf(fp, "dtype: %s\n", hs_exec_dtype_name(i->dtype));
    fprintf(fp, "memory: %.2f GiB total, %.2f GiB usable\n", i->mem_total / 1073741824.0,
            i->mem_usable / 1073741824.0);
    fprintf(fp, "gemm: %.4f TFLOP/s (%dx%dx%d %s, median %.1f us)\n", c->gemm_tflops, c->gemm_n,
            c->gemm_n, c->gemm_n, hs_exec_dtype_name(i->dtype), c->gemm_us);
    fprintf(fp, "copy: %.2f GB/s (read + write; %.0f MiB %s, median %.1f us)\n", c->copy_gbs,
            c->copy_bytes / 1048576.0, strcmp(i->backend, "cpu") ? "device-to-device memcpy" : "memcpy",
            c->copy_us);
}
