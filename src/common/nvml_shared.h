/*
 * nvml_shared.h — the one NVML loader (nvml_shared.c), shared by the sampler (capture/nvml.c),
 * the EnergyMonitor (core/energy.c), the live metrics (core/metrics_feed.c, the local rank)
 * and the trainprof command (cli/common.c); it lives in src/common, which every layer may
 * include and which includes nothing above the public header (docs/design.md §2.3): the
 * dlopen'ed libnvidia-ml function table, NVML initialisation with a readable reason on
 * failure, and the rules that choose GPUs (CUDA_VISIBLE_DEVICES, UUIDs, the local rank).
 *
 * Each copy of this code (libtrainprof's, hidden, and the trainprof command's) loads the table
 * once, under a lock (the dynamic loader maps libnvidia-ml once per process), and never
 * unloads it (NVML may still run threads of its own; docs/design.md §1 keeps vendor libraries
 * mapped). nvmlInit/nvmlShutdown are reference counted by NVML itself, so the sampler and
 * each monitor init and shut down on their own. NVML calls are thread safe (NVML documents
 * them so), so the table may be used from any thread.
 */
#ifndef TPROF_NVML_SHARED_H
#define TPROF_NVML_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "nvml_abi.h"

typedef struct tprof__nvml_api {
#define TPROF__NVML_PTR(ret, name, params, required) ret(*name) params;
    TPROF_NVML_FUNCTIONS(TPROF__NVML_PTR)
#undef TPROF__NVML_PTR
    /* the newest of each versioned pair, resolved at load */
    nvmlReturn_t (*get_count)(unsigned int *count);
    nvmlReturn_t (*get_handle)(unsigned int index, nvmlDevice_t *dev);
    nvmlReturn_t (*get_pci)(nvmlDevice_t dev, nvmlPciInfo_t *pci);
    nvmlReturn_t (*get_clock_events)(nvmlDevice_t dev, unsigned long long *reasons);
    char path[256]; /* what was loaded */
} tprof__nvml_api;

/* The function table, loading `lib` (non-empty: the caller's TRAINPROF_NVML_LIB, read through
 * core/config.h; tests name a fake) or else libnvidia-ml.so.1, then libnvidia-ml.so, on first
 * use. NULL when the library or one of its required entry points is missing; `why` (may be
 * NULL) then gets one line. Thread safe; the first call loads and decides for the process (one
 * attempt, a failure remembered), so a later call's `lib` is not read: every caller passes
 * the same variable. */
const tprof__nvml_api *tprof__nvml_load(const char *lib, char *why, size_t whylen);

/* nvmlInitWithFlags(NO_GPUS) where the library has it, else nvmlInit_v2 / nvmlInit. Returns
 * 0, or TPROF_ERR_UNAVAILABLE with a reason in `why` ("no NVIDIA driver loaded", NVML's error
 * string). Each success must be paired with api->nvmlShutdown(). */
int tprof__nvml_init(const tprof__nvml_api *api, char *why, size_t whylen);

/* An NVML device chosen for this process. */
typedef struct tprof__nvml_dev {
    nvmlDevice_t dev;
    unsigned int index;                          /* NVML index (PCI order) */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];  /* "GPU-..." as NVML gives it */
    /* chosen for a MIG device of it ("MIG-..." as CUDA_VISIBLE_DEVICES named it), else "":
     * its power and energy are then the whole GPU's, shared by its MIG instances */
    char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
} tprof__nvml_dev;

#define TPROF__NVML_MAX_GPUS 64

/* How tprof__nvml_visible matched the visible devices. */
typedef enum tprof__nvml_match {
    TPROF__NVML_ALL = 0,   /* CUDA_VISIBLE_DEVICES unset: every device NVML sees */
    TPROF__NVML_BY_UUID,   /* every entry was a UUID (exact mapping) */
    TPROF__NVML_BY_INDEX,  /* some entry was an index, read as an NVML (PCI-order) index */
} tprof__nvml_match;

/* The devices visible to this process, in CUDA_VISIBLE_DEVICES order (CUDA's ordinals), or
 * every device in NVML order when the variable is unset. Entries are decimal indices, full
 * UUIDs or unique UUID prefixes ("GPU-8a2f..."); as CUDA does, the list ends at the first
 * entry that names no device. A "MIG-" entry gives the GPU it is a MIG device of (NVML
 * reports power, energy and clocks per physical GPU), with mig_uuid set; one NVML cannot
 * place is skipped. `note` (may be NULL) gets a line on anything skipped, ambiguous or
 * shared. Returns the number of devices written to out (at most max). */
size_t tprof__nvml_visible(const tprof__nvml_api *api, tprof__nvml_dev *out, size_t max,
                           tprof__nvml_match *match, char *note, size_t notelen);

/* One device named by `spec`: "GPU-<uuid or unique prefix>", a UUID or prefix without the
 * "GPU-" (as torch prints it), or a decimal NVML index. Case-insensitive. Returns 0,
 * TPROF_ERR_NOT_FOUND when nothing (or more than one device) matches, TPROF_ERR_INVALID_ARG
 * for a NULL spec. */
int tprof__nvml_lookup(const tprof__nvml_api *api, const char *spec, tprof__nvml_dev *out);

/* The node-local rank from the launcher (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, PMIX_LOCAL_RANK, SLURM_LOCALID, first one set), or -1. `var` (may be
 * NULL) gets the variable's name. */
int tprof__nvml_local_rank(const char **var);

/* Every device NVML sees, in NVML (PCI) order: the number written to all (at most max). */
size_t tprof__nvml_enumerate(const tprof__nvml_api *api, tprof__nvml_dev *all, size_t max);

/* NVML's text for r (never NULL). */
const char *tprof__nvml_str(const tprof__nvml_api *api, nvmlReturn_t r);

/* The total-energy counter in mJ; 0, or TPROF_ERR_UNAVAILABLE (unsupported, or NVML
 * failed). Can take milliseconds: never call it on a hot path. */
int tprof__nvml_energy_mj(const tprof__nvml_api *api, nvmlDevice_t dev, uint64_t *mj);

#endif /* TPROF_NVML_SHARED_H */
