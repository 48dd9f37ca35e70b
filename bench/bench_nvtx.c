/*
 * bench_nvtx.c — cost of an NVTX range push+pop captured through NVTX injection.
 *
 * This program knows only the NVTX3 headers (header-only, from the CUDA toolkit) and libdl,
 * as PyTorch or NCCL do; libtrainprof.so (path fixed at build time, TPROF_LIB_PATH) comes
 * in through NVTX_INJECTION64_PATH on the first NVTX call. It measures
 * nvtxRangePushA("forward"); nvtxRangePop(); against a floor measured in the same run on
 * the same thread: two clock_gettime(CLOCK_MONOTONIC) calls, with per-thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID). Each configuration re-executes this program with a flag and
 * its own environment, because NVTX reads the injection variable once per process: enabled
 * (TRAINPROF_DIR set, a large ring) at 1 and 8 threads, in batches that fit the ring with
 * tprof_flush() (found with dlsym in the injected library) between them outside the timed
 * region, then the rank file is read back with the project's reader to check that every
 * pair was recorded and nothing was dropped; and disabled at run time (TRAINPROF_ENABLE=0
 * with the injection variable set: InitializeInjectionNvtx2 declines and NVTX falls back
 * to its own no-ops).
 *
 * Targets: enabled <= 3x the floor at 1 and 8 threads; disabled < 2 ns per call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "range_harness.h"

#ifndef TPROF_LIB_PATH
#error "build with -DTPROF_LIB_PATH=\"/path/to/libtrainprof.so\""
#endif

#define REPS 9

static void __attribute__((noinline)) nvtx_loop(long n) {
    for (long i = 0; i < n; i++) {
        nvtxRangePushA("forward");
        nvtxRangePop();
        /* NVTX's wrappers are inline loads of a global function pointer; without this
         * barrier the compiler may hoist the load and, when it is NULL (disabled), delete
         * the loop, which no real program would see */
        __asm__ volatile("" ::: "memory");
    }
}

/* The library NVTX loaded, looked up without loading a second copy. */
static void *lib_sym(const char *name) {
    void *h = dlopen(TPROF_LIB_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return NULL;
    void *s = dlsym(h, name);
    dlclose(h);
    return s;
}

static int (*p_flush)(void);
static int flush_via_dlsym(void) { return p_flush(); }

static int child_enabled(int nthreads, size_t ring_bytes, long batch, int warmup) {
    nvtxMarkA("bench_nvtx start"); /* NVTX loads the injection library here */
    int (*p_enabled)(void) = (int (*)(void))lib_sym("tprof_enabled");
    p_flush = (int (*)(void))lib_sym("tprof_flush");
    const char *(*p_path)(void) = (const char *(*)(void))lib_sym("tprof_output_path");
    int (*p_shutdown)(void) = (int (*)(void))lib_sym("tprof_shutdown");
    if (!p_enabled || !p_flush || !p_path || !p_shutdown) {
        fprintf(stderr, "bench_nvtx: %s was not injected (NVTX_INJECTION64_PATH=%s)\n",
                TPROF_LIB_PATH, getenv("NVTX_INJECTION64_PATH"));
        return 2;
    }
    if (!p_enabled()) {
        fprintf(stderr, "bench_nvtx: injected, but the session is not recording\n");
        return 2;
    }
    const rh_ops ops = {nvtx_loop, flush_via_dlsym};
    rh_result res;
    if (rh_run(nthreads, batch, warmup, &ops, &res) != 0) return 2;
    char path[4096] = "";
    const char *op = p_path();
    if (op) snprintf(path, sizeof path, "%s", op);
    p_shutdown();
    return rh_report("NVTX", nthreads, ring_bytes, batch, &res, path, 3.0);
}

static int child_disabled(void) {
    nvtxMarkA("bench_nvtx start"); /* NVTX tries the injection here; trainprof declines */
    nvtx_loop(100000);
    int (*p_enabled)(void) = (int (*)(void))lib_sym("tprof_enabled");
    if (!p_enabled) {
        /* NVTX dlcloses a tool that declines; -z nodelete keeps it mapped */
        fprintf(stderr, "bench_nvtx: %s was never loaded: the disabled case would not "
                        "exercise InitializeInjectionNvtx2\n", TPROF_LIB_PATH);
        return 2;
    }
    if (p_enabled()) {
        fprintf(stderr, "bench_nvtx: session recording with TRAINPROF_ENABLE=0\n");
        return 2;
    }
    const long n = 20 * 1000 * 1000;
    double api[REPS], flo[REPS];
    for (int r = 0; r < REPS; r++) {
        flo[r] = bench_floor_pair_ns(200000);
        uint64_t t0 = bench_thread_cpu_ns();
        nvtx_loop(n);
        uint64_t t1 = bench_thread_cpu_ns();
        api[r] = (double)(t1 - t0) / (double)n;
    }
    double a = bench_median(api, REPS), f = bench_median(flo, REPS);
    printf("\n[NVTX disabled at run time: TRAINPROF_ENABLE=0, injection variable set] "
           "%d reps x %ld pairs\n", REPS, n);
    printf("  push+pop             %7.2f ns/pair  = %.2f ns/call (min %.2f, max %.2f ns/call)\n",
           a, a / 2, bench_min(api, REPS) / 2, bench_max(api, REPS) / 2);
    printf("  floor: 2 clock reads %7.2f ns/pair; disabled pair / floor = %.3fx\n", f, a / f);
    bench_target("NVTX disabled ns per call", a / 2, 2.0, "ns");
    return 0;
}

typedef struct child_spec {
    const char *mode; /* argv[2] of the child */
    int nthreads;
    size_t ring_bytes;
    long batch;
    int warmup;
} child_spec;

static const child_spec specs[] = {
    /* 1 M pairs = 40 MB per batch in a 64 MiB ring; 2 warm-up batches lap it */
    {"enabled-1", 1, 64u << 20, 1000000, 2},
    /* 8 rings of 16 MiB; 200 k pairs = 8 MB per batch; 3 warm-up batches lap them */
    {"enabled-8", 8, 16u << 20, 200000, 3},
    {"disabled", 0, 0, 0, 0},
};
#define NSPECS (sizeof specs / sizeof specs[0])

static int child_main(const char *mode) {
    for (size_t i = 0; i < NSPECS; i++) {
        const child_spec *s = &specs[i];
        if (strcmp(mode, s->mode) != 0) continue;
        int rc = s->nthreads ? child_enabled(s->nthreads, s->ring_bytes, s->batch, s->warmup)
                             : child_disabled();
        fflush(stdout);
        return rc;
    }
    fprintf(stderr, "bench_nvtx: unknown mode %s\n", mode);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) return child_main(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    bench_banner("bench_nvtx", "nvtxRangePushA(\"forward\") + nvtxRangePop() injected into "
                               "trainprof vs two clock_gettime(CLOCK_MONOTONIC)");
    printf("  injection library %s\n", TPROF_LIB_PATH);
    if (access(TPROF_LIB_PATH, R_OK) != 0) {
        printf("bench_nvtx: BROKEN: %s not found (build the trainprof target)\n",
               TPROF_LIB_PATH);
        return 1;
    }
    char *dir = bench_mkdtemp("bench-nvtx");
    printf("  output dir %s\n", dir);
    int failed = 0;
    for (size_t i = 0; i < NSPECS; i++) {
        const child_spec *s = &specs[i];
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            setenv("NVTX_INJECTION64_PATH", TPROF_LIB_PATH, 1);
            setenv("TRAINPROF_DIR", dir, 1);
            unsetenv("LD_PRELOAD"); /* no second way in: only the injection */
            if (s->nthreads) {
                char kb[32];
                snprintf(kb, sizeof kb, "%zu", s->ring_bytes >> 10);
                setenv("TRAINPROF_RING_KB", kb, 1);
                unsetenv("TRAINPROF_ENABLE");
            } else {
                setenv("TRAINPROF_ENABLE", "0", 1);
            }
            char *args[] = {argv[0], "--child", (char *)s->mode, NULL};
            execv("/proc/self/exe", args);
            perror("execv /proc/self/exe");
            _exit(127);
        }
        int rc = bench_wait(pid);
        if (rc != 0) {
            printf("  child %s failed with status %d\n", s->mode, rc);
            failed = 1;
        }
    }
    bench_rm_dir(dir);
    free(dir);
    printf("\nbench_nvtx: %s\n", failed ? "BROKEN (see above)" : "done");
    return failed;
}
