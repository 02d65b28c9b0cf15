/* gpumon.h - the GPU's clocks and power while work is timed.
 *
 * Why: an op timed alone (back to back for milliseconds) and the same op
 * timed in a stream of reads differ by more than a launch for large GEMMs
 * (exec/README.md, "stream"), and the usual suspect is the SM clock: a
 * long run of tensor-core GEMMs reaches the board's power cap and clocks
 * down, a GEMM between memory reads may not.  Which clock a table row and
 * a replayed step ran at settles it, so profile and replay can record it.
 *
 * How: NVML (libnvidia-ml.so.1, shipped with the NVIDIA driver) opened at
 * run time with dlopen, so nothing links against it and a machine without
 * the driver builds and runs as before.  A thread samples the SM clock,
 * the board power and the clock-event reasons (power cap, thermal, ...)
 * every period_us while a window is open (begin .. end); begin and end
 * take a sample themselves, so every window has at least two.  A window of
 * a few microseconds sees the state around it, not inside it.  NVML's
 * power reading is a trailing average (about 1 s on Ampere and newer
 * boards other than GA100, per NVML's documentation), so power_w tells the
 * load of the last second, not of one short row.  Each sample is three
 * driver calls, which on GSP-based GPUs (Hopper) take the driver's lock:
 * sample every 10 ms or more, never every microsecond.
 *
 * The sampler is a function pointer, so that tests drive the thread with
 * scripted samples (hs_gpumon_open_fn); HS_NVML_LIB overrides the library
 * path (tests load a fake NVML). */
#ifndef HS_EXEC_GPUMON_H
#define HS_EXEC_GPUMON_H

#include <stddef.h>

#include "core/err.h"

typedef struct hs_gpumon hs_gpumon;

typedef struct hs_gpumon_sample {
    double sm_mhz;                /* SM clock; <= 0: not read */
    double power_w;               /* board power; < 0: not read */
    unsigned long long reasons;   /* NVML clock-event reason bits (HS_GPUMON_*) */
    int reasons_read;             /* 1 when reasons holds a reading (0 bits is then "none") */
} hs_gpumon_sample;

/* NVML's clock-event reason bits (nvmlClocksEventReason*, stable since
 * NVML 3.295). */
#define HS_GPUMON_IDLE 0x1ULL
#define HS_GPUMON_APP_CLOCKS 0x2ULL
#define HS_GPUMON_SW_POWER_CAP 0x4ULL
#define HS_GPUMON_HW_SLOWDOWN 0x8ULL
#define HS_GPUMON_SYNC_BOOST 0x10ULL
#define HS_GPUMON_SW_THERMAL 0x20ULL
#define HS_GPUMON_HW_THERMAL 0x40ULL
#define HS_GPUMON_HW_POWER_BRAKE 0x80ULL
#define HS_GPUMON_DISPLAY_CLOCK 0x100ULL

/* What one window saw.  n = 0: nothing was read (every sample failed). */
typedef struct hs_gpumon_stats {
    int n;                        /* samples with a clock */
    double sm_mhz_mean, sm_mhz_min, sm_mhz_max;
    double power_w_mean, power_w_max;   /* -1 when power was never read */
    unsigned long long reasons;   /* union over the window's samples */
    int reasons_n;                /* samples whose reasons were read; 0: reasons unknown */
} hs_gpumon_stats;

/* Reads one sample; returns 0, or nonzero when nothing could be read. */
typedef int (*hs_gpumon_read_fn)(void *ctx, hs_gpumon_sample *s);

/* Opens NVML and the device with PCI bus id `pci_bus_id` ("0000:17:00.0";
 * NULL or "": device 0).  Errors: HS_ENOTFOUND when the library or the
 * device is not there, HS_EIO when NVML fails, HS_ENOMEM; one line in err. */
int hs_gpumon_open_nvml(hs_gpumon **m, const char *pci_bus_id, int period_us, hs_err *err);
/* A monitor over any sampler (tests, other vendors' libraries). */
int hs_gpumon_open_fn(hs_gpumon **m, hs_gpumon_read_fn fn, void *ctx, int period_us, hs_err *err);
/* Stops the thread and releases the library.  close(NULL) is a no-op. */
void hs_gpumon_close(hs_gpumon *m);

/* Opens a window: clears the statistics, samples once and lets the thread
 * sample until end.  end samples once more, closes the window and returns
 * its statistics.  Not reentrant: one window at a time, one caller thread. */
void hs_gpumon_begin(hs_gpumon *m);
void hs_gpumon_end(hs_gpumon *m, hs_gpumon_stats *s);

/* What the monitor reads ("NVML 12.575.57, NVIDIA H200 at 0000:17:00.0"). */
const char *hs_gpumon_describe(const hs_gpumon *m);

/* The reason bits as names joined by '+' ("sw_power_cap+hw_slowdown"),
 * "none" for 0. */
void hs_gpumon_reasons_str(unsigned long long r, char *buf, size_t cap);
/* The same for a window: "unread" when no sample had its reasons read. */
void hs_gpumon_stats_reasons(const hs_gpumon_stats *s, char *buf, size_t cap);

#endif
