/* info.h - `hetsim-exec info`: the device a backend runs on and its
 * measured ceilings (GEMM FLOP/s, copy bandwidth). */
#ifndef HS_EXEC_INFO_H
#define HS_EXEC_INFO_H

#include <stdio.h>

#include "exec.h"

typedef struct hs_exec_ceilings {
    int gemm_n;                /* square GEMM size */
    double gemm_us;            /* median time, us */
    double gemm_tflops;        /* 2 n^3 / time, 10^12 FLOP/s */
    double copy_bytes;         /* bytes copied per run */
    double copy_us;            /* median time, us */
    double copy_gbs;           /* (read + write) bytes / time, 10^9 B/s */
} hs_exec_ceilings;

/* Measures a large square GEMM in the backend's dtype (8192 on a GPU, 1024
 * on the CPU) and a device-to-device copy (1 GiB on a GPU, 128 MiB memcpy
 * on the CPU). */
int hs_exec_ceilings_measure(hs_exec *x, hs_exec_ceilings *c, hs_err *err);

/* Prints the device and the ceilings, one "key: value" per line. */
void hs_exec_info_print(FILE *fp, const hs_exec *x, const hs_exec_ceilings *c);

#endif
