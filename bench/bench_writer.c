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
 * The writer runs twice: with the rank file's chunks compressed (zstd level 1, the default)
 * and plain (TRAINPROF_COMPRESS=0); compression runs on the flusher only, so the producer's
 * ns/event (the hot path) must not move, and the flusher's cost per event shows what
 * compression adds. The reader reads the compressed file (decompression included).
 *
 * GPU-like size: a stream of records as the library's rings hold them for a GPU run (CUPTI
 * kernel records and runtime API records, 64 bytes each, names interned; realistic
 * durations, gaps, streams and correlation ids from a fixed PRNG) cut into the writer's
 * 4 MiB chunks, written plain and compressed with the writer's own packer
 * (format/zchunk.c): the size ratio and the packer's throughput (records/s, one core).
 *
 * Targets: writer >= 10 M events/s on one core (both modes); reader >= 10 M events/s;
 * GPU-like rank file >= 4x smaller compressed.
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
#include "format/zchunk.h"
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

/* ------------------------------------------------------------------ GPU-like size */

#define GPU_STEPS 40
#define GPU_KERNELS_PER_STEP 2500 /* a mid-size transformer step: ~100 k records per step */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

typedef struct rec_buf {
    uint8_t *b;
    size_t len, cap;
} rec_buf;

static void *put_rec(rec_buf *rb, uint16_t kind, uint32_t arg, uint64_t ts, size_t pl) {
    size_t size = tprof__align8(sizeof(tprof_rec) + pl);
    if (rb->len + size > rb->cap) {
        rb->cap = rb->cap ? rb->cap * 2 : (64u << 20);
        rb->b = realloc(rb->b, rb->cap);
        if (!rb->b) abort();
    }
    tprof_rec *r = (tprof_rec *)(rb->b + rb->len);
    memset(r, 0, size);
    r->kind = kind;
    r->size = (uint16_t)size;
    r->arg = arg;
    r->ts_ns = ts;
    rb->len += size;
    return r + 1;
}

static void put_string(rec_buf *rb, uint32_t id, const char *s) {
    char *d = put_rec(rb, TPROF_REC_STRING, id, 0, strlen(s) + 1);
    memcpy(d, s, strlen(s) + 1);
}

/* Writes the records of rb as the writer would, cut at 4 MiB on record boundaries, plain or
 * compressed; the file's size, the records' bytes and the packing time. */
static uint64_t write_chunks(const char *path, const rec_buf *rb, tprof__zc *zc, double *pack_s,
                             uint64_t *records) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    tprof_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TPROF_FILE_MAGIC, 8);
    h.version = zc ? TPROF_FORMAT_VERSION : TPROF_FORMAT_VERSION_MIN;
    h.header_bytes = sizeof h;
    h.start_realtime_ns = 1700000000000000000ull;
    h.start_mono_ns = 1000000000ull;
    h.pid = 4242;
    h.header_crc = tprof__crc32(0, &h, offsetof(tprof_file_header, header_crc));
    fwrite(&h, sizeof h, 1, f);
    size_t cap = tprof__zc_bound(4u << 20);
    uint8_t *zb = malloc(cap);
    uint64_t t = 0;
    *records = 0;
    for (size_t off = 0; off < rb->len;) {
        size_t n = 0;
        while (off + n < rb->len) {
            const tprof_rec *r = (const tprof_rec *)(rb->b + off + n);
            if (n + r->size > (4u << 20)) break;
            n += r->size;
            ++*records;
        }
        tprof_chunk_header ch = {TPROF_CHUNK_MAGIC, (uint32_t)n, 0, 1, 4243, 0, 0};
        const void *out = rb->b + off;
        if (zc) {
            uint64_t a = bench_mono_ns();
            size_t z = tprof__zc_pack(zc, out, n, zb, cap);
            t += bench_mono_ns() - a;
            if (z) {
                ch.payload_bytes = (uint32_t)z;
                ch.flags = TPROF_CHUNK_F_ZSTD;
                out = zb;
            }
        }
        ch.crc32 = tprof__crc32(0, out, ch.payload_bytes);
        fwrite(&ch, sizeof ch, 1, f);
        fwrite(out, ch.payload_bytes, 1, f);
        off += n;
    }
    free(zb);
    fclose(f);
    *pack_s = (double)t / 1e9;
    return file_size(path);
}

/* A GPU run's records: per step, runtime API calls (cudaLaunchKernel mostly, some
 * cudaMemcpyAsync) and the kernels and copies they launched, 64 bytes each, as CUPTI's
 * buffers give them to the library; 48 kernel names (mangled, interned once). */
static int gpu_like_size(const char *dir) {
    static const char *const base[6] = {
        "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
        "_ZN7cutlass7Kernel2I60cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_"
        "align8EEvNT_6ParamsE",
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5Arr"
        "ayIPcLi1EEEEEviT0_T1_",
        "_ZN2at6native12_GLOBAL__N_124layer_norm_grad_input_kernelIN3c108BFloat16EfEEvPKT_S7_"
        "PKT0_SA_S7_PS5_i",
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::bfloat16_t>>",
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11s"
        "um_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_"};
    rec_buf rb = {0};
    uint32_t sid = 1;
    char name[256];
    for (int i = 0; i < 48; i++) {
        snprintf(name, sizeof name, "%s_%d", base[i % 6], i / 6);
        put_string(&rb, sid++, name);
    }
    uint32_t launch = sid, memcpy_api = sid + 1;
    put_string(&rb, sid++, "cudaLaunchKernel");
    put_string(&rb, sid++, "cudaMemcpyAsync");
    uint64_t t = 2000000000ull, gpu_t = t + 50000;
    uint32_t corr = 1;
    for (int s = 0; s < GPU_STEPS; s++) {
        for (int k = 0; k < GPU_KERNELS_PER_STEP; k++) {
            int copy = (k % 97) == 0;
            uint64_t api_d = 2500 + rng() % 3000; /* 2.5-5.5 us per launch */
            tprof_pl_gpu *a = put_rec(&rb, TPROF_REC_GPU_API, copy ? memcpy_api : launch, t,
                                      sizeof *a);
            a->end_ns = t + api_d;
            a->device = TPROF_DEVICE_UNKNOWN;
            a->correlation = corr;
            a->kind = copy ? 41 : 211; /* cbids as CUPTI numbers them */
            a->os_tid = 4243;
            uint32_t which = (uint32_t)(k % 48);
            uint64_t dur = copy ? 20000 + rng() % 5000
                                : (uint64_t)(5000 + which * 1500) + rng() % 2000;
            if (gpu_t < t + api_d) gpu_t = t + api_d + 1000 + rng() % 1000;
            tprof_pl_gpu *g = put_rec(&rb, copy ? TPROF_REC_GPU_MEMCPY : TPROF_REC_GPU_KERNEL,
                                      copy ? 0 : which + 1, gpu_t, sizeof *g);
            g->end_ns = gpu_t + dur;
            g->bytes = copy ? 4u << 20 : 0;
            g->device = 0;
            g->stream = copy ? 13 : 7;
            g->correlation = corr++;
            g->kind = copy ? 1 : 0;
            gpu_t += dur + 800 + rng() % 600;
            t += api_d + 300 + rng() % 700;
        }
        t = gpu_t + 100000; /* the step's end synchronises */
    }
    char plain[4200], comp[4200];
    snprintf(plain, sizeof plain, "%s/gpu-plain.tprof", dir);
    snprintf(comp, sizeof comp, "%s/gpu-zstd.tprof", dir);
    double dummy, pack_s;
    uint64_t recs, recs2;
    uint64_t ps = write_chunks(plain, &rb, NULL, &dummy, &recs);
    printf("\n[GPU-like rank file: %d steps x %d kernels + API calls, %llu records, 4 MiB "
           "chunks]\n", GPU_STEPS, GPU_KERNELS_PER_STEP, (unsigned long long)recs);
    int broken = 0;
    for (int level = 1; level <= 3; level += 2) {
        tprof__zc zc = {0};
        char why[200];
        if (tprof__zc_open(&zc, level, why, sizeof why) != TPROF_OK) {
            printf("  compression unavailable: %s\n", why);
            free(rb.b);
            return 1;
        }
        uint64_t zs = write_chunks(comp, &rb, &zc, &pack_s, &recs2);
        /* read back: every record, no damage */
        tprof_reader *r;
        char err[200];
        uint64_t back = 0;
        if (tprof__reader_open(comp, &r, err, sizeof err) == 0) {
            tprof_chunk c;
            while (tprof__reader_next(r, &c)) {
                size_t pos = 0;
                int bad = 0;
                while (tprof__chunk_next_rec(&c, &pos, &bad)) back++;
            }
            if (tprof__reader_damage_count(r)) back = 0;
            tprof__reader_close(r);
        }
        if (back != recs) {
            printf("  BROKEN: the compressed file reads %llu records of %llu\n",
                   (unsigned long long)back, (unsigned long long)recs);
            broken = 1;
        }
        printf("  level %d: plain %.1f MB, compressed %.1f MB: %.2fx smaller; packer %.1f M "
               "records/s, %.0f MB/s of records (one core)\n",
               level, (double)ps / 1e6, (double)zs / 1e6, (double)ps / (double)zs,
               (double)recs / pack_s / 1e6, (double)rb.len / pack_s / 1e6);
        if (level == 1)
            bench_target_min("GPU-like rank file, plain / zstd level 1 (the default)",
                             (double)ps / (double)zs, 4.0, "x");
    }
    unlink(plain);
    unlink(comp);
    free(rb.b);
    return broken;
}

/* The writer in both modes (compressed, then plain), reps and medians printed; the last
 * compressed rank file's path in out (for the reader). 1 when a measurement broke. */
static int writer_modes(const char *dir, uint64_t n_events, char *out, size_t outlen) {
    writer_result wr[WRITER_REPS];
    int broken = 0;
    char last_path[4096] = "", keep_path[4096] = "";
    out[0] = 0;
    double mode_bytes[2] = {0, 0}, mode_prod[2] = {0, 0}, mode_flusher[2] = {0, 0};
    /* mode 0: compressed (the default, level 1); mode 1: plain */
    for (int mode = 0; mode < 2 && !broken; mode++) {
        static const char *const mode_name[2] = {"zstd level 1", "plain"};
        setenv("TRAINPROF_COMPRESS", mode ? "0" : "1", 1); /* the children inherit it */
        printf("\n  writer, chunks %s:\n", mode_name[mode]);
        last_path[0] = 0;
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
            printf("\n[writer, chunks %s, one CPU, median of %d]\n", mode_name[mode], WRITER_REPS);
            mode_bytes[mode] = bytes;
            mode_prod[mode] = prod / ev * 1e9;
            mode_flusher[mode] = (proc - prod) / ev * 1e9;
            printf("  tprof (record + flush)   %7.3f s  %7.2f M events/s  %7.1f MB/s  "
                   "(%.1f ns/event; record phases %.3f s, tprof_flush calls %.3f s)\n",
                   t, ev / t / 1e6, bytes / t / 1e6, t / ev * 1e9, r, f);
            printf("  where the time went      producer thread CPU %.1f ns/event (its fsync calls "
                   "included), flusher %.1f ns/event, CPU idle (waiting for the disk) %.3f s\n",
                   prod / ev * 1e9, (proc - prod) / ev * 1e9, t - proc > 0 ? t - proc : 0.0);
            printf("  per CPU-second           %7.2f M events/s (events / process CPU time; "
                   "what one core sustains when fsync does not wait)\n",
                   ev / proc / 1e6);
            printf("  one clock read           %7.1f ns (same CPU): the hot path's own floor is "
                   "%.1f M events/s\n",
                   clk, 1e3 / clk);
            printf("  floor: fwrite+fsync      %7.3f s  %7.1f MB/s  -> tprof / floor = %.2fx\n", s,
                   bytes / s / 1e6, t / s);
            printf("  fwrite only (no fsync)   %7.3f s  %7.1f MB/s  -> tprof / fwrite = %.2fx\n", p,
                   bytes / p / 1e6, t / p);
            /* The target is the writer's: events per second of the one core it runs on (producer
             * and flusher pinned together). The wall-clock figure above also waits for this
             * machine's disk to absorb the page cache (the idle time printed), which is the
             * storage's speed, not the writer's; it is shown beside it, not judged. */
            char label[96];
            snprintf(label, sizeof label, "writer events/s on one core (per CPU-second), %s",
                     mode_name[mode]);
            bench_target_min(label, ev / proc, 1e7, "/s");
        }
        if (mode == 0) {
            snprintf(keep_path, sizeof keep_path, "%s", last_path); /* the reader reads it */
            last_path[0] = 0;
        } else if (last_path[0]) {
            unlink(last_path);
        }
    }
    unsetenv("TRAINPROF_COMPRESS");
    snprintf(out, outlen, "%s", keep_path);
    if (!broken) {
        printf("\n[writer, compressed vs plain]\n");
        printf("  file bytes (timed part)  %.1f MB plain, %.1f MB compressed: %.2fx smaller "
               "(this API mix)\n", mode_bytes[1] / 1e6, mode_bytes[0] / 1e6,
               mode_bytes[0] > 0 ? mode_bytes[1] / mode_bytes[0] : 0.0);
        printf("  producer thread CPU      %.1f ns/event compressed, %.1f plain (the hot path: "
               "compression is not on it)\n", mode_prod[0], mode_prod[1]);
        printf("  flusher CPU              %.1f ns/event compressed, %.1f plain\n",
               mode_flusher[0], mode_flusher[1]);
    }
    return broken;
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

    char last_path[4096];
    int broken = writer_modes(dir, n_events, last_path, sizeof last_path);

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
    if (!broken) broken = gpu_like_size(dir);
    bench_rm_dir(dir);
    free(dir);
    printf("\nbench_writer: %s\n", broken ? "BROKEN (see above)" : "done");
    return broken;
}
