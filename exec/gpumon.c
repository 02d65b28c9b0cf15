/* gpumon.c - see gpumon.h. */
#define _POSIX_C_SOURCE 200809L
#include "gpumon.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- NVML, declared by hand (nvml.h is not part of the toolkit's packages
 * everywhere); the entry points and enum values are NVML's stable C ABI. */

#define NVML_OK 0
#define NVML_CLOCK_SM 1

typedef struct nvml {
    void *lib, *dev;
    int (*shutdown)(void);
    int (*clock)(void *dev, int type, unsigned *mhz);
    int (*power)(void *dev, unsigned *mw);
    int (*reasons)(void *dev, unsigned long long *r);
    const char *(*errstr)(int rc);
} nvml;

typedef struct acc {
    int n, np, nr;
    double sum, mn, mx, psum, pmx;
    unsigned long long reasons;
} acc;

struct hs_gpumon {
    hs_gpumon_read_fn fn;
    void *ctx;
    long long period_ns;
    pthread_t th;              /* runs from open to close */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active, quit;
    unsigned gen;              /* window number: a sample begun in an older window is dropped */
    acc a;
    nvml nv;                   /* only for hs_gpumon_open_nvml */
    char desc[256];
};

static void acc_add(acc *a, const hs_gpumon_sample *s)
{
    if (s->sm_mhz > 0) {
        if (!a->n || s->sm_mhz < a->mn) a->mn = s->sm_mhz;
        if (!a->n || s->sm_mhz > a->mx) a->mx = s->sm_mhz;
        a->sum += s->sm_mhz;
        a->n++;
    }
    if (s->power_w >= 0) {
        if (!a->np || s->power_w > a->pmx) a->pmx = s->power_w;
        a->psum += s->power_w;
        a->np++;
    }
    if (s->reasons_read) {
        a->reasons |= s->reasons;
        a->nr++;
    }
}

static int sample(hs_gpumon *m, hs_gpumon_sample *s)
{
    s->sm_mhz = 0;
    s->power_w = -1;
    s->reasons = 0;
    s->reasons_read = 0;
    return m->fn(m->ctx, s);
}

static void deadline(struct timespec *ts, long long ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec += (long)(ns % 1000000000LL);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec++;
    }
}

static void *run(void *arg)
{
    hs_gpumon *m = arg;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        hs_gpumon_sample s;
        struct timespec ts;
        unsigned gen;
        int ok;
        while (!m->active && !m->quit) pthread_cond_wait(&m->cv, &m->mu);
        if (m->quit) break;
        gen = m->gen;
        /* NVML calls take tens of microseconds: never under the lock */
        pthread_mutex_unlock(&m->mu);
        ok = sample(m, &s) == 0;
        pthread_mutex_lock(&m->mu);
        if (ok && m->active && m->gen == gen) acc_add(&m->a, &s);
        deadline(&ts, m->period_ns);
        while (m->active && !m->quit && m->gen == gen) {
            int rc = pthread_cond_timedwait(&m->cv, &m->mu, &ts);
            /* any error but a wake-up ends the wait: never spin on the lock */
            if (rc && rc != EINTR) break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int hs_gpumon_open_fn(hs_gpumon **out, hs_gpumon_read_fn fn, void *ctx, int period_us, hs_err *err)
{
    hs_gpumon *m;
    pthread_condattr_t ca;
    int rc;
    *out = NULL;
    if (!fn || period_us < 1)
        return hs_errf(err, HS_EINVAL, "clock monitor: no sampler or a period under 1 us");
    if (!(m = calloc(1, sizeof *m))) return hs_errf(err, HS_ENOMEM, "out of memory (clock monitor)");
    m->fn = fn;
    m->ctx = ctx;
    m->period_ns = (long long)period_us * 1000LL;
    snprintf(m->desc, sizeof m->desc, "a sampler function");
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = pthread_create(&m->th, NULL, run, m))) {
        pthread_cond_destroy(&m->cv);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return hs_errf(err, HS_EIO, "clock monitor: cannot start its thread: %s", strerror(rc));
    }
    *out = m;
    return 0;
}

static int nvml_read(void *ctx, hs_gpumon_sample *s)
{
    const nvml *nv = ctx;
    unsigned mhz = 0, mw = 0;
    unsigned long long r = 0;
    if (nv->clock(nv->dev, NVML_CLOCK_SM, &mhz) != NVML_OK) return -1;
    s->sm_mhz = mhz;
    if (nv->power && nv->power(nv->dev, &mw) == NVML_OK) s->power_w = mw / 1000.0;
    if (nv->reasons && nv->reasons(nv->dev, &r) == NVML_OK) {
        s->reasons = r;
        s->reasons_read = 1;
    }
    return 0;
}

static const char *nvml_err(const nvml *nv, int rc)
{
    static char buf[32];
    if (nv->errstr) return nv->errstr(rc);
    snprintf(buf, sizeof buf, "NVML error %d", rc);
    return buf;
}

int hs_gpumon_open_nvml(hs_gpumon **out, const char *pci_bus_id, int period_us, hs_err *err)
{
    const char *path = getenv("HS_NVML_LIB");
    int (*init)(void), (*by_index)(unsigned, void **), (*by_pci)(const char *, void **);
    int (*name)(void *, char *, unsigned), (*driver)(char *, unsigned);
    char devname[96] = "?", drv[80] = "?", unread[80] = "";
    nvml nv;
    int rc;
    *out = NULL;
    memset(&nv, 0, sizeof nv);
    if (!path || !*path) path = "libnvidia-ml.so.1";
    if (!(nv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        return hs_errf(err, HS_ENOTFOUND, "clock monitor: cannot load %s (the NVIDIA driver's NVML): %s",
                       path, dlerror());
    /* POSIX: a data pointer from dlsym may be converted to a function pointer */
#define SYM(f, s) (*(void **)&(f) = dlsym(nv.lib, s))
    SYM(init, "nvmlInit_v2");
    SYM(nv.shutdown, "nvmlShutdown");
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
    SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    SYM(nv.clock, "nvmlDeviceGetClockInfo");
    SYM(nv.power, "nvmlDeviceGetPowerUsage");
    if (!SYM(nv.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
        SYM(nv.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    SYM(nv.errstr, "nvmlErrorString");
    SYM(name, "nvmlDeviceGetName");
    SYM(driver, "nvmlSystemGetDriverVersion");
#undef SYM
    if (!init || !nv.shutdown || !by_index || !nv.clock) {
        dlclose(nv.lib);
        return hs_errf(err, HS_ENOTFOUND, "clock monitor: %s lacks nvmlInit_v2, nvmlShutdown, "
                       "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetClockInfo", path);
    }
    if ((rc = init()) != NVML_OK) {
        hs_errf(err, HS_EIO, "clock monitor: nvmlInit: %s", nvml_err(&nv, rc));
        dlclose(nv.lib);
        return HS_EIO;
    }
    if (pci_bus_id && *pci_bus_id && by_pci) rc = by_pci(pci_bus_id, &nv.dev);
    else rc = by_index(0, &nv.dev);
    if (rc != NVML_OK) {
        hs_errf(err, HS_ENOTFOUND, "clock monitor: no NVML device %s: %s",
                pci_bus_id && *pci_bus_id ? pci_bus_id : "0", nvml_err(&nv, rc));
        nv.shutdown();
        dlclose(nv.lib);
        return HS_ENOTFOUND;
    }
    if (name) (void)name(nv.dev, devname, sizeof devname);
    if (driver) (void)driver(drv, sizeof drv);
    devname[sizeof devname - 1] = drv[sizeof drv - 1] = '\0';
    {
        /* one reading now: a monitor that cannot read the clock is no
         * monitor, and what it cannot read (power, reasons) is said once
         * here rather than guessed from empty columns later */
        hs_gpumon_sample probe = {0, -1, 0, 0};
        unsigned mhz = 0;
        if ((rc = nv.clock(nv.dev, NVML_CLOCK_SM, &mhz)) != NVML_OK) {
            hs_errf(err, HS_EIO, "clock monitor: nvmlDeviceGetClockInfo (SM): %s", nvml_err(&nv, rc));
            nv.shutdown();
            dlclose(nv.lib);
            return HS_EIO;
        }
        (void)nvml_read(&nv, &probe);
        if (probe.power_w < 0) snprintf(unread + strlen(unread), sizeof unread - strlen(unread), "%s", "; power not readable");
        if (!probe.reasons_read)
            snprintf(unread + strlen(unread), sizeof unread - strlen(unread), "%s", "; clock-event reasons not readable");
    }
    if ((rc = hs_gpumon_open_fn(out, nvml_read, NULL, period_us, err))) {
        nv.shutdown();
        dlclose(nv.lib);
        return rc;
    }
    /* the thread reads ctx only inside a window, after begin's lock */
    (*out)->nv = nv;
    (*out)->ctx = &(*out)->nv;
    /* bounded fields: the description fits meta.json's clock_monitor (255) */
    snprintf((*out)->desc, sizeof (*out)->desc, "NVML (driver %.40s), %.64s%s%.31s%.79s", drv, devname,
             pci_bus_id && *pci_bus_id ? " at " : "", pci_bus_id && *pci_bus_id ? pci_bus_id : "", unread);
    return 0;
}

void hs_gpumon_close(hs_gpumon *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->quit = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->th, NULL);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    if (m->nv.lib) {
        m->nv.shutdown();
        dlclose(m->nv.lib);
    }
    free(m);
}

void hs_gpumon_begin(hs_gpumon *m)
{
    hs_gpumon_sample s;
    unsigned gen;
    pthread_mutex_lock(&m->mu);
    memset(&m->a, 0, sizeof m->a);
    gen = ++m->gen;
    m->active = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (sample(m, &s) == 0) {
        pthread_mutex_lock(&m->mu);
        if (m->gen == gen) acc_add(&m->a, &s);
        pthread_mutex_unlock(&m->mu);
    }
}

void hs_gpumon_end(hs_gpumon *m, hs_gpumon_stats *st)
{
    hs_gpumon_sample s;
    int ok = sample(m, &s) == 0;
    pthread_mutex_lock(&m->mu);
    if (ok && m->active) acc_add(&m->a, &s);
    m->active = 0;
    m->gen++;                  /* a sample in flight now belongs to no window */
    pthread_cond_broadcast(&m->cv);
    st->n = m->a.n;
    st->sm_mhz_mean = m->a.n ? m->a.sum / m->a.n : 0;
    st->sm_mhz_min = m->a.n ? m->a.mn : 0;
    st->sm_mhz_max = m->a.n ? m->a.mx : 0;
    st->power_w_mean = m->a.np ? m->a.psum / m->a.np : -1;
    st->power_w_max = m->a.np ? m->a.pmx : -1;
    st->reasons = m->a.reasons;
    st->reasons_n = m->a.nr;
    pthread_mutex_unlock(&m->mu);
}

const char *hs_gpumon_describe(const hs_gpumon *m)
{
    return m->desc;
}

void hs_gpumon_reasons_str(unsigned long long r, char *buf, size_t cap)
{
    static const struct {
        unsigned long long bit;
        const char *name;
    } names[] = {{HS_GPUMON_IDLE, "idle"},
                 {HS_GPUMON_APP_CLOCKS, "app_clocks"},
                 {HS_GPUMON_SW_POWER_CAP, "sw_power_cap"},
                 {HS_GPUMON_HW_SLOWDOWN, "hw_slowdown"},
                 {HS_GPUMON_SYNC_BOOST, "sync_boost"},
                 {HS_GPUMON_SW_THERMAL, "sw_thermal"},
                 {HS_GPUMON_HW_THERMAL, "hw_thermal"},
                 {HS_GPUMON_HW_POWER_BRAKE, "hw_power_brake"},
                 {HS_GPUMON_DISPLAY_CLOCK, "display_clock"}};
    size_t len = 0;
    unsigned long long known = 0;
    if (!cap) return;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        known |= names[i].bit;
        if (r & names[i].bit) {
            int k = snprintf(buf + len, cap - len, "%s%s", len ? "+" : "", names[i].name);
            if (k < 0 || (size_t)k >= cap - len) return;
            len += (size_t)k;
        }
    }
    if (r & ~known) {
        int k = snprintf(buf + len, cap - len, "%s0x%llx", len ? "+" : "", r & ~known);
        if (k < 0 || (size_t)k >= cap - len) return;
        len += (size_t)k;
    }
    if (!len) snprintf(buf, cap, "none");
}

void hs_gpumon_stats_reasons(const hs_gpumon_stats *s, char *buf, size_t cap)
{
    if (!s->reasons_n) snprintf(buf, cap, "unread");
    else hs_gpumon_reasons_str(s->reasons, buf, cap);
}
