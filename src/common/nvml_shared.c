/*
 * nvml_shared.c — the one NVML loader (nvml_shared.h): the dlopen'ed libnvidia-ml function
 * table, NVML initialisation with a readable reason on failure, and the rules that choose a
 * process's GPUs. Compiled into libtrainprof (the sampler, capture/nvml.c, the EnergyMonitor,
 * core/energy.c, and the live metrics, core/metrics_feed.c) and into the trainprof command
 * (`run` and `serve` ask it whether NVML works before they start a node sampler), so that both
 * decide the same way on the same machine (docs/design.md §2.3). It depends on nothing of the
 * session: no log and no configuration (the library to load comes from the caller, which reads
 * TRAINPROF_NVML_LIB from core/config.h's table), only the launchers' and CUDA's environment
 * variables named in nvml_shared.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nvml_shared.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ the loader */

static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_load_state; /* 0 not tried, 1 loaded, -1 failed */
static tprof__nvml_api g_api;
static char g_load_why[384];

static int load_locked(const char *env) {
    static const char *const names[] = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
    void *h = NULL;
    char err[256] = "";
    if (env && *env) {
        snprintf(g_api.path, sizeof g_api.path, "%s", env);
        h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h) snprintf(err, sizeof err, "%s", dlerror());
    } else {
        for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) {
            snprintf(g_api.path, sizeof g_api.path, "%s", names[i]);
            h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            if (!h && i == 0) snprintf(err, sizeof err, "%s", dlerror());
        }
    }
    if (!h) {
        snprintf(g_load_why, sizeof g_load_why, "cannot load %s (%s)",
                 env && *env ? env : "libnvidia-ml.so.1", err);
        return 0;
    }
#define TPROF__NVML_SYM(ret, name, params, required) *(void **)&g_api.name = dlsym(h, #name);
    TPROF_NVML_FUNCTIONS(TPROF__NVML_SYM)
#undef TPROF__NVML_SYM
    const char *missing = NULL;
#define TPROF__NVML_REQ(ret, name, params, required) \
    if (required && !g_api.name && !missing) missing = #name;
    TPROF_NVML_FUNCTIONS(TPROF__NVML_REQ)
#undef TPROF__NVML_REQ
    if (!g_api.nvmlInit_v2 && !g_api.nvmlInit && !g_api.nvmlInitWithFlags && !missing)
        missing = "nvmlInit_v2";
    g_api.get_count = g_api.nvmlDeviceGetCount_v2 ? g_api.nvmlDeviceGetCount_v2
                                                  : g_api.nvmlDeviceGetCount;
    g_api.get_handle = g_api.nvmlDeviceGetHandleByIndex_v2 ? g_api.nvmlDeviceGetHandleByIndex_v2
                                                           : g_api.nvmlDeviceGetHandleByIndex;
    g_api.get_pci = g_api.nvmlDeviceGetPciInfo_v3 ? g_api.nvmlDeviceGetPciInfo_v3
                                                  : g_api.nvmlDeviceGetPciInfo_v2;
    g_api.get_clock_events = g_api.nvmlDeviceGetCurrentClocksEventReasons
                                 ? g_api.nvmlDeviceGetCurrentClocksEventReasons
                                 : g_api.nvmlDeviceGetCurrentClocksThrottleReasons;
    if (!missing && !g_api.get_count) missing = "nvmlDeviceGetCount_v2";
    if (!missing && !g_api.get_handle) missing = "nvmlDeviceGetHandleByIndex_v2";
    if (missing) {
        snprintf(g_load_why, sizeof g_load_why, "%s lacks %s", g_api.path, missing);
        dlclose(h); /* nothing of it was called */
        return 0;
    }
    return 1;
}

const tprof__nvml_api *tprof__nvml_load(const char *lib, char *why, size_t whylen) {
    pthread_mutex_lock(&g_load_lock);
    if (!g_load_state) g_load_state = load_locked(lib) ? 1 : -1;
    int ok = g_load_state > 0;
    if (!ok && why && whylen) snprintf(why, whylen, "%s", g_load_why);
    pthread_mutex_unlock(&g_load_lock);
    return ok ? &g_api : NULL;
}

const char *tprof__nvml_str(const tprof__nvml_api *api, nvmlReturn_t r) {
    const char *s = api->nvmlErrorString ? api->nvmlErrorString(r) : NULL;
    return s ? s : "unknown NVML error";
}

int tprof__nvml_init(const tprof__nvml_api *api, char *why, size_t whylen) {
    nvmlReturn_t r;
    /* NO_GPUS: a machine with a driver and no GPU is "no GPU", not an init failure */
    if (api->nvmlInitWithFlags) r = api->nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS);
    else if (api->nvmlInit_v2) r = api->nvmlInit_v2();
    else r = api->nvmlInit();
    if (r == NVML_SUCCESS) return 0;
    if (why && whylen) {
        if (r == NVML_ERROR_DRIVER_NOT_LOADED || r == NVML_ERROR_LIBRARY_NOT_FOUND)
            snprintf(why, whylen, "no NVIDIA driver loaded (nvmlInit: %s)",
                     tprof__nvml_str(api, r));
        else
            snprintf(why, whylen, "nvmlInit failed: %s (%d)", tprof__nvml_str(api, r), r);
    }
    return TPROF_ERR_UNAVAILABLE;
}

int tprof__nvml_energy_mj(const tprof__nvml_api *api, nvmlDevice_t dev, uint64_t *mj) {
    if (!api->nvmlDeviceGetTotalEnergyConsumption) return TPROF_ERR_UNAVAILABLE;
    unsigned long long v = 0;
    if (api->nvmlDeviceGetTotalEnergyConsumption(dev, &v) != NVML_SUCCESS)
        return TPROF_ERR_UNAVAILABLE;
    *mj = (uint64_t)v;
    return 0;
}

/* ------------------------------------------------------------------ choosing devices */

/* Every device NVML sees, in NVML (PCI) order. */
size_t tprof__nvml_enumerate(const tprof__nvml_api *api, tprof__nvml_dev *all, size_t max) {
    unsigned int count = 0;
    if (api->get_count(&count) != NVML_SUCCESS) return 0;
    size_t n = 0;
    for (unsigned int i = 0; i < count && n < max; i++) {
        tprof__nvml_dev d;
        memset(&d, 0, sizeof d);
        if (api->get_handle(i, &d.dev) != NVML_SUCCESS) continue;
        if (api->nvmlDeviceGetUUID(d.dev, d.uuid, sizeof d.uuid) != NVML_SUCCESS) d.uuid[0] = 0;
        d.uuid[sizeof d.uuid - 1] = 0;
        d.index = i;
        all[n++] = d;
    }
    return n;
}

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* Position in all[] of the device `tok` names, or -1 (none, or an ambiguous prefix).
 * bare_uuid: accept a UUID without its "GPU-" (torch prints UUIDs so); CUDA_VISIBLE_DEVICES
 * does not. */
static int match_token(const tprof__nvml_dev *all, size_t nall, const char *tok, int bare_uuid,
                       int *is_index) {
    *is_index = 0;
    if (all_digits(tok)) {
        errno = 0;
        unsigned long idx = strtoul(tok, NULL, 10);
        if (errno) return -1;
        *is_index = 1;
        for (size_t k = 0; k < nall; k++)
            if (all[k].index == idx) return (int)k;
        return -1;
    }
    const char *want = tok;
    if (!strncasecmp(want, "GPU-", 4)) want += 4;
    else if (!bare_uuid) return -1;
    size_t wl = strlen(want);
    if (!wl) return -1;
    int found = -1, hits = 0;
    for (size_t k = 0; k < nall; k++) {
        const char *u = all[k].uuid;
        if (!strncasecmp(u, "GPU-", 4)) u += 4;
        if (!strncasecmp(u, want, wl)) {
            found = (int)k;
            hits++;
        }
    }
    return hits == 1 ? found : -1;
}

/* Position in all[] of the GPU that MIG device `tok` ("MIG-<uuid>", or the older
 * "MIG-GPU-<uuid>/<gi>/<ci>", both of which nvmlDeviceGetHandleByUUID accepts) is on; -1
 * when NVML cannot say. */
static int mig_parent(const tprof__nvml_api *api, const tprof__nvml_dev *all, size_t nall,
                      const char *tok) {
    nvmlDevice_t mig, dev;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (!api->nvmlDeviceGetHandleByUUID || !api->nvmlDeviceGetDeviceHandleFromMigDeviceHandle ||
        api->nvmlDeviceGetHandleByUUID(tok, &mig) != NVML_SUCCESS ||
        api->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &dev) != NVML_SUCCESS ||
        api->nvmlDeviceGetUUID(dev, uuid, sizeof uuid) != NVML_SUCCESS)
        return -1;
    uuid[sizeof uuid - 1] = 0;
    for (size_t k = 0; k < nall; k++)
        if (!strcmp(all[k].uuid, uuid)) return (int)k;
    return -1;
}

size_t tprof__nvml_visible(const tprof__nvml_api *api, tprof__nvml_dev *out, size_t max,
                           tprof__nvml_match *match, char *note, size_t notelen) {
    if (note && notelen) note[0] = 0;
    tprof__nvml_dev all[TPROF__NVML_MAX_GPUS];
    size_t nall = tprof__nvml_enumerate(api, all, TPROF__NVML_MAX_GPUS);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) {
        *match = TPROF__NVML_ALL;
        size_t n = nall < max ? nall : max;
        memcpy(out, all, n * sizeof *out);
        return n;
    }
    *match = TPROF__NVML_BY_UUID;
    size_t n = 0;
    for (const char *p = cvd;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        char tok[128];
        if (len >= sizeof tok) len = sizeof tok - 1;
        memcpy(tok, p, len);
        tok[len] = 0;
        if (!strncasecmp(tok, "MIG-", 4)) {
            int k = mig_parent(api, all, nall, tok);
            if (k < 0) {
                if (note && notelen)
                    snprintf(note, notelen, "MIG device %s not sampled: NVML does not place it on "
                                            "a GPU", tok);
            } else {
                if (note && notelen)
                    snprintf(note, notelen, "MIG device %s is on GPU %u (%s): that whole GPU is "
                                            "sampled, its power and energy shared by its MIG "
                                            "instances", tok, all[k].index, all[k].uuid);
                int dup = 0;
                for (size_t i = 0; i < n; i++) dup |= out[i].index == all[k].index;
                if (!dup && n < max) {
                    out[n] = all[k];
                    snprintf(out[n].mig_uuid, sizeof out[n].mig_uuid, "%.95s", tok);
                    n++;
                }
            }
        } else {
            int is_index;
            int k = match_token(all, nall, tok, 0, &is_index);
            if (k < 0) {
                /* CUDA's rule: devices listed before an invalid entry stay visible */
                if (note && notelen && *tok)
                    snprintf(note, notelen, "CUDA_VISIBLE_DEVICES entry \"%s\" names no GPU; the "
                                            "list ends there, as CUDA reads it", tok);
                break;
            }
            if (is_index) *match = TPROF__NVML_BY_INDEX;
            int dup = 0;
            for (size_t i = 0; i < n; i++) dup |= out[i].index == all[k].index;
            if (!dup && n < max) out[n++] = all[k];
        }
        if (!e) break;
        p = e + 1;
    }
    return n;
}

int tprof__nvml_lookup(const tprof__nvml_api *api, const char *spec, tprof__nvml_dev *out) {
    if (!spec) return TPROF_ERR_INVALID_ARG;
    tprof__nvml_dev all[TPROF__NVML_MAX_GPUS];
    size_t nall = tprof__nvml_enumerate(api, all, TPROF__NVML_MAX_GPUS);
    while (isspace((unsigned char)*spec)) spec++;
    int is_index;
    int k = match_token(all, nall, spec, 1, &is_index);
    if (k < 0) return TPROF_ERR_NOT_FOUND;
    *out = all[k];
    return 0;
}

int tprof__nvml_local_rank(const char **var) {
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !all_digits(v)) continue;
        if (var) *var = vars[i];
        long r = strtol(v, NULL, 10);
        return r > 1 << 20 ? 1 << 20 : (int)r;
    }
    if (var) *var = NULL;
    return -1;
}
