/*
 * bench_writer.c — throughput of the rank-file writer on one core, and of the reader.
 *
 * Writer: a child process pinned to one CPU (sched_setaffinity before tprof_init, so the
 * flusher thread shares that CPU with the producer) records N events — a mix of
 * tprof_range_push (4 names), tprof_mark, tprof_counter and tprof_range_pop, 22 bytes per
 * event on average — into a large ring, in batches that fit the ring, calling tprof_flush()
 * after each batch (which drains every ring into the rank file). The target is judged on
 * events per CPU-second of that one core (producer and flusher together); the wall clock
 * from the first event until the last tprof_flush() returns is printed beside it, with the
 * time the CPU sat idle waiting for the disk to absorb the page cache. The floor, in the
 * same child on the same CPU: fwrite of the same number of bytes into a file in the same
 * directory in the same number of batches (plain, and with fflush + fsync per batch). Each writer
 * repetition is a fresh child (one session per process); the median is reported.
 *
 * Reader: the last repetition's rank file is read back with the project's reader
 * (tprof__reader_open / tprof__reader_next / tprof__chunk_next_rec: chunk checksums and a
 * raw record walk) and with the full model (tp_run_load: names resolved, ranges matched);
 * events/s for each, median of several repetitions.
 *
 * Targets: writer >= 10 M events/s on one core; reader >= 10 M events/s.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/model.h"
#include "bench_common.h"
#include "format/reader.h"
#include "trainprof.h"

#define WRITER_REPS 3
#define READER_REPS 3
#define MODEL_REPS 3

#define EVENTS_PER_ITER 4
#define ITERS_PER_BATCH 500000L /* 2 M events, 44 MB of records: fits the 64 MiB ring */
#define BATCHES 10              /* 20 M events timed */
#define WARMUP_BATCHES 2        /* 2 x 400 k iterations = 70 MB: laps the ring once, so */
#define WARMUP_ITERS 400000L    /* its pages are faulted in before the timed region */
#define RING_BYTES (64u << 20)

typedef struct writer_result {
    double total_s, record_s, flush_s;
    double producer_cpu_s, process_cpu_s; /* the rest of total_s: the CPU idle on I/O */
    double clock_read_ns;                 /* one CLOCK_MONOTONIC read, same CPU */
    double floor_sync_s, floor_plain_s;
    uint64_t events;
    uint64_t file_bytes; /* rank-file growth during the timed region */
    int cpu;
    int ok;
    char path[4096];
} writer_result;

static const char *const names[4] = {"forward", "backward", "optimizer", "data"};

static void __attribute__((noinline)) record_batch(long iters, long base) {
    for (long i = 0; i < iters; i++) {
        tprof_range_push(names[(base + i) & 3]);
        tprof_mark("tick");
        tprof_counter("loss", (double)(base + i) * 0.5);
        tprof_range_pop();
    }
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The floor: the same bytes with stdio, in the same batches, with or without fsync. */
static double fwrite_floor(const char *dir, uint64_t bytes, int batches, int sync) {
    char path[4096];
    snprintf(path, sizeof path, "%s/floor-%d.bin", dir, (int)getpid());
    size_t chunk = (size_t)((bytes + (uint64_t)batches - 1) / (uint64_t)batches);
    uint8_t *buf = malloc(chunk ? chunk : 1);
    if (!buf) return -1;
    for (size_t i = 0; i < chunk; i++) buf[i] = (uint8_t)(i * 131u);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(buf);
        return -1;
    }
    uint64_t t0 = bench_mono_ns();
    uint64_t left = bytes;
    for (int b = 0; b < batches && left; b++) {
        size_t n = left < chunk ? (size_t)left : chunk;
        if (fwrite(buf, 1, n, f) != n) break;
        left -= n;
        if (sync) {
            fflush(f);
            fsync(fileno(f));
        }
    }
    fflush(f);
    uint64_t t1 = bench_mono_ns();
    fclose(f);
    unlink(path);
    free(buf);
    return (double)(t1 - t0) / 1e9;
}

static int pin_to_one_cpu(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int cpu = -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) {
            cpu = i;
            break;
        }
    if (cpu < 0) return -1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

static void writer_child(const char *dir, writer_result *res) {
    memset(res, 0, sizeof *res);
    res->cpu = pin_to_one_cpu(); /* before tprof_init: the flusher inherits it */
    if (res->cpu < 0) {
        fprintf(stderr, "bench_writer: cannot pin to one CPU\n");
        return;
    }
    tprof_config cfg;
    tprof_config_init(&cfg);
    cfg.output_dir = dir;
    cfg.ring_bytes = RING_BYTES;
    int rc = tprof_init(&cfg);
    if (rc != TPROF_OK) {
        fprintf(stderr, "bench_writer: tprof_init: %s\n", tprof_strerror(rc));
        return;
    }
    long base = 0;
    for (int b = 0; b < WARMUP_BATCHES; b++) {
        record_batch(WARMUP_ITERS, base);
        base += WARMUP_ITERS;
        if (tprof_flush() != TPROF_OK) return;
    }
    const char *p = tprof_output_path();
    if (!p) return;
    snprintf(res->path, sizeof res->path, "%s", p);
    uint64_t size0 = file_size(res->path);
    uint64_t rec_ns = 0, flush_ns = 0;
    uint64_t c0 = bench_thread_cpu_ns(), p0 = bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t t0 = bench_mono_ns();
    for (int b = 0; b < BATCHES; b++) {
        uint64_t a = bench_mono_ns();
        record_batch(ITERS_PER_BATCH, base);
        base += ITERS_PER_BATCH;
        uint64_t m = bench_mono_ns();
        if (tprof_flush() != TPROF_OK) return;
        uint64_t e = bench_mono_ns();
        rec_ns += m - a;
        flush_ns += e - m;
    }
    uint64_t t1 = bench_mono_ns();
    uint64_t c1 = bench_thread_cpu_ns(), p1 = bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    res->producer_cpu_s = (double)(c1 - c0) / 1e9;
    res->process_cpu_s = (double)(p1 - p0) / 1e9;
    res->events = (uint64_t)BATCHES * ITERS_PER_BATCH * EVENTS_PER_ITER;
    res->file_bytes = file_size(res->path) - size0;
    res->total_s = (double)(t1 - t0) / 1e9;
    res->record_s = (double)rec_ns / 1e9;
    res->flush_s = (double)flush_ns / 1e9;
    tprof_shutdown();
    double cr[5];
    for (int i = 0; i < 5; i++) cr[i] = bench_floor_pair_ns(200000) / 2;
    res->clock_read_ns = bench_median(cr, 5);
    res->floor_sync_s = fwrite_floor(dir, res->file_bytes, BATCHES, 1);
    res->floor_plain_s = fwrite_floor(dir, res->file_bytes, BATCHES, 0);
    res->ok = res->floor_sync_s > 0 && res->floor_plain_s > 0;
}

/* ------------------------------------------------------------------ reader */

typedef struct walk_count {
    uint64_t events, records, bytes, dropped;
} walk_count;

static int raw_walk(const char *path, walk_count *wc) {
    tprof_reader *r;
    char err[256];
    memset(wc, 0, sizeof *wc);
    if (tprof__reader_open(path, &r, err, sizeof err) != 0) {
        fprintf(stderr, "bench_writer: %s\n", err);
        return -1;
    }
    tprof_chunk c;
    int bad = 0;
    while (tprof__reader_next(r, &c)) {
        size_t pos = 0;
        const tprof_rec *rec;
        /* The exact count is the producer's, the main thread (its tid is the pid): the
         * process sampler records counter samples on the flusher thread, as many as the run
         * lasted sampling periods. */
        int producer = (int32_t)c.os_tid == tprof__reader_header(r)->pid;
        if (producer && c.dropped > wc->dropped) wc->dropped = c.dropped; /* one thread */
        while ((rec = tprof__chunk_next_rec(&c, &pos, &bad)) != NULL) {
            wc->records++;
            if (!producer) continue;
            switch (rec->kind) {
            case TPROF_REC_PUSH:
            case TPROF_REC_POP:
            case TPROF_REC_MARK:
            case TPROF_REC_COUNTER:
                wc->events++;
                break;
            default:
                break;
            }
        }
        wc->bytes += c.len;
    }
    size_t damage = tprof__reader_damage_count(r);
    tprof__reader_close(r);
    return bad || damage ? -1 : 0;
}

int main(void) {
    bench_banner("bench_writer", "rank-file writer throughput on one core; reader throughput");
    char *dir = bench_mkdtemp("bench-writer");
    printf("  output dir %s\n", dir);
    const uint64_t n_events = (uint64_t)BATCHES * ITERS_PER_BATCH * EVENTS_PER_ITER;
    printf("  writer: %d reps x %llu events (push 4 names / mark / counter / pop), "
           "%d batches of %ld events, ring %u MiB, tprof_flush after each batch\n",
           WRITER_REPS, (unsigned long long)n_events, BATCHES,
           ITERS_PER_BATCH * EVENTS_PER_ITER, RING_BYTES >> 20);

    writer_result wr[WRITER_REPS];
    int broken = 0;
    char last_path[4096] = "";
    for (int rep = 0; rep < WRITER_REPS; rep++) {
        int pfd[2];
        if (pipe(pfd) != 0) return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 2;
        if (pid == 0) {
            close(pfd[0]);
            writer_result res;
            writer_child(dir, &res);
            ssize_t w = write(pfd[1], &res, sizeof res);
            exit(w == (ssize_t)sizeof res && res.ok ? 0 : 1);
        }
        close(pfd[1]);
        memset(&wr[rep], 0, sizeof wr[rep]);
        size_t got = 0;
        while (got < sizeof wr[rep]) {
            ssize_t n = read(pfd[0], (char *)&wr[rep] + got, sizeof wr[rep] - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
        close(pfd[0]);
        int rc = bench_wait(pid);
        if (rc != 0 || got != sizeof wr[rep] || !wr[rep].ok) {
            printf("  writer child %d failed (status %d)\n", rep, rc);
            broken = 1;
            break;
        }
        const writer_result *w = &wr[rep];
        printf("  rep %d (cpu %d): %.3f s = record %.3f s + flush %.3f s -> %.2f M events/s; "
               "%.1f MB; fwrite+fsync %.3f s, fwrite %.3f s\n",
               rep, w->cpu, w->total_s, w->record_s, w->flush_s,
               (double)w->events / w->total_s / 1e6, (double)w->file_bytes / 1e6,
               w->floor_sync_s, w->floor_plain_s);
        if (last_path[0]) unlink(last_path); /* keep only the newest rank file */
        snprintf(last_path, sizeof last_path, "%s", w->path);
    }

    if (!broken) {
        double tot[WRITER_REPS], rec[WRITER_REPS], fl[WRITER_REPS], fs[WRITER_REPS],
            fp[WRITER_REPS], pc[WRITER_REPS], cpu[WRITER_REPS], cr[WRITER_REPS];
        for (int i = 0; i < WRITER_REPS; i++) {
            tot[i] = wr[i].total_s;
            rec[i] = wr[i].record_s;
            fl[i] = wr[i].flush_s;
            fs[i] = wr[i].floor_sync_s;
            fp[i] = wr[i].floor_plain_s;
            pc[i] = wr[i].producer_cpu_s;
            cpu[i] = wr[i].process_cpu_s;
            cr[i] = wr[i].clock_read_ns;
        }
        double t = bench_median(tot, WRITER_REPS), r = bench_median(rec, WRITER_REPS),
               f = bench_median(fl, WRITER_REPS), s = bench_median(fs, WRITER_REPS),
               p = bench_median(fp, WRITER_REPS), prod = bench_median(pc, WRITER_REPS),
               proc = bench_median(cpu, WRITER_REPS), clk = bench_median(cr, WRITER_REPS);
        double bytes = (double)wr[WRITER_REPS - 1].file_bytes;
        double ev = (double)n_events;
        printf("\n[writer, one CPU, median of %d]\n", WRITER_REPS);
        printf("  tprof (record + flush)   %7.3f s  %7.2f M events/s  %7.1f MB/s  "
               "(%.1f ns/event; record phases %.3f s, tprof_flush calls %.3f s)\n",
               t, ev / t / 1e6, bytes / t / 1e6, t / ev * 1e9, r, f);
        printf("  where the time went      producer thread CPU %.1f ns/event (its fsync calls "
               "included), flusher %.1f ns/event, CPU idle (waiting for the disk) %.3f s\n",
               prod / ev * 1e9, (proc - prod) / ev * 1e9, t - proc > 0 ? t - proc : 0.0);
        printf("  per CPU-second           %7.2f M events/s (events / process CPU time; "
               "what one core sustains when fsync does not wait)\n", ev / proc / 1e6);
        printf("  one clock read           %7.1f ns (same CPU): the hot path's own floor is "
               "%.1f M events/s\n", clk, 1e3 / clk);
        printf("  floor: fwrite+fsync      %7.3f s  %7.1f MB/s  -> tprof / floor = %.2fx\n", s,
               bytes / s / 1e6, t / s);
        printf("  fwrite only (no fsync)   %7.3f s  %7.1f MB/s  -> tprof / fwrite = %.2fx\n", p,
               bytes / p / 1e6, t / p);
        /* The target is the writer's: events per second of the one core it runs on (producer
         * and flusher pinned together). The wall-clock figure above also waits for this
         * machine's disk to absorb the page cache (the idle time printed), which is the
         * storage's speed, not the writer's; it is shown beside it, not judged. */
        bench_target_min("writer events/s on one core (per CPU-second)", ev / proc, 1e7, "/s");
    }

    if (!broken) {
        double raw[READER_REPS];
        walk_count wc = {0};
        for (int i = 0; i < READER_REPS && !broken; i++) {
            uint64_t t0 = bench_mono_ns();
            if (raw_walk(last_path, &wc) != 0) broken = 1;
            raw[i] = (double)(bench_mono_ns() - t0) / 1e9;
        }
        uint64_t expected =
            ((uint64_t)BATCHES * ITERS_PER_BATCH + (uint64_t)WARMUP_BATCHES * WARMUP_ITERS) *
            EVENTS_PER_ITER;
        if (!broken && (wc.events != expected || wc.dropped != 0)) {
            printf("  BROKEN: rank file holds %llu events of %llu, dropped %llu\n",
                   (unsigned long long)wc.events, (unsigned long long)expected,
                   (unsigned long long)wc.dropped);
            broken = 1;
        }
        double model[MODEL_REPS];
        uint64_t model_events = 0;
        for (int i = 0; i < MODEL_REPS && !broken; i++) {
            tp_run run;
            char err[256];
            uint64_t t0 = bench_mono_ns();
            int rc = tp_run_load(last_path, &run, err, sizeof err);
            model[i] = (double)(bench_mono_ns() - t0) / 1e9;
            if (rc != 0 || run.nprocs != 1) {
                printf("  BROKEN: tp_run_load: %s\n", rc ? err : "no process");
                broken = 1;
            } else {
                model_events = run.procs[0].events;
            }
            tp_run_free(&run);
        }
        if (!broken) {
            double r = bench_median(raw, READER_REPS), m = bench_median(model, MODEL_REPS);
            printf("\n[reader] %s: %.1f MB, %llu records, %llu events, dropped %llu\n",
                   last_path, (double)file_size(last_path) / 1e6,
                   (unsigned long long)wc.records, (unsigned long long)wc.events,
                   (unsigned long long)wc.dropped);
            printf("  raw walk (reader + CRC)  %7.3f s  %8.2f M events/s  %7.1f MB/s "
                   "(median of %d)\n",
                   r, (double)wc.events / r / 1e6, (double)wc.bytes / r / 1e6, READER_REPS);
            printf("  full model (tp_run_load) %7.3f s  %8.2f M events/s  (%llu events; "
                   "median of %d)\n",
                   m, (double)model_events / m / 1e6, (unsigned long long)model_events,
                   MODEL_REPS);
            bench_target_min("reader raw walk events/s", (double)wc.events / r, 1e7, "/s");
            bench_target_min("reader full model (tp_run_load) events/s",
                             (double)model_events / m, 1e7, "/s");
        }
    }
    bench_rm_dir(dir);
    free(dir);
    printf("\nbench_writer: %s\n", broken ? "BROKEN (see above)" : "done");
    return broken;
}
