/*
 * cuda_devices.c — which CUDA devices a process can use, written into its rank file's metadata
 * as cuda.<ordinal>.{uuid,name,sm_count,memory_total_bytes,sm_clock_max_mhz,
 * compute_capability}, so that every rank's own file names its GPUs (the NVML sampler may be
 * another process) and the report can match them to NVML's by UUID.
 *
 * Two sources, one writer (tprof__cuda_describe):
 *  - CUPTI's device records, where GPU activity is captured (capture/cupti.c);
 *  - otherwise the CUDA driver the process itself loaded and initialised: the flusher asks it
 *    (tprof__cuda_devices_tick) about once a second and on its last pass, first for the
 *    description, then for the devices whose primary context has become active
 *    (cuda.<ordinal>.in_use = 1: the GPUs the process works on, which the report otherwise
 *    learns from GPU records). We never load libcuda (dlopen RTLD_NOLOAD only) and never call
 *    cuInit: before the program initialises CUDA, cuDeviceGetCount answers
 *    CUDA_ERROR_NOT_INITIALIZED and nothing is written; a program that never uses CUDA is
 *    left exactly as it was.
 * Ordinals are the driver's, i.e. after CUDA_VISIBLE_DEVICES, as CUPTI's device ids are.
 * Our own declarations of the few driver calls (docs/design.md §6.6): no link dependency.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../core/internal.h"
#include "mapped.h"
#include "../core/source.h"

typedef int cu_result; /* CUDA_SUCCESS = 0 */

/* CUdevice_attribute values (cuda.h) */
enum {
    CU_ATTR_CLOCK_RATE = 13, /* kHz */
    CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76
};

static _Atomic int g_described; /* some device was written, by either source */

/* the 16 bytes as NVML prints a UUID after its prefix */
static void uuid_text(char *v, size_t n, const char *prefix, const unsigned char *u) {
    snprintf(v, n, "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

void tprof__cuda_describe(unsigned ordinal, const unsigned char uuid[16], const char *name,
                          unsigned sm_count, unsigned long long memory_bytes,
                          unsigned clock_khz, unsigned cc_major, unsigned cc_minor) {
    char k[48], v[64];
    const unsigned char *u = uuid;
#define META(key, ...)                                          \
    do {                                                        \
        snprintf(k, sizeof k, "cuda.%u." key, ordinal);         \
        snprintf(v, sizeof v, __VA_ARGS__);                     \
        tprof__set_meta(k, v);                                  \
    } while (0)
    /* NVML's spelling of the same 16 bytes (nvidia-smi -L) */
    snprintf(k, sizeof k, "cuda.%u.uuid", ordinal);
    uuid_text(v, sizeof v, "GPU-", u);
    tprof__set_meta(k, v);
    META("name", "%.60s", name ? name : "");
    META("sm_count", "%u", sm_count);
    META("memory_total_bytes", "%llu", memory_bytes);
    META("sm_clock_max_mhz", "%u", clock_khz / 1000);
    META("compute_capability", "%u.%u", cc_major, cc_minor);
#undef META
    atomic_store(&g_described, 1);
}

void tprof__cuda_describe_mig(unsigned ordinal, const unsigned char mig_uuid[16],
                              const unsigned char *gpu_uuid) {
    char k[48], v[64];
    snprintf(k, sizeof k, "cuda.%u.uuid", ordinal);
    uuid_text(v, sizeof v, "MIG-", mig_uuid);
    tprof__set_meta(k, v);
    if (gpu_uuid) {
        snprintf(k, sizeof k, "cuda.%u.gpu_uuid", ordinal);
        uuid_text(v, sizeof v, "GPU-", gpu_uuid);
        tprof__set_meta(k, v);
    }
}

static struct {
    cu_result (*count)(int *n);
    cu_result (*get)(int *dev, int ordinal);
    cu_result (*name)(char *name, int len, int dev);
    cu_result (*uuid)(unsigned char uuid[16], int dev);
    cu_result (*uuid_v1)(unsigned char uuid[16], int dev); /* may be missing */
    cu_result (*mem)(size_t *bytes, int dev);
    cu_result (*attr)(int *v, int attr, int dev);
    cu_result (*primary_state)(int dev, unsigned *flags, int *active); /* may be missing */
} D;

/* The driver's calls, when the process has libcuda mapped: 1, else 0 (tried again later).
 * Mapped or not is asked of the loader's list first (mapped.h): a dlopen that fails leaves an
 * error message allocated for the calling thread, which a fork child inherits and never
 * frees. */
static int find_driver(void) {
    if (D.count) return 1;
    char path[256];
    if (!tprof__mapped("libcuda.so", path, sizeof path, 1)) return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 0;
    *(void **)&D.get = dlsym(h, "cuDeviceGet");
    *(void **)&D.name = dlsym(h, "cuDeviceGetName");
    *(void **)&D.uuid = dlsym(h, "cuDeviceGetUuid_v2");
    *(void **)&D.uuid_v1 = dlsym(h, "cuDeviceGetUuid");
    if (!D.uuid) {
        D.uuid = D.uuid_v1;
        D.uuid_v1 = NULL;
    }
    *(void **)&D.mem = dlsym(h, "cuDeviceTotalMem_v2");
    *(void **)&D.attr = dlsym(h, "cuDeviceGetAttribute");
    *(void **)&D.primary_state = dlsym(h, "cuDevicePrimaryCtxGetState");
    void *count = dlsym(h, "cuDeviceGetCount");
    if (!(D.get && D.name && D.uuid && D.mem && D.attr && count)) {
        dlclose(h);
        return 0;
    }
    *(void **)&D.count = count; /* last: it says the others are set (one thread calls) */
    return 1;
}

/* Every device the initialised driver shows; how many there are, 0 when it is not
 * initialised (yet). */
static int describe_from_driver(void) {
    int n = 0;
    if (!find_driver() || D.count(&n) != 0 || n <= 0) return 0;
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) {
        int dev, sm, khz, maj, min;
        char name[128];
        unsigned char uuid[16];
        size_t mem;
        if (D.get(&dev, i) || D.name(name, (int)sizeof name, dev) || D.uuid(uuid, dev) ||
            D.mem(&mem, dev) || D.attr(&sm, CU_ATTR_MULTIPROCESSOR_COUNT, dev) ||
            D.attr(&khz, CU_ATTR_CLOCK_RATE, dev) || D.attr(&maj, CU_ATTR_CC_MAJOR, dev) ||
            D.attr(&min, CU_ATTR_CC_MINOR, dev))
            continue;
        name[sizeof name - 1] = 0;
        tprof__cuda_describe((unsigned)i, uuid, name, (unsigned)sm, (unsigned long long)mem,
                             (unsigned)khz, (unsigned)maj, (unsigned)min);
        /* cuda.h documents that cuDeviceGetUuid (cuDeviceGetUuid_v2 since CUDA 11.4)
         * returns a MIG device's own MIG UUID; the first version, kept for older programs,
         * does not tell the MIG devices of a GPU apart. When the two differ, this is a MIG
         * device, taken to be on the GPU the first one names (to be confirmed on MIG
         * hardware: tests/gpu/gpu_identity.sh part 4; the report also finds the GPU through the
         * sampler's list of MIG devices, gpu.<i>.mig_uuids, should this parent be wrong) */
        unsigned char v1[16];
        if (D.uuid_v1 && D.uuid_v1(v1, dev) == 0 && memcmp(v1, uuid, sizeof v1))
            tprof__cuda_describe_mig((unsigned)i, uuid, v1);
    }
    return n;
}

/* cuda.<ordinal>.in_use = 1 for each device whose primary context (the one the CUDA runtime
 * and torch use) is active: the GPUs this process works on, where no GPU record says so.
 * Written once per device; `*seen` holds the devices written. */
static void mark_in_use(int n, uint64_t *seen) {
    for (int i = 0; D.primary_state && i < n; i++) {
        unsigned flags;
        int dev, active = 0;
        if ((*seen >> i & 1) || D.get(&dev, i) || D.primary_state(dev, &flags, &active) || !active)
            continue;
        char k[32];
        snprintf(k, sizeof k, "cuda.%d.in_use", i);
        tprof__set_meta(k, "1");
        *seen |= 1ull << i;
    }
}

/* the flusher's own: one thread calls (fork_child resets them: a child's file is new) */
static uint64_t next_try, in_use;
static int ndev; /* devices the driver described; 0 before */

static void cuda_devices_after_fork(void) {
    next_try = in_use = 0;
    ndev = 0;
    atomic_store(&g_described, 0);
}

static uint64_t cuda_devices_tick(int final) {
    /* CUPTI's device records say it, with its first buffers, and its GPU records say which
     * devices are used; ask the driver only when the run ends without them */
    if (tprof__source_active("cupti") && !final) return 0;
    if (!ndev && atomic_load(&g_described)) return 0; /* CUPTI described them */
    uint64_t now = tprof__now();
    if (!final && now < next_try) return 0;
    next_try = now + 1000000000ull;
    if (!ndev) ndev = describe_from_driver();
    mark_in_use(ndev, &in_use);
    return 0;
}

const tprof__source tprof__source_cuda_devices = {
    .name = "cuda_devices",
    .tick = cuda_devices_tick,
    .after_fork = cuda_devices_after_fork,
};
