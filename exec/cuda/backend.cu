/* backend.cu - the CUDA backend: device, memory, cuBLAS GEMMs, CUDA-event
 * timing.  The non-GEMM kernels are in kernels.cu.
 *
 * All work goes to one non-blocking stream; cuBLAS runs on it too.  GEMMs:
 *   16 bits  cublasGemmEx, FP16 or BF16 operands, FP32 accumulation
 *            (CUBLAS_COMPUTE_32F), y^T = W x^T in cuBLAS's column-major terms
 *   8/4 bits m <= 16 rows: our fused kernel reads the quantised weights and
 *            dequantises in registers (weight-bandwidth bound, like the
 *            decode kernels of AWQ/GPTQ runtimes); m > 16: a dequantise
 *            kernel writes the FP16/BF16 weight into scratch, then
 *            cublasGemmEx (what those runtimes do for large batches).
 * Timing brackets the work with two events on the stream; timer_stop waits
 * for the second one, so every asynchronous fault is reported there. */
#include "cuda/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cu_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

static void cu_destroy(hs_exec *x)
{
    hs__cuda *c = hs__cu(x);
    if (!c) return;
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    if (c->stage) (void)cudaFree(c->stage);
    if (c->wdeq) (void)cudaFree(c->wdeq);
    if (c->part) (void)cudaFree(c->part);
    if (c->pf) (void)cudaFree(c->pf);
    free(c->pf_info);
    if (c->ev0) (void)cudaEventDestroy(c->ev0);
    if (c->ev1) (void)cudaEventDestroy(c->ev1);
    for (int i = 0; i < c->n_marks; i++) (void)cudaEventDestroy(c->marks[i]);
    free(c->marks);
    if (c->blas) (void)cublasDestroy(c->blas);
    if (c->blas_ws) (void)cudaFree(c->blas_ws);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    free(c);
    x->priv = NULL;
}

static int cu_open(hs_exec *x, int device, int dtype, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    cudaDeviceProp prop;
    size_t free_b = 0, total_b = 0;
    int n = 0, rt = 0, drv = 0, bv = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return hs_errf(err, HS_ENOTFOUND, "--backend cuda: no CUDA device (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
    }
    if (device < 0 || device >= n)
        return hs_errf(err, HS_ENOTFOUND, "--backend cuda: no CUDA device %d (%d present)", device, n);
    c->device = device;
    HS_CK(cudaSetDevice(device));
    HS_CK(cudaGetDeviceProperties(&prop, device));
    c->sms = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    if (dtype < 0) dtype = HS_EXEC_FP16;
    if (dtype == HS_EXEC_FP32)
        return hs_errf(err, HS_EUNSUPPORTED, "--backend cuda: computes in fp16 or bf16, not fp32");
    if (dtype == HS_EXEC_BF16 && prop.major < 8)
        return hs_errf(err, HS_EUNSUPPORTED, "--dtype bf16: %s (sm_%d%d) has no BF16 tensor cores",
                       prop.name, prop.major, prop.minor);
    HS_CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    HS_CKB(cublasCreate(&c->blas));
    HS_CKB(cublasSetStream(c->blas, c->stream));
    {
        /* The workspace NVIDIA recommends (cuBLAS docs, cublasSetWorkspace:
         * 32 MiB on Hopper, 4 MiB before), as PyTorch gives its handles
         * (CUDABlas.cpp): without one cuBLAS may not pick the split-K and
         * stream-K kernels that an engine's GEMMs run.  Taken before the
         * free memory is read, so the KV pool's size accounts for it. */
        size_t ws = prop.major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20;
        HS_CK(cudaMalloc(&c->blas_ws, ws));
        HS_CKB(cublasSetWorkspace(c->blas, c->blas_ws, ws));
    }
    HS_CK(cudaEventCreate(&c->ev0));
    HS_CK(cudaEventCreate(&c->ev1));
    HS_CK(cudaMemGetInfo(&free_b, &total_b));
    HS_CK(cudaRuntimeGetVersion(&rt));
    HS_CK(cudaDriverGetVersion(&drv));
    HS_CKB(cublasGetVersion(c->blas, &bv));
    snprintf(x->info.backend, sizeof x->info.backend, "cuda");
    snprintf(x->info.device, sizeof x->info.device, "%s", prop.name);
    snprintf(x->info.detail, sizeof x->info.detail,
             "sm_%d%d, %d SMs, CUDA runtime %d.%d, driver %d.%d, cuBLAS %d", prop.major,
             prop.minor, prop.multiProcessorCount, rt / 1000, rt % 1000 / 10, drv / 1000,
             drv % 1000 / 10, bv);
    x->info.dtype = (hs_exec_dtype)dtype;
    x->info.elem_bytes = 2;
    x->info.mem_total = (double)total_b;
    x->info.mem_usable = (double)free_b;
    /* NVML names the device by its bus id (the clock monitor); without it
     * the monitor falls back to NVML's device 0 */
    if (cudaDeviceGetPCIBusId(x->info.pci_bus_id, (int)sizeof x->info.pci_bus_id, device) != cudaSuccess) {
        (void)cudaGetLastError();
        x->info.pci_bus_id[0] = '\0';
    }
    return 0;
}

static int cu_init(hs_exec *x, int device, int dtype, hs_err *err)
{
    int rc;
    if (!(x->priv = calloc(1, sizeof(hs__cuda)))) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = cu_open(x, device, dtype, err))) cu_destroy(x);
    return rc;
}

static int cu_alloc(hs_exec *x, void **p, size_t bytes, hs_err *err)
{
    cudaError_t e;
    (void)x;
    *p = NULL;
    e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return hs_errf(err, hs__cuda_code(e), "CUDA: cudaMalloc of %zu bytes: %s", bytes,
                       cudaGetErrorString(e));
    }
    return 0;
}

static void cu_free(hs_exec *x, void *p)
{
    (void)x;
    if (p && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

int hs__cuda_reserve(hs_exec *x, void **buf, size_t *cap, size_t bytes, hs_err *err)
{
    int rc;
    if (bytes <= *cap) return 0;
    HS_CK(cudaStreamSynchronize(hs__cu(x)->stream));
    cu_free(x, *buf);
    *buf = NULL;
    *cap = 0;
    if ((rc = cu_alloc(x, buf, bytes, err))) return rc;
    *cap = bytes;
    return 0;
}

static int cu_upload(hs_exec *x, void *dst, const float *src, size_t n, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    int rc;
    if (!n) return 0;
    if ((rc = hs__cuda_reserve(x, &c->stage, &c->stage_bytes, n * sizeof(float), err))) return rc;
    HS_CK(cudaMemcpyAsync(c->stage, src, n * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    if ((rc = hs__cuda_from_float(x, dst, (const float *)c->stage, n, err))) return rc;
    HS_CK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cu_download(hs_exec *x, float *dst, const void *src, size_t n, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    int rc;
    if (!n) return 0;
    if ((rc = hs__cuda_reserve(x, &c->stage, &c->stage_bytes, n * sizeof(float), err))) return rc;
    if ((rc = hs__cuda_to_float(x, (float *)c->stage, src, n, err))) return rc;
    HS_CK(cudaMemcpyAsync(dst, c->stage, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
    HS_CK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cu_upload_bytes(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    if (!bytes) return 0;
    HS_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    HS_CK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cu_download_bytes(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    if (!bytes) return 0;
    HS_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    HS_CK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cu_copy(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err)
{
    if (!bytes) return 0;
    HS_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, hs__cu(x)->stream));
    return 0;
}

/* y[m][n] = in[m][k] W[n][k]^T with W in dtype: column-major, that is
 * Y^T (n x m, ld n) = W^T' (op T of the k x n matrix W^T, ld k) X^T (k x m, ld k). */
static int gemm16(hs_exec *x, void *y, const void *in, const void *w, int m, int n, int k,
                  hs_err *err)
{
    cudaDataType_t t = x->info.dtype == HS_EXEC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    HS_CKB(cublasGemmEx(hs__cu(x)->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, t, k, in, t,
                        k, &zero, y, t, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

static int cu_gemm(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m,
                   hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    int rc;
    if (m < 1) return hs_errf(err, HS_EINVAL, "gemm: %d rows", m);
    if (w->bits == 16) return gemm16(x, y, in, w->data, m, w->n, w->k, err);
    if (m <= HS__CUDA_FUSED_M) return hs__cuda_gemm_q_fused(x, y, in, w, m, err);
    if ((rc = hs__cuda_reserve(x, &c->wdeq, &c->wdeq_bytes, (size_t)w->n * w->k * 2, err)) ||
        (rc = hs__cuda_dequantize(x, c->wdeq, w, err)))
        return rc;
    return gemm16(x, y, in, c->wdeq, m, w->n, w->k, err);
}

static int cu_sync(hs_exec *x, hs_err *err)
{
    HS_CK(cudaStreamSynchronize(hs__cu(x)->stream));
    return 0;
}

static int cu_timer_start(hs_exec *x, hs_err *err)
{
    HS_CK(cudaEventRecord(hs__cu(x)->ev0, hs__cu(x)->stream));
    return 0;
}

static int cu_timer_stop(hs_exec *x, double *us, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    float ms = 0;
    HS_CK(cudaEventRecord(c->ev1, c->stream));
    HS_CK(cudaEventSynchronize(c->ev1));
    HS_CK(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    *us = ms * 1000.0;
    return 0;
}

static int cu_mark(hs_exec *x, int i, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    if (i < 0 || i >= HS_EXEC_MAX_MARKS) return hs_errf(err, HS_ERANGE, "mark %d out of range", i);
    if (!c->marks && !(c->marks = (cudaEvent_t *)calloc(HS_EXEC_MAX_MARKS, sizeof *c->marks)))
        return hs_errf(err, HS_ENOMEM, "out of memory (marks)");
    for (; c->n_marks <= i; c->n_marks++) HS_CK(cudaEventCreate(&c->marks[c->n_marks]));
    HS_CK(cudaEventRecord(c->marks[i], c->stream));
    return 0;
}

static int cu_marks_read(hs_exec *x, int n, double *us, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    if (n < 1 || n > c->n_marks) return hs_errf(err, HS_ERANGE, "%d marks: none or out of range", n);
    HS_CK(cudaEventSynchronize(c->marks[n - 1]));
    for (int i = 0; i < n; i++) {
        float ms = 0;
        HS_CK(cudaEventElapsedTime(&ms, c->marks[0], c->marks[i]));
        us[i] = ms * 1000.0;
    }
    return 0;
}

extern "C" const hs_exec_ops hs_exec_cuda_ops = {
    "cuda",
    cu_available,
    cu_init,
    cu_destroy,
    cu_alloc,
    cu_free,
    cu_upload,
    cu_download,
    cu_upload_bytes,
    cu_download_bytes,
    hs__cuda_fill_random,
    hs__cuda_fill_bytes,
    hs__cuda_read_bytes,
    cu_copy,
    cu_gemm,
    hs__cuda_embed,
    hs__cuda_norm,
    hs__cuda_act,
    hs__cuda_add,
    hs__cuda_rope,
    hs__cuda_kv_write,
    hs__cuda_attention_prefill,
    hs__cuda_attention_decode,
    cu_sync,
    cu_timer_start,
    cu_timer_stop,
    hs__cuda_decode_split,
    cu_mark,
    cu_marks_read,
};
