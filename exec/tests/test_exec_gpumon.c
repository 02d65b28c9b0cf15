/* test_exec_gpumon.c - the clock monitor (gpumon.h): a window's statistics
 * over scripted samples (begin and end always sample; the thread samples
 * in between; failed reads and unread power are not averaged in); many
 * short windows in a row neither hang nor leak samples across windows;
 * hs_exec_measure fills mon_last; the NVML path against a stand-in
 * library (argv[1]): device by bus id or index 0, a missing library, a
 * device that is not there and a failing nvmlInit are one-line errors, and
 * close shuts NVML down; the reason bits print by name. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "exec.h"
#include "gpumon.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Scripted: clock 1000, 1100, 1200, 1000, ... by call number; power on
 * even calls only; reason bit 0x4 on every third call. */
typedef struct script {
    atomic_long calls;
    int fail;                  /* every read fails */
    int no_reasons;            /* the reasons are never read */
    int window;                /* the window the caller is in: stamped into the clock */
} script;

static int scripted(void *ctx, hs_gpumon_sample *s)
{
    script *sc = ctx;
    long k = atomic_fetch_add(&sc->calls, 1);
    if (sc->fail) return -1;
    s->sm_mhz = 1000 + 100 * (double)(k % 3);
    if (k % 2 == 0) s->power_w = 300 + (double)(k % 5);
    s->reasons_read = !sc->no_reasons;
    if (k % 3 == 0 && s->reasons_read) s->reasons = HS_GPUMON_SW_POWER_CAP;
    return 0;
}

static void test_window(void)
{
    script sc = {0};
    hs_gpumon *m = NULL;
    hs_gpumon_stats st;
    hs_err err = {0};
    CHECK_OK(hs_gpumon_open_fn(&m, scripted, &sc, 1000, &err), &err);
    if (!m) return;
    hs_gpumon_begin(m);
    sleep_ms(100);             /* about 100 samples; at least one from the thread */
    hs_gpumon_end(m, &st);
    CHECK(st.n >= 3);
    CHECK(st.n <= atomic_load(&sc.calls));
    CHECK(st.sm_mhz_min >= 1000 && st.sm_mhz_max <= 1200);
    CHECK(st.sm_mhz_mean >= st.sm_mhz_min && st.sm_mhz_mean <= st.sm_mhz_max);
    CHECK(st.power_w_mean >= 300 && st.power_w_mean <= 304);
    CHECK(st.power_w_max >= st.power_w_mean);
    CHECK(st.reasons == HS_GPUMON_SW_POWER_CAP);
    CHECK_STR(hs_gpumon_describe(m), "a sampler function");

    /* no window open: the thread waits and does not sample (a sample in
     * flight at end may still finish first) */
    {
        long before;
        sleep_ms(20);
        before = atomic_load(&sc.calls);
        sleep_ms(30);
        CHECK_INT(atomic_load(&sc.calls), before);
    }

    /* the begin and end samples alone: exactly known statistics */
    atomic_store(&sc.calls, 0);
    hs_gpumon_close(m);
    CHECK_OK(hs_gpumon_open_fn(&m, scripted, &sc, 10 * 1000 * 1000, &err), &err); /* 10 s period */
    if (!m) return;
    hs_gpumon_begin(m);        /* call 0: 1000 MHz, power 300, cap; the thread's call 1 follows */
    for (int i = 0; i < 2000 && atomic_load(&sc.calls) < 2; i++) sleep_ms(1);   /* a loaded machine */
    hs_gpumon_end(m, &st);     /* call 2: 1200 MHz, power 302 */
    CHECK_INT(st.n, 3);
    CHECK_NEAR(st.sm_mhz_mean, 1100, 1e-9);
    CHECK_NEAR(st.sm_mhz_min, 1000, 1e-9);
    CHECK_NEAR(st.sm_mhz_max, 1200, 1e-9);
    CHECK_NEAR(st.power_w_mean, 301, 1e-9);
    CHECK_NEAR(st.power_w_max, 302, 1e-9);
    CHECK(st.reasons == HS_GPUMON_SW_POWER_CAP);
    CHECK_INT(st.reasons_n, 3);
    {
        char why[32];
        hs_gpumon_stats_reasons(&st, why, sizeof why);
        CHECK_STR(why, "sw_power_cap");
    }

    /* reasons never read: "unread", not "none" */
    sc.no_reasons = 1;
    hs_gpumon_begin(m);
    hs_gpumon_end(m, &st);
    CHECK(st.n >= 2);
    CHECK_INT(st.reasons_n, 0);
    {
        char why[32];
        hs_gpumon_stats_reasons(&st, why, sizeof why);
        CHECK_STR(why, "unread");
    }
    sc.no_reasons = 0;

    /* every read fails: nothing averaged, power marked unread */
    sc.fail = 1;
    hs_gpumon_begin(m);
    hs_gpumon_end(m, &st);
    CHECK_INT(st.n, 0);
    CHECK_NEAR(st.sm_mhz_mean, 0, 0);
    CHECK_NEAR(st.power_w_mean, -1, 0);
    CHECK(st.reasons == 0);
    hs_gpumon_close(m);
    hs_gpumon_close(NULL);
}

/* Many short windows with a fast thread: each sees its own samples only
 * (n >= 2 from begin and end, never more than the calls made meanwhile),
 * and closing right after a window does not hang. */
static void test_many_windows(void)
{
    script sc = {0};
    hs_gpumon *m = NULL;
    hs_err err = {0};
    int bad = 0;
    CHECK_OK(hs_gpumon_open_fn(&m, scripted, &sc, 1, &err), &err);
    if (!m) return;
    for (int i = 0; i < 2000; i++) {
        hs_gpumon_stats st;
        long c0 = atomic_load(&sc.calls), c1;
        hs_gpumon_begin(m);
        if (i % 100 == 0) sleep_ms(1);
        hs_gpumon_end(m, &st);
        c1 = atomic_load(&sc.calls);
        if (st.n < 2 || st.n > c1 - c0) bad++;
    }
    CHECK_INT(bad, 0);
    hs_gpumon_close(m);
    CHECK_INT(hs_gpumon_open_fn(&m, NULL, NULL, 1000, &err), HS_EINVAL);
    CHECK(m == NULL);
}

static int tiny_op(hs_exec *x, void *ctx, hs_err *err)
{
    (void)x;
    (void)err;
    (*(volatile int *)ctx)++;
    return 0;
}

/* hs_exec_measure samples over its timed runs only. */
static void test_measure(void)
{
    script sc = {0};
    hs_exec x;
    hs_err err = {0};
    hs_exec_timing t = {1, 3, 5, 100, 0, HS_EXEC_TIME_ALONE, 0};
    volatile int runs = 0;
    double us = -1;
    CHECK_OK(hs_exec_open(&x, "cpu", -1, &err), &err);
    CHECK_STR(x.info.pci_bus_id, "");
    CHECK_OK(hs_exec_measure(&x, &t, tiny_op, (void *)&runs, &us, &err), &err);
    CHECK_INT(x.mon_last.n, 0);              /* no monitor: nothing recorded */
    CHECK_OK(hs_gpumon_open_fn(&x.mon, scripted, &sc, 1000 * 1000, &err), &err);
    CHECK_OK(hs_exec_measure(&x, &t, tiny_op, (void *)&runs, &us, &err), &err);
    CHECK(x.mon_last.n >= 2);
    CHECK(x.mon_last.sm_mhz_mean >= 1000 && x.mon_last.sm_mhz_mean <= 1200);
    CHECK(us >= 0);
    hs_gpumon_close(x.mon);
    x.mon = NULL;
    hs_exec_close(&x);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An op of 2 ms of host time, summing what it took into *ctx. */
static int sleepy_op(hs_exec *x, void *ctx, hs_err *err)
{
    struct timespec ts = {0, 2000000};
    double t0 = mono_s();
    (void)x;
    (void)err;
    while (nanosleep(&ts, &ts) == -1) {}
    *(double *)ctx += mono_s() - t0;
    return 0;
}

/* rest: after the measurement the host idles rest times as long as it
 * took, which is at least the op's own time over its runs: with rest 1
 * the call takes at least twice that. */
static void test_rest(void)
{
    hs_exec x;
    hs_err err = {0};
    hs_exec_timing t = {1, 3, 3, 100, 0, HS_EXEC_TIME_ALONE, 1.0};
    double busy = 0, us = -1, t0, wall;
    CHECK_OK(hs_exec_open(&x, "cpu", -1, &err), &err);
    t0 = mono_s();
    CHECK_OK(hs_exec_measure(&x, &t, sleepy_op, &busy, &us, &err), &err);
    wall = mono_s() - t0;
    CHECK(busy >= 4 * 0.002);             /* one warm-up, three timed runs */
    CHECK(wall >= 2 * busy);
    CHECK(us >= 2000);
    hs_exec_close(&x);
}

static void test_nvml(const char *lib)
{
    hs_gpumon *m = NULL;
    hs_gpumon_stats st;
    hs_err err = {0};
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);   /* keeps it loaded; reads its counters */
    int (*sessions)(void) = NULL;
    CHECK(h != NULL);
    if (!h) return;
    *(void **)&sessions = dlsym(h, "fake_nvml_sessions");
    CHECK(sessions != NULL);
    if (!sessions) return;
    setenv("HS_NVML_LIB", lib, 1);

    CHECK_OK(hs_gpumon_open_nvml(&m, "0000:17:00.0", 1000, &err), &err);
    if (m) {
        CHECK(strstr(hs_gpumon_describe(m), "FakeGPU") != NULL);
        CHECK(strstr(hs_gpumon_describe(m), "999.1") != NULL);
        CHECK(strstr(hs_gpumon_describe(m), "0000:17:00.0") != NULL);
        CHECK_INT(sessions(), 1);
        hs_gpumon_begin(m);
        sleep_ms(20);
        hs_gpumon_end(m, &st);
        CHECK(st.n >= 2);
        CHECK_NEAR(st.sm_mhz_mean, 1980, 1e-9);
        CHECK_NEAR(st.power_w_mean, 700, 1e-9);
        CHECK(st.reasons == HS_GPUMON_SW_POWER_CAP);
        hs_gpumon_close(m);
        CHECK_INT(sessions(), 0);
    }
    m = NULL;
    setenv("FAKE_NVML_MHZ", "1755", 1);
    CHECK_OK(hs_gpumon_open_nvml(&m, NULL, 1000, &err), &err);   /* device 0 */
    if (m) {
        hs_gpumon_begin(m);
        hs_gpumon_end(m, &st);
        CHECK_NEAR(st.sm_mhz_mean, 1755, 1e-9);
        hs_gpumon_close(m);
    }
    unsetenv("FAKE_NVML_MHZ");

    /* reasons the driver will not give: said once, in the description */
    m = NULL;
    setenv("FAKE_NVML_NO_REASONS", "1", 1);
    CHECK_OK(hs_gpumon_open_nvml(&m, NULL, 1000, &err), &err);
    if (m) {
        char why[32];
        CHECK(strstr(hs_gpumon_describe(m), "clock-event reasons not readable") != NULL);
        hs_gpumon_begin(m);
        hs_gpumon_end(m, &st);
        hs_gpumon_stats_reasons(&st, why, sizeof why);
        CHECK_STR(why, "unread");
        hs_gpumon_close(m);
    }
    unsetenv("FAKE_NVML_NO_REASONS");

    /* a clock that cannot be read: no monitor, one line */
    m = NULL;
    setenv("FAKE_NVML_MHZ", "0", 1);
    CHECK_INT(hs_gpumon_open_nvml(&m, NULL, 1000, &err), HS_EIO);
    CHECK(m == NULL && strstr(err.msg, "nvmlDeviceGetClockInfo") != NULL);
    CHECK_INT(sessions(), 0);
    unsetenv("FAKE_NVML_MHZ");

    m = NULL;
    CHECK_INT(hs_gpumon_open_nvml(&m, "0000:99:00.0", 1000, &err), HS_ENOTFOUND);
    CHECK(m == NULL);
    CHECK(strstr(err.msg, "0000:99:00.0") != NULL && strstr(err.msg, "Not Found") != NULL);
    CHECK_INT(sessions(), 0);                /* the failed open shut NVML down */

    setenv("FAKE_NVML_INIT", "9", 1);
    CHECK_INT(hs_gpumon_open_nvml(&m, NULL, 1000, &err), HS_EIO);
    CHECK(strstr(err.msg, "nvmlInit") != NULL);
    unsetenv("FAKE_NVML_INIT");

    setenv("HS_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    CHECK_INT(hs_gpumon_open_nvml(&m, NULL, 1000, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "/nonexistent/libnvidia-ml.so.1") != NULL);
    CHECK(strchr(err.msg, '\n') == NULL);
    unsetenv("HS_NVML_LIB");
    dlclose(h);
}

static void test_reasons(void)
{
    char buf[128], tiny[6];
    hs_gpumon_reasons_str(0, buf, sizeof buf);
    CHECK_STR(buf, "none");
    hs_gpumon_reasons_str(HS_GPUMON_SW_POWER_CAP | HS_GPUMON_HW_SLOWDOWN, buf, sizeof buf);
    CHECK_STR(buf, "sw_power_cap+hw_slowdown");
    hs_gpumon_reasons_str(HS_GPUMON_IDLE | 0x1000ULL, buf, sizeof buf);
    CHECK_STR(buf, "idle+0x1000");
    hs_gpumon_reasons_str(HS_GPUMON_SW_THERMAL | HS_GPUMON_HW_POWER_BRAKE, tiny, sizeof tiny);
    CHECK_STR(tiny, "sw_th");                /* cut at the buffer, never overrun */
}

int main(int argc, char **argv)
{
    test_reasons();
    test_window();
    test_many_windows();
    test_measure();
    test_rest();
    if (argc > 1) test_nvml(argv[1]);
    else printf("no stand-in NVML library given: the NVML path is not tested\n");
    return hs_check_result();
}
