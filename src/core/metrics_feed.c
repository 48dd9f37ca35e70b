/*
 * metrics_feed.c — what feeds the live metrics registry (metrics.c) in a profiled process,
 * and the endpoint's life with the session (TRAINPROF_METRICS_PORT; docs/metrics.md).
 *
 * Design (zero hot-path cost): the training threads do nothing for metrics. Steps come from
 * the STEP_BEGIN/STEP_END records the flusher drains anyway: when metrics are on, the flusher
 * walks the records of each drained span (a few ns per record, on its own thread) and pairs
 * begins with ends by step number; drops and bytes come from the counts it reads per pass.
 * The samplers that run on the flusher (procfs, NVML) set their gauges beside the counter
 * records they write; throughput per step comes from the metadata (tokens_per_step, ...).
 * With metrics off, the flusher and samplers test one int per drained span or sample, and the
 * registry is never allocated. So step metrics lag the job by at most one flush period
 * (TRAINPROF_FLUSH_MS, 50 ms), which a 15 s scrape interval does not see.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "internal.h"
#include "metrics.h"
#include "../common/nvml_shared.h"
#include "step_names.h"
#include "per_step.h"

#ifndef TPROF_BUILD_TYPE
#define TPROF_BUILD_TYPE "unknown"
#endif

/* step duration buckets, seconds: 1 ms to 2 min */
static const double k_step_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                       0.5,   1,      2.5,   5,    10,    25,    60,   120};

static struct {
    int step_hist, steps, step_last, step_num, tokens, samples, flops, tok_rate, smp_rate, flop_rate;
    int dropped, bytes, detail, cpu, rss, threads, ctx, start_time, build;
    int fam_gpu[12], fam_gpu_mem_total, fam_gpu_mem_peak, fam_busy[2];
    int comm_ops, comm_bytes, comm_seconds, comm_hist, timer;
    int mem[3], mem_frag;
    int host_load[3], host_mem_total, host_mem_avail, host_cpu, net_rx, net_tx, disk_rd, disk_wr;
} F;

/* communication duration buckets, seconds: 10 us to 10 s */
static const double k_comm_bounds[] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                       5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 10};

/* Communication series, flusher-only. The label `comm` is the communicator's hash in hex
 * (the report's id); a job with thousands of communicators (Megatron's many groups) keeps
 * the first COMM_MAX_LABELLED apart and folds the rest into comm="other", so the series
 * count stays bounded: (COMM_MAX_LABELLED + 1) x ops x 3 families + ops histograms. */
#define COMM_MAX_LABELLED 32
static struct {
    uint64_t hash[COMM_MAX_LABELLED];
    int n;
    int ops[COMM_MAX_LABELLED + 1][TPROF_COMM_OP_COUNT][3]; /* series + 1; 0 = not made yet */
    int hist[TPROF_COMM_OP_COUNT];                           /* series + 1 */
} C;

static struct {
    /* flusher-only state */
    struct { uint64_t step, ts; int used; } pending[32];
    unsigned next_slot;
    /* written by setup calls, read by the flusher */
    _Atomic uint64_t tokens_bits, samples_bits, flops_bits;
    int port_wanted;
    _Atomic int deferred_port; /* a process without a local rank: serve from its first step */
    _Atomic int stepped;       /* a step completed (set under the session lock) */
    pid_t owner; /* the process that serves; a forked child does not */
    char rank[16], local_rank[16];
} L;

/* GPU series ids, per NVML index and metric (k_gpu's, then 12 peak memory, 13 capacity,
 * 14 and 15 the busy-time counters); written and read by the sampler thread only */
#define GPU_MAX 64
static int g_gpu_series[GPU_MAX][16];

/* Busy-time counters beside the two utilisation gauges (metrics.h, tprof__m_integrate):
 * rate() of a counter gives the utilisation over any window, where a gauge scraped every
 * 15 s gives one ~1 s average per scrape. */
static const struct {
    const char *gauge; /* the suffix of the gauge it integrates */
    const char *name, *help;
} k_busy[2] = {
    {"util_percent", "trainprof_gpu_busy_seconds_total",
     "time a kernel ran on the GPU (NVML utilisation integrated over the sampler's intervals); rate() = utilisation"},
    {"mem_util_percent", "trainprof_gpu_memory_busy_seconds_total",
     "time device memory was read or written (NVML memory utilisation integrated over the sampler's intervals)"},
};
static tprof__m_integ g_busy[GPU_MAX][2];
/* NVML averages utilisation over a period of 1/6 s to 1 s, depending on the product (NVML
 * API reference, nvmlDeviceGetUtilizationRates), and the sampler runs at 1 Hz or faster:
 * an interval over 5 s between two samples is a stalled sampler, and is not integrated */
#define BUSY_MAX_GAP_NS 5000000000ull

static const struct {
    const char *suffix; /* capture/nvml.c's counter suffix */
    const char *name, *help;
    double scale;
    int type;
} k_gpu[] = {
    {"power_w", "trainprof_gpu_power_watts", "GPU power draw (NVML, averaged by the driver)", 1, TPROF_M_GAUGE},
    {"power_instant_w", "trainprof_gpu_power_instant_watts", "GPU instantaneous power draw", 1, TPROF_M_GAUGE},
    {"energy_j", "trainprof_gpu_energy_joules_total", "GPU energy since the sampler started", 1, TPROF_M_COUNTER},
    {"util_percent", "trainprof_gpu_utilization_ratio", "fraction of time a kernel ran (NVML utilisation)", 0.01, TPROF_M_GAUGE},
    {"mem_util_percent", "trainprof_gpu_memory_utilization_ratio", "fraction of time device memory was read or written", 0.01, TPROF_M_GAUGE},
    {"mem_used_bytes", "trainprof_gpu_memory_used_bytes", "device memory in use", 1, TPROF_M_GAUGE},
    {"sm_clock_mhz", "trainprof_gpu_sm_clock_hertz", "SM clock", 1e6, TPROF_M_GAUGE},
    {"temp_c", "trainprof_gpu_temperature_celsius", "GPU temperature", 1, TPROF_M_GAUGE},
    {"power_limit_w", "trainprof_gpu_power_limit_watts", "enforced power limit", 1, TPROF_M_GAUGE},
    {"clock_event_reasons", "trainprof_gpu_clock_event_reasons", "NVML clock event (throttle) reason bits", 1, TPROF_M_GAUGE},
};
#define N_GPU_METRICS (sizeof k_gpu / sizeof k_gpu[0])


static int one(int fam) { return tprof__m_series_raw(fam, ""); }

/* The caching allocator's counters that trainprof.torch records at each phase boundary
 * (docs/report-json.md, "Memory"), as live gauges: the flusher sees their COUNTER records as it
 * drains the rings, so the training thread does nothing more. */
static const struct {
    const char *counter, *metric, *help;
    int type;
} k_mem[3] = {
    {"cuda.memory_allocated_bytes", "trainprof_cuda_memory_allocated_bytes", "bytes the CUDA caching allocator has allocated to tensors at its last sample (torch.cuda.memory_allocated)", TPROF_M_GAUGE},
    {"cuda.memory_reserved_bytes", "trainprof_cuda_memory_reserved_bytes", "bytes the CUDA caching allocator holds from the device at its last sample (torch.cuda.memory_reserved)", TPROF_M_GAUGE},
    {"cuda.memory_alloc_retries", "trainprof_cuda_memory_alloc_retries_total", "cudaMalloc retries after the caching allocator freed its cache (num_alloc_retries)", TPROF_M_COUNTER},
};

static void register_families(void) {
    F.step_hist = tprof__m_family("trainprof_step_duration_seconds",
                                  "training step wall time (API steps, else step ranges)", TPROF_M_HISTOGRAM,
                                  k_step_bounds, (int)(sizeof k_step_bounds / sizeof *k_step_bounds));
    F.steps = tprof__m_family("trainprof_steps_total", "training steps completed", TPROF_M_COUNTER, NULL, 0);
    F.step_last = tprof__m_family("trainprof_step_last_duration_seconds", "wall time of the last completed step", TPROF_M_GAUGE, NULL, 0);
    F.step_num = tprof__m_family("trainprof_step_number", "number of the last completed step", TPROF_M_GAUGE, NULL, 0);
    F.tokens = tprof__m_family("trainprof_tokens_total", "tokens processed by this rank (tokens_per_step x steps)", TPROF_M_COUNTER, NULL, 0);
    F.samples = tprof__m_family("trainprof_samples_total", "samples processed by this rank (samples_per_step x steps)", TPROF_M_COUNTER, NULL, 0);
    F.flops = tprof__m_family("trainprof_model_flops_total", "model FLOPs of this rank (flops_per_step x steps)", TPROF_M_COUNTER, NULL, 0);
    F.tok_rate = tprof__m_family("trainprof_tokens_per_second", "tokens per second of the last step", TPROF_M_GAUGE, NULL, 0);
    F.smp_rate = tprof__m_family("trainprof_samples_per_second", "samples per second of the last step", TPROF_M_GAUGE, NULL, 0);
    F.flop_rate = tprof__m_family("trainprof_model_flops_per_second", "model FLOP/s of this rank in the last step (flops_per_step / step time); / 1e12 = TFLOP/s per GPU", TPROF_M_GAUGE, NULL, 0);
    F.dropped = tprof__m_family("trainprof_events_dropped_total", "events lost to full rings or limits", TPROF_M_COUNTER, NULL, 0);
    F.bytes = tprof__m_family("trainprof_recorded_bytes_total", "bytes of records drained from the rings", TPROF_M_COUNTER, NULL, 0);
    F.detail = tprof__m_family("trainprof_detail_capture", "1 while detailed (CUPTI kernel) capture is on", TPROF_M_GAUGE, NULL, 0);
    F.cpu = tprof__m_family("process_cpu_seconds_total", "user and system CPU time of the process", TPROF_M_COUNTER, NULL, 0);
    F.rss = tprof__m_family("process_resident_memory_bytes", "resident memory of the process", TPROF_M_GAUGE, NULL, 0);
    F.threads = tprof__m_family("trainprof_process_threads", "threads of the process", TPROF_M_GAUGE, NULL, 0);
    F.ctx = tprof__m_family("trainprof_process_context_switches_total", "voluntary and involuntary context switches", TPROF_M_COUNTER, NULL, 0);
    F.start_time = tprof__m_family("process_start_time_seconds", "when the session started, seconds since the epoch", TPROF_M_GAUGE, NULL, 0);
    F.build = tprof__m_family("trainprof_build_info", "trainprof build (value 1)", TPROF_M_GAUGE, NULL, 0);
    for (size_t i = 0; i < N_GPU_METRICS; i++)
        F.fam_gpu[i] = tprof__m_family(k_gpu[i].name, k_gpu[i].help, k_gpu[i].type, NULL, 0);
    F.fam_gpu_mem_total = tprof__m_family("trainprof_gpu_memory_total_bytes", "device memory capacity", TPROF_M_GAUGE, NULL, 0);
    for (int i = 0; i < 2; i++)
        F.fam_busy[i] = tprof__m_family(k_busy[i].name, k_busy[i].help, TPROF_M_COUNTER, NULL, 0);
    F.fam_gpu_mem_peak = tprof__m_family("trainprof_gpu_memory_used_peak_bytes", "highest device memory in use seen by the sampler", TPROF_M_GAUGE, NULL, 0);
    F.comm_ops = tprof__m_family("trainprof_comm_operations_total", "communication operations completed (NCCL, MPI, torch.distributed)", TPROF_M_COUNTER, NULL, 0);
    F.comm_bytes = tprof__m_family("trainprof_comm_bytes_total", "per-rank payload bytes of communication operations", TPROF_M_COUNTER, NULL, 0);
    F.comm_seconds = tprof__m_family("trainprof_comm_seconds_total", "time in communication operations (GPU-side when known, else the host call)", TPROF_M_COUNTER, NULL, 0);
    F.timer = tprof__m_family("trainprof_timer_elapsed_seconds", "a Timers timer's elapsed time as last gathered for a log (Megatron-style: over the log interval when the log resets)", TPROF_M_GAUGE, NULL, 0);
    static const char *const load_names[3] = {"trainprof_host_load1", "trainprof_host_load5", "trainprof_host_load15"};
    for (int i = 0; i < 3; i++)
        F.host_load[i] = tprof__m_family(load_names[i], "host load average (runnable and uninterruptible tasks), node samplers only", TPROF_M_GAUGE, NULL, 0);
    F.host_mem_total = tprof__m_family("trainprof_host_memory_total_bytes", "host memory (MemTotal), node samplers only", TPROF_M_GAUGE, NULL, 0);
    F.host_mem_avail = tprof__m_family("trainprof_host_memory_available_bytes", "host memory available (MemAvailable), node samplers only", TPROF_M_GAUGE, NULL, 0);
    F.host_cpu = tprof__m_family("trainprof_host_cpu_seconds_total", "host CPU time by mode, all cores (/proc/stat), node samplers only", TPROF_M_COUNTER, NULL, 0);
    F.net_rx = tprof__m_family("trainprof_host_network_receive_bytes_total", "bytes received by a network interface (/proc/net/dev; not lo), node samplers only", TPROF_M_COUNTER, NULL, 0);
    F.net_tx = tprof__m_family("trainprof_host_network_transmit_bytes_total", "bytes sent by a network interface (/proc/net/dev; not lo), node samplers only", TPROF_M_COUNTER, NULL, 0);
    F.disk_rd = tprof__m_family("trainprof_host_disk_read_bytes_total", "bytes read from a whole disk (/proc/diskstats sectors x 512; no partitions, loop or ram devices), node samplers only", TPROF_M_COUNTER, NULL, 0);
    F.disk_wr = tprof__m_family("trainprof_host_disk_written_bytes_total", "bytes written to a whole disk (/proc/diskstats), node samplers only", TPROF_M_COUNTER, NULL, 0);
    for (int i = 0; i < 3; i++)
        F.mem[i] = tprof__m_family(k_mem[i].metric, k_mem[i].help, k_mem[i].type, NULL, 0);
    F.mem_frag = tprof__m_family("trainprof_cuda_memory_fragmentation_ratio", "1 - allocated / reserved of the CUDA caching allocator at its last sample (trainprof.torch)", TPROF_M_GAUGE, NULL, 0);
    F.comm_hist = tprof__m_family("trainprof_comm_duration_seconds", "duration of each communication operation", TPROF_M_HISTOGRAM,
                                  k_comm_bounds, (int)(sizeof k_comm_bounds / sizeof *k_comm_bounds));
}

static void set_const_labels(void) {
    const char *l[6];
    int n = 0;
    if (L.rank[0]) { l[n++] = "rank"; l[n++] = L.rank; }
    if (L.local_rank[0]) { l[n++] = "local_rank"; l[n++] = L.local_rank; }
    l[n] = NULL;
    tprof__m_set_const_labels(l);
}

/* s into dst (cap bytes), cut between two UTF-8 characters when it does not fit */
static void copy_cut(char *dst, size_t cap, const char *s) {
    size_t n = tprof__m_utf8_cut(s, cap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* The node's name for the `host` label: whole (Linux allows 64 bytes, HOST_NAME_MAX), so
 * that it is never cut inside a character; an invalid byte in it is replaced when the label
 * is made (metrics.c). */
static void host_name(char *buf, size_t cap) {
    if (gethostname(buf, cap - 1) != 0) buf[0] = 0;
    buf[cap - 1] = 0;
}

static const char *first_env(const char *const *vars) {
    for (; *vars; vars++) {
        const char *v = getenv(*vars);
        if (v && *v) return v;
    }
    return NULL;
}

static void start_endpoint(int port);

/* POST /capture?detail=on|off, on the HTTP thread */
static int on_detail(int on) { return tprof__kwin_request(on); }

void tprof__metrics_session_start(uint64_t start_realtime_ns) {
    const char *p = tprof__env(TPROF__OPT_METRICS_PORT);
    if (!p || !*p) return; /* off: nothing allocated, nothing started */
    if (L.owner && L.owner != getpid()) return; /* a forked child: the parent serves */
    char *end;
    long port = strtol(p, &end, 10);
    if (*end || port < 0 || port > 65535) {
        tprof__log(TPROF_LOG_WARN, "ignoring TRAINPROF_METRICS_PORT=%s: not a port number", p);
        return;
    }
    if (tprof__m_enable() != 0) return;
    L.owner = getpid();
    static int registered;
    if (!registered) {
        registered = 1;
        register_families();
        tprof__m_set(tprof__m_series(F.build, (const char *const[]){
                         "version", TPROF_VERSION_STRING, "build_type", TPROF_BUILD_TYPE, NULL}),
                     1);
        tprof__m_set(one(F.start_time), (double)start_realtime_ns * 1e-9);
        tprof__m_set(one(F.detail), tprof__kwin_capture_now() ? 1 : 0);
        static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                "PMIX_RANK", "SLURM_PROCID", NULL};
        const char *r = first_env(rank_vars);
        if (r) copy_cut(L.rank, sizeof L.rank, r);
        const char *var;
        int lr = tprof__nvml_local_rank(&var);
        if (lr >= 0) snprintf(L.local_rank, sizeof L.local_rank, "%d", lr);
        set_const_labels();
        /* the feeds (flusher, samplers) may start: everything above is published */
        __atomic_store_n(&tprof__metrics_on, 1, __ATOMIC_RELEASE);
    }
    /* the per-local-rank offset: ranks of one node listen on PORT, PORT+1, ...; port 0
     * (an ephemeral port) stays 0. TRAINPROF_METRICS_RANK_OFFSET=0 turns the offset off
     * (trainprof run's node sampler). */
    const char *off = tprof__env(TPROF__OPT_METRICS_RANK_OFFSET);
    int no_offset = off && !strcmp(off, "0");
    int lr = tprof__nvml_local_rank(NULL);
    if (port && lr > 0 && !no_offset) port += lr;
    if (port > 65535) {
        tprof__log(TPROF_LOG_WARN, "metrics endpoint not started: port %ld out of range", port);
        return;
    }
    /* A process with no local rank may be a launcher (torchrun's agent, mpirun) that starts
     * before its ranks: serving at once, it would hold PORT and local rank 0's endpoint would
     * fail with "address in use". It serves from its first step instead: a single-process
     * job steps within seconds, a launcher never does. */
    if (lr < 0 && !no_offset && port) {
        atomic_store(&L.deferred_port, (int)port);
        return;
    }
    start_endpoint((int)port);
}

/* Starts the HTTP endpoint on `port` (0: ephemeral); a failure is one warning and a
 * capability line, never an error for the job. */
static void start_endpoint(int port) {
    tprof__http_cfg cfg = {tprof__env(TPROF__OPT_METRICS_ADDR), port,
                           tprof__env(TPROF__OPT_METRICS_TOKEN), on_detail};
    char why[300];
    /* the server thread inherits our mask: it must never take the job's signals */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int bound = tprof__http_start(&cfg, why, sizeof why);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (bound < 0) {
        tprof__log(TPROF_LOG_WARN, "metrics endpoint not started: %s", why);
        tprof__capability("metrics", why);
        return;
    }
    char v[160];
    snprintf(v, sizeof v, "http://%s%s%s:%d/metrics",
             strchr(cfg.addr && *cfg.addr ? cfg.addr : "", ':') ? "[" : "",
             cfg.addr && *cfg.addr ? cfg.addr : "127.0.0.1",
             strchr(cfg.addr && *cfg.addr ? cfg.addr : "", ':') ? "]" : "", bound);
    tprof__capability("metrics", v);
    tprof__log(TPROF_LOG_INFO, "metrics endpoint on %s", v);
}

/* Timers (timers/timers.c), each time a rank gathers its timers for a log: the values it
 * contributes, this rank's elapsed seconds per name. On the thread that logs (not a hot
 * path: the log is a collective); the first 64 names get a series, later ones none. */
void tprof__metrics_timers(const char *const *names, const double *seconds, size_t n) {
    if (!TPROF__METRICS_ON()) return;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct { char name[64]; int series; } seen[64];
    static int nseen;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        /* a longer name is cut between two characters: a cut inside one would leave a
         * byte that is not UTF-8 */
        size_t len = tprof__m_utf8_cut(names[i], sizeof seen[0].name - 1);
        int k = 0;
        while (k < nseen && (strlen(seen[k].name) != len || memcmp(seen[k].name, names[i], len)))
            k++;
        if (k == nseen) {
            if (nseen == 64) continue;
            memcpy(seen[k].name, names[i], len);
            seen[k].name[len] = 0;
            const char *lab[] = {"timer", seen[k].name, NULL};
            seen[k].series = tprof__m_series(F.timer, lab);
            nseen++;
        }
        if (seen[k].series >= 0) tprof__m_set(seen[k].series, seconds[i]);
    }
    pthread_mutex_unlock(&mu);
}

/* The flusher after each pass, without the session lock (starting the endpoint records a
 * capability, which takes that lock). */
void tprof__metrics_after_pass(void) {
    if (!atomic_load(&L.deferred_port) || !atomic_load(&L.stepped)) return;
    int port = atomic_exchange(&L.deferred_port, 0);
    if (port && L.owner == getpid()) start_endpoint(port);
}

void tprof__metrics_session_stop(void) {
    if (L.owner == getpid()) tprof__http_stop();
}

void tprof__metrics_after_fork(void) { tprof__http_forget(); }

int tprof_metrics_port(void) {
    int p = tprof__http_port();
    if (p > 0) return p;
#ifdef TPROF_HAVE_MHD
    return TPROF_ERR_DISABLED;
#else
    return TPROF_ERR_UNAVAILABLE;
#endif
}

void tprof__metrics_meta(const char *key, const char *value) {
    if (!key || !value) return;
    _Atomic uint64_t *dst = !strcmp(key, "tokens_per_step")    ? &L.tokens_bits
                            : !strcmp(key, "samples_per_step") ? &L.samples_bits
                            : !strcmp(key, "flops_per_step")   ? &L.flops_bits
                                                               : NULL;
    if (dst) {
        double x;
        if (tprof__per_step_parse(key, value, &x)) atomic_store(dst, tprof__m_d2u(x));
        return;
    }
    if (!__atomic_load_n(&tprof__metrics_on, __ATOMIC_ACQUIRE)) return;
    if (!strcmp(key, "rank") || !strcmp(key, "local_rank")) {
        char *dstr = key[0] == 'r' ? L.rank : L.local_rank;
        /* setup calls, not the hot path; the registry copies the labels under its mutex */
        copy_cut(dstr, sizeof L.rank, value);
        set_const_labels();
    }
}

static void step_done(uint64_t step, uint64_t ns) {
    atomic_store(&L.stepped, 1); /* a deferred endpoint starts after this pass */
    double s = (double)ns * 1e-9;
    tprof__m_observe(one(F.step_hist), s);
    tprof__m_add(one(F.steps), 1);
    tprof__m_set(one(F.step_last), s);
    tprof__m_set(one(F.step_num), (double)step);
    double tok = tprof__m_u2d(atomic_load(&L.tokens_bits)), smp = tprof__m_u2d(atomic_load(&L.samples_bits));
    double flp = tprof__m_u2d(atomic_load(&L.flops_bits));
    if (tok > 0) {
        tprof__m_add(one(F.tokens), tok);
        if (s > 0) tprof__m_set(one(F.tok_rate), tok / s);
    }
    if (smp > 0) {
        tprof__m_add(one(F.samples), smp);
        if (s > 0) tprof__m_set(one(F.smp_rate), smp / s);
    }
    if (flp > 0) {
        tprof__m_add(one(F.flops), flp);
        if (s > 0) tprof__m_set(one(F.flop_rate), flp / s);
    }
}

/* Steps marked by ranges (docs/design.md §4: a name from TRAINPROF_STEP_NAME, else ProfilerStep#*,
 * else the common names), as the report finds them: the first pattern seen counts, on the
 * first thread where it appears, numbered from 0; API steps, once seen, take over. The
 * flusher follows each thread's STRING records (a thread's names come before their use) to
 * know which name ids are steps, and its push/pop depth to know which pop ends one. */
typedef struct m_scan {
    struct { uint32_t id; int pat; } *ids; /* name ids of this thread that are step names */
    uint32_t nids, cap;
    int depth, step_depth; /* step_depth: depth of the open step range, -1 none */
    uint64_t begin_ts;
    uint32_t mem_id[3];    /* this thread's name ids of k_mem's counters */
    unsigned mem_known;    /* bit i: mem_id[i] is known */
    int mem_has_alloc;     /* mem_alloc is this thread's allocated, not yet followed by reserved */
    double mem_alloc;
} m_scan;

static struct {
    int pat;          /* -1 until a step range is seen */
    uint32_t serial;  /* the thread whose ranges are steps */
    uint64_t next;    /* next step number */
    int api;          /* API steps seen: ranges no longer count */
    const char *user; /* TRAINPROF_STEP_NAME */
    int user_read;
} R = {-1, 0, 0, 0, NULL, 0};

static const char *const k_default_steps[] = {TPROF_DEFAULT_STEP_NAMES};

static int name_pattern(const char *name) {
    if (!R.user_read) {
        R.user_read = 1;
        const char *u = tprof__env(TPROF__OPT_STEP_NAME);
        R.user = u && *u ? u : NULL;
    }
    int npat = R.user ? 1 : 2 + (int)(sizeof k_default_steps / sizeof *k_default_steps);
    for (int i = R.user ? 0 : 1; i < npat; i++) {
        if (R.pat >= 0 && i != R.pat) continue;
        const char *pat = i == 0 ? R.user : i == 1 ? TPROF_PROFILER_STEP_GLOB : k_default_steps[i - 2];
        int m = strpbrk(pat, "*?[") ? fnmatch(pat, name, 0) == 0 : strcmp(pat, name) == 0;
        if (m) return i;
    }
    return -1;
}

void tprof__metrics_thread_free(void *scan) {
    m_scan *m = scan;
    if (m) free(m->ids);
    free(m);
}

static int step_id_pattern(const m_scan *m, uint32_t id) {
    for (uint32_t i = 0; i < m->nids; i++)
        if (m->ids[i].id == id) return m->ids[i].pat;
    return -1;
}

static m_scan *scan_of(tprof__thread *t) {
    m_scan *m = t->m_scan;
    if (!m) {
        m = t->m_scan = calloc(1, sizeof *m);
        if (m) m->step_depth = -1;
    }
    return m;
}

/* A STRING record that names one of k_mem's counters: its id, for this thread. */
static void mem_string(tprof__thread *t, const tprof_rec *r, size_t sz) {
    const char *body = (const char *)(r + 1);
    size_t blen = sz - sizeof *r;
    if (blen < 5 || memcmp(body, "cuda.", 5) != 0 || !memchr(body, 0, blen)) return;
    for (int i = 0; i < 3; i++) {
        if (strcmp(body, k_mem[i].counter) != 0) continue;
        m_scan *m = scan_of(t);
        if (!m) return;
        m->mem_id[i] = r->arg;
        m->mem_known |= 1u << i;
    }
}

/* A COUNTER record: one of the allocator's gauges when its name is one of k_mem's. */
static void mem_counter(tprof__thread *t, const tprof_rec *r, size_t sz) {
    if (sz < sizeof *r + sizeof(tprof_pl_counter)) return;
    const char *body = (const char *)(r + 1);
    int k = -1;
    if (r->arg == TPROF_INLINE_NAME) {
        const char *nm = body + sizeof(tprof_pl_counter);
        size_t nl = sz - sizeof *r - sizeof(tprof_pl_counter);
        for (int i = 0; i < 3 && k < 0 && nl && memchr(nm, 0, nl); i++)
            if (!strcmp(nm, k_mem[i].counter)) k = i;
    } else {
        const m_scan *m = t->m_scan;
        for (int i = 0; m && i < 3 && k < 0; i++)
            if ((m->mem_known & 1u << i) && m->mem_id[i] == r->arg) k = i;
    }
    if (k < 0) return;
    tprof_pl_counter pl;
    memcpy(&pl, body, sizeof pl);
    if (!(pl.value >= 0) || !(pl.value < 1e300)) return; /* NaN, negative, infinite */
    tprof__m_set(one(F.mem[k]), pl.value);
    /* The ratio of one sample: its allocated with the reserved that follows it on the same
     * thread (a sample is written back to back on one thread; the flusher may drain it half
     * written, and other threads' samples may be of another device). The allocator
     * allocates inside what it reserved: a pair that says otherwise gives no ratio. */
    m_scan *m = scan_of(t);
    if (!m || k == 2) return;
    if (k == 0) {
        m->mem_alloc = pl.value;
        m->mem_has_alloc = 1;
        return;
    }
    if (m->mem_has_alloc && pl.value > 0 && m->mem_alloc <= pl.value)
        tprof__m_set(one(F.mem_frag), 1 - m->mem_alloc / pl.value);
    m->mem_has_alloc = 0;
}

static void range_rec(tprof__thread *t, const tprof_rec *r, size_t sz) {
    m_scan *m = scan_of(t);
    if (!m) return;
    const char *body = (const char *)(r + 1);
    size_t blen = sz - sizeof *r;
    if (r->kind == TPROF_REC_STRING) {
        if (!memchr(body, 0, blen)) return;
        int pi = name_pattern(body);
        if (pi < 0 || (R.pat >= 0 && pi != R.pat)) return;
        if (m->nids == m->cap) {
            uint32_t cap = m->cap ? m->cap * 2 : 8;
            void *ids = realloc(m->ids, cap * sizeof *m->ids);
            if (!ids) return;
            m->ids = ids;
            m->cap = cap;
        }
        m->ids[m->nids].id = r->arg;
        m->ids[m->nids++].pat = pi;
        return;
    }
    if (r->kind == TPROF_REC_POP) {
        if (m->depth > 0) m->depth--;
        if (m->step_depth >= 0 && m->depth == m->step_depth) {
            m->step_depth = -1;
            if (!R.api && r->ts_ns >= m->begin_ts) step_done(R.next++, r->ts_ns - m->begin_ts);
        }
        return;
    }
    /* PUSH */
    int depth = m->depth++;
    if (R.api || m->step_depth >= 0 || (R.pat >= 0 && R.serial != t->serial)) return;
    int pi = -1;
    if (r->arg == TPROF_INLINE_NAME) {
        const char *nm = body + sizeof(tprof_pl_push);
        if (blen > sizeof(tprof_pl_push) && memchr(nm, 0, blen - sizeof(tprof_pl_push)))
            pi = name_pattern(nm);
    } else {
        pi = step_id_pattern(m, r->arg);
    }
    if (pi < 0 || (R.pat >= 0 && pi != R.pat)) return;
    R.pat = pi; /* the first pattern seen is the one counted */
    if (R.serial == 0) R.serial = t->serial;
    m->step_depth = depth;
    m->begin_ts = r->ts_ns;
}

/* One TPROF_REC_COMM_OP record: counts, bytes and time per communicator and op. Series are
 * looked up once and cached (the registry lookup takes its mutex). */
static void comm_rec(const tprof_rec *r, size_t sz) {
    if (sz < sizeof *r + sizeof(tprof_pl_comm)) return;
    tprof_pl_comm pl; /* the fixed payload comes first; an inline name would follow it */
    memcpy(&pl, r + 1, sizeof pl);
    uint32_t op = pl.op < TPROF_COMM_OP_COUNT ? pl.op : TPROF_COMM_UNKNOWN;
    int ci = 0;
    while (ci < C.n && C.hash[ci] != pl.comm_hash) ci++;
    if (ci == C.n && C.n < COMM_MAX_LABELLED) C.hash[C.n++] = pl.comm_hash;
    /* ci == C.n (table full): the "other" row */
    int *ids = C.ops[ci < C.n ? ci : COMM_MAX_LABELLED][op];
    if (!ids[0]) {
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)pl.comm_hash);
        const char *lab[] = {"comm", ci < C.n ? hex : "other", "op", tprof__comm_op_name(op), NULL};
        ids[0] = tprof__m_series(F.comm_ops, lab) + 1;
        ids[1] = tprof__m_series(F.comm_bytes, lab) + 1;
        ids[2] = tprof__m_series(F.comm_seconds, lab) + 1;
    }
    if (!C.hist[op]) {
        const char *lab[] = {"op", tprof__comm_op_name(op), NULL};
        C.hist[op] = tprof__m_series(F.comm_hist, lab) + 1;
    }
    uint64_t b = r->ts_ns, e = pl.end_ns;
    if ((pl.flags & TPROF_COMM_F_GPU_TIME) && pl.gpu_end_ns >= pl.gpu_start_ns) {
        b = pl.gpu_start_ns;
        e = pl.gpu_end_ns;
    }
    double secs = e >= b ? (double)(e - b) * 1e-9 : 0;
    if (ids[0] > 0) tprof__m_add(ids[0] - 1, 1);
    if (ids[1] > 0) tprof__m_add(ids[1] - 1, (double)pl.bytes);
    if (pl.flags & TPROF_COMM_F_UNFINISHED) return; /* no end: counted, not timed */
    if (ids[2] > 0) tprof__m_add(ids[2] - 1, secs);
    if (C.hist[op] > 0) tprof__m_observe(C.hist[op] - 1, secs);
}

/* The flusher, for each span of a ring it drains (caller holds the session lock). */
void tprof__metrics_scan(tprof__thread *t, const uint8_t *p, size_t n) {
    size_t off = 0;
    while (off + sizeof(tprof_rec) <= n) {
        const tprof_rec *r = (const tprof_rec *)(p + off);
        size_t sz = r->size < 8 ? 8 : r->size;
        if (off + sz > n) break;
        if (r->kind == TPROF_REC_STRING || r->kind == TPROF_REC_PUSH || r->kind == TPROF_REC_POP)
            range_rec(t, r, sz);
        if (r->kind == TPROF_REC_STRING) mem_string(t, r, sz);
        if (r->kind == TPROF_REC_COUNTER) mem_counter(t, r, sz);
        if (r->kind == TPROF_REC_COMM_OP) comm_rec(r, sz);
        if ((r->kind == TPROF_REC_STEP_BEGIN || r->kind == TPROF_REC_STEP_END) &&
            sz >= sizeof *r + sizeof(tprof_pl_u64) && off + sz <= n) {
            uint64_t step = ((const tprof_pl_u64 *)(r + 1))->value;
            R.api = 1;
            if (r->kind == TPROF_REC_STEP_BEGIN) {
                unsigned k = L.next_slot++ % 32u;
                L.pending[k].step = step;
                L.pending[k].ts = r->ts_ns;
                L.pending[k].used = 1;
            } else {
                for (unsigned k = 0; k < 32; k++) {
                    if (!L.pending[k].used || L.pending[k].step != step) continue;
                    L.pending[k].used = 0;
                    if (r->ts_ns >= L.pending[k].ts) step_done(step, r->ts_ns - L.pending[k].ts);
                    break;
                }
            }
        }
        off += sz;
    }
}

void tprof__metrics_pass(uint64_t dropped_total, uint64_t bytes_total) {
    tprof__m_set(one(F.dropped), (double)dropped_total);
    tprof__m_set(one(F.bytes), (double)bytes_total);
}

void tprof__metrics_detail(int on) { tprof__m_set(one(F.detail), on ? 1 : 0); }

/* Per-device host counters: a device's series are made the first time it is seen, for at
 * most HOST_DEVICES devices of each kind (interfaces, disks), so a node with many virtual
 * interfaces cannot grow the registry. */
#define HOST_DEVICES 16
typedef struct {
    char name[HOST_DEVICES][32];
    int series[HOST_DEVICES][2], n;
} host_devs;

/* Sets a device's two counters to v0 and v1. Its series are made the first time it is
 * seen, if there is room and admit (when given; called only then, as it may cost a system
 * call) accepts the name. */
static void host_dev_set(host_devs *d, const char *host, const char *name, int fam0, int fam1,
                         double v0, double v1, int (*admit)(const char *name)) {
    int i = 0;
    while (i < d->n && strcmp(d->name[i], name)) i++;
    if (i == d->n) {
        if (d->n >= HOST_DEVICES || strlen(name) >= sizeof d->name[0]) return;
        if (admit && !admit(name)) return;
        const char *l[] = {"host", host, "device", name, NULL};
        snprintf(d->name[i], sizeof d->name[0], "%s", name);
        d->series[i][0] = tprof__m_series(fam0, l);
        d->series[i][1] = tprof__m_series(fam1, l);
        d->n++;
    }
    tprof__m_set(d->series[i][0], v0);
    tprof__m_set(d->series[i][1], v1);
}

/* Interfaces that containers and overlays create and delete by the hundred: a node running
 * them would fill the 16 slots with dead devices before its real NICs (prefixes of Docker,
 * CNI plugins (Calico, Flannel, Weave, Cilium), libvirt and tunnels). */
static int virtual_interface(const char *name) {
    static const char *const prefixes[] = {"veth", "docker", "br-", "virbr", "cali", "flannel",
                                           "cni", "weave", "cilium", "lxc", "vxlan", "tunl",
                                           "kube-ipvs", "ifb", "tap", "vnet"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

/* bytes received and sent by each interface but loopback and virtual_interface's */
static void host_network(const char *host) {
    static host_devs devs;
    FILE *f = fopen("/proc/net/dev", "re");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':'), *name = line;
        if (!colon) continue; /* the two header lines */
        *colon = 0;
        while (*name == ' ') name++;
        unsigned long long v[9];
        if (!strcmp(name, "lo") || virtual_interface(name) ||
            sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
            continue;
        host_dev_set(&devs, host, name, F.net_rx, F.net_tx, (double)v[0], (double)v[8], NULL);
    }
    fclose(f);
}

/* a whole disk: a name under /sys/block (partitions are not) */
static int whole_disk(const char *name) {
    char path[96];
    snprintf(path, sizeof path, "/sys/block/%s", name);
    return access(path, F_OK) == 0;
}

/* bytes read and written by each whole disk, loop, ram and zram devices left out as
 * node_exporter does; diskstats counts 512-byte sectors whatever the device's block size
 * (Linux Documentation/admin-guide/iostats.rst) */
static void host_disks(const char *host) {
    static host_devs devs;
    FILE *f = fopen("/proc/diskstats", "re");
    if (!f) return;
    char line[512], name[64];
    while (fgets(line, sizeof line, f)) {
        unsigned long long rd_sect, wr_sect; /* fields 6 and 10: sectors read, written */
        if (sscanf(line, " %*u %*u %63s %*u %*u %llu %*u %*u %*u %llu", name, &rd_sect, &wr_sect) != 3)
            continue;
        if (!strncmp(name, "loop", 4) || !strncmp(name, "ram", 3) || !strncmp(name, "zram", 4))
            continue;
        host_dev_set(&devs, host, name, F.disk_rd, F.disk_wr, (double)rd_sect * 512.0,
                     (double)wr_sect * 512.0, whole_disk);
    }
    fclose(f);
}

/* The node's own figures, from the sampler of a node-sampler process (trainprof serve, or
 * trainprof run's node sampler: TRAINPROF_NVML_SAMPLER names this process): load averages,
 * memory total and available, CPU seconds by mode. A rank does not serve them (one series
 * per node, not per rank). */
static void host_metrics(void) {
    static int node = -1, series[3 + 2 + 5];
    static char host[HOST_NAME_MAX + 2] = "";
    static const char *const modes[5] = {"user", "nice", "system", "idle", "iowait"};
    if (node < 0) {
        const char *v = tprof__env(TPROF__OPT_NVML_SAMPLER);
        node = v && atoi(v) == (int)getpid();
        if (!node) return;
        host_name(host, sizeof host);
        const char *h[] = {"host", host, NULL};
        for (int i = 0; i < 3; i++) series[i] = tprof__m_series(F.host_load[i], h);
        series[3] = tprof__m_series(F.host_mem_total, h);
        series[4] = tprof__m_series(F.host_mem_avail, h);
        for (int i = 0; i < 5; i++)
            series[5 + i] = tprof__m_series(F.host_cpu, (const char *const[]){"host", host, "mode", modes[i], NULL});
    }
    if (!node) return;
    FILE *f = fopen("/proc/loadavg", "re");
    double l[3];
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3)
            for (int i = 0; i < 3; i++) tprof__m_set(series[i], l[i]);
        fclose(f);
    }
    char line[256];
    if ((f = fopen("/proc/meminfo", "re"))) {
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) tprof__m_set(series[3], (double)kb * 1024.0);
            else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) tprof__m_set(series[4], (double)kb * 1024.0);
        }
        fclose(f);
    }
    if ((f = fopen("/proc/stat", "re"))) {
        unsigned long long t[5];
        long hz = sysconf(_SC_CLK_TCK);
        if (fgets(line, sizeof line, f) && hz > 0 &&
            sscanf(line, "cpu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2], &t[3], &t[4]) == 5)
            for (int i = 0; i < 5; i++) tprof__m_set(series[5 + i], (double)t[i] / (double)hz);
        fclose(f);
    }
    host_network(host);
    host_disks(host);
}

void tprof__metrics_process(double cpu_s, double rss_bytes, double threads, double ctx) {
    host_metrics();
    tprof__m_set(one(F.cpu), cpu_s);
    if (rss_bytes >= 0) tprof__m_set(one(F.rss), rss_bytes);
    tprof__m_set(one(F.threads), threads);
    tprof__m_set(one(F.ctx), ctx);
}

static int gpu_series(unsigned idx, const char *uuid, int fam) {
    char gi[16], host[HOST_NAME_MAX + 2];
    snprintf(gi, sizeof gi, "%u", idx);
    host_name(host, sizeof host);
    return tprof__m_series(fam, (const char *const[]){"gpu", gi, "uuid", uuid ? uuid : "",
                                                      "host", host, NULL});
}

void tprof__metrics_gpu(unsigned idx, const char *uuid, const char *suffix, double v) {
    if (idx >= GPU_MAX) return;
    for (size_t m = 0; m < N_GPU_METRICS; m++) {
        if (strcmp(suffix, k_gpu[m].suffix)) continue;
        int *s = &g_gpu_series[idx][m];
        if (*s == 0) *s = gpu_series(idx, uuid, F.fam_gpu[m]) + 1;
        if (*s <= 0) return;
        tprof__m_set(*s - 1, v * k_gpu[m].scale);
        if (m == 5) { /* memory used: the peak beside it */
            int *pk = &g_gpu_series[idx][12];
            if (*pk == 0) *pk = gpu_series(idx, uuid, F.fam_gpu_mem_peak) + 1;
            static double peak[GPU_MAX];
            if (v > peak[idx]) peak[idx] = v;
            if (*pk > 0) tprof__m_set(*pk - 1, peak[idx]);
        }
        for (int b = 0; b < 2; b++) {
            if (strcmp(suffix, k_busy[b].gauge)) continue;
            int *bs = &g_gpu_series[idx][14 + b];
            if (*bs == 0) *bs = gpu_series(idx, uuid, F.fam_busy[b]) + 1;
            /* the sample was taken just before this call, on this thread */
            if (*bs > 0) tprof__m_integrate(*bs - 1, &g_busy[idx][b], v * 0.01, tprof__now(), BUSY_MAX_GAP_NS);
        }
        return;
    }
}

void tprof__metrics_gpu_total_memory(unsigned idx, const char *uuid, double bytes) {
    if (idx >= GPU_MAX) return;
    int *s = &g_gpu_series[idx][13];
    if (*s == 0) *s = gpu_series(idx, uuid, F.fam_gpu_mem_total) + 1;
    if (*s > 0) tprof__m_set(*s - 1, bytes);
}
