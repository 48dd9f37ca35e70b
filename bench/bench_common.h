/*
 * bench_common.h — small helpers shared by the benchmarks: clocks, medians, the
 * two-clock-read floor, child processes, temporary directories and verdict lines.
 *
 * Every benchmark reports absolute figures and their ratio to a floor measured in the
 * same run, on the same thread, interleaved with the measurement, so that a noisy VM moves
 * both together. Verdicts are printed as "target: ... PASS|MISS" lines; a missed target
 * does not change the exit status (only a broken measurement does: drops, lost events,
 * a child that failed).
 */
#ifndef TPROF_BENCH_COMMON_H
#define TPROF_BENCH_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t bench_thread_cpu_ns(void) {
    return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}
static inline uint64_t bench_mono_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }

static int __attribute__((unused)) bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of n values (sorts a copy). */
static inline double bench_median(const double *v, size_t n) {
    if (n == 0) return 0.0;
    double *c = malloc(n * sizeof *c);
    if (!c) return v[0];
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, bench_cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static inline double bench_min(const double *v, size_t n) {
    double m = v[0];
    for (size_t i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

static inline double bench_max(const double *v, size_t n) {
    double m = v[0];
    for (size_t i = 1; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* The floor of a range push+pop: the two CLOCK_MONOTONIC reads it cannot avoid. Returns
 * a value derived from the reads so that the compiler keeps them. */
static uint64_t __attribute__((noinline, unused)) bench_clock_pair_loop(long n) {
    uint64_t acc = 0;
    for (long i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        acc += (uint64_t)a.tv_nsec ^ (uint64_t)b.tv_nsec;
    }
    return acc;
}

static volatile uint64_t bench_sink;

/* Per-thread CPU ns of one floor pair, over n pairs. */
static inline double bench_floor_pair_ns(long n) {
    uint64_t t0 = bench_thread_cpu_ns();
    bench_sink += bench_clock_pair_loop(n);
    uint64_t t1 = bench_thread_cpu_ns();
    return (double)(t1 - t0) / (double)n;
}

/* Prints a verdict line and returns 1 on PASS. */
static inline int bench_target(const char *what, double value, double limit, const char *unit) {
    int ok = value <= limit;
    printf("  target: %-52s <= %6.2f%-4s measured %8.2f%-4s %s\n", what, limit, unit, value,
           unit, ok ? "PASS" : "MISS");
    return ok;
}

static inline int bench_target_min(const char *what, double value, double limit,
                                   const char *unit) {
    int ok = value >= limit;
    printf("  target: %-52s >= %6.3g%-4s measured %8.3g%-4s %s\n", what, limit, unit, value,
           unit, ok ? "PASS" : "MISS");
    return ok;
}

/* mkdtemp under $TMPDIR (or /tmp); exits on failure. */
static inline char *bench_mkdtemp(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *p = malloc(n);
    if (!p) exit(2);
    snprintf(p, n, "%s/tprof-%s-XXXXXX", base, tag);
    if (!mkdtemp(p)) {
        fprintf(stderr, "mkdtemp %s: %s\n", p, strerror(errno));
        exit(2);
    }
    return p;
}

/* Removes the plain files of a flat directory, then the directory. */
static inline void bench_rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4096];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Waits for a child; returns its exit status, or 128+signal. */
static inline int bench_wait(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 127;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 127;
}

static inline void bench_banner(const char *name, const char *what) {
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    printf("%s: %s\n  host %s, %ld CPUs online, %s\n", name, what, host,
           sysconf(_SC_NPROCESSORS_ONLN), date);
}

#endif /* TPROF_BENCH_COMMON_H */
