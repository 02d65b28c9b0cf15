/* fake_nvml.c - a stand-in for the driver's libnvidia-ml.so.1 with the
 * entry points gpumon.c loads, for test_exec_gpumon: one device,
 * "FakeGPU" at bus 0000:17:00.0, an SM clock of 1980 MHz (FAKE_NVML_MHZ
 * overrides it; 0: unreadable), 700 W, capped by software power limit.
 * FAKE_NVML_INIT set to a number makes nvmlInit_v2 return it;
 * FAKE_NVML_NO_REASONS makes the clock-event reasons unreadable. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the entry points, as NVML declares them (handles as void *) */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetHandleByIndex_v2(unsigned idx, void **dev);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev);
int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz);
int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw);
int nvmlDeviceGetCurrentClocksEventReasons(void *dev, unsigned long long *r);
int nvmlDeviceGetName(void *dev, char *buf, unsigned cap);
int nvmlSystemGetDriverVersion(char *buf, unsigned cap);
int fake_nvml_sessions(void);

#define OK 0
#define ERR_NOT_FOUND 6

static int dev_token;          /* the handle points here */
static atomic_int inits;

int nvmlInit_v2(void)
{
    const char *e = getenv("FAKE_NVML_INIT");
    if (e && *e) return atoi(e);
    atomic_fetch_add(&inits, 1);
    return OK;
}

int nvmlShutdown(void)
{
    atomic_fetch_sub(&inits, 1);
    return OK;
}

const char *nvmlErrorString(int rc)
{
    return rc == ERR_NOT_FOUND ? "Not Found" : rc == 0 ? "Success" : "Unknown Error";
}

int nvmlDeviceGetHandleByIndex_v2(unsigned idx, void **dev)
{
    if (idx != 0) return ERR_NOT_FOUND;
    *dev = &dev_token;
    return OK;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    if (strcmp(bus, "0000:17:00.0")) return ERR_NOT_FOUND;
    *dev = &dev_token;
    return OK;
}

int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    const char *e = getenv("FAKE_NVML_MHZ");
    if (dev != &dev_token || type != 1 || atomic_load(&inits) <= 0) return 999;
    if (e && *e && atoi(e) <= 0) return 3;     /* FAKE_NVML_MHZ=0: the clock cannot be read */
    *mhz = e && *e ? (unsigned)atoi(e) : 1980u;
    return OK;
}

int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    if (dev != &dev_token) return 999;
    *mw = 700000;
    return OK;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *dev, unsigned long long *r)
{
    const char *e = getenv("FAKE_NVML_NO_REASONS");
    if (dev != &dev_token || (e && *e)) return 999;
    *r = 0x4ULL;
    return OK;
}

int nvmlDeviceGetName(void *dev, char *buf, unsigned cap)
{
    if (dev != &dev_token) return 999;
    snprintf(buf, cap, "FakeGPU");
    return OK;
}

int nvmlSystemGetDriverVersion(char *buf, unsigned cap)
{
    snprintf(buf, cap, "999.1");
    return OK;
}

/* for the test: how many NVML sessions are open */
int fake_nvml_sessions(void)
{
    return atomic_load(&inits);
}
