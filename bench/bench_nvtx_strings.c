/*
 * bench_nvtx_strings.c — 2 M unique names registered through NVTX
 * (nvtxDomainRegisterStringA) with trainprof injected, against the same calls with no tool.
 *
 * The program knows only the NVTX3 headers and libdl (as bench_nvtx.c); libtrainprof.so comes
 * in through NVTX_INJECTION64_PATH. Each configuration re-executes this program with its own
 * environment (NVTX reads the injection variable once per process): "injected" (TRAINPROF_DIR
 * set) and "bare" (no injection variable: NVTX's own stubs return NULL handles). The names
 * ("layer.<i>.attention.qkv", 23 to 29 bytes) are made before the clock starts; the figure is
 * the wall time of the 2 M registrations on one thread, the median of 3 fresh processes.
 *
 * The injected run is checked, outside the timed region: every handle is distinct and names
 * its own string (a handle points at the holder whose first member is the name,
 * capture/nvtx_strings.h), none is past the limit, and registering the first name again
 * returns its handle.
 *
 * Target: injected <= 2 s for the 2 M registrations.
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "capture/nvtx_strings.h"

#ifndef TPROF_LIB_PATH
#error "build with -DTPROF_LIB_PATH=\"/path/to/libtrainprof.so\""
#endif

#define NAMES 2000000L
#define REPS 3
#define NAME_BYTES 32

static int by_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Checks the injected run's handles; 0 when all hold. */
static int check_handles(nvtxDomainHandle_t d, nvtxStringHandle_t *h, const char *names) {
    for (long i = 0; i < NAMES; i++) {
        const tprof_regstr *r = (const tprof_regstr *)h[i];
        if (!r || strcmp(r->str, names + i * NAME_BYTES) != 0) {
            fprintf(stderr, "bench_nvtx_strings: handle %ld names \"%s\", not \"%s\"\n", i,
                    r ? r->str : "(NULL)", names + i * NAME_BYTES);
            return 1;
        }
    }
    if (nvtxDomainRegisterStringA(d, names) != h[0]) {
        fprintf(stderr, "bench_nvtx_strings: the first name registered again got another "
                        "handle\n");
        return 1;
    }
    qsort(h, NAMES, sizeof *h, by_ptr);
    for (long i = 1; i < NAMES; i++)
        if (h[i] == h[i - 1]) {
            fprintf(stderr, "bench_nvtx_strings: two names share a handle (\"%s\")\n",
                    ((const tprof_regstr *)h[i])->str);
            return 1;
        }
    return 0;
}

static int child(int injected) {
    char *names = malloc(NAMES * NAME_BYTES);
    nvtxStringHandle_t *h = malloc(NAMES * sizeof *h);
    if (!names || !h) return 2;
    for (long i = 0; i < NAMES; i++)
        snprintf(names + i * NAME_BYTES, NAME_BYTES, "layer.%ld.attention.qkv", i);
    nvtxDomainHandle_t d = nvtxDomainCreateA("bench"); /* NVTX loads the tool here */
    uint64_t t0 = bench_mono_ns();
    for (long i = 0; i < NAMES; i++) h[i] = nvtxDomainRegisterStringA(d, names + i * NAME_BYTES);
    uint64_t t1 = bench_mono_ns();
    int rc = 0;
    if (injected) {
        if (!d) {
            fprintf(stderr, "bench_nvtx_strings: %s was not injected\n", TPROF_LIB_PATH);
            rc = 2;
        } else if (check_handles(d, h, names) != 0) {
            rc = 2;
        }
    }
    /* the figure goes to the parent on stdout: seconds */
    printf("%.6f\n", (double)(t1 - t0) / 1e9);
    free(names);
    free(h);
    return rc;
}

/* One fresh process; its seconds, or a negative value when it failed. */
static double run_child(const char *self, int injected, const char *dir) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        unsetenv("LD_PRELOAD");
        if (injected) {
            setenv("NVTX_INJECTION64_PATH", TPROF_LIB_PATH, 1);
            setenv("TRAINPROF_DIR", dir, 1);
        } else {
            unsetenv("NVTX_INJECTION64_PATH");
        }
        execl(self, self, "--child", injected ? "injected" : "bare", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = "";
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int rc = bench_wait(pid);
    if (rc != 0 || n <= 0) {
        printf("  child %s failed with status %d\n", injected ? "injected" : "bare", rc);
        return -1;
    }
    return atof(buf);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) return child(!strcmp(argv[2], "injected"));
    bench_banner("bench_nvtx_strings", "2 M unique nvtxDomainRegisterStringA names, trainprof "
                                       "injected vs no tool");
    printf("  injection library %s\n", TPROF_LIB_PATH);
    if (access(TPROF_LIB_PATH, R_OK) != 0) {
        printf("bench_nvtx_strings: BROKEN: %s not found (build the trainprof target)\n",
               TPROF_LIB_PATH);
        return 1;
    }
    char *dir = bench_mkdtemp("bench-nvtx-strings");
    double inj[REPS], bare[REPS];
    int failed = 0;
    for (int r = 0; r < REPS && !failed; r++) {
        bare[r] = run_child("/proc/self/exe", 0, dir);
        inj[r] = run_child("/proc/self/exe", 1, dir);
        failed = bare[r] < 0 || inj[r] < 0;
    }
    bench_rm_dir(dir);
    free(dir);
    if (failed) {
        printf("\nbench_nvtx_strings: BROKEN (see above)\n");
        return 1;
    }
    double i = bench_median(inj, REPS), b = bench_median(bare, REPS);
    printf("\n[%ld unique names, one thread, median of %d processes]\n", NAMES, REPS);
    printf("  trainprof injected   %8.3f s  (%.0f ns per registration; min %.3f, max %.3f s)\n",
           i, i * 1e9 / NAMES, bench_min(inj, REPS), bench_max(inj, REPS));
    printf("  no tool (bare)       %8.3f s  (%.1f ns per registration)\n", b, b * 1e9 / NAMES);
    bench_target("2 M registered strings, injected", i, 2.0, "s");
    printf("\nbench_nvtx_strings: done\n");
    return 0;
}
