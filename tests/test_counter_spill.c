/*
 * test_counter_spill.c — a slim thread's packed counters written out to the temporary file of
 * the process as they pass the spill threshold (counter_pack.h): read back through the
 * iterator's window and tp_counters_packed_read, they are the bytes and counters packed in
 * memory, whatever the threshold (1 byte, around a counter's largest size, around the
 * window); the report, the summaries' slim blocks and the blocks decoded again are those of
 * the run held in memory; the file is closed with the last thread in it; a file cut short
 * reads as an I/O error, not as counters, and so does a summary read in place once another
 * file is renamed over it; threads spill at once into the one file; without a temporary
 * directory the bytes stay in memory. Inputs: a series of every value form (integers,
 * thousandths, raw doubles, NaN), the synthetic four-rank run and a node sampler of 20,000
 * samples (slim_runs.h).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "analysis/counter_pack.h"
#include "analysis/model.h"
#include "analysis/summary.h"
#include "slim_runs.h"
#include "synth.h"
#include "trainprof.h"

/* The descriptors open in this process; in seen[] (when not NULL), which of the first
 * MAX_FD are open. */
enum { MAX_FD = 4096 };
static size_t open_fds(unsigned char *seen) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    size_t n = 0;
    int self = dirfd(d);
    if (seen) memset(seen, 0, MAX_FD);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd == self) continue;
        n++;
        if (seen && fd < MAX_FD) seen[fd] = 1;
    }
    closedir(d);
    return n;
}

/* The one descriptor open now that was not in was[] (open_fds). */
static int new_fd(const unsigned char *was) {
    static unsigned char is[MAX_FD];
    open_fds(is);
    int fd = 0;
    while (fd < MAX_FD && (was[fd] || !is[fd])) fd++;
    assert_true(fd < MAX_FD);
    return fd;
}

static const char *const NAMES[] = {"gpu0.power_w", "gpu0.energy_j", "gpu1.power_w",
                                    "gpu1.temperature_c", "gpu0.mem_used_bytes"};

/* n counters of every value form: thousandths (power), a growing counter, integers, raw
 * doubles (a third, a NaN now and then: 8 bytes each) and times that go back at times. */
static tp_counter *series(size_t n) {
    tp_counter *c = malloc(n * sizeof *c);
    assert_non_null(c);
    for (size_t i = 0; i < n; i++) {
        size_t m = i % 5;
        uint64_t ts = T0 + (i / 5) * 100 * MS + (i % 97 == 0 ? 0 : i % 13);
        double v = m == 0 ? 250.125 + (double)(i % 11) * 1.5
                   : m == 1 ? 100 + (double)i * 0.037
                   : m == 2 ? (i % 7 ? 300.5 : 1.0 / 3 + (double)i)
                   : m == 3 ? 40 + (double)(i % 9)
                            : (i % 31 ? 8e10 + (double)i * 2097152 : NAN);
        c[i] = (tp_counter){NAMES[m], ts, v};
    }
    return c;
}

/* in[0..n) packed into a fresh thread as a light load does (then ended by the slim pass). */
static void pack(tp_thread *t, const tp_counter *in, size_t n) {
    memset(t, 0, sizeof *t);
    tp_cpack st = {0};
    for (size_t i = 0; i < n; i++) assert_int_equal(tp_counter_append(t, &st, &in[i]), 0);
    tp_cpack_free(&st);
    tp_thread_pack_counters(t);
}

/* Packed under every threshold, the thread holds the bytes packed in memory, gives back the
 * same counters, unpacks and packs again; once it spilled, it keeps none in memory. */
static void spill_packing(void **state) {
    (void)state;
    enum { N = 30000 };
    size_t base = open_fds(NULL), before = tp_cpack_set_spill(0);
    tp_counter *in = series(N);
    tp_thread ref;
    pack(&ref, in, N);
    assert_null(ref.counters_spilled);
    size_t len = ref.counters_packed_len;
    assert_true(len > 3 * TP_CPACK_WINDOW / 2); /* the window refills inside the series */
    uint8_t *got = malloc(len);
    assert_non_null(got);
    static const size_t at[] = {1, 2, 27, 28, 29, 100, 4096, 65535, 65536, 65537, 1u << 20};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        tp_cpack_set_spill(at[k]);
        tp_thread t;
        pack(&t, in, N);
        int spilled = at[k] < len;
        assert_int_equal(t.counters_spilled != NULL, spilled);
        if (spilled) {
            assert_int_equal(t.counters_packed_len, 0);
            assert_int_equal(open_fds(NULL), base + 1);
        }
        assert_int_equal(tp_counters_packed_size(&t), len);
        assert_int_equal(tp_counters_packed_read(&t, 0, got, len), TPROF_OK);
        assert_memory_equal(got, ref.counters_packed, len);
        for (size_t off = 0; off < len; off += len / 7 + 1) { /* pieces across segments */
            size_t n = (len - off) < 70001 ? len - off : 70001;
            assert_int_equal(tp_counters_packed_read(&t, off, got, n), TPROF_OK);
            assert_memory_equal(got, ref.counters_packed + off, n);
        }
        assert_int_equal(tp_counters_packed_read(&t, len, got, 1), TPROF_ERR_INVALID_ARG);
        assert_int_equal(tp_counters_packed_read(&t, len + 1, got, 0), TPROF_ERR_INVALID_ARG);
        slim_counters_are(&t, in, N);
        assert_int_equal(tp_thread_unpack_counters(&t), 0);
        assert_null(t.counters_spilled);
        assert_null(t.counters_packed);
        for (size_t i = 0; i < N; i++) assert_true(slim_same_counter(&t.counters[i], &in[i]));
        assert_int_equal(open_fds(NULL), base); /* its last segment freed: the file closed */
        tp_thread_pack_counters(&t); /* from the array, spilling again */
        assert_null(t.counters);
        assert_int_equal(t.counters_spilled != NULL, spilled);
        slim_counters_are(&t, in, N);
        tp_thread_free_counters(&t);
        assert_int_equal(open_fds(NULL), base);
    }
    tp_thread_free_counters(&ref);
    free(got);
    free(in);
    tp_cpack_set_spill(before);
}

/* A reader on another thread whose bytes read back did not decode. */
static void *damaged_read(void *arg) {
    (void)arg;
    uint64_t here = tp_counters_read_failures_here();
    tp_spill_read_damaged();
    return tp_counters_read_failures_here() == here + 1 ? NULL : (void *)1;
}

/* Two threads share the file, which closes with the last of them; the file cut short reads as
 * an I/O error; without a temporary directory the bytes stay in memory. */
static void spill_file_faults(void **state) {
    (void)state;
    enum { N = 5000 };
    static unsigned char was[MAX_FD];
    size_t base = open_fds(was), before = tp_cpack_set_spill(100);
    tp_counter *in = series(N);
    tp_thread a, b;
    pack(&a, in, N);
    assert_int_equal(open_fds(NULL), base + 1);
    int fd = new_fd(was); /* the temporary file */
    pack(&b, in, N / 2);
    assert_int_equal(open_fds(NULL), base + 1);
    tp_thread_free_counters(&a);
    assert_int_equal(open_fds(NULL), base + 1);
    slim_counters_are(&b, in, N / 2);
    assert_int_equal(ftruncate(fd, 0), 0);
    tp_counter_it it;
    tp_counter c;
    assert_int_equal(tp_counter_it_init(&it, &b), 0);
    size_t n = 0;
    while (tp_counter_next(&it, &c)) n++;
    assert_int_equal(n, 0);
    assert_int_equal(tp_counter_it_done(&it), TPROF_ERR_IO);
    uint8_t byte;
    assert_int_equal(tp_counters_packed_read(&b, 0, &byte, 1), TPROF_ERR_IO);
    assert_int_equal(tp_thread_unpack_counters(&b), TPROF_ERR_IO);
    tp_thread_free_counters(&b);
    assert_int_equal(open_fds(NULL), base);

    /* packed bytes read in place from a file through a descriptor of their own: the file
     * renamed over or removed is still read; written in place, it reads as an I/O error,
     * counted */
    tp_thread r;
    pack(&r, in, N); /* spilled, then read back whole */
    size_t len = (size_t)tp_counters_packed_size(&r);
    uint8_t *bytes = malloc(len);
    assert_non_null(bytes);
    assert_int_equal(tp_counters_packed_read(&r, 0, bytes, len), TPROF_OK);
    tp_thread_free_counters(&r);
    assert_int_equal(open_fds(NULL), base);
    char dir[512], file[600], other[600];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "counter-spill-place"), 0);
    snprintf(file, sizeof file, "%s/sum", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    FILE *f = fopen(file, "w+"); /* readable: its descriptor is the one read */
    assert_non_null(f);
    assert_int_equal(fwrite("12345", 1, 5, f), 5);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fflush(f), 0);
    tp_thread p;
    tp_cpack_set_spill(0);
    pack(&p, in, N); /* in memory, its names numbered as the file's bytes: they go */
    free(p.counters_packed);
    p.counters_packed = malloc(1);
    p.counters_packed_len = 0;
    assert_int_equal(tp_cpack_refer(&p, fileno(f), 5, len), TPROF_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(open_fds(NULL), base + 1);
    slim_counters_are(&p, in, N);
    f = fopen(other, "w"); /* another file renamed over it, then none */
    assert_non_null(f);
    assert_int_equal(fwrite("x", 1, 1, f), 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(other, file), 0);
    slim_counters_are(&p, in, N);
    assert_int_equal(unlink(file), 0);
    slim_counters_are(&p, in, N);
    uint64_t failed = tp_counters_read_failures(), failed_here = tp_counters_read_failures_here();
    assert_int_equal(open_fds(NULL), base + 1);
    fd = new_fd(was); /* its descriptor */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    int w = open(self, O_WRONLY); /* the removed file, written in place */
    assert_true(w >= 0);
    assert_int_equal(pwrite(w, "\0", 1, 9), 1);
    close(w);
    assert_int_equal(tp_counter_it_init(&it, &p), 0);
    while (tp_counter_next(&it, &c)) {}
    assert_int_equal(tp_counter_it_done(&it), TPROF_ERR_IO);
    assert_true(tp_counters_read_failures() == failed + 1);
    assert_true(tp_counters_read_failures_here() == failed_here + 1);
    /* another thread's failure is the process's, not this thread's (summarize's reason) */
    pthread_t other_reader;
    assert_int_equal(pthread_create(&other_reader, NULL, damaged_read, NULL), 0);
    void *other_saw = (void *)1;
    assert_int_equal(pthread_join(other_reader, &other_saw), 0);
    assert_null(other_saw); /* its own count rose by its own failure */
    assert_true(tp_counters_read_failures() == failed + 2);
    assert_true(tp_counters_read_failures_here() == failed_here + 1);
    tp_thread_free_counters(&p);
    assert_int_equal(open_fds(NULL), base);
    tp_cpack_set_spill(100);

    /* a quarter of the descriptors at most: past it, refused (the caller copies) */
    struct rlimit lim, few;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    few = lim;
    few.rlim_cur = 48; /* 4 summaries: a quarter of those past 32 */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &few), 0);
    f = fopen(other, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fflush(f), 0);
    tp_thread q[6];
    int held = 0, refused = 0;
    for (int i = 0; i < 6; i++) {
        memset(&q[i], 0, sizeof q[i]);
        int rc = tp_cpack_refer(&q[i], fileno(f), 0, len);
        held += rc == TPROF_OK;
        refused += rc == TPROF_ERR_IO;
    }
    assert_int_equal(held, 4);
    assert_int_equal(refused, 2);
    for (int i = 0; i < 6; i++) tp_thread_free_counters(&q[i]);
    assert_int_equal(fclose(f), 0);
    /* 32 descriptors or fewer: nothing held, nothing spilled (the command's own files) */
    few.rlim_cur = 32;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &few), 0);
    f = fopen(other, "r");
    assert_non_null(f);
    assert_int_equal(tp_cpack_refer(&q[0], fileno(f), 0, len), TPROF_ERR_IO);
    assert_int_equal(fclose(f), 0);
    tp_thread_free_counters(&q[0]);
    pack(&q[0], in, N);
    assert_int_equal(q[0].counters_packed_len, tp_counters_packed_size(&q[0])); /* in memory */
    slim_counters_are(&q[0], in, N);
    tp_thread_free_counters(&q[0]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    free(bytes);
    synth_rmtree(dir);
    assert_int_equal(open_fds(NULL), base);

    const char *tmp = getenv("TMPDIR");
    char *keep = tmp ? strdup(tmp) : NULL;
    setenv("TMPDIR", "/nonexistent/trainprof-test", 1);
    pack(&a, in, N);
    assert_true(!a.counters_spilled || !tp_counters_packed_size(&a) ||
                a.counters_packed_len == tp_counters_packed_size(&a));
    assert_int_equal(open_fds(NULL), base);
    slim_counters_are(&a, in, N);
    tp_thread_free_counters(&a);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    free(in);
    tp_cpack_set_spill(before);
}

typedef struct packer {
    const tp_counter *in;
    size_t n;
    tp_thread t;
} packer;

static void *pack_on_thread(void *arg) {
    packer *k = arg;
    pack(&k->t, k->in, k->n);
    slim_counters_are(&k->t, k->in, k->n);
    return NULL;
}

/* Threads spilling into the one file at once each get their own bytes back; the file closes
 * with the last of them (run under ThreadSanitizer too). */
static void spill_threads(void **state) {
    (void)state;
    enum { N = 8000, THREADS = 4 };
    size_t base = open_fds(NULL), before = tp_cpack_set_spill(64);
    tp_counter *in = series(N);
    packer k[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        k[i] = (packer){in + i * 100, N - (size_t)i * 100, {0}};
        assert_int_equal(pthread_create(&th[i], NULL, pack_on_thread, &k[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_non_null(k[i].t.counters_spilled);
        slim_counters_are(&k[i].t, k[i].in, k[i].n);
        tp_thread_free_counters(&k[i].t);
        assert_int_equal(open_fds(NULL), i + 1 < THREADS ? base + 1 : base);
    }
    free(in);
    tp_cpack_set_spill(before);
}

/* The report of run dir and its processes' slim blocks, with the spill threshold at. */
static char *outputs(const char *dir, size_t at, tp_sum_buf **blocks, size_t *nblocks,
                     int *spilled) {
    tp_cpack_set_spill(at);
    const char *ops[] = {dir};
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    *spilled = 0;
    for (size_t i = 0; i < run.nprocs; i++)
        for (size_t t = 0; t < run.procs[i].nthreads; t++)
            *spilled |= run.procs[i].threads[t].counters_spilled != NULL;
    tp_report_opts o;
    tp_report_opts_init(&o);
    char *buf = slim_render_str(&run, &o);
    *nblocks = run.nprocs;
    *blocks = calloc(run.nprocs, sizeof **blocks);
    assert_non_null(*blocks);
    for (size_t i = 0; i < run.nprocs; i++) {
        tp_sum_buf *m = &(*blocks)[i];
        tp_sum_slim(m, &run.procs[i], 0);
        assert_false(m->bad);
        /* decoded from a file under this threshold, copied into the temporary file or (named)
         * left in it, the block codes the same again */
        char named[600];
        snprintf(named, sizeof named, "%s/block-%zu", dir, i);
        FILE *sf = fopen(named, "w+");
        assert_non_null(sf);
        assert_int_equal(fwrite("head", 1, 4, sf), 4); /* the body at an offset */
        assert_int_equal(fwrite(m->b, 1, m->len, sf), m->len);
        for (int in_place = 0; in_place < 2; in_place++) {
            assert_int_equal(fseek(sf, 4, SEEK_SET), 0);
            tp_process q;
            uint32_t crc = 0;
            assert_int_equal(tp_summary_slim_decode_file(&run, sf, in_place,
                                                         m->len, 4096, &crc, &q),
                             1);
            for (size_t k = 0; k < q.nthreads; k++) {
                const tp_thread *th = &q.threads[k];
                uint64_t size = tp_counters_packed_size(th);
                /* left in place: nothing of it in memory nor in the temporary file */
                if (in_place && at && size >= at) assert_int_equal(th->counters_packed_len, 0);
                assert_int_equal(th->counters_spilled != NULL, at && size >= at);
            }
            tp_sum_buf again = {0};
            tp_sum_slim(&again, &q, 0);
            assert_int_equal(again.len, m->len);
            assert_memory_equal(again.b, m->b, again.len);
            free(again.b);
            tp_process_free(&q);
        }
        fclose(sf);
        unlink(named);
    }
    tp_run_free(&run);
    return buf;
}

/* The report and the slim blocks of a run whose samples were spilled are those of the run
 * held in memory, byte for byte. */
static void spill_same_outputs(void **state) {
    (void)state;
    size_t base = open_fds(NULL), before = tp_cpack_set_spill(0);
    void (*const runs[])(const char *) = {four_ranks_run, slim_long_sampler_run};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "counter-spill"), 0);
        runs[r](dir);
        tp_sum_buf *ref, *blk;
        size_t nref, nblk;
        int spilled;
        char *want = outputs(dir, 0, &ref, &nref, &spilled);
        assert_false(spilled);
        static const size_t at[] = {1, 100, 70000};
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            char *doc = outputs(dir, at[k], &blk, &nblk, &spilled);
            /* the four ranks' samples are a few hundred bytes a thread */
            if (r == 1 || at[k] == 1) assert_true(spilled);
            slim_same(dir, "spilled", "in memory", want, "spilled", doc);
            assert_int_equal(nblk, nref);
            for (size_t i = 0; i < nblk; i++) {
                assert_int_equal(blk[i].len, ref[i].len);
                assert_memory_equal(blk[i].b, ref[i].b, blk[i].len);
                free(blk[i].b);
            }
            free(blk);
            free(doc);
            assert_int_equal(open_fds(NULL), base);
        }
        for (size_t i = 0; i < nref; i++) free(ref[i].b);
        free(ref);
        free(want);
        synth_rmtree(dir);
    }
    tp_cpack_set_spill(before);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(spill_packing),
                                       cmocka_unit_test(spill_file_faults),
                                       cmocka_unit_test(spill_threads),
                                       cmocka_unit_test(spill_same_outputs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
