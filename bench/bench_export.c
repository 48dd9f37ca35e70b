/*
 * bench_export.c — trace export at scale: a synthetic run (default 4 ranks x 400 steps x
 * 500 kernels per step, about 0.8 million events) is written with the tests' rank-file writer
 * (tests/synth.c), loaded once per format in a child process of its own, and exported to a
 * byte-counting sink: the Chrome JSON (tp_export_chrome) and the Perfetto protobuf
 * (tp_export_perfetto). Prints, per format, events per second, bytes written, and the peak
 * RSS of the child beside its RSS after loading (what the export adds to the model). Targets:
 * the Perfetto export at least as fast as the Chrome one, at most half its bytes, and within
 * 64 MB of the loaded model (it streams: one packet, the name table, one track's order).
 *
 *     bench_export [--ranks N] [--steps N] [--kernels N]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/model.h"
#include "bench_common.h"
#include "export/chrome.h"
#include "export/perfetto.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t MS = 1000000ull;

static int write_rank(const char *dir, int rank, int nranks, int steps, int kernels) {
    uint64_t rt0 = 1700000000000000000ull, t0 = 1000000000ull;
    synth_file *f = synth_open(dir, "bench", 1000 + rank, rt0, t0);
    if (!f) return -1;
    synth_rank(f, rank, nranks);
    synth_thread(f, 1, 1000 + rank);
    synth_thread(f, 2, 5000 + rank);
    for (uint32_t i = 0; i < 64; i++) {
        char name[96];
        snprintf(name, sizeof name, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tile_v%u", i);
        synth_string(f, 2, i + 1, name);
    }
    uint32_t corr = 1;
    for (int s = 0; s < steps; s++) {
        uint64_t b = t0 + MS + (uint64_t)s * 10 * MS, slot = 9 * MS / (uint64_t)kernels;
        synth_step_begin(f, 1, b, (uint64_t)s);
        synth_push(f, 1, b + 1000, "forward", 0, 0);
        synth_pop(f, 1, b + 4 * MS, 0);
        for (int k = 0; k < kernels; k++) {
            uint64_t ks = b + (uint64_t)k * slot + 1000;
            tprof_pl_gpu pl = {ks + slot * 8 / 10, 0, 0, 7 + (uint32_t)(k & 1), corr++, 0, 0, 0};
            synth_raw(f, 2, TPROF_REC_GPU_KERNEL, (uint32_t)(k % 64) + 1, ks, &pl, sizeof pl,
                      NULL, 0);
        }
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.end_ns = b + 9 * MS + 500000;
        c.bytes = 64u << 20;
        c.comm_hash = 0xabcdef;
        c.seq = (uint32_t)s;
        c.nranks = (uint32_t)nranks;
        c.rank = (uint32_t)rank;
        c.op = TPROF_COMM_ALLREDUCE;
        synth_comm(f, 1, b + 9 * MS, &c, NULL);
        synth_counter(f, 1, b, "loss", 2.0 + 1.0 / (s + 1));
        synth_step_end(f, 1, b + 10 * MS, (uint64_t)s);
        synth_flush(f);
    }
    synth_end_of_file(f, t0 + 2 * MS + (uint64_t)steps * 10 * MS, 0);
    return synth_close(f);
}

/* A FILE that counts what is written to it and keeps nothing. */
static ssize_t count_write(void *c, const char *buf, size_t n) {
    (void)buf;
    *(uint64_t *)c += n;
    return (ssize_t)n;
}

static double rss_now_mb(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

typedef struct result {
    double seconds, rss_loaded_mb, rss_peak_mb;
    uint64_t bytes, events;
    int ok;
} result;

/* In a child: load, export in `format` (0 Chrome, 1 Perfetto), report through a pipe. */
static result measure(const char *dir, int format, uint64_t events) {
    result r = {0};
    int fd[2];
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        tp_run run;
        char err[512];
        if (tp_run_load(dir, &run, err, sizeof err)) _exit(1);
        r.rss_loaded_mb = rss_now_mb();
        cookie_io_functions_t io = {NULL, count_write, NULL, NULL};
        FILE *out = fopencookie(&r.bytes, "w", io);
        if (!out) _exit(1);
        setvbuf(out, NULL, _IOFBF, 1 << 16);
        double t0 = (double)bench_mono_ns();
        tp_perfetto_counts c;
        int rc = format ? tp_export_perfetto(&run, out, NULL, &c)
                        : tp_export_chrome(&run, out, NULL);
        fclose(out);
        r.seconds = ((double)bench_mono_ns() - t0) / 1e9;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        r.rss_peak_mb = (double)ru.ru_maxrss / 1024.0;
        r.events = format ? c.slices + c.counters + c.instants : events;
        r.ok = rc == 0;
        if (write(fd[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
        tp_run_free(&run);
        _exit(0);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &r, sizeof r) != (ssize_t)sizeof r) r.ok = 0;
    close(fd[0]);
    if (pid > 0 && bench_wait(pid) != 0) r.ok = 0;
    return r;
}

int main(int argc, char **argv) {
    int ranks = 4, steps = 400, kernels = 500;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc) ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--ranks N] [--steps N] [--kernels N]\n", argv[0]);
            return 2;
        }
    }
    if (ranks < 1 || steps < 1 || kernels < 2) return 2;
    bench_banner("bench_export", "Chrome JSON and Perfetto protobuf export of a synthetic run");
    char *dir = bench_mkdtemp("export");
    for (int r = 0; r < ranks; r++)
        if (write_rank(dir, r, ranks, steps, kernels) != 0) {
            fprintf(stderr, "cannot write the synthetic run in %s\n", dir);
            return 1;
        }
    printf("  generated %d ranks x %d steps x %d kernels (not timed)\n", ranks, steps, kernels);
    result pf = measure(dir, 1, 0);
    result ch = measure(dir, 0, pf.events); /* the same events (test_perfetto checks it) */
    bench_rm_dir(dir);
    free(dir);
    if (!pf.ok || !ch.ok) {
        fprintf(stderr, "an export failed\n");
        return 1;
    }
    const result *rs[2] = {&ch, &pf};
    const char *names[2] = {"chrome json", "perfetto"};
    for (int i = 0; i < 2; i++)
        printf("  %-12s %9llu events %7.2f s %8.2f M events/s %10.1f MB; RSS %.0f MB loaded, "
               "%.0f MB peak (+%.0f MB)\n",
               names[i], (unsigned long long)rs[i]->events, rs[i]->seconds,
               (double)rs[i]->events / rs[i]->seconds / 1e6, (double)rs[i]->bytes / 1e6,
               rs[i]->rss_loaded_mb, rs[i]->rss_peak_mb,
               rs[i]->rss_peak_mb - rs[i]->rss_loaded_mb);
    bench_target_min("perfetto events/s / chrome events/s", ch.seconds / pf.seconds, 1.0, "x");
    bench_target("perfetto bytes / chrome bytes", (double)pf.bytes / (double)ch.bytes, 0.5, "x");
    bench_target("perfetto peak RSS above the loaded model", pf.rss_peak_mb - pf.rss_loaded_mb,
                 64.0, " MB");
    return 0;
}
