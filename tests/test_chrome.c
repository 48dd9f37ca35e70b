/*
 * test_chrome.c — cmocka tests of the Chrome/Kineto JSON exporter (src/export/chrome.c).
 *
 * Each test writes a run with known timestamps through the synthetic writer, loads it with
 * the real reader and model, exports it into memory and parses the result with cJSON, so
 * that what is checked is what a viewer would read: values, not substrings of our own
 * formatting (except where the exact text is the point, such as three decimals).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/model.h"
#include "export/chrome.h"
#include "format/format.h"
#include "export_same.h"
#include "synth.h"
#include "trainprof.h"

/* Rank 0 starts at RT0 on the wall clock and MONO0 on its monotonic clock; rank 1 starts
 * 250 ns later in wall time, with an unrelated monotonic clock (another host); the helper
 * of rank 0 starts 10 us after it on the same host, so on the same monotonic clock. */
#define RT0 1700000000000000000ull
#define MONO0 5000000000ull
#define RT1 (RT0 + 250)
#define MONO1 9000000000ull
#define RTH (RT0 + 10000)
#define MONOH (MONO0 + 10000)

/* ------------------------------------------------------------------ helpers */

#include "chrome_out.h"

/* The nth event with this phase and name (NULL name: any), or fail. */
static const cJSON *find(const chrome_out *o, const char *ph, const char *name, size_t nth) {
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) if (is(ev, ph, name) && nth-- == 0) return ev;
    fail_msg("no event ph=%s name=%s", ph, name ? name : "(any)");
    return NULL;
}

/* The async end event matching a begin, by cat and id. */
static const cJSON *find_end(const chrome_out *o, const cJSON *b) {
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) {
        if (!is(ev, "e", NULL)) continue;
        if (!strcmp(str(ev, "id"), str(b, "id")) && !strcmp(str(ev, "cat"), str(b, "cat")))
            return ev;
    }
    fail_msg("no end for async id %s", str(b, "id"));
    return NULL;
}

static const cJSON *meta(const chrome_out *o, const char *what, double pid, double tid) {
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) {
        if (is(ev, "M", what) && num(ev, "pid") == pid && (tid < 0 || num(ev, "tid") == tid))
            return ev;
    }
    fail_msg("no %s metadata for pid %.0f tid %.0f", what, pid, tid);
    return NULL;
}

static long long ns(double us) { return llround(us * 1000.0); }

static void assert_us(const cJSON *ev, const char *key, long long want_ns) {
    assert_int_equal(ns(num(ev, key)), want_ns);
}

typedef struct span {
    double pid, tid;
    long long s, e;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->e > y->e ? -1 : x->e < y->e;
}

typedef struct aev {
    const char *id;
    char ph;
    double ts;
} aev;

static int cmp_aev(const void *a, const void *b) {
    const aev *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : x->ph - y->ph;
}

/* What Perfetto insists on: on every (pid, tid), X events nest or are disjoint; and every
 * async begin has exactly one end with the same id, not earlier. */
static void assert_well_formed(const chrome_out *o) {
    size_t n = (size_t)cJSON_GetArraySize(o->events), k = 0, na = 0;
    span *sp = calloc(n ? n : 1, sizeof *sp);
    aev *av = calloc(n ? n : 1, sizeof *av);
    assert_non_null(sp);
    assert_non_null(av);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) {
        assert_non_null(str(ev, "ph"));
        if (is(ev, "X", NULL)) {
            long long s = ns(num(ev, "ts"));
            sp[k++] = (span){num(ev, "pid"), num(ev, "tid"), s, s + ns(num(ev, "dur"))};
            assert_true(num(ev, "dur") >= 0);
        }
        if (is(ev, "b", NULL) || is(ev, "e", NULL)) {
            assert_string_equal(str(ev, "cat"), "async_range");
            assert_non_null(str(ev, "id"));
            av[na++] = (aev){str(ev, "id"), str(ev, "ph")[0], num(ev, "ts")};
        }
    }
    qsort(av, na, sizeof *av, cmp_aev);
    assert_int_equal(na % 2, 0);
    for (size_t i = 0; i < na; i += 2) {
        assert_int_equal(av[i].ph, 'b');
        assert_int_equal(av[i + 1].ph, 'e');
        assert_string_equal(av[i].id, av[i + 1].id);
        assert_true(av[i + 1].ts >= av[i].ts);
        if (i + 2 < na) assert_string_not_equal(av[i].id, av[i + 2].id);
    }
    free(av);
    qsort(sp, k, sizeof *sp, cmp_span);
    long long *stack = calloc(k ? k : 1, sizeof *stack);
    size_t d = 0;
    for (size_t i = 0; i < k; i++) {
        if (i && (sp[i].pid != sp[i - 1].pid || sp[i].tid != sp[i - 1].tid)) d = 0;
        while (d && stack[d - 1] <= sp[i].s) d--;
        if (d && sp[i].e > stack[d - 1])
            fail_msg("X events overlap without nesting on pid %.0f tid %.0f at %lld ns",
                     sp[i].pid, sp[i].tid, sp[i].s);
        stack[d++] = sp[i].e;
    }
    free(stack);
    free(sp);
    /* the window ends last, at the latest time of any event */
    const cJSON *last = cJSON_GetArrayItem(o->events, (int)n - 1);
    assert_true(is(last, "i", "Record Window End"));
    assert_string_equal(str(last, "s"), "g");
    double maxt = 0;
    cJSON_ArrayForEach(ev, o->events) {
        if (is(ev, "M", NULL)) continue;
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
        double t = num(ev, "ts") + (cJSON_IsNumber(dur) ? dur->valuedouble : 0);
        if (t > maxt) maxt = t;
    }
    assert_int_equal(ns(num(last, "ts")), ns(maxt));
    /* nothing unescaped: a raw control byte would be invalid JSON for strict readers */
    for (const char *c = o->text; *c; c++) assert_true((unsigned char)*c >= 0x20 || *c == '\n');
}

/* ------------------------------------------------------------------ the main fixture */

/* A two-rank run plus a helper of rank 0 whose OS pid (1) equals rank 1's number. */
static void write_main_run(const char *dir) {
    synth_file *f = synth_open(dir, "nodeA", 4321, RT0, MONO0);
    assert_non_null(f);
    synth_rank(f, 0, 2);
    synth_meta(f, "backend", "nccl");
    synth_domain(f, 1, "dA");
    synth_domain(f, 2, "dB");
    synth_category(f, 0, 3, "io");
    synth_thread(f, 1, 4321);
    synth_thread(f, 2, 4330);
    synth_thread_name(f, 1, MONO0, 4321, "main");
    synth_push(f, 1, MONO0 + 1000000, "outer", 0, 3);
    synth_push(f, 1, MONO0 + 1500000, "inner", 0, 7);
    synth_pop(f, 1, MONO0 + 2000000, 0);
    synth_pop(f, 1, MONO0 + 3500500, 0);
    /* two domains, so two stacks: A and B overlap without nesting */
    synth_push(f, 1, MONO0 + 4000000, "A", 1, 0);
    synth_push(f, 1, MONO0 + 5000000, "B", 2, 0);
    synth_pop(f, 1, MONO0 + 6000000, 1);
    synth_pop(f, 1, MONO0 + 7000000, 2);
    synth_mark(f, 1, MONO0 + 7500000, "checkpoint", 0, 0);
    synth_counter(f, 1, MONO0 + 7600000, "loss", 0.1);
    synth_counter(f, 1, MONO0 + 7700000, "bad", NAN);
    synth_counter(f, 1, MONO0 + 7800000, "inf", INFINITY);
    synth_start(f, 1, MONO0 + 8000000, 42, "io_wait", 0, 0);
    /* the end lands in the file before its start, as a flush order can make it */
    synth_end(f, 2, MONO0 + 9000000, 42);
    synth_push(f, 2, MONO0 + 8100000, "w", 0, 0);
    synth_pop(f, 2, MONO0 + 8200000, 0);
    synth_flush_thread(f, 2);
    synth_end_of_file(f, MONO0 + 10000000, 0);
    assert_int_equal(synth_close(f), 0);

    f = synth_open(dir, "nodeB", 5555, RT1, MONO1);
    assert_non_null(f);
    synth_rank(f, 1, 2);
    synth_thread(f, 1, 5555);
    synth_thread_name(f, 1, MONO1, 5555, "main");
    synth_push(f, 1, MONO1 + 1000000, "fwd", 0, 0);
    synth_pop(f, 1, MONO1 + 2000000, 0);
    synth_end_of_file(f, MONO1 + 3000000, 0);
    assert_int_equal(synth_close(f), 0);

    synth_header h = {"nodeA", 1, 4321, RTH, MONOH, "synth-run", NULL, NULL};
    f = synth_open_ex(dir, &h);
    assert_non_null(f);
    synth_thread(f, 1, 1);
    synth_push(f, 1, MONOH + 100, "load", 0, 0);
    synth_pop(f, 1, MONOH + 200, 0);
    synth_end_of_file(f, MONOH + 300, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_merged(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-merged"), 0);
    write_main_run(dir);
    tp_run run;
    load(dir, &run);
    assert_int_equal(run.nprocs, 3);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);

    assert_int_equal(num(o.root, "schemaVersion"), 1);
    assert_string_equal(str(o.root, "displayTimeUnit"), "ms");
    assert_non_null(str(o.root, "traceName"));
    /* a 1.7e18 base does not survive a double: check the text */
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000000000000,"));
    assert_null(cJSON_GetObjectItemCaseSensitive(o.root, "distributedInfo"));

    /* outer, inner, A on rank 0's main thread; w on its worker; fwd; the helper's load */
    assert_int_equal(count(&o, "X", NULL), 6);
    const cJSON *outer = find(&o, "X", "outer", 0);
    assert_string_equal(str(outer, "cat"), "user_annotation");
    assert_int_equal(num(outer, "pid"), 0);
    assert_int_equal(num(outer, "tid"), 4321);
    assert_us(outer, "ts", 1000000);
    assert_us(outer, "dur", 2500500);
    assert_non_null(strstr(o.text, "\"ts\":1000.000,\"dur\":2500.500"));
    assert_string_equal(cJSON_GetStringValue(arg(outer, "category")), "io");
    assert_null(arg(outer, "domain"));

    const cJSON *inner = find(&o, "X", "inner", 0);
    assert_us(inner, "ts", 1500000);
    assert_us(inner, "dur", 500000);
    assert_true(cJSON_IsNumber(arg(inner, "category")));
    assert_int_equal(arg(inner, "category")->valuedouble, 7);
    assert_true(num(inner, "ts") >= num(outer, "ts"));
    assert_true(num(inner, "ts") + num(inner, "dur") <= num(outer, "ts") + num(outer, "dur"));

    /* A stays X, B (overlapping A without nesting) becomes an async pair */
    const cJSON *a = find(&o, "X", "A", 0);
    assert_string_equal(cJSON_GetStringValue(arg(a, "domain")), "dA");
    assert_us(a, "ts", 4000000);
    assert_us(a, "dur", 2000000);
    assert_int_equal(count(&o, "X", "B"), 0);
    assert_int_equal(count(&o, "b", "B"), 1);
    const cJSON *bb = find(&o, "b", "B", 0);
    assert_string_equal(cJSON_GetStringValue(arg(bb, "domain")), "dB");
    assert_int_equal(num(bb, "tid"), 4321);
    assert_us(bb, "ts", 5000000);
    assert_us(find_end(&o, bb), "ts", 7000000);

    /* a start/end range that ended on the other thread */
    assert_int_equal(count(&o, "X", "io_wait"), 0);
    const cJSON *io = find(&o, "b", "io_wait", 0);
    assert_int_equal(num(io, "tid"), 4321);
    assert_us(io, "ts", 8000000);
    const cJSON *io_e = find_end(&o, io);
    assert_int_equal(num(io_e, "tid"), 4330);
    assert_us(io_e, "ts", 9000000);
    assert_string_not_equal(str(io, "id"), str(bb, "id"));

    const cJSON *mk = find(&o, "i", "checkpoint", 0);
    assert_string_equal(str(mk, "s"), "t");
    assert_us(mk, "ts", 7500000);

    /* counters: the exact value back; NaN and Inf skipped */
    const cJSON *loss = find(&o, "C", "loss", 0);
    assert_true(arg(loss, "value")->valuedouble == 0.1);
    assert_int_equal(count(&o, "C", "bad"), 0);
    assert_int_equal(count(&o, "C", "inf"), 0);

    /* rank 1: pid = rank, times on the shared wall clock (starts 250 ns after the base) */
    const cJSON *fwd = find(&o, "X", "fwd", 0);
    assert_int_equal(num(fwd, "pid"), 1);
    assert_int_equal(num(fwd, "tid"), 5555);
    assert_us(fwd, "ts", 1000250);
    assert_us(fwd, "dur", 1000000);

    /* the helper keeps its OS pid unless it collides with a rank: pid 1 is rank 1 here */
    const cJSON *ld = find(&o, "X", "load", 0);
    double hpid = num(ld, "pid");
    assert_true(hpid != 0 && hpid != 1);
    assert_us(ld, "ts", 10100);
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "process_name", hpid, -1), "name")),
                        "helper of rank 0 (nodeA:1)");

    /* metadata for every process and thread */
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "process_name", 0, -1), "name")),
                        "rank 0 (nodeA:4321)");
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "process_name", 1, -1), "name")),
                        "rank 1 (nodeB:5555)");
    assert_int_equal(arg(meta(&o, "process_sort_index", 1, -1), "sort_index")->valuedouble, 1);
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "thread_name", 0, 4321), "name")),
                        "main");
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "thread_name", 0, 4330), "name")),
                        "thread 4330");
    assert_int_equal(count(&o, "M", "process_name"), 3);
    assert_int_equal(count(&o, "M", "thread_name"), 4);

    /* the last event is io_wait's end on rank 0 */
    assert_us(cJSON_GetArrayItem(o.events, cJSON_GetArraySize(o.events) - 1), "ts", 9000000);

    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

static void test_per_rank(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-rank"), 0);
    write_main_run(dir);
    tp_run run;
    load(dir, &run);

    chrome_out o = export_run(&run, 0, NULL);
    assert_well_formed(&o);
    const cJSON *di = cJSON_GetObjectItemCaseSensitive(o.root, "distributedInfo");
    assert_true(cJSON_IsObject(di));
    assert_string_equal(str(di, "backend"), "nccl");
    assert_int_equal(num(di, "rank"), 0);
    assert_int_equal(num(di, "world_size"), 2);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o.root, "deviceProperties")));
    assert_int_equal(num(o.root, "schemaVersion"), 1);
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000000000000,"));
    /* OS pids; the helper of rank 0 comes along with its own pid; rank 1 stays out */
    assert_int_equal(num(find(&o, "X", "outer", 0), "pid"), 4321);
    assert_us(find(&o, "X", "outer", 0), "ts", 1000000);
    assert_int_equal(num(find(&o, "X", "load", 0), "pid"), 1);
    assert_int_equal(count(&o, "X", "fwd"), 0);
    assert_int_equal(count(&o, "M", "process_name"), 2);
    /* the helper sorts next to the rank it helps */
    assert_int_equal(arg(meta(&o, "process_sort_index", 1, -1), "sort_index")->valuedouble, 0);
    out_free(&o);

    o = export_run(&run, 1, NULL);
    assert_well_formed(&o);
    di = cJSON_GetObjectItemCaseSensitive(o.root, "distributedInfo");
    assert_string_equal(str(di, "backend"), "unknown");
    assert_int_equal(num(di, "rank"), 1);
    assert_int_equal(num(di, "world_size"), 2);
    /* the base is this rank's own start, so its first range is at exactly 1 ms */
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000000000250,"));
    const cJSON *fwd = find(&o, "X", "fwd", 0);
    assert_int_equal(num(fwd, "pid"), 5555);
    assert_us(fwd, "ts", 1000000);
    assert_int_equal(count(&o, "X", NULL), 1);
    out_free(&o);

    FILE *f = open_memstream(&o.text, &o.len);
    assert_int_equal(tp_export_chrome_rank(&run, 7, f, NULL), TPROF_ERR_NOT_FOUND);
    fclose(f);
    free(o.text);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* ------------------------------------------------------------------ steps */

static void test_api_steps(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-steps"), 0);
    synth_file *f = synth_open(dir, "n", 100, RT0, MONO0);
    synth_thread(f, 1, 100);
    synth_push(f, 1, MONO0 + 500000, "around", 0, 0);
    synth_step_begin(f, 1, MONO0 + 1000000, 5);
    synth_push(f, 1, MONO0 + 1100000, "inside", 0, 0);
    synth_pop(f, 1, MONO0 + 1200000, 0);
    synth_push(f, 1, MONO0 + 1500000, "straddle", 0, 0);
    synth_step_end(f, 1, MONO0 + 2000000, 5);
    synth_step_begin(f, 1, MONO0 + 2000000, 6);
    synth_pop(f, 1, MONO0 + 2500000, 0);
    synth_step_end(f, 1, MONO0 + 3000000, 6);
    synth_pop(f, 1, MONO0 + 3500000, 0);
    synth_end_of_file(f, MONO0 + 4000000, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load(dir, &run);
    tp_export_opts opts = {NULL, 1};
    chrome_out o = export_run(&run, 0, &opts);
    assert_well_formed(&o);

    const cJSON *s5 = find(&o, "X", "ProfilerStep#5", 0);
    assert_string_equal(str(s5, "cat"), "user_annotation");
    assert_int_equal(num(s5, "tid"), 100);
    assert_int_equal(num(s5, "pid"), 100);
    assert_us(s5, "ts", 1000000);
    assert_us(s5, "dur", 1000000);
    assert_true(cJSON_IsTrue(arg(s5, "warmup")));
    const cJSON *s6 = find(&o, "X", "ProfilerStep#6", 0);
    assert_us(s6, "ts", 2000000);
    assert_us(s6, "dur", 1000000);
    assert_null(arg(s6, "warmup"));
    /* steps win: the range crossing the step boundary is demoted, the others stay X */
    assert_int_equal(count(&o, "X", "straddle"), 0);
    assert_int_equal(count(&o, "b", "straddle"), 1);
    assert_int_equal(count(&o, "X", "inside"), 1);
    assert_int_equal(count(&o, "X", "around"), 1);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);

    /* a ProfilerStep range is already in the trace: no duplicate */
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-steps2"), 0);
    f = synth_open(dir, "n", 100, RT0, MONO0);
    synth_thread(f, 1, 100);
    synth_push(f, 1, MONO0 + 1000, "ProfilerStep#0", 0, 0);
    synth_pop(f, 1, MONO0 + 2000, 0);
    synth_end_of_file(f, MONO0 + 3000, 0);
    assert_int_equal(synth_close(f), 0);
    load(dir, &run);
    o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", "ProfilerStep#0"), 1);
    assert_int_equal(count(&o, "X", NULL), 1);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}


/* ------------------------------------------------------------------ selection */

/* Two ranks on one host (one clock), 6 API steps of 10 ms each, a "work" range at 1-3 ms of
 * every step and a counter at each step's start. Selected: rank 1, steps 2-3 -> rank 1's two
 * "work" ranges of those steps, its ProfilerStep#2/#3 and the counters at 20 and 30 ms,
 * nothing of rank 0; seconds 0.015-0.025 -> the work ranges at 21-23 ms of both ranks. */
static void write_sel_run(const char *dir) {
    for (uint32_t r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, "n", 200 + r, RT0, MONO0);
        synth_thread(f, 1, 200 + r);
        synth_rank(f, r, 2);
        for (uint32_t k = 0; k < 6; k++) {
            uint64_t b = MONO0 + k * 10000000ull;
            synth_step_begin(f, 1, b, k);
            synth_counter(f, 1, b, "loss", 1.0 + k);
            synth_push(f, 1, b + 1000000, "work", 0, 0);
            synth_pop(f, 1, b + 3000000, 0);
            synth_step_end(f, 1, b + 10000000, k);
        }
        synth_end_of_file(f, MONO0 + 61000000, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

static void test_selection(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-sel"), 0);
    write_sel_run(dir);
    tp_run run;
    load(dir, &run);
    const int one[] = {1};
    tp_export_opts opts = {NULL, 1, NULL, one, 1, 1, 0, 2, 3, 0, 0};
    chrome_out o = export_run(&run, -1, &opts);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", "work"), 2);
    assert_int_equal(count(&o, "X", "ProfilerStep#2"), 1);
    assert_int_equal(count(&o, "X", "ProfilerStep#3"), 1);
    assert_int_equal(count(&o, "X", "ProfilerStep#1"), 0);
    assert_int_equal(count(&o, "X", "ProfilerStep#4"), 0);
    assert_int_equal(count(&o, "C", "loss"), 2); /* at the starts of steps 2 and 3 */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o.events) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        if (!cJSON_IsString(ph) || !strcmp(ph->valuestring, "M")) continue;
        assert_int_equal(num(ev, "pid"), 1); /* rank 1 only */
    }
    assert_us(find(&o, "X", "work", 0), "ts", 21000000);
    out_free(&o);
    /* seconds 0.015-0.025 of the trace: steps 1 and 2 overlap it, on both ranks; the work
     * ranges of steps 1 (11-13 ms) and 2 (21-23 ms) only */
    tp_export_opts t = {NULL, 1, NULL, NULL, 0, 0, 1, 0, 0, 0.015, 0.025};
    o = export_run(&run, -1, &t);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", "work"), 2); /* 21-23 ms, once on each rank */
    out_free(&o);
    /* steps no rank has: nothing to export */
    tp_export_opts none = {NULL, 1, NULL, NULL, 0, 1, 0, 40, 41, 0, 0};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(tp_export_chrome(&run, f, &none), TPROF_ERR_NOT_FOUND);
    fclose(f);
    free(text);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* ------------------------------------------------------------------ awkward input */

static void test_escaping(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-esc"), 0);
    static const char nasty[] = "q\"b\\s\nn\x01" "c\xff\xfe" "e";
    static const char clean[] = "q\"b\\s\nn\x01" "c\xEF\xBF\xBD\xEF\xBF\xBD" "e";
    synth_header h = {"h\xffx\"y", 77, 1, RT0, MONO0, "r", NULL, "esc.tprof"};
    synth_file *f = synth_open_ex(dir, &h);
    synth_domain(f, 1, "dom\"ain\\");
    synth_category(f, 1, 2, "cat\tx");
    synth_thread(f, 1, 77);
    synth_thread_name(f, 1, MONO0, 77, "th\x02\"read\xc3");
    synth_push(f, 1, MONO0 + 1000, nasty, 1, 2);
    synth_pop(f, 1, MONO0 + 2000, 1);
    synth_mark(f, 1, MONO0 + 2500, nasty, 0, 0);
    synth_counter(f, 1, MONO0 + 2600, nasty, -1.5e300);
    synth_string(f, 1, 1, "by\x7fid");
    synth_push_sid(f, 1, MONO0 + 3000, 1, 0, 0);
    synth_pop(f, 1, MONO0 + 4000, 0);
    synth_end_of_file(f, MONO0 + 5000, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load(dir, &run);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    const cJSON *x = find(&o, "X", clean, 0);
    assert_string_equal(cJSON_GetStringValue(arg(x, "domain")), "dom\"ain\\");
    assert_string_equal(cJSON_GetStringValue(arg(x, "category")), "cat\tx");
    assert_int_equal(count(&o, "i", clean), 1);
    assert_true(arg(find(&o, "C", clean, 0), "value")->valuedouble == -1.5e300);
    assert_int_equal(count(&o, "X", "by\x7fid"), 1);
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "process_name", 0, -1), "name")),
                        "rank 0 (h\xEF\xBF\xBDx\"y:77)");
    assert_string_equal(cJSON_GetStringValue(arg(meta(&o, "thread_name", 0, 77), "name")),
                        "th\x02\"read\xEF\xBF\xBD");
    out_free(&o);

    o = export_run(&run, 0, NULL);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", clean), 1);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* No END_OF_FILE: ranges left open end at the last event and are flagged; an open range
 * that outlives its closed parent-in-time no longer nests and becomes b/e. */
static void test_unclosed(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-open"), 0);
    synth_file *f = synth_open(dir, "n", 9, RT0, MONO0);
    synth_thread(f, 1, 9);
    synth_push(f, 1, MONO0 + 500000, "root", 0, 0);
    synth_push(f, 1, MONO0 + 1000000, "p", 1, 0);
    synth_push(f, 1, MONO0 + 2000000, "u", 2, 0);
    synth_pop(f, 1, MONO0 + 5000000, 1);
    synth_mark(f, 1, MONO0 + 6000000, "last", 0, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load(dir, &run);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    const cJSON *root = find(&o, "X", "root", 0);
    assert_true(cJSON_IsTrue(arg(root, "unclosed")));
    assert_us(root, "ts", 500000);
    assert_us(root, "dur", 5500000);
    const cJSON *p = find(&o, "X", "p", 0);
    assert_null(arg(p, "unclosed"));
    assert_int_equal(count(&o, "X", "u"), 0);
    const cJSON *u = find(&o, "b", "u", 0);
    assert_true(cJSON_IsTrue(arg(u, "unclosed")));
    assert_us(find_end(&o, u), "ts", 6000000);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* Two threads that had the same OS tid share one row: their ranges must nest together. */
static void test_tid_reuse(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-tid"), 0);
    synth_file *f = synth_open(dir, "n", 9, RT0, MONO0);
    synth_thread(f, 1, 777);
    synth_thread(f, 2, 777);
    synth_push(f, 1, MONO0 + 1000, "first", 0, 0);
    synth_pop(f, 1, MONO0 + 5000, 0);
    synth_push(f, 2, MONO0 + 3000, "second", 0, 0);
    synth_pop(f, 2, MONO0 + 8000, 0);
    synth_end_of_file(f, MONO0 + 9000, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load(dir, &run);
    assert_int_equal(run.procs[0].nthreads, 2);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", "first"), 1);
    assert_int_equal(count(&o, "b", "second"), 1);
    assert_int_equal(count(&o, "M", "thread_name"), 1);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* Many ranges on three interleaved domain stacks: every X nests, and every range is
 * written exactly once, as X or as an async pair. */
static void test_many(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-many"), 0);
    synth_file *f = synth_open(dir, "n", 9, RT0, MONO0);
    synth_thread(f, 1, 9);
    uint32_t rng = 12345;
    int depth[3] = {0, 0, 0};
    size_t pushes = 0;
    uint64_t t = MONO0;
    for (int i = 0; i < 20000; i++) {
        rng = rng * 1103515245u + 12345u;
        uint32_t d = (rng >> 16) % 3;
        t += 1 + (rng >> 8) % 1000;
        if (depth[d] < 6 && ((rng >> 4) & 1)) {
            synth_push(f, 1, t, d == 0 ? "r0" : d == 1 ? "r1" : "r2", d, 0);
            depth[d]++;
            pushes++;
        } else if (depth[d]) {
            synth_pop(f, 1, t, d);
            depth[d]--;
        }
        if (i % 1000 == 999) synth_flush(f); /* many chunks, as a real run has */
    }
    synth_end_of_file(f, t + 1, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load(dir, &run);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    size_t x = count(&o, "X", NULL), b = count(&o, "b", NULL);
    assert_int_equal(x + b, pushes);
    assert_true(x > 0 && b > 0);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* A torn tail and a flipped byte lose their chunks; the export stays valid JSON. */
static void test_damaged(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-dmg"), 0);
    synth_file *f = synth_open(dir, "n", 9, RT0, MONO0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 9);
    synth_push(f, 1, MONO0 + 1000, "kept", 0, 0);
    synth_pop(f, 1, MONO0 + 2000, 0);
    synth_flush(f);
    uint64_t second = synth_offset(f);
    synth_push(f, 1, MONO0 + 3000, "flipped", 0, 0);
    synth_pop(f, 1, MONO0 + 4000, 0);
    synth_flush(f);
    uint64_t third = synth_offset(f);
    synth_push(f, 1, MONO0 + 5000, "torn", 0, 0);
    synth_pop(f, 1, MONO0 + 6000, 0);
    synth_flush(f);
    char path[600];
    snprintf(path, sizeof path, "%s", synth_path(f));
    assert_int_equal(synth_close(f), 0);
    assert_int_equal(synth_flip_byte(path, (int64_t)second + 40, 0x20), 0);
    assert_int_equal(synth_truncate(path, (int64_t)third + 40), 0);
    assert_int_equal(synth_file_size(path), (int64_t)third + 40);
    tp_run run;
    load(dir, &run);
    assert_true(run.procs[0].ndamage >= 2);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    assert_int_equal(count(&o, "X", "kept"), 1);
    assert_int_equal(count(&o, "X", "flipped") + count(&o, "b", "flipped"), 0);
    assert_int_equal(count(&o, "X", "torn") + count(&o, "b", "torn"), 0);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

static void test_write_error(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-io"), 0);
    write_main_run(dir);
    tp_run run;
    load(dir, &run);
    /* a stream that refuses writes, and a device that is always full */
    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    assert_int_equal(tp_export_chrome(&run, ro, NULL), TPROF_ERR_IO);
    fclose(ro);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(tp_export_chrome_rank(&run, 0, full, NULL), TPROF_ERR_IO);
        fclose(full);
    }
    assert_int_equal(tp_export_chrome(&run, NULL, NULL), TPROF_ERR_INVALID_ARG);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

/* ------------------------------------------------------------------ clocks across hosts */

#define MSEC 1000000ull
#define SKEW (250 * MSEC) /* hostB's realtime clock runs this far ahead */
#define B_START (3 * MSEC) /* hostB's rank starts this long after hostA's, in true time */

/* An MPI barrier of rank `rank` (of 2) on communicator 0xb0, entered at `start`, left at
 * `end` (monotonic of its file): host-timed, so its end counts for alignment. */
static void barrier(synth_file *f, uint32_t seq, uint32_t rank, uint64_t start, uint64_t end) {
    synth_mpi_barrier(f, 1, 0xb0, seq, rank, 2, start, end);
}

/* Two hosts: rank 0 on hostA (pair RT0, MONO0), rank 1 on hostB, which starts B_START later
 * in true time and whose realtime clock is SKEW ahead. Times below are true ns after RT0.
 * Barrier k (1..5) is left by both ranks at 10k + 2 ms; rank 0 enters it at 10k ms, rank 1
 * at 10k + 1 ms. Rank 0's "produce" is [20, 20.5] ms, rank 1's "consume" [20.6, 21] ms. */
static void write_two_hosts(const char *dir) {
    synth_file *a = synth_open(dir, "hostA", 100, RT0, MONO0);
    synth_file *b = synth_open(dir, "hostB", 200, RT0 + B_START + SKEW, MONO1);
    assert_non_null(a);
    assert_non_null(b);
    synth_rank(a, 0, 2);
    synth_rank(b, 1, 2);
    synth_thread(a, 1, 100);
    synth_thread(b, 1, 200);
#define TA(t) (MONO0 + (t))
#define TB(t) (MONO1 + (t) - B_START)
    for (uint32_t k = 1; k <= 5; k++) {
        uint64_t e = 10 * MSEC * k + 2 * MSEC;
        barrier(a, k, 0, TA(10 * MSEC * k), TA(e));
        barrier(b, k, 1, TB(10 * MSEC * k + MSEC), TB(e));
    }
    synth_push(a, 1, TA(20 * MSEC), "produce", 0, 0);
    synth_pop(a, 1, TA(20 * MSEC + 500000), 0);
    synth_push(b, 1, TB(20 * MSEC + 600000), "consume", 0, 0);
    synth_pop(b, 1, TB(21 * MSEC), 0);
    synth_end_of_file(a, TA(60 * MSEC), 0);
    synth_end_of_file(b, TB(60 * MSEC), 0);
#undef TA
#undef TB
    assert_int_equal(synth_close(a), 0);
    assert_int_equal(synth_close(b), 0);
}

/* The end (ns after the base) of the Barrier with sequence number seq on pid. */
static long long barrier_end(const chrome_out *o, double pid, double seq) {
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) {
        if (!is(ev, "X", "Barrier") || num(ev, "pid") != pid) continue;
        if (cJSON_GetNumberValue(arg(ev, "seq")) == seq)
            return ns(num(ev, "ts")) + ns(num(ev, "dur"));
    }
    fail_msg("no Barrier seq %.0f on pid %.0f", seq, pid);
    return 0;
}

static void test_two_hosts(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-hosts"), 0);
    write_two_hosts(dir);
    tp_run run;
    load(dir, &run);
    chrome_out o = export_run(&run, -1, NULL);
    assert_well_formed(&o);
    /* the base is rank 0's start; every barrier ends at the same time on both ranks */
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000000000000,"));
    for (int k = 1; k <= 5; k++) {
        long long e0 = barrier_end(&o, 0, k), e1 = barrier_end(&o, 1, k);
        assert_int_equal(e0, (long long)(10 * MSEC * (unsigned)k + 2 * MSEC));
        assert_true(llabs(e1 - e0) < (long long)MSEC);
        assert_int_equal(e1, e0);
    }
    /* the order across hosts is the true one, at the true times */
    const cJSON *prod = find(&o, "X", "produce", 0), *cons = find(&o, "X", "consume", 0);
    assert_us(prod, "ts", 20 * MSEC);
    assert_us(cons, "ts", 20 * MSEC + 600000);
    assert_true(num(cons, "ts") > num(prod, "ts") + num(prod, "dur"));
    /* the offsets and how they were found */
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(o.root, "trainprof.clock_offsets");
    assert_int_equal((long long)num(off, "hostA"), 0);
    assert_int_equal((long long)num(off, "hostB"), -(long long)SKEW);
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o.root, "trainprof.clock_alignment");
    assert_string_equal(str(al, "status"), "aligned");
    const cJSON *hb = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(al, "hosts"), 1);
    assert_string_equal(str(hb, "host"), "hostB");
    assert_string_equal(str(hb, "found_by"), "matched collectives");
    assert_int_equal(num(hb, "collectives_used"), 5);
    const cJSON *bad = cJSON_GetObjectItemCaseSensitive(al, "unusable_clock_pairs");
    assert_int_equal(cJSON_GetArraySize(bad), 0);
    out_free(&o);

    /* a rank's own file is on the same clock */
    o = export_run(&run, 1, NULL);
    cons = find(&o, "X", "consume", 0);
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000003000000,"));
    assert_us(cons, "ts", 20 * MSEC + 600000 - B_START);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    synth_rmtree(dir);
}

/* One host, two ranks on one monotonic clock: rank 0's file has a zeroed start pair, rank 1's
 * is good (RT0, MONO0). Rank 0 is placed through rank 1's pair, and named. */
static void test_zeroed_pair(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-zeroed"), 0);
    synth_file *z = synth_open(dir, "hostZ", 300, 0, 0);
    synth_file *g = synth_open(dir, "hostZ", 301, RT0, MONO0);
    assert_non_null(z);
    assert_non_null(g);
    synth_rank(z, 0, 2);
    synth_rank(g, 1, 2);
    synth_push(z, 1, MONO0 + 1000000, "r0", 0, 0);
    synth_pop(z, 1, MONO0 + 2000000, 0);
    synth_push(g, 1, MONO0 + 1500000, "r1", 0, 0);
    synth_pop(g, 1, MONO0 + 2500000, 0);
    synth_end_of_file(z, MONO0 + 3000000, 0);
    synth_end_of_file(g, MONO0 + 3000000, 0);
    assert_int_equal(synth_close(z), 0);
    assert_int_equal(synth_close(g), 0);
    tp_run run;
    load(dir, &run);

    /* the report's result names it, with what placed it */
    tp_clocks c;
    tp_clocks_result r;
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(tp_clocks_result_fill(&r, &c), TPROF_OK);
    tp_clocks_free(&c);
    const char *want = "clock pair of hostZ:300 is not usable (realtime and monotonic are zero): "
                       "placed by the clock pair of hostZ:301 (same host, same monotonic clock)";
    assert_int_equal(r.nissues, 1);
    assert_string_equal(r.issues[0].line, want);
    assert_int_equal(r.issues[0].rank, 0);

    tp_export_opts eo = {NULL, 1, &r};
    chrome_out o = export_run(&run, -1, &eo);
    assert_well_formed(&o);
    assert_non_null(strstr(o.text, "\"baseTimeNanoseconds\": 1700000000000000000,"));
    assert_us(find(&o, "X", "r0", 0), "ts", 1000000);
    assert_us(find(&o, "X", "r1", 0), "ts", 1500000);
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o.root, "trainprof.clock_alignment");
    const cJSON *bad = cJSON_GetObjectItemCaseSensitive(al, "unusable_clock_pairs");
    assert_int_equal(cJSON_GetArraySize(bad), 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(bad, 0)), want);
    out_free(&o);
    tp_clocks_result_free(&r);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    synth_rmtree(dir);
}

/* Each impossible pair is named for what is wrong with it; a plausible one is not. */
static void test_pair_problems(void **state) {
    (void)state;
    tp_process p;
    memset(&p, 0, sizeof p);
    const uint64_t now = RT0 + 1000 * MSEC;
    p.end_mono = MONO0 + MSEC;
    struct { uint64_t rt, mono; const char *want; } t[] = {
        {RT0, MONO0, NULL},
        {0, 0, "realtime and monotonic are zero"},
        {0, MONO0, "realtime is zero"},
        {RT0, 0, "monotonic is zero"},
        {946684799000000000ull, MONO0, "realtime before 2000-01-01"},
        {now + 86400000000000ull + 1, MONO0, "realtime more than a day in the future"},
        {RT0, MONO0 + MSEC + 1, "monotonic after the file's end"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        p.hdr.start_realtime_ns = t[i].rt;
        p.hdr.start_mono_ns = t[i].mono;
        const char *got = tp_clock_pair_problem(&p, now);
        if (t[i].want) assert_string_equal(got, t[i].want);
        else assert_null(got);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged),    cmocka_unit_test(test_per_rank),
        cmocka_unit_test(test_api_steps), cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_unclosed),  cmocka_unit_test(test_tid_reuse),
        cmocka_unit_test(test_many),      cmocka_unit_test(test_damaged),
        cmocka_unit_test(test_write_error), cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_zeroed_pair), cmocka_unit_test(test_pair_problems),
        cmocka_unit_test(test_selection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
