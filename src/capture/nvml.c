/*
 * nvml.c — GPU device metrics through NVML: the sampler that records, per GPU, power,
 * energy, utilisation, memory, SM clock, temperature, the enforced power limit and the
 * clock-event (throttle) reasons as counters "gpu<i>.*" (i = NVML index), at
 * TRAINPROF_NVML_HZ (default 10). The library is loaded, and the GPUs chosen, by the loader
 * shared with the EnergyMonitor and the trainprof command (common/nvml_shared.c).
 *
 * Like the process sampler (procfs.c) it runs on the flusher thread, called once per flusher
 * pass (tprof__nvml_tick), so it has no thread of its own and exists only in processes that
 * record something; and the total-energy call, which can take milliseconds, never runs on a
 * thread of the program. The effective rate is bounded by the flusher period
 * (TRAINPROF_FLUSH_MS, default 50 ms, i.e. 20 Hz at most).
 *
 * Which GPUs: those visible to this process. CUDA_VISIBLE_DEVICES entries
 * that are UUIDs ("GPU-..." or a unique prefix) are matched to NVML devices exactly; a MIG
 * device ("MIG-...") gives the GPU it is on (NVML reports power and energy per physical GPU),
 * and each GPU in MIG mode lists its MIG devices (gpu.<i>.mig_uuids). Entries that are
 * indices are read as NVML indices, which are in PCI bus order; CUDA numbers devices fastest
 * first unless CUDA_DEVICE_ORDER=PCI_BUS_ID. On a node of identical GPUs the two orders
 * agree (CUDA breaks ties by PCI bus id); on a mixed node an index may name another GPU than
 * CUDA's, and "nvml.match" in the rank file says "index" so the report can warn. The node
 * sampler of `trainprof run` samples every GPU of the node in that case: the report finds
 * each rank's GPU by the UUID in the rank's own file, never by position.
 * When several ranks share a node only local rank 0 samples (one sampler per node is enough
 * and NVML calls are not free), unless TRAINPROF_NVML_ALL_RANKS=1. A child forked from a
 * process that samples does not sample again (DataLoader workers inherit the environment).
 *
 * Missing NVML (no library, no driver, nvmlInit failing, no GPU) is a missing capability:
 * one line at info level and "capability.nvml" in the rank file, never an error for the job.
 * Loading and nvmlInit happen on the flusher's first pass once the session records; without
 * persistence mode nvmlInit can take a second, which delays that pass (not the program).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/internal.h"
#include "../core/metrics.h"
#include "../common/nvml_shared.h"
#include "../core/source.h"

/* ------------------------------------------------------------------ the sampler */

enum metric {
    M_POWER,
    M_POWER_INSTANT,
    M_ENERGY,
    M_UTIL,
    M_MEM_UTIL,
    M_MEM_USED,
    M_SM_CLOCK,
    M_TEMP,
    M_POWER_LIMIT,
    M_CLOCK_EVENTS,
    M_COUNT
};

static const char *const metric_suffix[M_COUNT] = {
    "power_w",      "power_instant_w", "energy_j", "util_percent",  "mem_util_percent",
    "mem_used_bytes", "sm_clock_mhz",  "temp_c",   "power_limit_w", "clock_event_reasons"};

typedef struct nv_gpu {
    tprof__nvml_dev d;
    int off[M_COUNT];  /* not supported on this GPU: not asked again */
    int lost;          /* fell off the bus: not sampled again */
    /* energy relative to the first sample, in mJ: acc_mj + (counter - base_mj); when the
     * counter goes backwards (driver reload restarts it from 0), what was counted so far
     * moves into acc_mj and the base becomes 0 */
    int have_energy;
    uint64_t base_mj, prev_mj, acc_mj;
    /* counter names kept in place, so the interning cache hits on their pointers */
    char names[M_COUNT][40];
} nv_gpu;

enum { MODE_UNDECIDED = 0, MODE_ON = 1, MODE_OFF = 2 };

static struct {
    pid_t pid;   /* the process this state belongs to (a forked child starts over) */
    int mode;
    const tprof__nvml_api *api;
    uint64_t period_ns, next_ns;
    size_t n;
    nv_gpu gpu[TPROF__NVML_MAX_GPUS];
    int named;
} g;

/* Missing or skipped: one line at `level`, and the reason for the report. */
static void sampler_off(int level, const char *why) {
    g.mode = MODE_OFF;
    tprof__log(level, "NVML sampling off: %s", why);
    char status[400];
    /* "unavailable"/"off" first: the report reads such a status as not captured */
    snprintf(status, sizeof status, "%s%.380s", strncmp(why, "off", 3) ? "unavailable: " : "",
             why);
    tprof__capability("nvml", status);
}

static void put(tprof__thread *t, const char *name, double v, uint64_t ts) {
    uint32_t size;
    tprof_pl_counter *pl = tprof__begin_named(t, TPROF_REC_COUNTER, name, sizeof *pl, ts, &size);
    if (!pl) return;
    pl->value = v;
    tprof__commit(t, size);
}

/* The counter record, and the live metric beside it when metrics are on (core/metrics.h) */
static void putm(tprof__thread *t, const nv_gpu *gp, int metric, double v, uint64_t ts) {
    put(t, gp->names[metric], v, ts);
    if (TPROF__METRICS_ON()) tprof__metrics_gpu(gp->d.index, gp->d.uuid, metric_suffix[metric], v);
}

static void meta_gpu(unsigned idx, const char *key, const char *value) {
    char k[64];
    snprintf(k, sizeof k, "gpu.%u.%s", idx, key);
    tprof__set_meta(k, value);
}

static void meta_gpu_u64(unsigned idx, const char *key, unsigned long long v) {
    char s[32];
    snprintf(s, sizeof s, "%llu", v);
    meta_gpu(idx, key, s);
}

/* What never changes during the run goes into the rank file once. */
static void describe_gpu(const tprof__nvml_api *api, nv_gpu *gp) {
    nvmlDevice_t dev = gp->d.dev;
    unsigned idx = gp->d.index;
    meta_gpu(idx, "uuid", gp->d.uuid);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    if (api->nvmlDeviceGetName && api->nvmlDeviceGetName(dev, name, sizeof name) == NVML_SUCCESS) {
        name[sizeof name - 1] = 0;
        meta_gpu(idx, "name", name);
    }
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    if (api->get_pci && api->get_pci(dev, &pci) == NVML_SUCCESS) {
        pci.busId[sizeof pci.busId - 1] = 0;
        meta_gpu(idx, "pci_bus_id", pci.busId);
    }
    nvmlMemory_t mem;
    if (api->nvmlDeviceGetMemoryInfo && api->nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
        meta_gpu_u64(idx, "memory_total_bytes", mem.total);
        if (TPROF__METRICS_ON())
            tprof__metrics_gpu_total_memory(idx, gp->d.uuid, (double)mem.total);
    }
    unsigned int v;
    if (api->nvmlDeviceGetEnforcedPowerLimit &&
        api->nvmlDeviceGetEnforcedPowerLimit(dev, &v) == NVML_SUCCESS) {
        char s[32];
        snprintf(s, sizeof s, "%.3f", v / 1000.0);
        meta_gpu(idx, "power_limit_w", s);
    }
    if (api->nvmlDeviceGetMaxClockInfo &&
        api->nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
        meta_gpu_u64(idx, "sm_clock_max_mhz", v);
    /* MIG mode: the GPU's MIG devices, by the UUIDs CUDA gives them, so that a rank on a MIG
     * device finds this GPU (whose power and energy all its MIG instances share) */
    unsigned cur = 0, pend = 0, max = 0;
    if (api->nvmlDeviceGetMigMode && api->nvmlDeviceGetMaxMigDeviceCount &&
        api->nvmlDeviceGetMigDeviceHandleByIndex &&
        api->nvmlDeviceGetMigMode(dev, &cur, &pend) == NVML_SUCCESS &&
        cur == NVML_DEVICE_MIG_ENABLE &&
        api->nvmlDeviceGetMaxMigDeviceCount(dev, &max) == NVML_SUCCESS) {
        char list[1024] = "";
        size_t ll = 0;
        for (unsigned m = 0; m < max && m < 64; m++) {
            nvmlDevice_t mig;
            char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
            if (api->nvmlDeviceGetMigDeviceHandleByIndex(dev, m, &mig) != NVML_SUCCESS ||
                api->nvmlDeviceGetUUID(mig, u, sizeof u) != NVML_SUCCESS)
                continue; /* an index with no MIG device behind it */
            u[sizeof u - 1] = 0;
            int w = snprintf(list + ll, sizeof list - ll, "%s%s", ll ? "," : "", u);
            if (w < 0 || (size_t)w >= sizeof list - ll) break;
            ll += (size_t)w;
        }
        meta_gpu(idx, "mig_uuids", list);
    }
    if (gp->d.mig_uuid[0]) meta_gpu(idx, "mig_device", gp->d.mig_uuid);
    for (int m = 0; m < M_COUNT; m++)
        snprintf(gp->names[m], sizeof gp->names[m], "gpu%u.%s", idx, metric_suffix[m]);
}

/* A process whose GPU activity CUPTI records does not sample NVML: the two together hung the
 * training thread in a kernel launch (H200, torch 2.11, CUPTI 13.0.1; each alone runs fine),
 * and the job comes first. Sampling stops as soon as CUPTI records in this process (checked
 * at start and at every tick, as CUDA may initialise after the sampler started).
 * TRAINPROF_NVML_WITH_CUPTI=1 overrides, for investigation. */
static int cupti_conflict(void) {
    const char *force = tprof__env(TPROF__OPT_NVML_WITH_CUPTI);
    if (!tprof__source_active("cupti") || (force && !strcmp(force, "1"))) return 0;
    g.mode = MODE_OFF;
    tprof__capability("nvml", "off: not sampled in a process with CUPTI GPU capture (a hang "
                              "was seen with both); TRAINPROF_CUPTI=0 gives energy and power");
    return 1;
}

/* The flusher's period, ms (TRAINPROF_FLUSH_MS; its 50 for 0): the sampler runs once a pass. */
static uint32_t g_flush_ms = 50;

static void sampler_start(uint32_t hz) {
    char why[1024];
    if (!hz) {
        g.mode = MODE_OFF;
        tprof__capability("nvml", "off (TRAINPROF_NVML_HZ=0)");
        return;
    }
    /* A process with GPU capture does not sample NVML (cupti_conflict says why). */
    /* `trainprof run` samples the node's GPUs in its own process (no CUDA, no CUPTI there)
     * and names its pid here: the job's processes leave NVML alone. */
    const char *node = tprof__env(TPROF__OPT_NVML_SAMPLER);
    int node_self = node && *node && atoi(node) == (int)getpid();
    if (node && *node && !node_self) {
        snprintf(why, sizeof why, "off: sampled by trainprof run's node sampler (pid %.20s)", node);
        sampler_off(TPROF_LOG_INFO, why);
        return;
    }
    if (!node_self && cupti_conflict()) return;
    const char *var;
    int lr = tprof__nvml_local_rank(&var);
    const char *every = tprof__env(TPROF__OPT_NVML_ALL_RANKS);
    if (!node_self && lr > 0 && !(every && !strcmp(every, "1"))) {
        snprintf(why, sizeof why,
                 "not sampled here: %s=%d (local rank 0 samples the GPUs of this "
                 "node; TRAINPROF_NVML_ALL_RANKS=1 samples in every rank)",
                 var, lr);
        sampler_off(TPROF_LOG_INFO, why);
        return;
    }
    char reason[400];
    const tprof__nvml_api *api =
        tprof__nvml_load(tprof__env(TPROF__OPT_NVML_LIB), reason, sizeof reason);
    if (!api) {
        snprintf(why, sizeof why, "%s", reason); /* sampler_off says "unavailable" */
        sampler_off(TPROF_LOG_INFO, why);
        return;
    }
    if (tprof__nvml_init(api, reason, sizeof reason) != 0) {
        snprintf(why, sizeof why, "%s", reason); /* sampler_off says "unavailable" */
        sampler_off(TPROF_LOG_INFO, why);
        return;
    }
    tprof__nvml_dev devs[TPROF__NVML_MAX_GPUS];
    tprof__nvml_match match;
    char note[256];
    size_t n = tprof__nvml_visible(api, devs, TPROF__NVML_MAX_GPUS, &match, note, sizeof note);
    if (note[0]) tprof__log(TPROF_LOG_INFO, "NVML: %s", note);
    if (node_self && match == TPROF__NVML_BY_INDEX) {
        /* CUDA reads indices in its own order (fastest first unless CUDA_DEVICE_ORDER=
         * PCI_BUS_ID), which NVML cannot know: the node sampler samples every GPU of the
         * node, and the report finds each rank's by the UUID in the rank's file */
        n = tprof__nvml_enumerate(api, devs, TPROF__NVML_MAX_GPUS);
        match = TPROF__NVML_ALL;
        tprof__log(TPROF_LOG_INFO, "NVML: CUDA_VISIBLE_DEVICES holds indices, which CUDA may "
                                   "number in another order than NVML's: sampling every GPU");
    }
    if (!n) {
        api->nvmlShutdown();
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        if (cvd)
            snprintf(why, sizeof why, "no GPU to sample (CUDA_VISIBLE_DEVICES=\"%.200s\")%s%s",
                     cvd, note[0] ? ": " : "", note);
        else
            snprintf(why, sizeof why, "no GPU to sample (NVML found none)");
        sampler_off(TPROF_LOG_INFO, why);
        return;
    }
    g.api = api;
    g.n = n;
    char list[256] = "";
    size_t ll = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&g.gpu[i], 0, sizeof g.gpu[i]);
        g.gpu[i].d = devs[i];
        describe_gpu(api, &g.gpu[i]);
        int w = snprintf(list + ll, sizeof list - ll, "%s%u", i ? "," : "", devs[i].index);
        if (w > 0 && (size_t)w < sizeof list - ll) ll += (size_t)w;
    }
    char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
    if (api->nvmlSystemGetDriverVersion &&
        api->nvmlSystemGetDriverVersion(drv, sizeof drv) == NVML_SUCCESS) {
        drv[sizeof drv - 1] = 0;
        tprof__set_meta("nvml.driver_version", drv);
    }
    static const char *const match_names[] = {"all", "uuid", "index"};
    tprof__set_meta("nvml.devices", list);
    tprof__set_meta("nvml.match", match_names[match]);
    if (hz > 100) hz = 100; /* NVML's own values update every 1/6 s to 1 s */
    char hzs[16];
    snprintf(hzs, sizeof hzs, "%u", hz);
    tprof__set_meta("nvml.hz", hzs);
    /* one sample a flusher pass at most: a rate past it is not what the samples will show */
    uint32_t most = 1000u / g_flush_ms;
    char bound[96] = "";
    if (most && hz > most)
        snprintf(bound, sizeof bound, " asked, at most %u Hz (one sample a flush, "
                 "TRAINPROF_FLUSH_MS=%u)", most, g_flush_ms);
    snprintf(why, sizeof why, "sampling %zu GPU%s (NVML %s %s) at %u Hz%s%s%s, from %s", n,
             n == 1 ? "" : "s", n == 1 ? "index" : "indices", list, hz, bound,
             drv[0] ? ", driver " : "", drv, api->path);
    tprof__capability("nvml", why);
    tprof__log(TPROF_LOG_INFO, "NVML %s", why);
    if (match == TPROF__NVML_BY_INDEX)
        tprof__log(TPROF_LOG_INFO, "NVML: CUDA_VISIBLE_DEVICES holds indices, read in NVML's PCI "
                                   "order (CUDA's order agrees on a node of identical GPUs, or "
                                   "with CUDA_DEVICE_ORDER=PCI_BUS_ID)");
    g.period_ns = 1000000000ull / hz;
    g.next_ns = 0;
    g.mode = MODE_ON;
}

/* The energy counter is missing on many GPUs and most vGPUs: the report then integrates the
 * power samples, and says why it had to (gpu.<i>.energy_counter). */
static void energy_counter_missing(const nv_gpu *gp, const char *why) {
    char v[160];
    snprintf(v, sizeof v, "unsupported: %.140s", why);
    meta_gpu(gp->d.index, "energy_counter", v);
}

/* An unsupported call is not asked again; a lost GPU is not sampled again. */
static int failed(nv_gpu *gp, int metric, nvmlReturn_t r) {
    if (r == NVML_SUCCESS) return 0;
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION ||
        r == NVML_ERROR_FUNCTION_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT) {
        gp->off[metric] = 1;
        tprof__log(TPROF_LOG_INFO, "NVML: GPU %u does not give %s (NVML error %d); not asked again",
                   gp->d.index, metric_suffix[metric], r);
        if (metric == M_ENERGY) {
            char why[128];
            snprintf(why, sizeof why, "nvmlDeviceGetTotalEnergyConsumption answered \"%s\" (%d)",
                     tprof__nvml_str(g.api, r), r);
            energy_counter_missing(gp, why);
        }
    }
    if (r == NVML_ERROR_GPU_IS_LOST && !gp->lost) {
        gp->lost = 1;
        tprof__log(TPROF_LOG_WARN, "NVML: GPU %u (%s) is lost; no longer sampled", gp->d.index,
                   gp->d.uuid);
    }
    return 1;
}

static double field_value(const nvmlFieldValue_t *f) {
    switch (f->valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return f->value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return (double)f->value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return (double)f->value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return (double)f->value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return (double)f->value.sllVal;
    case NVML_VALUE_TYPE_SIGNED_INT: return (double)f->value.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: return (double)f->value.usVal;
    default: return (double)f->value.uiVal;
    }
}

static void sample_gpu(tprof__thread *t, const tprof__nvml_api *api, nv_gpu *gp) {
    nvmlDevice_t dev = gp->d.dev;
    nvmlReturn_t r;
    /* every counter of this sample carries the time of the energy read: the midpoint of the
     * call, the best estimate of when the driver read its counter */
    uint64_t t0 = tprof__now();
    unsigned long long mj = 0;
    int have_mj = 0;
    if (!gp->off[M_ENERGY]) {
        if (!api->nvmlDeviceGetTotalEnergyConsumption) {
            gp->off[M_ENERGY] = 1;
            energy_counter_missing(gp,
                                   "the NVML library has no nvmlDeviceGetTotalEnergyConsumption");
        } else if (!failed(gp, M_ENERGY, r = api->nvmlDeviceGetTotalEnergyConsumption(dev, &mj)))
            have_mj = 1;
        if (gp->lost) return;
    }
    uint64_t t1 = tprof__now();
    uint64_t ts = t0 + (t1 - t0) / 2;
    if (have_mj) {
        if (!gp->have_energy) {
            gp->have_energy = 1;
            gp->base_mj = gp->prev_mj = mj;
        } else if (mj < gp->prev_mj) {
            tprof__log(TPROF_LOG_INFO, "NVML: the energy counter of GPU %u went back from %llu "
                                       "to %llu mJ (driver reloaded?); counting on from there",
                       gp->d.index, (unsigned long long)gp->prev_mj, mj);
            gp->acc_mj += gp->prev_mj - gp->base_mj;
            gp->base_mj = 0; /* the counter restarted from 0 at the reload */
        }
        gp->prev_mj = mj;
        putm(t, gp, M_ENERGY, (double)(gp->acc_mj + (mj - gp->base_mj)) / 1000.0, ts);
    }
    unsigned int v;
    if (!gp->off[M_POWER]) {
        if (!api->nvmlDeviceGetPowerUsage) gp->off[M_POWER] = 1;
        else if (!failed(gp, M_POWER, r = api->nvmlDeviceGetPowerUsage(dev, &v)))
            putm(t, gp, M_POWER, v / 1000.0, ts);
    }
    if (!gp->off[M_POWER_INSTANT]) {
        nvmlFieldValue_t f;
        memset(&f, 0, sizeof f);
        f.fieldId = NVML_FI_DEV_POWER_INSTANT;
        f.scopeId = 0; /* the GPU alone, not the module */
        if (!api->nvmlDeviceGetFieldValues) gp->off[M_POWER_INSTANT] = 1;
        else if (!failed(gp, M_POWER_INSTANT, r = api->nvmlDeviceGetFieldValues(dev, 1, &f)) &&
                 !failed(gp, M_POWER_INSTANT, f.nvmlReturn))
            putm(t, gp, M_POWER_INSTANT, field_value(&f) / 1000.0, ts);
    }
    if (!gp->off[M_UTIL]) {
        nvmlUtilization_t u;
        if (!api->nvmlDeviceGetUtilizationRates) gp->off[M_UTIL] = 1;
        else if (!failed(gp, M_UTIL, r = api->nvmlDeviceGetUtilizationRates(dev, &u))) {
            putm(t, gp, M_UTIL, u.gpu, ts);
            putm(t, gp, M_MEM_UTIL, u.memory, ts);
        }
    }
    if (!gp->off[M_MEM_USED]) {
        nvmlMemory_t m;
        if (!api->nvmlDeviceGetMemoryInfo) gp->off[M_MEM_USED] = 1;
        else if (!failed(gp, M_MEM_USED, r = api->nvmlDeviceGetMemoryInfo(dev, &m))) {
            putm(t, gp, M_MEM_USED, (double)m.used, ts);
            /* the capacity too: the endpoint may have started after the sampler described
             * the GPU (the session's first pass), and a gauge set once would then be lost */
            if (TPROF__METRICS_ON())
                tprof__metrics_gpu_total_memory(gp->d.index, gp->d.uuid, (double)m.total);
        }
    }
    if (!gp->off[M_SM_CLOCK]) {
        if (!api->nvmlDeviceGetClockInfo) gp->off[M_SM_CLOCK] = 1;
        else if (!failed(gp, M_SM_CLOCK, r = api->nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v)))
            putm(t, gp, M_SM_CLOCK, v, ts);
    }
    if (!gp->off[M_TEMP]) {
        if (!api->nvmlDeviceGetTemperature) gp->off[M_TEMP] = 1;
        else if (!failed(gp, M_TEMP,
                         r = api->nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &v)))
            putm(t, gp, M_TEMP, v, ts);
    }
    if (!gp->off[M_POWER_LIMIT]) {
        if (!api->nvmlDeviceGetEnforcedPowerLimit) gp->off[M_POWER_LIMIT] = 1;
        else if (!failed(gp, M_POWER_LIMIT, r = api->nvmlDeviceGetEnforcedPowerLimit(dev, &v)))
            putm(t, gp, M_POWER_LIMIT, v / 1000.0, ts);
    }
    if (!gp->off[M_CLOCK_EVENTS]) {
        unsigned long long reasons;
        if (!api->get_clock_events) gp->off[M_CLOCK_EVENTS] = 1;
        else if (!failed(gp, M_CLOCK_EVENTS, r = api->get_clock_events(dev, &reasons)))
            putm(t, gp, M_CLOCK_EVENTS, (double)reasons, ts);
    }
}

static void nvml_tick(uint32_t hz, int final) {
    pid_t pid = getpid();
    if (g.pid != pid || g.mode == MODE_UNDECIDED) {
        /* decide only once the session records: the flusher's first pass may run while the
         * session is still starting, and metadata written then would be lost */
        if (final || atomic_load(&tprof__g_state) != TPROF__ON) return;
        if (g.pid != pid) {
            /* first call in this process, or a forked child's first: start over */
            int parent_samples = g.pid != 0 && g.mode == MODE_ON;
            pid_t parent = g.pid;
            memset(&g, 0, sizeof g);
            g.pid = pid;
            if (parent_samples) {
                char why[160];
                snprintf(why, sizeof why,
                         "not sampled here: forked from process %d, which samples", (int)parent);
                sampler_off(TPROF_LOG_DEBUG, why);
                return;
            }
        }
        sampler_start(hz);
    }
    if (g.mode != MODE_ON || cupti_conflict()) return;
    uint64_t now = tprof__now();
    if (!final && now < g.next_ns) return;
    /* a fixed grid, so the rate holds on average; after a long stall, restart the grid */
    g.next_ns = g.next_ns && now < g.next_ns + g.period_ns ? g.next_ns + g.period_ns
                                                           : now + g.period_ns;
    tprof__thread *t = tprof__thread_get();
    if (!t && final && (uintptr_t)tprof__tls > TPROF__TLS_SENTINELS) {
        /* shutting down: the state no longer lets threads record, but this thread's ring
         * is drained once more after this call, so a last sample closes the run */
        t = tprof__tls;
    }
    if (t) {
        if (!g.named) {
            tprof__thread_name(t, t->os_tid, "trainprof sampler");
            g.named = 1;
        }
        for (size_t i = 0; i < g.n; i++)
            if (!g.gpu[i].lost) sample_gpu(t, g.api, &g.gpu[i]);
    }
    if (final) {
        g.api->nvmlShutdown();
        g.mode = MODE_OFF;
    }
}

/* The sampling rate of the session (TRAINPROF_NVML_HZ, 0 = off), the flusher's own. */
static uint32_t g_hz;

static void nvml_source_start(const tprof_config *cfg) {
    g_hz = cfg->nvml_hz;
    g_flush_ms = cfg->flush_interval_ms ? cfg->flush_interval_ms : 50;
}

/* Samples when its period has passed; `final` (the flusher's last pass) takes one more
 * sample so the run's end is covered, then releases NVML. */
static uint64_t nvml_source_tick(int final) {
    nvml_tick(g_hz, final);
    return 0;
}

const tprof__source tprof__source_nvml = {
    .name = "nvml",
    .start = nvml_source_start,
    .tick = nvml_source_tick,
};
