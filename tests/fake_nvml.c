/*
 * fake_nvml.c — a scripted stand-in for libnvidia-ml.so.1, loaded by libtrainprof through
 * TRAINPROF_NVML_LIB in tests/test_nvml.c, so the NVML sampler and the EnergyMonitor are
 * tested with known values on machines without a GPU.
 *
 * The script (t = seconds since the first nvmlInit of the process, or the first after every
 * reference was shut down; CLOCK_MONOTONIC, the clock trainprof timestamps with):
 *   GPU 0  "Fake GPU 0": 250 W constant, energy 5e6 mJ + 250 W * t; power-instant field
 *          supported; 95 % busy; 1980 MHz; 55 C; limit 700 W; no clock event; memory used
 *          1 GiB + 1 GiB/s (up to 60 GiB) of 80 GiB.
 *   GPU 1  "Fake GPU 1": power ramps, P = 100 W + 50 W/s * t, energy 2e6 mJ + the integral
 *          (100 t + 25 t^2 J); the power-instant field answers NOT_SUPPORTED; 60 % busy; SM
 *          clock alternates 1500 / 1700 MHz; 72 C; limit 400 W; clock event SW power cap
 *          (0x4) always; memory used 2 GiB of 80 GiB.
 *   GPU k>1 (FAKE_NVML_GPUS up to 4): 150 W constant, otherwise as GPU 0.
 * Environment: FAKE_NVML_GPUS (default 2), FAKE_NVML_INIT_FAIL=1 (nvmlInit answers "driver
 * not loaded"), FAKE_NVML_RESET_MS=N (GPU 0's energy counter restarts from 0 N ms after t=0,
 * as after a driver reload), FAKE_NVML_NO_ENERGY=1 (the energy counter answers NOT_SUPPORTED on
 * every GPU, as on many GPUs and vGPUs; power is still given), FAKE_NVML_MIG=1 (GPU 1 is in
 * MIG mode with the MIG devices MIG-5a1e0000-0000-5000-8000-0000000001a0 and ...1a1, in MIG
 * slots 0 and 2 of 4; without it the MIG mode query answers NOT_SUPPORTED).
 * Test controls (exported, found with dlsym): fake_nvml_set_energy pins a GPU's counter to a
 * value; fake_nvml_refs is the number of nvmlInit references held; fake_nvml_energy_calls
 * and fake_nvml_energy_calls_off counts calls of the energy counter, and those made from a
 * thread not named `thread_name`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/nvml_abi.h"

#define FAKE_API __attribute__((visibility("default")))
#define MAX_GPUS 4

struct nvmlDevice_st {
    unsigned idx;
};

static struct nvmlDevice_st g_dev[MAX_GPUS] = {{0}, {1}, {2}, {3}};
/* FAKE_NVML_MIG=1: GPU 1 is in MIG mode with two MIG devices (MIG slots 0 and 2 populated
 * of 4), whose handles are these */
#define MIG_SLOTS 4
static struct nvmlDevice_st g_mig[2] = {{100}, {101}};
static const char *const g_mig_uuid[2] = {"MIG-5a1e0000-0000-5000-8000-0000000001a0",
                                          "MIG-5a1e0000-0000-5000-8000-0000000001a1"};

static int mig_on(void) {
    const char *v = getenv("FAKE_NVML_MIG");
    return v && !strcmp(v, "1");
}

static int is_mig(nvmlDevice_t d) { return mig_on() && d >= g_mig && d < g_mig + 2; }
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_refs;   /* read and written under g_lock */
static double g_t0;
static int g_pinned[MAX_GPUS];
static unsigned long long g_pinned_mj[MAX_GPUS];
static unsigned long long g_energy_calls, g_clock_calls[MAX_GPUS];
#define MAX_CALLERS 64
static char g_callers[MAX_CALLERS][16]; /* thread names of energy callers */
static unsigned long long g_caller_calls[MAX_CALLERS];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned ngpus(void) {
    const char *v = getenv("FAKE_NVML_GPUS");
    unsigned n = v ? (unsigned)atoi(v) : 2;
    return n > MAX_GPUS ? MAX_GPUS : n;
}

static int refs(void) {
    pthread_mutex_lock(&g_lock);
    int r = g_refs;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* seconds since t=0 of the script */
static double elapsed(void) {
    pthread_mutex_lock(&g_lock);
    double t0 = g_t0;
    pthread_mutex_unlock(&g_lock);
    return now_s() - t0;
}

static int check(nvmlDevice_t d) {
    if (!refs()) return NVML_ERROR_UNINITIALIZED;
    if (!d || d < g_dev || d >= g_dev + ngpus()) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static double power_w(unsigned i, double t) {
    if (i == 0) return 250.0;
    if (i == 1) return 100.0 + 50.0 * t;
    return 150.0;
}

static double energy_mj(unsigned i, double t) {
    if (i == 0) {
        const char *r = getenv("FAKE_NVML_RESET_MS");
        double reset = r ? atof(r) / 1000.0 : -1;
        if (reset >= 0 && t >= reset) return 250.0 * (t - reset) * 1000.0;
        return 5e6 + 250.0 * t * 1000.0;
    }
    if (i == 1) return 2e6 + (100.0 * t + 25.0 * t * t) * 1000.0;
    return 1e6 + 150.0 * t * 1000.0;
}

/* ------------------------------------------------------------------ test controls */

FAKE_API void fake_nvml_set_energy(unsigned gpu, unsigned long long mj);
FAKE_API int fake_nvml_refs(void);
FAKE_API unsigned long long fake_nvml_energy_calls(void);
FAKE_API unsigned long long fake_nvml_energy_calls_off(const char *thread_name);
FAKE_API double fake_nvml_t0(void);

void fake_nvml_set_energy(unsigned gpu, unsigned long long mj) {
    pthread_mutex_lock(&g_lock);
    if (gpu < MAX_GPUS) {
        g_pinned[gpu] = 1;
        g_pinned_mj[gpu] = mj;
    }
    pthread_mutex_unlock(&g_lock);
}

int fake_nvml_refs(void) { return refs(); }

unsigned long long fake_nvml_energy_calls(void) {
    pthread_mutex_lock(&g_lock);
    unsigned long long n = g_energy_calls;
    pthread_mutex_unlock(&g_lock);
    return n;
}

double fake_nvml_t0(void) {
    pthread_mutex_lock(&g_lock);
    double t0 = g_t0;
    pthread_mutex_unlock(&g_lock);
    return t0;
}

unsigned long long fake_nvml_energy_calls_off(const char *thread_name) {
    unsigned long long n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_CALLERS && g_callers[i][0]; i++)
        if (strcmp(g_callers[i], thread_name)) n += g_caller_calls[i];
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* ------------------------------------------------------------------ NVML */

FAKE_API nvmlReturn_t nvmlInit_v2(void);
FAKE_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
FAKE_API nvmlReturn_t nvmlShutdown(void);
FAKE_API const char *nvmlErrorString(nvmlReturn_t r);
FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n);
FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d);
FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int n);
FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n);
FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci);
FAKE_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *e);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v);
FAKE_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type,
                                             unsigned int *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, nvmlClockType_t type,
                                                unsigned int *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t s,
                                               unsigned int *c);
FAKE_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r);
FAKE_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count);
FAKE_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int i,
                                                          nvmlDevice_t *mig);
FAKE_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                   nvmlDevice_t *d);

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *f = getenv("FAKE_NVML_INIT_FAIL");
    if (f && !strcmp(f, "1")) return NVML_ERROR_DRIVER_NOT_LOADED;
    pthread_mutex_lock(&g_lock);
    if (g_refs++ == 0) g_t0 = now_s();
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&g_lock);
    nvmlReturn_t r = g_refs > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (g_refs > 0) g_refs--;
    pthread_mutex_unlock(&g_lock);
    return r;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    snprintf(v, n, "999.99.99-fake");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!refs()) return NVML_ERROR_UNINITIALIZED;
    *count = ngpus();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (!refs()) return NVML_ERROR_UNINITIALIZED;
    if (i >= ngpus()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &g_dev[i];
    return NVML_SUCCESS;
}

static void uuid_of(unsigned i, char *buf, size_t n) {
    snprintf(buf, n, "GPU-5a1e0000-0000-4000-8000-00000000000%u", i);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    if (!refs()) return NVML_ERROR_UNINITIALIZED;
    for (unsigned m = 0; mig_on() && m < 2; m++)
        if (!strcmp(uuid, g_mig_uuid[m])) {
            *d = &g_mig[m];
            return NVML_SUCCESS;
        }
    for (unsigned i = 0; i < ngpus(); i++) {
        char u[96];
        uuid_of(i, u, sizeof u);
        if (!strcmp(u, uuid)) {
            *d = &g_dev[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int n) {
    if (refs() && is_mig(d)) {
        snprintf(uuid, n, "%s", g_mig_uuid[d - g_mig]);
        return NVML_SUCCESS;
    }
    int r = check(d);
    if (r) return r;
    uuid_of(d->idx, uuid, n);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n) {
    int r = check(d);
    if (r) return r;
    snprintf(name, n, "Fake GPU %u", d->idx);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    int r = check(d);
    if (r) return r;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", 0x10 + d->idx);
    pci->bus = 0x10 + d->idx;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *e) {
    int r = check(d);
    if (r) return r;
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    pthread_mutex_lock(&g_lock);
    g_energy_calls++;
    int k = 0;
    while (k < MAX_CALLERS - 1 && g_callers[k][0] && strcmp(g_callers[k], name)) k++;
    if (!g_callers[k][0]) snprintf(g_callers[k], sizeof g_callers[k], "%s", name[0] ? name : "?");
    g_caller_calls[k]++;
    const char *no = getenv("FAKE_NVML_NO_ENERGY");
    if (no && !strcmp(no, "1")) {
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *e = g_pinned[d->idx] ? g_pinned_mj[d->idx]
                          : (unsigned long long)energy_mj(d->idx, now_s() - g_t0);
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    int r = check(d);
    if (r) return r;
    *mw = (unsigned int)(power_w(d->idx, elapsed()) * 1000.0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v) {
    int r = check(d);
    if (r) return r;
    for (int i = 0; i < n; i++) {
        v[i].timestamp = 0;
        v[i].latencyUsec = 0;
        if (v[i].fieldId == NVML_FI_DEV_POWER_INSTANT && d->idx != 1) {
            v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v[i].value.uiVal = (unsigned int)(power_w(d->idx, elapsed()) * 1000.0);
            v[i].nvmlReturn = NVML_SUCCESS;
        } else {
            v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    int r = check(d);
    if (r) return r;
    u->gpu = d->idx == 1 ? 60 : 95;
    u->memory = d->idx == 1 ? 20 : 40;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    int r = check(d);
    if (r) return r;
    const unsigned long long gib = 1ull << 30;
    m->total = 80 * gib;
    if (d->idx == 1) {
        m->used = 2 * gib;
    } else {
        double used = (1.0 + (elapsed())) * (double)gib;
        m->used = used > 60.0 * (double)gib ? 60 * gib : (unsigned long long)used;
    }
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *mhz) {
    int r = check(d);
    if (r) return r;
    if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_lock);
    unsigned long long c = g_clock_calls[d->idx]++;
    pthread_mutex_unlock(&g_lock);
    *mhz = d->idx == 1 ? (c & 1 ? 1700 : 1500) : 1980;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *mhz) {
    int r = check(d);
    if (r) return r;
    if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = 1980;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t s, unsigned int *c) {
    int r = check(d);
    if (r) return r;
    if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *c = d->idx == 1 ? 72 : 55;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) {
    int r = check(d);
    if (r) return r;
    *mw = d->idx == 1 ? 400000 : 700000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons) {
    int r = check(d);
    if (r) return r;
    *reasons = d->idx == 1 ? NVML_CLOCKS_EVENT_SW_POWER_CAP : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend) {
    int r = check(d);
    if (r) return r;
    if (!mig_on()) return NVML_ERROR_NOT_SUPPORTED; /* pre-Ampere, as most fakes' GPUs */
    *cur = *pend = d->idx == 1 ? NVML_DEVICE_MIG_ENABLE : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count) {
    int r = check(d);
    if (r) return r;
    *count = mig_on() && d->idx == 1 ? MIG_SLOTS : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int i,
                                                 nvmlDevice_t *mig) {
    int r = check(d);
    if (r) return r;
    if (!mig_on() || d->idx != 1 || i >= MIG_SLOTS) return NVML_ERROR_INVALID_ARGUMENT;
    if (i % 2) return NVML_ERROR_NOT_FOUND; /* slots 1 and 3 hold no MIG device */
    *mig = &g_mig[i / 2];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *d) {
    if (!refs()) return NVML_ERROR_UNINITIALIZED;
    if (!is_mig(mig)) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &g_dev[1];
    return NVML_SUCCESS;
}
