/*
 * energy.c — the EnergyMonitor (trainprof.h): Megatron-LM's energy_monitor.py method set
 * (setup, resume, pause, lap, get_total, shutdown) over NVML's total-energy counter, with
 * values kept per GPU, devices found by UUID, and zeros instead of failures without NVML.
 *
 * State per GPU, in integer millijoules as NVML counts them (Megatron-LM's
 * megatron/core/energy_monitor.py keeps mJ integers too): `last_mj`, the counter at the last
 * read while resumed; `cur_mj`, what the lap in progress has counted; `lap_mj`, the last
 * completed lap; `total_mj`, the sum of completed laps. Only the intervals between resume and
 * pause (or lap) add to cur_mj, so paused time never counts. A counter that goes backwards
 * restarted from 0 (the driver was reloaded): the new value itself is the energy since then.
 *
 * NVML is read on the caller's thread (one read per GPU per resume, pause and lap; a read can
 * take milliseconds). The library is the one the sampler loaded (capture/nvml.c); each
 * monitor holds its own nvmlInit reference. The cross-rank sum goes through the collectives
 * hook, outside the monitor's lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"
#include "../common/nvml_shared.h"

typedef struct egpu {
    tprof__nvml_dev d;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    int have_last;
    uint64_t last_mj, cur_mj, lap_mj, total_mj;
} egpu;

struct tprof_energy {
    pthread_mutex_t lock;
    const tprof__nvml_api *api; /* NULL without NVML: the monitor has no GPU */
    int inited;                 /* an nvmlInit reference to give back at shutdown */
    int resumed;
    size_t n;
    egpu gpu[];
};

static tprof_energy *alloc_monitor(size_t n) {
    tprof_energy *m = calloc(1, sizeof *m + n * sizeof(egpu));
    if (m) pthread_mutex_init(&m->lock, NULL);
    return m;
}

int tprof_energy_setup(const char *const *devices, size_t ndevices, tprof_energy **out) {
    if (!out) return TPROF_ERR_INVALID_ARG;
    *out = NULL;
    if (ndevices && !devices) return TPROF_ERR_INVALID_ARG;
    char why[400];
    const tprof__nvml_api *api = tprof__nvml_load(tprof__env(TPROF__OPT_NVML_LIB), why, sizeof why);
    if (!api || tprof__nvml_init(api, why, sizeof why) != 0) {
        /* a monitor with no GPU: its calls return zeros and still take part in the
         * collectives, so ranks with and without NVML stay in step */
        tprof__log(TPROF_LOG_INFO, "EnergyMonitor: NVML unavailable: %s", why);
        *out = alloc_monitor(0);
        return *out ? TPROF_ERR_UNAVAILABLE : TPROF_ERR_NO_MEMORY;
    }
    tprof__nvml_dev devs[TPROF__NVML_MAX_GPUS];
    size_t n = 0;
    int rc = TPROF_OK;
    if (!ndevices) {
        tprof__nvml_match match;
        char note[256];
        n = tprof__nvml_visible(api, devs, TPROF__NVML_MAX_GPUS, &match, note, sizeof note);
        if (note[0]) tprof__log(TPROF_LOG_INFO, "EnergyMonitor: %s", note);
        /* torchrun's convention: each rank sees every GPU and uses cuda:LOCAL_RANK; taking
         * them all would count every GPU once per rank in the world sum */
        int lr = tprof__nvml_local_rank(NULL);
        if (n > 1 && lr >= 0 && (size_t)lr < n) {
            devs[0] = devs[lr];
            n = 1;
        }
        /* a MIG device: NVML's energy is its whole GPU's, shared by every MIG instance on
         * it; counting it as this rank's would count it once per instance in the world sum */
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (devs[i].mig_uuid[0]) {
                tprof__log(TPROF_LOG_WARN,
                           "EnergyMonitor: %s is a MIG device of GPU %u (%s), whose "
                           "energy all its MIG instances share: not counted",
                           devs[i].mig_uuid, devs[i].index, devs[i].uuid);
                continue;
            }
            devs[kept++] = devs[i];
        }
        n = kept;
    } else {
        for (size_t i = 0; i < ndevices; i++) {
            tprof__nvml_dev d;
            if (tprof__nvml_lookup(api, devices[i], &d) != 0) {
                tprof__log(TPROF_LOG_WARN, "EnergyMonitor: no GPU matches \"%s\"",
                           devices[i] ? devices[i] : "(null)");
                rc = TPROF_ERR_NOT_FOUND;
                continue;
            }
            int dup = 0;
            for (size_t k = 0; k < n; k++) dup |= devs[k].index == d.index;
            if (!dup && n < TPROF__NVML_MAX_GPUS) devs[n++] = d;
        }
    }
    tprof_energy *m = alloc_monitor(n);
    if (!m) {
        api->nvmlShutdown();
        return TPROF_ERR_NO_MEMORY;
    }
    m->api = api;
    m->inited = 1;
    m->n = n;
    for (size_t i = 0; i < n; i++) {
        m->gpu[i].d = devs[i];
        if (!api->nvmlDeviceGetName ||
            api->nvmlDeviceGetName(devs[i].dev, m->gpu[i].name, sizeof m->gpu[i].name) !=
                NVML_SUCCESS)
            m->gpu[i].name[0] = 0;
        m->gpu[i].name[sizeof m->gpu[i].name - 1] = 0;
        /* many GPUs and vGPUs have no total-energy counter: say so once, here, rather than
         * return silent zeros at every lap */
        uint64_t mj;
        if (tprof__nvml_energy_mj(api, devs[i].dev, &mj) != 0)
            tprof__log(TPROF_LOG_WARN, "EnergyMonitor: GPU %u (%s) gives no total-energy counter; "
                                       "its laps count 0 J and return TPROF_ERR_UNAVAILABLE (the "
                                       "report integrates the sampled power instead)",
                       devs[i].index, devs[i].uuid);
    }
    if (!n && rc == TPROF_OK) rc = TPROF_ERR_UNAVAILABLE; /* no GPU visible */
    *out = m;
    return rc;
}

/* Adds the energy since the last read to the lap in progress. A failed read counts nothing
 * (Megatron returns its last value then: a zero delta). Caller holds m->lock. */
static int advance(tprof_energy *m, egpu *e) {
    uint64_t mj;
    if (tprof__nvml_energy_mj(m->api, e->d.dev, &mj) != 0) return -1;
    if (e->have_last) e->cur_mj += mj >= e->last_mj ? mj - e->last_mj : mj;
    e->last_mj = mj;
    e->have_last = 1;
    return 0;
}

int tprof_energy_resume(tprof_energy *m) {
    if (!m) return TPROF_ERR_UNAVAILABLE;
    pthread_mutex_lock(&m->lock);
    int rc = m->n ? TPROF_OK : TPROF_ERR_UNAVAILABLE;
    /* resuming a running monitor changes nothing (Megatron would re-read the counter and
     * lose the interval since the last read) */
    if (!m->resumed) {
        for (size_t i = 0; i < m->n; i++) {
            egpu *e = &m->gpu[i];
            uint64_t mj;
            e->have_last = tprof__nvml_energy_mj(m->api, e->d.dev, &mj) == 0;
            if (e->have_last) e->last_mj = mj;
            else rc = TPROF_ERR_UNAVAILABLE;
        }
        m->resumed = 1;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int tprof_energy_pause(tprof_energy *m) {
    if (!m) return TPROF_ERR_UNAVAILABLE;
    pthread_mutex_lock(&m->lock);
    int rc = m->n ? TPROF_OK : TPROF_ERR_UNAVAILABLE;
    if (m->resumed) {
        for (size_t i = 0; i < m->n; i++)
            if (advance(m, &m->gpu[i]) != 0) rc = TPROF_ERR_UNAVAILABLE;
        m->resumed = 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* The sum of `v` over ranks through the hook (all_reduce SUM, else all_gather), or v alone
 * with -1 when the hook cannot do it. */
static int world_sum(double v, double *out) {
    tprof_collectives c;
    tprof_get_collectives(&c);
    *out = v;
    if (c.all_reduce) {
        double x = v;
        if (c.all_reduce(c.ctx, &x, 1, TPROF_REDUCE_SUM) != 0) return -1;
        *out = x;
        return 0;
    }
    if (c.all_gather && c.world_size >= 1) {
        double *all = malloc((size_t)c.world_size * sizeof *all);
        if (!all) return -1;
        int rc = c.all_gather(c.ctx, &v, sizeof v, all);
        if (rc == 0) {
            double s = 0;
            for (int r = 0; r < c.world_size; r++) s += all[r];
            *out = s;
        }
        free(all);
        return rc == 0 ? 0 : -1;
    }
    return -1;
}

static int finish(int rc, double rank_j, double *rank_joules, double *world_joules) {
    if (rank_joules) *rank_joules = rank_j;
    double w;
    if (world_sum(rank_j, &w) != 0) rc = TPROF_ERR_UNAVAILABLE;
    if (world_joules) *world_joules = w;
    return rc;
}

int tprof_energy_lap(tprof_energy *m, double *rank_joules, double *world_joules) {
    int rc = TPROF_ERR_UNAVAILABLE;
    uint64_t sum = 0;
    if (m) {
        pthread_mutex_lock(&m->lock);
        rc = m->n ? TPROF_OK : TPROF_ERR_UNAVAILABLE;
        for (size_t i = 0; i < m->n; i++) {
            egpu *e = &m->gpu[i];
            if (m->resumed && advance(m, e) != 0) rc = TPROF_ERR_UNAVAILABLE;
            e->lap_mj = e->cur_mj;
            e->total_mj += e->cur_mj;
            e->cur_mj = 0;
            sum += e->lap_mj;
        }
        pthread_mutex_unlock(&m->lock);
    }
    return finish(rc, (double)sum / 1000.0, rank_joules, world_joules);
}

int tprof_energy_get_total(tprof_energy *m, double *rank_joules, double *world_joules) {
    int rc = TPROF_ERR_UNAVAILABLE;
    uint64_t sum = 0;
    if (m) {
        pthread_mutex_lock(&m->lock);
        rc = m->n ? TPROF_OK : TPROF_ERR_UNAVAILABLE;
        for (size_t i = 0; i < m->n; i++) sum += m->gpu[i].total_mj;
        pthread_mutex_unlock(&m->lock);
    }
    return finish(rc, (double)sum / 1000.0, rank_joules, world_joules);
}

void tprof_energy_shutdown(tprof_energy *m) {
    if (!m) return;
    if (m->inited) m->api->nvmlShutdown();
    pthread_mutex_destroy(&m->lock);
    free(m);
}

size_t tprof_energy_gpu_count(const tprof_energy *m) { return m ? m->n : 0; }

int tprof_energy_gpu_info(tprof_energy *m, size_t i, tprof_energy_gpu *out) {
    if (!out || out->struct_size < sizeof *out) return TPROF_ERR_INVALID_ARG;
    if (!m || i >= m->n) return TPROF_ERR_NOT_FOUND;
    pthread_mutex_lock(&m->lock);
    const egpu *e = &m->gpu[i];
    out->nvml_index = (int)e->d.index;
    snprintf(out->uuid, sizeof out->uuid, "%s", e->d.uuid);
    snprintf(out->name, sizeof out->name, "%s", e->name);
    out->lap_joules = (double)e->lap_mj / 1000.0;
    out->total_joules = (double)e->total_mj / 1000.0;
    out->current_joules = (double)e->cur_mj / 1000.0;
    pthread_mutex_unlock(&m->lock);
    return TPROF_OK;
}

/* ------------------------------------------------------------------ helpers */

double tprof_energy_joules_per_step(double joules, uint64_t steps) {
    return steps ? joules / (double)steps : 0.0;
}

double tprof_energy_wh_per_step(double joules, uint64_t steps) {
    return tprof_energy_joules_per_step(joules, steps) / 3600.0;
}

double tprof_energy_joules_per_sample(double joules, uint64_t samples) {
    return samples ? joules / (double)samples : 0.0;
}

double tprof_energy_wh_per_sample(double joules, uint64_t samples) {
    return tprof_energy_joules_per_sample(joules, samples) / 3600.0;
}

double tprof_energy_avg_watts(double joules, uint64_t interval_ns) {
    return interval_ns ? joules / ((double)interval_ns / 1e9) : 0.0;
}
