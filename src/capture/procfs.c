/*
 * procfs.c — the process sampler: CPU use, resident memory, threads and context switches
 * of this process (/proc/self, and the process CPU clock), recorded as counters at
 * TRAINPROF_SAMPLE_HZ (default 10).
 *
 * It runs on the flusher thread (no thread of its own), so it exists only in processes that
 * record something. Each sample reads two small files; counters go to the flusher's own
 * ring like any thread's. Rates (CPU %, switches/s) are computed between samples, so the
 * first sample only primes them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../core/metrics.h"
#include "../core/source.h"
#include "../core/writer.h"

typedef struct procfs_prev {
    uint64_t ts_ns;
    double cpu_s;
    uint64_t ctx;
    int named;
} procfs_prev;

static procfs_prev g_prev;
static uint64_t g_cpu_ts; /* start of the current CPU-rate window */
static double g_cpu_s;

/* The descriptor lives in the library's reserved range (core/writer.h) for the moment it is
 * open: a program that closes its descriptors and opens new ones meanwhile gets the lowest
 * numbers, so this read and close do not meet its descriptor under a reused number. */
static ssize_t read_small(const char *path, char *buf, size_t n) {
    int fd = tprof__open_private(path, O_RDONLY, 0);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k >= 0) buf[k] = 0;
    return k;
}

/* "Key:   value" from /proc/self/status, or -1. */
static long long status_field(const char *status, const char *key) {
    const char *p = strstr(status, key);
    if (!p) return -1;
    p += strlen(key);
    while (*p == ' ' || *p == '\t' || *p == ':') p++;
    return strtoll(p, NULL, 10);
}

/* The sampling period (0: off) and the next sample's time, the flusher's own. */
static uint64_t g_period_ns, g_next_ns;
static int g_metrics_seen;

static void procfs_start(const tprof_config *cfg) {
    uint32_t hz = cfg->sample_hz > 1000 ? 1000 : cfg->sample_hz;
    g_period_ns = hz ? 1000000000ull / hz : 0;
    g_next_ns = 0;
    g_metrics_seen = 0;
    if (hz) {
        memset(&g_prev, 0, sizeof g_prev);
        g_cpu_ts = 0;
        g_cpu_s = 0;
    }
}

static void procfs_sample(void);

/* A sample when the period has passed; the next one's time wakes the flusher. */
static uint64_t procfs_tick(int final) {
    (void)final;
    if (!g_period_ns) return 0;
    uint64_t now = tprof__now();
    if (!g_metrics_seen && TPROF__METRICS_ON()) {
        /* the endpoint just started: its process gauges now, not a period later */
        g_metrics_seen = 1;
        g_next_ns = 0;
    }
    if (now >= g_next_ns) {
        procfs_sample();
        g_next_ns = now + g_period_ns;
    }
    return g_next_ns;
}

const tprof__source tprof__source_procfs = {
    .name = "procfs",
    .start = procfs_start,
    .tick = procfs_tick,
};

static void procfs_sample(void) {
    tprof__thread *t = tprof__thread_get();
    if (!t) return;
    if (!g_prev.named) {
        tprof__thread_name(t, t->os_tid, "trainprof sampler");
        /* the bound of process.cpu_percent: 100 % per CPU online (the report flags a rate
         * above it as impossible) */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus > 0) {
            char v[24];
            snprintf(v, sizeof v, "%ld", cpus);
            tprof_set_metadata("process.host_cpus", v);
        }
        g_prev.named = 1;
    }
    char stat[1024], status[4096];
    if (read_small("/proc/self/stat", stat, sizeof stat) <= 0) return;
    if (read_small("/proc/self/status", status, sizeof status) <= 0) return;
    /* fields after the command name, which is in parentheses and may hold spaces */
    const char *p = strrchr(stat, ')');
    if (!p) return;
    unsigned long long utime = 0, stime = 0;
    long threads = 0;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
     * cutime cstime priority nice num_threads (fields 3..20 of proc(5)) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %ld",
               &utime, &stime, &threads) != 3)
        return;
    /* CPU time from the process clock, in ns: /proc's utime+stime count 10 ms ticks, too
     * coarse for rates at 10-100 Hz */
    (void)utime;
    (void)stime;
    struct timespec cts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
    double cpu_s = (double)cts.tv_sec + (double)cts.tv_nsec * 1e-9;
    long long rss_kb = status_field(status, "VmRSS");
    long long vol = status_field(status, "voluntary_ctxt_switches");
    long long invol = status_field(status, "nonvoluntary_ctxt_switches");
    uint64_t now = tprof__now();
    uint64_t ctx = (uint64_t)(vol > 0 ? vol : 0) + (uint64_t)(invol > 0 ? invol : 0);
    if (rss_kb >= 0) tprof_counter("process.rss_bytes", (double)rss_kb * 1024.0);
    tprof_counter("process.threads", (double)threads);
    if (g_prev.ts_ns && now > g_prev.ts_ns) {
        double dt = (double)(now - g_prev.ts_ns) * 1e-9;
        tprof_counter("process.ctx_switches_per_s", (double)(ctx - g_prev.ctx) / dt);
    }
    /* CPU % over at least 100 ms: the kernel credits other threads' CPU time at their
     * scheduling ticks, so over a 1 ms window (--sample-hz 1000) the rate jumped past 100 %
     * times the cores */
    if (!g_cpu_ts || now < g_cpu_ts) {
        g_cpu_ts = now;
        g_cpu_s = cpu_s;
    } else if (now - g_cpu_ts >= 100000000ull) {
        tprof_counter("process.cpu_percent",
                      100.0 * (cpu_s - g_cpu_s) / ((double)(now - g_cpu_ts) * 1e-9));
        g_cpu_ts = now;
        g_cpu_s = cpu_s;
    }
    if (TPROF__METRICS_ON())
        tprof__metrics_process(cpu_s, rss_kb >= 0 ? (double)rss_kb * 1024.0 : -1.0,
                               (double)threads, (double)ctx);
    g_prev = (procfs_prev){now, cpu_s, ctx, 1};
}
