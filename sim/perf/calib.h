/* calib.h - the shipped calibration: fitted latency models computed once
 * from every measured table (`hetsim perf calibrate`) and loaded at start,
 * so no run pays for a fit (a fit on the shipped tables takes seconds, ten
 * times the simulation of an hour of traffic).
 *
 * profiles/calibration.json holds one entry per calibrated GPU (the fitted
 * model of fitted.h trained on that GPU's tables only: serves models that
 * have no table of their own on it) and one transfer entry (gpu "", trained
 * on every table: serves GPUs with no measurement, with memory-bound ops on
 * the datasheet roofline, see fitted.h).  Each entry carries the
 * cross-validated error of the whole decoder layer and of attention: for a
 * GPU entry leave-one-model-out on its tables, for the transfer entry
 * leave-one-GPU-out; those are the expected errors the runs report. */
#ifndef HS_PERF_CALIB_H
#define HS_PERF_CALIB_H

#include <stdio.h>

#include "perf/fitted.h"

typedef struct hs_calib_cv {
    double layer_med, layer_p90, layer_bias;  /* %, < 0 (med): not measured */
    double attn_med;                          /* %, decode and prefill pooled; < 0: none */
    int n;                                    /* layer points */
    /* the transfer entry: each fold's layer median (one GPU held out), then
     * their median, least and greatest over the folds: what to expect of
     * one new GPU, where the pooled layer_med weighs GPUs by their rows;
     * %, < 0 (fold_med): not measured */
    double fold_med, fold_lo, fold_hi;
    int folds;
} hs_calib_cv;

typedef struct hs_calib_entry {
    char gpu[32];             /* "": the transfer entry */
    int n_tables;
    char models[256];         /* comma-separated models of its tables */
    hs_fit fit;
    hs_calib_cv cv;
} hs_calib_entry;

#define HS_CALIB_MAX (HS_FIT_MAX_GPUS + 1)

typedef struct hs_calib {
    char source[512];
    int n;
    hs_calib_entry e[HS_CALIB_MAX];
} hs_calib;

/* Reads / writes profiles/calibration.json (format in profiles/README.md).
 * Errors name the file and the key. */
int hs_calib_load(hs_calib *c, const char *path, hs_err *err);
int hs_calib_write(const hs_calib *c, const char *path, hs_err *err);

/* The entry serving GPU `gpu`: its own when calibrated, else the transfer
 * entry; NULL when there is neither. */
const hs_calib_entry *hs_calib_for(const hs_calib *c, const char *gpu);

/* The error to expect of e's predictions, % per layer (< 0: unknown, e
 * NULL included): for the transfer entry, what one new GPU should expect,
 * the median over the GPUs held out (each counted once; the pooled figure
 * weighs them by rows), with their least and greatest in *lo and *hi;
 * otherwise its leave-one-model-out median, *lo = *hi = -1. */
double hs_calib_expected_err(const hs_calib_entry *e, double *lo, double *hi);

/* Builds the calibration from the tables named by dirs (hs_fit_data_load),
 * with cross-validation; prints what it fits and measures to log.  Slow
 * (seconds): a command, never a run. */
int hs_calib_build(hs_calib *c, const char *dirs, FILE *log, hs_err *err);

#endif
