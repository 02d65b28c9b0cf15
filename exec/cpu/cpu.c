/* cpu.c - the CPU backend: host memory, OpenBLAS sgemm, clock_gettime.
 *
 * Everything is FP32.  Quantised weights (INT8/INT4, the layout in exec.h)
 * are dequantised into a scratch FP32 matrix and then multiplied with
 * sgemm, both inside the timed call, so the tables of this backend describe
 * this CPU (OpenBLAS threads for the GEMMs, one thread for the rest), not
 * any GPU.  "Device" pointers are host pointers, so the kernels read block
 * tables and sequence lengths directly. */
#include "cpu/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include "core/time.h"

static int cpu_available(void)
{
    return 1;
}

/* First "model name" of /proc/cpuinfo, else "unknown CPU". */
static void cpu_model(char *buf, size_t cap)
{
    char line[512];
    FILE *fp = fopen("/proc/cpuinfo", "r");
    snprintf(buf, cap, "unknown CPU");
    if (!fp) return;
    while (fgets(line, sizeof line, fp)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        if (*c) snprintf(buf, cap, "%s", c);
        break;
    }
    fclose(fp);
}

/* MemTotal and MemAvailable of /proc/meminfo (bytes); sysconf fallback. */
static void cpu_memory(double *total, double *avail)
{
    char line[256];
    FILE *fp = fopen("/proc/meminfo", "r");
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    *total = pages > 0 && psz > 0 ? (double)pages * psz : 0;
    *avail = *total / 2;
    if (!fp) return;
    while (fgets(line, sizeof line, fp)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) *total = kb * 1024.0;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) *avail = kb * 1024.0;
    }
    fclose(fp);
}

static int cpu_init(hs_exec *x, int device, int dtype, hs_err *err)
{
    hs__cpu *c;
    (void)device;
    if (dtype >= 0 && dtype != HS_EXEC_FP32)
        return hs_errf(err, HS_EUNSUPPORTED, "the cpu backend computes in fp32 only (not %s)",
                       hs_exec_dtype_name((hs_exec_dtype)dtype));
    if (!(c = calloc(1, sizeof *c))) return hs_errf(err, HS_ENOMEM, "out of memory");
    x->priv = c;
    snprintf(x->info.backend, sizeof x->info.backend, "cpu");
    cpu_model(x->info.device, sizeof x->info.device);
#ifdef HS_OPENBLAS
    snprintf(x->info.detail, sizeof x->info.detail, "%ld cores online, OpenBLAS %d threads (%s)",
             sysconf(_SC_NPROCESSORS_ONLN), openblas_get_num_threads(), openblas_get_config());
#else
    snprintf(x->info.detail, sizeof x->info.detail, "%ld cores online, system CBLAS",
             sysconf(_SC_NPROCESSORS_ONLN));
#endif
    x->info.dtype = HS_EXEC_FP32;
    x->info.elem_bytes = 4;
    cpu_memory(&x->info.mem_total, &x->info.mem_usable);
    return 0;
}

static void cpu_destroy(hs_exec *x)
{
    hs__cpu *c = x->priv;
    if (!c) return;
    free(c->wbuf);
    free(c->scores);
    free(c->marks);
    free(c);
    x->priv = NULL;
}

int hs__cpu_reserve(float **buf, size_t *cap, size_t n, hs_err *err)
{
    float *p;
    if (n <= *cap) return 0;
    if (!(p = malloc(n * sizeof *p)))
        return hs_errf(err, HS_ENOMEM, "out of memory (%zu floats of scratch)", n);
    free(*buf);
    *buf = p;
    *cap = n;
    return 0;
}

static int cpu_alloc(hs_exec *x, void **p, size_t bytes, hs_err *err)
{
    (void)x;
    /* 64-byte aligned for the BLAS kernels; never a zero-size request. */
    size_t n = (bytes + 63) / 64 * 64;
    *p = aligned_alloc(64, n ? n : 64);
    if (!*p) return hs_errf(err, HS_ENOMEM, "out of memory allocating %zu bytes", bytes);
    return 0;
}

static void cpu_free(hs_exec *x, void *p)
{
    (void)x;
    free(p);
}

static int cpu_upload(hs_exec *x, void *dst, const float *src, size_t n, hs_err *err)
{
    (void)x;
    (void)err;
    memcpy(dst, src, n * sizeof(float));
    return 0;
}

static int cpu_download(hs_exec *x, float *dst, const void *src, size_t n, hs_err *err)
{
    (void)x;
    (void)err;
    memcpy(dst, src, n * sizeof(float));
    return 0;
}

static int cpu_copy(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err)
{
    (void)x;
    (void)err;
    memcpy(dst, src, bytes);
    return 0;
}

/* splitmix64: the same generator as the CUDA fill kernels. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cpu_fill_random(hs_exec *x, void *dst, size_t n, uint64_t seed, float scale,
                           hs_err *err)
{
    float *d = dst;
    uint64_t s = mix64(seed);
    (void)x;
    (void)err;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mix64(s ^ (i * 0xd1b54a32d192ed03ULL)) >> 11) * 0x1p-53;
        d[i] = (float)((2 * u - 1) * scale);
    }
    return 0;
}

static int cpu_fill_bytes(hs_exec *x, void *dst, size_t bytes, uint64_t seed, hs_err *err)
{
    uint8_t *d = dst;
    uint64_t s = mix64(seed);
    (void)x;
    (void)err;
    /* Byte j of each 8-byte word is bits 8j..8j+7 of one draw (as on CUDA). */
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t r = mix64(s ^ (i * 0xd1b54a32d192ed03ULL));
        if (i + 8 <= bytes) {
            uint8_t b[8];
            for (int j = 0; j < 8; j++) b[j] = (uint8_t)(r >> (8 * j));
            memcpy(d + i, b, 8);
        } else {
            for (size_t j = 0; i + j < bytes; j++) d[i + j] = (uint8_t)(r >> (8 * j));
        }
    }
    return 0;
}

static int cpu_read_bytes(hs_exec *x, const void *src, size_t bytes, hs_err *err)
{
    static volatile uint64_t sink;   /* keeps the loads */
    const uint8_t *p = src;
    uint64_t acc = 0, w;
    (void)x;
    (void)err;
    for (size_t i = 0; i + 8 <= bytes; i += 64) {
        memcpy(&w, p + i, 8);
        acc ^= w;
    }
    sink = acc;
    (void)sink;   /* read back once: a sink only written draws a warning */
    return 0;
}

/* W[n][k] from the quantised layout into dst. */
static void dequantize(const hs_exec_weight *w, float *dst)
{
    const uint8_t *q = w->data;
    const float *sc = w->scale, *zp = w->zero;
    for (int r = 0; r < w->n; r++) {
        const uint8_t *row = q + (size_t)r * w->ld;
        float *o = dst + (size_t)r * w->k;
        for (int g = 0; g < w->groups; g++) {
            float s = sc[(size_t)r * w->groups + g], z = zp[(size_t)r * w->groups + g];
            int k0 = g * HS_EXEC_QGROUP, k1 = k0 + HS_EXEC_QGROUP < w->k ? k0 + HS_EXEC_QGROUP : w->k;
            if (w->bits == 8)
                for (int i = k0; i < k1; i++) o[i] = ((float)row[i] - z) * s;
            else
                for (int i = k0; i < k1; i++)
                    o[i] = ((float)((row[i / 2] >> (4 * (i % 2))) & 15) - z) * s;
        }
    }
}

static int cpu_gemm(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m,
                    hs_err *err)
{
    hs__cpu *c = x->priv;
    const float *wf = w->data;
    int rc;
    if (m < 1) return hs_errf(err, HS_EINVAL, "gemm: %d rows", m);
    if (w->bits != 16) {
        if ((rc = hs__cpu_reserve(&c->wbuf, &c->wbuf_n, (size_t)w->n * w->k, err))) return rc;
        dequantize(w, c->wbuf);
        wf = c->wbuf;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, w->n, w->k, 1.0f, in, w->k, wf, w->k,
                0.0f, y, w->n);
    return 0;
}

static int cpu_sync(hs_exec *x, hs_err *err)
{
    (void)x;
    (void)err;
    return 0;
}

static int cpu_timer_start(hs_exec *x, hs_err *err)
{
    (void)err;
    ((hs__cpu *)x->priv)->t0 = hs_wall_s();
    return 0;
}

static int cpu_timer_stop(hs_exec *x, double *us, hs_err *err)
{
    (void)err;
    *us = (hs_wall_s() - ((hs__cpu *)x->priv)->t0) * 1e6;
    return 0;
}

/* The CPU backend runs each op before returning: a mark is the time now. */
static int cpu_mark(hs_exec *x, int i, hs_err *err)
{
    hs__cpu *c = x->priv;
    if (i < 0 || i >= HS_EXEC_MAX_MARKS) return hs_errf(err, HS_ERANGE, "mark %d out of range", i);
    if (!c->marks && !(c->marks = malloc(HS_EXEC_MAX_MARKS * sizeof *c->marks)))
        return hs_errf(err, HS_ENOMEM, "out of memory (marks)");
    c->marks[i] = hs_wall_s();
    return 0;
}

static int cpu_marks_read(hs_exec *x, int n, double *us, hs_err *err)
{
    hs__cpu *c = x->priv;
    if (n < 1 || n > HS_EXEC_MAX_MARKS || !c->marks)
        return hs_errf(err, HS_ERANGE, "%d marks: none or out of range", n);
    for (int i = 0; i < n; i++) us[i] = (c->marks[i] - c->marks[0]) * 1e6;
    return 0;
}

const hs_exec_ops hs_exec_cpu_ops = {
    .name = "cpu",
    .available = cpu_available,
    .init = cpu_init,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .upload_bytes = cpu_copy,
    .download_bytes = cpu_copy,
    .fill_random = cpu_fill_random,
    .fill_bytes = cpu_fill_bytes,
    .read_bytes = cpu_read_bytes,
    .copy = cpu_copy,
    .gemm = cpu_gemm,
    .embed = hs__cpu_embed,
    .norm = hs__cpu_norm,
    .act = hs__cpu_act,
    .add = hs__cpu_add,
    .rope = hs__cpu_rope,
    .kv_write = hs__cpu_kv_write,
    .attention_prefill = hs__cpu_attention_prefill,
    .attention_decode = hs__cpu_attention_decode,
    .sync = cpu_sync,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .mark = cpu_mark,
    .marks_read = cpu_marks_read,
};
