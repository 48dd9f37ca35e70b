/*
 * test_stress.c — the per-thread rings under load: many threads recording ranges, marks,
 * counters and steps into deliberately small rings (64 KiB, the minimum) so that events
 * are dropped, with exact accounting (events in the file + drops reported == events
 * attempted), bounded memory, threads over the max_threads limit, and many short-lived
 * threads whose rings must be recycled. Labelled "tsan" too: `make check-tsan` runs it
 * under ThreadSanitizer, where the flusher draining rings while their owners write (and
 * freeing rings of exited threads) is what is being checked.
 *
 * Each scenario runs in a forked child (one session per process; the child's memory is
 * measured without the loader's), which sends its counts back through a pipe; the parent
 * loads the rank file with tp_run_load and asserts. Work is scaled by time, not count, so
 * the test takes about the same time under sanitizers (STRESS_MS of recording).
 *
 * Memory bounds (documented here, checked in the parent):
 *  - heap in use (mallinfo2, or the sanitizer allocator's count) while 16 threads record:
 *    at most 16 x ring + 8 MiB above the level before tprof_init (rings, per-thread string
 *    tables, the process stream);
 *  - VmHWM of the child at the end: at most 16 x ring + 64 MiB (not checked under ASan or
 *    TSan, whose shadow memory and quarantine dominate RSS);
 *  - after 1600 short-lived threads have recorded and exited: heap in use at most 2 MiB
 *    above the start (their rings, 1600 x 64 KiB = 100 MiB, must have been freed).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "fmt.h"
#include "trainprof.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifdef UNDER_SANITIZER
size_t __sanitizer_get_current_allocated_bytes(void);
static int64_t heap_in_use(void) { return (int64_t)__sanitizer_get_current_allocated_bytes(); }
#else
#include <malloc.h>
static int64_t heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return (int64_t)(m.uordblks + m.hblkhd);
}
#endif

#define RING (64u * 1024u)
#define NTHREADS 16
#define STRESS_MS 1500
#define MIB (1024 * 1024)

/* What a scenario child sends back. */
typedef struct result {
    char err[200];                 /* "" when the child's own checks passed */
    uint64_t attempts;             /* events attempted, all threads */
    uint32_t nthr;
    uint32_t tid[NTHREADS];
    uint64_t thr_attempts[NTHREADS];
    uint64_t threads_created;
    int64_t heap_start, heap_peak, heap_end;
    uint64_t hwm_kb;
    double seconds;
} result;

static char g_root[PATH_MAX];
/* The run a test loaded; also freed by the per-test teardown, so that a failing
 * assertion (which longjmps out of the test) is not reported as a leak under ASan. */
static tp_run g_run;

static int free_run(void **state) {
    (void)state;
    tp_run_free(&g_run);
    return 0;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') v = strtoull(line + kl + 1, NULL, 10);
    fclose(f);
    return v;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static void scratch(char *out, size_t n, const char *tag) {
    fmt(out, n, "%s/%s-XXXXXX", g_root, tag);
    assert_non_null(mkdtemp(out));
}

static int start_session(const char *dir, uint32_t max_threads, uint32_t flush_ms,
                         result *r) {
    tprof_config cfg;
    tprof_config_init(&cfg);
    cfg.output_dir = dir;
    cfg.ring_bytes = RING;
    cfg.max_threads = max_threads;
    cfg.flush_interval_ms = flush_ms;
    cfg.sample_hz = 0; /* exact event accounting: no sampler thread */
    cfg.nvml_hz = 0;   /* nor GPU samples (on a GPU machine) */
    int rc = tprof_init(&cfg);
    if (rc != TPROF_OK)
        fmt(r->err, sizeof r->err, "tprof_init: %s", tprof_strerror(rc));
    return rc;
}

/* Runs fn(dir, r) in a child process and returns its result (asserting it exited 0). */
static void run_scenario(void (*fn)(const char *, result *), const char *dir, result *out) {
    int fds[2];
    assert_int_equal(0, pipe(fds));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        static result r;
        memset(&r, 0, sizeof r);
        uint64_t t0 = now_ns();
        fn(dir, &r);
        r.seconds = (double)(now_ns() - t0) / 1e9;
        ssize_t w = write(fds[1], &r, sizeof r);
        close(fds[1]);
        exit(w == (ssize_t)sizeof r ? 0 : 1); /* exit, not _exit: atexit and LSan run */
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t k = read(fds[0], (char *)out + got, sizeof *out - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("scenario child ended with status 0x%x (sanitizer report above?)", st);
    assert_int_equal(sizeof *out, got);
    if (out->err[0]) fail_msg("scenario: %s", out->err);
}

static void load_one(const char *dir, tp_run *run) {
    char err[PATH_MAX + 200] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc != TPROF_OK) fail_msg("tp_run_load: %s (%s)", tprof_strerror(rc), err);
    assert_int_equal(1, run->nprocs);
    assert_int_equal(0, run->nerrors);
}

/* ============================================================ 16 threads, small rings */

typedef struct worker {
    uint64_t deadline;
    uint64_t attempts;
    uint32_t tid;
    int new_names; /* a fresh name every 64 iterations (first uses while the ring is full) */
} worker;

static void *stress_worker(void *arg) {
    worker *w = arg;
    w->tid = (uint32_t)syscall(SYS_gettid);
    static const char *const names[8] = {"fwd", "bwd", "optim", "data",
                                         "allreduce", "attn", "mlp", "norm"};
    /* every fixed name is used once while the ring is still empty, so its STRING record
     * (not an event) never competes with events for room */
    uint64_t a = 0;
    char fresh[32] = "";
    for (uint64_t i = 0;; i++) {
        if ((i & 31) == 0 && now_ns() >= w->deadline) break;
        const char *nm = names[i & 7];
        if (w->new_names) {
            if ((i & 63) == 0) fmt(fresh, sizeof fresh, "fresh%llu", (unsigned long long)(i >> 6));
            nm = fresh;
        }
        tprof_range_push(nm);
        tprof_range_push("inner");
        tprof_mark("tick");
        tprof_counter("value", (double)i);
        tprof_range_pop();
        a += 5;
        if ((i & 15) == 0) {
            uint64_t id = tprof_range_start("async");
            tprof_range_end(id);
            a += 2;
        }
        if ((i & 4095) == 0) {
            tprof_step_begin(i >> 12);
            tprof_step_end(i >> 12);
            a += 2;
        }
        tprof_range_pop();
        a++;
    }
    w->attempts = a;
    return NULL;
}

static void stress_threads(const char *dir, result *r, int nthreads, int new_names,
                           uint64_t ms) {
    r->heap_start = heap_in_use();
    if (start_session(dir, 1024, 50, r) != TPROF_OK) return;
    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    uint64_t deadline = now_ns() + ms * 1000000ull;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){deadline, 0, 0, new_names};
        if (pthread_create(&th[i], NULL, stress_worker, &w[i]) != 0) {
            fmt(r->err, sizeof r->err, "pthread_create: %s", strerror(errno));
            return;
        }
    }
    r->heap_peak = r->heap_start;
    while (now_ns() < deadline) {
        int64_t h = heap_in_use();
        if (h > r->heap_peak) r->heap_peak = h;
        usleep(20000);
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        r->tid[i] = w[i].tid;
        r->thr_attempts[i] = w[i].attempts;
        r->attempts += w[i].attempts;
    }
    r->nthr = (uint32_t)nthreads;
    int rc = tprof_shutdown();
    if (rc != TPROF_OK) fmt(r->err, sizeof r->err, "tprof_shutdown: %s", tprof_strerror(rc));
    r->hwm_kb = status_kb("VmHWM");
}

static void scenario_stress(const char *dir, result *r) {
    stress_threads(dir, r, NTHREADS, 0, STRESS_MS);
}

static void scenario_new_names(const char *dir, result *r) {
    stress_threads(dir, r, 4, 1, 400);
}

static const tp_thread *thread_by_tid(const tp_process *p, uint32_t tid) {
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].os_tid == tid) return &p->threads[i];
    return NULL;
}

/* events in the file + drops reported == attempts, per thread and in total */
static void check_exact(const tp_process *p, const result *r) {
    uint64_t ev = 0, dr = 0;
    int bad = 0;
    for (uint32_t i = 0; i < r->nthr; i++) {
        const tp_thread *t = thread_by_tid(p, r->tid[i]);
        uint64_t te = t ? t->events : 0, td = t ? t->dropped : 0;
        if (te + td != r->thr_attempts[i]) {
            print_message("thread %u: %llu events + %llu dropped != %llu attempted (%+lld)\n",
                          r->tid[i], (unsigned long long)te, (unsigned long long)td,
                          (unsigned long long)r->thr_attempts[i],
                          (long long)(te + td) - (long long)r->thr_attempts[i]);
            bad = 1;
        }
        ev += te;
        dr += td;
    }
    print_message("%u threads: %llu attempted, %llu in the file, %llu dropped (process: %llu "
                  "events, %llu dropped)\n",
                  r->nthr, (unsigned long long)r->attempts, (unsigned long long)ev,
                  (unsigned long long)dr, (unsigned long long)p->events,
                  (unsigned long long)p->dropped);
    assert_int_equal(r->attempts, p->events + p->dropped);
    assert_false(bad);
}

static void test_stress_exact_accounting(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "stress");
    result r;
    run_scenario(scenario_stress, dir, &r);
    tp_run *run = &g_run;
    load_one(dir, run);
    const tp_process *p = &run->procs[0];
    assert_int_equal(1, p->complete);
    assert_int_equal(0, p->ndamage);
    check_exact(p, &r);
    /* the rings were small on purpose: some events must have been dropped, and some
     * recorded on every thread that ran (on a loaded machine a thread can be given no CPU
     * before the deadline: it attempted nothing, and check_exact holds it to that) */
    assert_true(p->dropped > 0);
    for (uint32_t i = 0; i < r.nthr; i++) {
        if (r.thr_attempts[i] == 0) continue;
        const tp_thread *t = thread_by_tid(p, r.tid[i]);
        assert_non_null(t);
        assert_true(t->events > 0);
    }
    int64_t growth = r.heap_peak - r.heap_start;
    print_message("heap in use: +%.1f MiB at peak (bound %.1f MiB); VmHWM %.1f MiB (bound "
                  "%.1f MiB); %.2f s\n",
                  (double)growth / MIB, (double)(NTHREADS * RING + 8 * MIB) / MIB,
                  (double)r.hwm_kb / 1024, (double)(NTHREADS * RING + 64 * MIB) / MIB,
                  r.seconds);
    assert_true(growth <= (int64_t)(NTHREADS * RING) + 8 * MIB);
#ifndef UNDER_SANITIZER
    assert_true(r.hwm_kb * 1024 <= (uint64_t)NTHREADS * RING + 64ull * MIB);
#endif
    tp_run_free(run);
}

/* The first use of a name on a thread writes a STRING record (not an event). When that
 * happens while the ring is full, only the event may be counted as dropped: the failed
 * STRING record is not an event. */
static void test_stress_new_names_when_full(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "newnames");
    result r;
    run_scenario(scenario_new_names, dir, &r);
    tp_run *run = &g_run;
    load_one(dir, run);
    const tp_process *p = &run->procs[0];
    assert_int_equal(1, p->complete);
    assert_true(p->dropped > 0);
    check_exact(p, &r);
    tp_run_free(run);
}

/* ============================================================ over max_threads */

#define OVER_THREADS 64
#define OVER_LIMIT 4
#define OVER_EVENTS 300

static pthread_barrier_t g_start, g_end;

static void *over_worker(void *arg) {
    worker *w = arg;
    w->tid = (uint32_t)syscall(SYS_gettid);
    /* all threads ask for a ring at the same moment, and none exits (freeing its slot)
     * before all have recorded: exactly OVER_LIMIT threads may get a ring */
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < OVER_EVENTS / 2; i++) {
        tprof_range_push("over");
        tprof_range_pop();
    }
    w->attempts = OVER_EVENTS;
    pthread_barrier_wait(&g_end);
    return NULL;
}

static void scenario_over_limit(const char *dir, result *r) {
    if (start_session(dir, OVER_LIMIT, 20, r) != TPROF_OK) return;
    pthread_barrier_init(&g_start, NULL, OVER_THREADS);
    pthread_barrier_init(&g_end, NULL, OVER_THREADS);
    static worker w[OVER_THREADS];
    pthread_t th[OVER_THREADS];
    for (int i = 0; i < OVER_THREADS; i++) {
        w[i] = (worker){0, 0, 0, 0};
        if (pthread_create(&th[i], NULL, over_worker, &w[i]) != 0) {
            fmt(r->err, sizeof r->err, "pthread_create: %s", strerror(errno));
            exit(1);
        }
    }
    for (int i = 0; i < OVER_THREADS; i++) {
        pthread_join(th[i], NULL);
        r->attempts += w[i].attempts;
    }
    r->nthr = 0; /* more threads than result slots: totals only */
    pthread_barrier_destroy(&g_start);
    pthread_barrier_destroy(&g_end);
    tprof_shutdown();
}

/* 64 threads ask for a ring at once with max_threads = 4: exactly 4 get one (the
 * registry has room for 4), the others' events are refused. A race here is timing
 * dependent, so the scenario is repeated (ASan catches an overflow at once). */
static void test_stress_threads_over_limit_registry(void **state) {
    (void)state;
    for (int attempt = 0; attempt < 20; attempt++) {
        char dir[PATH_MAX];
        scratch(dir, sizeof dir, "overlimit");
        result r;
        run_scenario(scenario_over_limit, dir, &r);
        tp_run *run = &g_run;
        load_one(dir, run);
        const tp_process *p = &run->procs[0];
        if (p->nthreads != OVER_LIMIT)
            print_message("attempt %d: %d threads, max_threads %d: %zu threads in the file, "
                          "%llu events\n",
                          attempt, OVER_THREADS, OVER_LIMIT, p->nthreads,
                          (unsigned long long)p->events);
        assert_int_equal(OVER_LIMIT, p->nthreads);
        assert_int_equal((uint64_t)OVER_LIMIT * OVER_EVENTS, p->events);
        assert_int_equal(1, p->complete);
        tp_run_free(run);
    }
}

/* Threads beyond max_threads get no ring; their events are "dropped and counted"
 * (trainprof.h), so the drops the file reports cover them. */
static void test_stress_threads_over_limit_drops(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "overdrops");
    result r;
    run_scenario(scenario_over_limit, dir, &r);
    tp_run *run = &g_run;
    load_one(dir, run);
    const tp_process *p = &run->procs[0];
    const char *meta = tp_meta(p, "threads_over_limit");
    print_message("events %llu, dropped %llu, metadata threads_over_limit=%s, "
                  "attempted %llu\n",
                  (unsigned long long)p->events, (unsigned long long)p->dropped,
                  meta ? meta : "(none)", (unsigned long long)r.attempts);
    /* the threads that got no ring are named in the metadata, and every one of their
     * events is in the drop count: recorded + dropped == attempted, exactly */
    assert_non_null(meta);
    assert_int_equal(OVER_THREADS - OVER_LIMIT, strtoull(meta, NULL, 10));
    assert_int_equal(r.attempts, p->events + p->dropped);
    tp_run_free(run);
}

/* ============================================================ short-lived threads */

#define SHORT_WAVES 100
#define SHORT_PER_WAVE 16
#define SHORT_ITERS 100 /* x4 events: ~9 KiB per thread, well inside a 64 KiB ring */

static void *short_worker(void *arg) {
    worker *w = arg;
    w->tid = (uint32_t)syscall(SYS_gettid);
    for (int i = 0; i < SHORT_ITERS; i++) {
        tprof_range_push("short");
        tprof_counter("short_i", i);
        tprof_mark("short_m");
        tprof_range_pop();
    }
    w->attempts = 4 * SHORT_ITERS;
    return NULL; /* exits while its last events may still be in its ring */
}

static void scenario_short_threads(const char *dir, result *r) {
    /* max_threads 80: more than the 64 threads started between two explicit flushes,
     * far fewer than the 1600 started in all, so exited threads' slots must be reused */
    if (start_session(dir, 80, 20, r) != TPROF_OK) return;
    r->heap_start = heap_in_use();
    r->heap_peak = r->heap_start;
    for (int wave = 0; wave < SHORT_WAVES; wave++) {
        worker w[SHORT_PER_WAVE];
        pthread_t th[SHORT_PER_WAVE];
        for (int i = 0; i < SHORT_PER_WAVE; i++) {
            w[i] = (worker){0, 0, 0, 0};
            if (pthread_create(&th[i], NULL, short_worker, &w[i]) != 0) {
                fmt(r->err, sizeof r->err, "pthread_create: %s", strerror(errno));
                return;
            }
        }
        for (int i = 0; i < SHORT_PER_WAVE; i++) {
            pthread_join(th[i], NULL);
            r->attempts += w[i].attempts;
            r->threads_created++;
        }
        if (wave % 4 == 3) tprof_flush();
        int64_t h = heap_in_use();
        if (h > r->heap_peak) r->heap_peak = h;
    }
    tprof_flush(); /* drains and frees the last exited threads */
    r->heap_end = heap_in_use();
    tprof_shutdown();
}

static void test_stress_short_lived_threads(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "short");
    result r;
    run_scenario(scenario_short_threads, dir, &r);
    tp_run *run = &g_run;
    load_one(dir, run);
    const tp_process *p = &run->procs[0];
    print_message("%llu threads, %llu events attempted; file: %zu threads, %llu events, %llu "
                  "dropped; heap +%.2f MiB at the end, +%.2f MiB at peak; %.2f s\n",
                  (unsigned long long)r.threads_created, (unsigned long long)r.attempts,
                  p->nthreads, (unsigned long long)p->events, (unsigned long long)p->dropped,
                  (double)(r.heap_end - r.heap_start) / MIB,
                  (double)(r.heap_peak - r.heap_start) / MIB, r.seconds);
    assert_int_equal(SHORT_WAVES * SHORT_PER_WAVE, r.threads_created);
    assert_null(tp_meta(p, "dropped.threads_over_limit"));
    assert_int_equal(r.threads_created, p->nthreads);
    assert_int_equal(r.attempts, p->events);
    assert_int_equal(0, p->dropped);
    assert_int_equal(1, p->complete);
    for (size_t i = 0; i < p->nthreads; i++)
        assert_int_equal(4 * SHORT_ITERS, p->threads[i].events);
    /* exited threads' rings were freed: 1600 leaked rings would be 100 MiB */
    assert_true(r.heap_end - r.heap_start <= 2 * MIB);
    assert_true(r.heap_peak - r.heap_start <= (int64_t)(80 * RING) + 8 * MIB);
    tp_run_free(run);
}

/* ============================================================ main */

static int group_setup(void **state) {
    (void)state;
    const char *t = getenv("TPROF_TEST_TMP");
    fmt(g_root, sizeof g_root, "%s/stress-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_root)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_root, strerror(errno));
        return -1;
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (getenv("REL_KEEP")) return 0;
    nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void) {
    unsetenv("TRAINPROF_DIR"); /* the test process itself never records */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stress_exact_accounting, free_run),
        cmocka_unit_test_teardown(test_stress_short_lived_threads, free_run),
        cmocka_unit_test_teardown(test_stress_threads_over_limit_registry, free_run),
        cmocka_unit_test_teardown(test_stress_threads_over_limit_drops, free_run),
        cmocka_unit_test_teardown(test_stress_new_names_when_full, free_run),
    };
    return cmocka_run_group_tests_name("stress", tests, group_setup, group_teardown);
}
