/*
 * test_span_store.c — spans held to a bound and written in sorted runs (span_store.h) walk
 * back in start order, every span kept once, whatever the bound: held alone, in one run or in
 * hundreds (merged 64 at a time as they come), with no file to write (in memory), on a file
 * cut short or giving back zeros (the walk ends and says so), and with each allocation
 * refused in turn (an error, never a wrong walk).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "analysis/alloc.h"
#include "analysis/span_store.h"
#include "analysis/spans.h"
#include "trainprof.h"

static uint64_t g_rs;
static uint64_t rnd(uint64_t n) {
    g_rs = g_rs * 6364136223846793005ull + 1442695040888963407ull;
    return (g_rs >> 33) % n;
}

static int by_start_end(const void *a, const void *b) {
    const tp_span *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->e < y->e ? -1 : x->e > y->e;
}

/* n spans, some empty (dropped by the store), in no order: starts drawn from few values so
 * that equal starts are common. *nkept: the non-empty ones, sorted into kept. */
static tp_span *make_spans(size_t n, tp_span **kept, size_t *nkept) {
    tp_span *v = malloc(n * sizeof *v), *k = malloc(n * sizeof *k);
    assert_non_null(v);
    assert_non_null(k);
    *nkept = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = 1000 + rnd(n * 4), len = rnd(10) == 0 ? 0 : 1 + rnd(5000);
        v[i] = (tp_span){s, s + len};
        if (len) k[(*nkept)++] = v[i];
    }
    qsort(k, *nkept, sizeof *k, by_start_end);
    *kept = k;
    return v;
}

/* The store's walk: in start order, and (sorted by end within a start) the spans kept. */
static void walk_is(const tp_span_store *st, const tp_span *kept, size_t nkept) {
    tp_span_walk *w = tp_span_walk_open(st);
    assert_non_null(w);
    tp_span *got = malloc((nkept + 1) * sizeof *got);
    size_t n = 0;
    tp_span x;
    while (tp_span_walk_next(w, &x)) {
        assert_true(n < nkept);
        if (n) assert_true(got[n - 1].s <= x.s);
        got[n++] = x;
    }
    tp_span_walk_close(w);
    assert_int_equal(n, nkept);
    qsort(got, n, sizeof *got, by_start_end);
    assert_memory_equal(got, kept, n * sizeof *got);
    free(got);
}

static tp_span_store *store_of(const tp_span *v, size_t n, size_t hold) {
    tp_span_store *st = tp_span_store_new(hold);
    assert_non_null(st);
    for (size_t i = 0; i < n; i++) assert_int_equal(tp_span_store_push(st, v[i].s, v[i].e), 0);
    tp_span_store_seal(st);
    return st;
}

/* Descriptors the process has open. */
/* 1 when fd is open. */
static int fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

static void test_walk_in_order(void **state) {
    (void)state;
    g_rs = 7;
    size_t holds[] = {1, 3, 64, 1000, 5000, 100000};
    for (size_t n = 0; n <= 5000; n = n ? n * 5 : 1) {
        size_t nkept;
        tp_span *kept, *v = make_spans(n, &kept, &nkept);
        for (size_t h = 0; h < sizeof holds / sizeof *holds; h++) {
            tp_span_store *st = store_of(v, n, holds[h]);
            assert_int_equal(tp_span_store_count(st), nkept);
            walk_is(st, kept, nkept);
            walk_is(st, kept, nkept); /* a second walk gives them again */
            assert_int_equal(tp_span_store_failed(st), 0);
            tp_span_store_free(st);
        }
        free(v);
        free(kept);
    }
    /* a walk of no store gives nothing */
    tp_span_walk *w = tp_span_walk_open(NULL);
    tp_span x;
    assert_non_null(w);
    assert_int_equal(tp_span_walk_next(w, &x), 0);
    tp_span_walk_close(w);
}

/* Held a span at a time, every 64 runs of a level merged into one of the next as they come:
 * the runs left are the digits of the runs written, in base 64. */
static void test_runs_merged(void **state) {
    (void)state;
    g_rs = 23;
    size_t n = 5000, nkept;
    tp_span *kept, *v = make_spans(n, &kept, &nkept);
    tp_span_store *st = store_of(v, n, 1);
    size_t written = nkept - 1, digits = 0; /* the last one is held */
    for (size_t w = written; w; w /= 64) digits += w % 64;
    assert_true(written > 4096);
    assert_int_equal(tp_span_store_runs(st), digits);
    walk_is(st, kept, nkept);
    tp_span_store_free(st);
    free(v);
    free(kept);
}

/* Two walks of one store side by side, one step each in turn, give the same spans. */
static void test_walks_side_by_side(void **state) {
    (void)state;
    g_rs = 11;
    size_t nkept;
    tp_span *kept, *v = make_spans(3000, &kept, &nkept);
    tp_span_store *st = store_of(v, 3000, 100);
    tp_span_walk *a = tp_span_walk_open(st), *b = tp_span_walk_open(st);
    assert_non_null(a);
    assert_non_null(b);
    tp_span x, y;
    size_t n = 0;
    while (tp_span_walk_next(a, &x)) {
        assert_int_equal(tp_span_walk_next(b, &y), 1);
        assert_int_equal(x.s, y.s);
        n++;
    }
    assert_int_equal(tp_span_walk_next(b, &y), 0);
    assert_int_equal(n, nkept);
    tp_span_walk_close(a);
    tp_span_walk_close(b);
    tp_span_store_free(st);
    free(v);
    free(kept);
}

/* Where no file can be made the spans stay in memory: the same walk, no descriptor taken. */
static void test_no_file(void **state) {
    (void)state;
    g_rs = 13;
    size_t nkept;
    tp_span *kept, *v = make_spans(4000, &kept, &nkept);
    char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", "/nonexistent/trainprof-test", 1);
    int fds = open_fds();
    tp_span_store *st = store_of(v, 4000, 50);
    assert_int_equal(open_fds(), fds);
    walk_is(st, kept, nkept);
    tp_span_store_free(st);
    if (old) setenv("TMPDIR", old, 1);
    else unsetenv("TMPDIR");
    free(old);
    free(v);
    free(kept);
}

/* The store's file damaged under it by `damage` (given the descriptor it opened, found as
 * the one new after the store was filled): the walk ends early and the store says so. */
static void damaged_fails(int (*damage)(int fd), uint64_t seed) {
    g_rs = seed;
    size_t nkept;
    tp_span *kept, *v = make_spans(4000, &kept, &nkept);
    int before[1024] = {0};
    for (int fd = 3; fd < 1024; fd++) before[fd] = fd_open(fd);
    tp_span_store *st = store_of(v, 4000, 50);
    int done = 0;
    for (int fd = 3; fd < 1024; fd++)
        if (!before[fd] && fd_open(fd)) done += damage(fd);
    assert_int_equal(done, 1);
    tp_span_walk *w = tp_span_walk_open(st); /* reads each run's first block: some may fail */
    size_t n = 0;
    tp_span x;
    while (w && tp_span_walk_next(w, &x)) n++;
    tp_span_walk_close(w);
    assert_true(n < nkept);
    assert_int_equal(tp_span_store_failed(st), 1);
    tp_span_store_free(st);
    free(v);
    free(kept);
}

static int cut_short(int fd) { return ftruncate(fd, 512) == 0; }

/* zeros where the last run lies (a page lost, a hole): spans that are empty, out of order */
static int zeroed(int fd) {
    static const char zeros[1024];
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < 4096) return 0;
    return pwrite(fd, zeros, sizeof zeros, sb.st_size - 2048) == (ssize_t)sizeof zeros;
}

/* The runs' file cut short, or giving back what was not written: a run's spans are never
 * empty, and in order. */
static void test_file_damaged(void **state) {
    (void)state;
    damaged_fails(cut_short, 17);
    damaged_fails(zeroed, 29);
}

/* Each allocation refused in turn: a push or a walk's opening says so (a refusal the store
 * works around, a sort's room, says nothing); every walk opened gives the spans kept: all
 * but those whose push was refused. */
static void test_refusals(void **state) {
    (void)state;
    g_rs = 19;
    size_t nkept;
    tp_span *kept, *v = make_spans(2000, &kept, &nkept);
    (void)tp_alloc_fail_at(ULONG_MAX);
    tp_span_store_free(store_of(v, 2000, 40));
    unsigned long total = tp_alloc_fail_at(0);
    assert_true(total > 3);
    size_t refused = 0;
    for (unsigned long k = 1; k <= total + 1; k++) {
        tp_span_store *st = NULL;
        (void)tp_alloc_fail_at(k);
        st = tp_span_store_new(40);
        size_t lost = 0;
        for (size_t i = 0; st && i < 2000; i++)
            if (tp_span_store_push(st, v[i].s, v[i].e) != TPROF_OK) lost++;
        if (st) tp_span_store_seal(st);
        tp_span_walk *w = st ? tp_span_walk_open(st) : NULL;
        (void)tp_alloc_fail_at(0);
        refused += !st || lost || !w;
        if (w) {
            size_t n = 0;
            tp_span x;
            while (tp_span_walk_next(w, &x)) n++;
            assert_int_equal(n + lost, nkept);
        }
        tp_span_walk_close(w);
        tp_span_store_free(st);
    }
    assert_true(refused > 0);
    free(v);
    free(kept);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_in_order),
        cmocka_unit_test(test_runs_merged),
        cmocka_unit_test(test_walks_side_by_side),
        cmocka_unit_test(test_no_file),
        cmocka_unit_test(test_file_damaged),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
