/*
 * test_api.c — the public recording API, end to end through the rank file.
 *
 * One session per process is the library's rule, so every case runs its recording part in
 * a forked child with its own output directory, then the parent loads the directory with
 * the model (src/analysis/model.h) and asserts what was recorded: names, nesting, times,
 * threads, steps, metadata, and the tolerance of misuse.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/steps.h"
#include "trainprof.h"

#define CHILD_PREFIX "api"
#include "child.h"

/* As child.h's start_session, but with the library's default ring (ring 0) or the given one,
 * and optionally a string-table limit */
static void start_session_ring(size_t ring, uint32_t max_strings) {
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    if (ring) c.ring_bytes = ring;
    if (max_strings) c.max_strings = max_strings;
    c.sample_hz = 0; /* these tests count threads and events exactly */
    c.nvml_hz = 0;   /* nor the GPU sampler's (on a GPU machine) */
    if (tprof_init(&c) != TPROF_OK) _exit(90);
}

static const tp_range *find_range(const tp_process *p, const char *name, const tp_thread **th) {
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].nranges; k++)
            if (!strcmp(p->threads[i].ranges[k].name, name)) {
                if (th) *th = &p->threads[i];
                return &p->threads[i].ranges[k];
            }
    return NULL;
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* ------------------------------------------------------------------ nesting and names */

static void body_nesting(void) {
    start_session_ring(0, 0);
    tprof_name_thread("main-thread");
    tprof_range_push("outer");
    tprof_range_push("inner");
    tprof_mark("tick");
    tprof_range_pop();
    tprof_range_push("inner"); /* second use of an interned name */
    tprof_range_pop();
    tprof_range_pop();
    tprof_counter("loss", 2.5);
    tprof_counter("loss", 1.25);
    tprof_range_push_ex("mydomain", "dom-range", 7);
    tprof_range_pop();
}

static void test_nesting_names_counters(void **state) {
    (void)state;
    fresh_dir("nest");
    in_child(body_nesting);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_true(p->complete);
    assert_int_equal(p->dropped, 0);
    assert_int_equal(p->nthreads, 1);
    const tp_thread *t = &p->threads[0];
    assert_string_equal(t->name, "main-thread");
    assert_int_equal(t->nranges, 4);
    assert_string_equal(t->ranges[0].name, "outer");
    assert_string_equal(t->ranges[1].name, "inner");
    assert_string_equal(t->ranges[2].name, "inner");
    assert_ptr_equal(t->ranges[1].name, t->ranges[2].name); /* interned once */
    assert_int_equal(t->ranges[1].parent, 0);
    assert_int_equal(t->ranges[1].depth, 1);
    assert_int_equal(t->ranges[0].parent, -1);
    assert_int_equal(t->ranges[0].child_ns, (t->ranges[1].end - t->ranges[1].start) +
                                                (t->ranges[2].end - t->ranges[2].start));
    assert_true(t->ranges[1].start >= t->ranges[0].start && t->ranges[2].end <= t->ranges[0].end);
    assert_int_equal(t->nmarks, 1);
    assert_string_equal(t->marks[0].name, "tick");
    assert_true(t->marks[0].ts >= t->ranges[1].start && t->marks[0].ts <= t->ranges[1].end);
    assert_int_equal(t->ncounters, 2);
    assert_string_equal(t->counters[0].name, "loss");
    assert_true(t->counters[0].value == 2.5 && t->counters[1].value == 1.25);
    const tp_range *d = find_range(p, "dom-range", NULL);
    assert_non_null(d);
    assert_string_equal(tp_domain_name(p, d->domain), "mydomain");
    assert_int_equal(d->category, 7);
    assert_int_equal(d->flags & TP_R_UNCLOSED, 0);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ a known sleep */

static uint64_t g_sleep_ns = 20000000ull;

#define SLEEPS 3

/* the child's own clock readings around each push..pop, for the parent to compare */
static uint64_t *g_truth;

static void body_sleep(void) {
    start_session_ring(0, 0);
    for (int i = 0; i < SLEEPS; i++) {
        uint64_t a = mono_ns();
        tprof_range_push("sleep");
        sleep_until(mono_ns() + g_sleep_ns);
        tprof_range_pop();
        g_truth[i] = mono_ns() - a;
    }
}

static void test_known_sleep(void **state) {
    (void)state;
    fresh_dir("sleep");
    g_truth = mmap(NULL, SLEEPS * sizeof *g_truth, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(g_truth != MAP_FAILED);
    in_child(body_sleep);
    tp_run run;
    load(&run);
    const tp_thread *t = &run.procs[0].threads[0];
    assert_int_equal(t->nranges, SLEEPS);
    /* each 20 ms sleep: at least 20 ms, never more than the program measured around the
     * push..pop itself, and within 1 ms of it for most sleeps (a late wake-up on a loaded
     * machine is inside both; a preemption between the program's clock read and the push is
     * not, so one sleep in a run may differ by more: the median is what is asserted) */
    uint64_t dev[SLEEPS], worst = 0;
    for (size_t i = 0; i < SLEEPS; i++) {
        uint64_t dur = t->ranges[i].end - t->ranges[i].start;
        assert_true(dur >= g_sleep_ns && dur <= g_truth[i]);
        dev[i] = g_truth[i] - dur;
        if (dev[i] > worst) worst = dev[i];
    }
    for (size_t i = 1; i < SLEEPS; i++) /* insertion sort: a handful of values */
        for (size_t j = i; j > 0 && dev[j - 1] > dev[j]; j--) {
            uint64_t x = dev[j];
            dev[j] = dev[j - 1];
            dev[j - 1] = x;
        }
    printf("known sleep: median %.3f ms, worst %.3f ms from the program's own clock\n",
           (double)dev[SLEEPS / 2] / 1e6, (double)worst / 1e6);
    assert_true(dev[SLEEPS / 2] < 1000000ull);
    munmap(g_truth, SLEEPS * sizeof *g_truth);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ cross-thread ranges */

static uint64_t g_cross_id;

static void *ender(void *arg) {
    (void)arg;
    tprof_name_thread("ender");
    tprof_range_end(g_cross_id);
    tprof_range_end(0xdeadbeefull); /* unknown id: tolerated */
    return NULL;
}

static void body_cross(void) {
    start_session_ring(0, 0);
    g_cross_id = tprof_range_start("cross");
    tprof_range_pop(); /* pop with nothing open: tolerated */
    pthread_t th;
    pthread_create(&th, NULL, ender, NULL);
    pthread_join(th, NULL);
    tprof_range_push("left-open");
}

static void test_cross_thread_and_misuse(void **state) {
    (void)state;
    fresh_dir("cross");
    in_child(body_cross);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const tp_thread *owner;
    const tp_range *r = find_range(p, "cross", &owner);
    assert_non_null(r);
    assert_true(r->flags & TP_R_ASYNC);
    assert_int_equal(r->flags & TP_R_UNCLOSED, 0);
    assert_true(r->end > r->start);
    const tp_thread *ender_thread = NULL;
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].name && !strcmp(p->threads[i].name, "ender"))
            ender_thread = &p->threads[i];
    assert_non_null(ender_thread);
    assert_int_equal(r->end_tid, ender_thread->os_tid);
    assert_int_equal(owner->unmatched_pops, 1);
    assert_int_equal(p->unknown_ends, 1);
    const tp_range *open = find_range(p, "left-open", NULL);
    assert_non_null(open);
    assert_true(open->flags & TP_R_UNCLOSED);
    assert_true(open->end >= open->start);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ steps and metadata */

static void body_steps(void) {
    start_session_ring(0, 0);
    /* no cmocka asserts in the child: it reports through its exit status */
    if (tprof_set_rank(3, 8) != TPROF_OK) _exit(10);
    if (tprof_set_rank(8, 8) != TPROF_ERR_INVALID_ARG) _exit(11);
    if (tprof_set_metadata("model", "char_lm") != TPROF_OK) _exit(12);
    /* the program's own clock around each step: the report's mean must lie inside it
     * however late the sleeps wake on a loaded machine */
    double outer_ms = 0;
    for (uint64_t s = 100; s < 105; s++) {
        uint64_t t0 = mono_ns();
        tprof_step_begin(s);
        tprof_range_push("data");
        sleep_until(mono_ns() + 2000000);
        tprof_range_pop();
        tprof_range_push("compute");
        sleep_until(mono_ns() + 6000000);
        tprof_range_pop();
        tprof_step_end(s);
        if (s > 100) outer_ms += (double)(mono_ns() - t0) / 1e6 / 4; /* the measured four */
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/own_mean_ms", g_dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%.6f\n", outer_ms) < 0 || fclose(f) != 0) _exit(13);
}

static double jnum(const cJSON *o, const char *path) {
    /* dotted path: "a.b.c" with numeric array indexes */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, "."))
        cur = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(cur, atoi(tok))
                                           : cJSON_GetObjectItemCaseSensitive(cur, tok);
    assert_non_null(cur);
    return cur->valuedouble;
}

static void test_steps_metadata_report(void **state) {
    (void)state;
    fresh_dir("steps");
    in_child(body_steps);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->rank, 3);
    assert_int_equal(p->world_size, 8);
    assert_int_equal(p->role, TP_ROLE_RANK);
    assert_string_equal(tp_meta(p, "model"), "char_lm");
    tp_steps s;
    assert_int_equal(tp_find_steps(p, NULL, 1, &s), TPROF_OK);
    assert_int_equal(s.source, TP_STEPS_API);
    assert_int_equal(s.nsteps, 5);
    assert_int_equal(s.nwarmup, 1);
    assert_int_equal(s.steps[0].app_step, 100);
    assert_int_equal(s.steps[4].app_step, 104);
    tp_steps_free(&s);

    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    assert_int_equal((int)jnum(rep, "ranks.0.rank"), 3);
    assert_int_equal((int)jnum(rep, "ranks.0.steps.count"), 5);
    assert_int_equal((int)jnum(rep, "ranks.0.steps.measured"), 4);
    double mean = jnum(rep, "ranks.0.steps.mean_ms");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/own_mean_ms", g_dir);
    FILE *f = fopen(path, "r");
    double own = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lf", &own), 1);
    fclose(f);
    /* sleeps of 8 ms a step, and no more than the program's own clock saw around the steps */
    assert_true(mean >= 8.0 && mean <= own + 1e-3);
    /* data loading: exactly the recorded data ranges of the measured steps over their
     * step time (2 ms of each ~8 ms step) */
    const tp_thread *t = &p->threads[0];
    uint64_t data_ns = 0, step_ns = 0;
    for (size_t k = 0; k < t->nranges; k++)
        if (!strcmp(t->ranges[k].name, "data") && k >= 2)
            data_ns += t->ranges[k].end - t->ranges[k].start;
    for (size_t k = 1; k < t->nsteps / 2; k++)
        step_ns += t->steps[2 * k + 1].ts - t->steps[2 * k].ts;
    double share = jnum(rep, "ranks.0.data_loading.share");
    assert_true(fabs(share - (double)data_ns / (double)step_ns) < 1e-9);
    /* 2 of ~8 ms when the sleeps keep time; a loaded machine stretches either sleep, so only
     * that both parts were seen (the exact figure is checked above against the records) */
    assert_true(share > 0.0 && share < 1.0);
    /* top inclusive: the longer of compute (6 ms sleeps) and data (2 ms sleeps) as recorded
     * (on a loaded machine a late wake-up can make data the longer), no more than the step */
    uint64_t compute_ns = 0;
    for (size_t k = 0; k < t->nranges; k++)
        if (!strcmp(t->ranges[k].name, "compute") && k >= 2)
            compute_ns += t->ranges[k].end - t->ranges[k].start;
    const char *longest = compute_ns >= data_ns ? "compute" : "data";
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
                                             cJSON_GetObjectItemCaseSensitive(rep, "ranks"), 0),
                                         "ranges"),
        "top_inclusive");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(top, 0), "name")->valuestring,
        longest);
    double cms =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(top, 0), "inclusive_ms")->valuedouble;
    assert_true(cms >= (longest[0] == 'c' ? 6.0 : 2.0) && cms <= own + 1e-3);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ interning bound */

static void body_bound(void) {
    start_session_ring(0, 4); /* only 4 names per thread are interned */
    char name[32];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "op_%d", i);
        tprof_range_push(name);
        tprof_range_pop();
    }
}

static void test_string_bound(void **state) {
    (void)state;
    fresh_dir("bound");
    in_child(body_bound);
    tp_run run;
    load(&run);
    const tp_thread *t = &run.procs[0].threads[0];
    assert_int_equal(t->nranges, 20);
    char name[32];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "op_%d", i);
        assert_string_equal(t->ranges[i].name, name);
    }
    tp_run_free(&run);
}

/* Past TRAINPROF_MAX_STRINGS (here 4) names go inline: the report still counts every name
 * exactly. op_<i> is pushed i + 1 times, the rounds interleaved (so interned and inline
 * names alternate on the thread) and every name written into one reused buffer (so the
 * pointer cache sees the same pointer with other contents). */
#define ENV_BOUND_NAMES 24

static void body_bound_env(void) {
    setenv("TRAINPROF_MAX_STRINGS", "4", 1);
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.sample_hz = 0;
    c.nvml_hz = 0;
    CHECK(tprof_config_from_env(&c) == TPROF_OK && c.max_strings == 4, 20);
    CHECK(tprof_init(&c) == TPROF_OK, 21);
    char name[32];
    for (int round = 0; round < ENV_BOUND_NAMES; round++)
        for (int i = round; i < ENV_BOUND_NAMES; i++) {
            snprintf(name, sizeof name, "op_%d", i);
            tprof_range_push(name);
            tprof_range_pop();
        }
}

static void test_string_bound_env_report(void **state) {
    (void)state;
    fresh_dir("boundenv");
    in_child(body_bound_env);
    tp_run run;
    load(&run);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.top_n = 1000;
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rep, "ranks"), 0), "ranges");
    assert_int_equal((int)jnum(ranges, "distinct_names"), ENV_BOUND_NAMES);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ranges, "top_inclusive");
    assert_int_equal(cJSON_GetArraySize(rows), ENV_BOUND_NAMES);
    int seen[ENV_BOUND_NAMES] = {0};
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const char *n = cJSON_GetObjectItemCaseSensitive(row, "name")->valuestring;
        int i = -1, used = 0;
        assert_int_equal(sscanf(n, "op_%d%n", &i, &used), 1);
        assert_int_equal(used, (int)strlen(n));
        assert_true(i >= 0 && i < ENV_BOUND_NAMES);
        assert_int_equal(seen[i]++, 0);
        assert_int_equal((int)jnum(row, "count"), i + 1);
    }
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ process sampler */

static void body_procfs(void) {
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.sample_hz = 100;
    if (tprof_init(&c) != TPROF_OK) _exit(90);
    tprof_range_push("work");
    /* 48 MiB touched, then 300 ms of CPU (however long a loaded machine takes to give it,
     * up to 10 s): the sampler must see both */
    size_t n = 48u << 20;
    volatile char *m = malloc(n);
    for (size_t i = 0; i < n; i += 4096) m[i] = (char)i;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    uint64_t w0 = mono_ns(), cpu_ns = 0;
    volatile double x = 0;
    while (cpu_ns < 300000000ull && mono_ns() - w0 < 10000000000ull) {
        for (int k = 0; k < 100000; k++) x += 1.0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        cpu_ns = (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000ll + (c1.tv_nsec - c0.tv_nsec));
    }
    /* the process's own CPU share over the busy loop, for the test to compare */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/own_cpu_percent", g_dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%.3f\n", 100.0 * (double)cpu_ns / (double)(mono_ns() - w0)) < 0 ||
        fclose(f) != 0)
        _exit(91);
    tprof_range_pop();
    free((void *)m);
}

static void test_procfs_sampler(void **state) {
    (void)state;
    fresh_dir("procfs");
    in_child(body_procfs);
    tp_run run;
    load(&run);
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    double rss = jnum(rep, "ranks.0.process.rss_peak_bytes");
    double cpu = jnum(rep, "ranks.0.process.cpu_percent_max");
    double thr = jnum(rep, "ranks.0.process.threads_max");
    double samples = jnum(rep, "ranks.0.process.samples");
    printf("sampler: %.0f samples, RSS peak %.1f MiB, CPU max %.0f %%, %.0f threads\n", samples,
           rss / 1048576.0, cpu, thr);
    assert_true(rss >= 48.0 * 1048576.0);
    /* one busy thread: the busiest 100 ms window holds at least the loop's average share
     * (half of it, for windows that straddle the loop's ends), and no more than the
     * machine's cores with jitter */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/own_cpu_percent", g_dir);
    FILE *f = fopen(path, "r");
    double own = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lf", &own), 1);
    fclose(f);
    printf("sampler: the loop's own CPU share %.0f %%\n", own);
    assert_true(cpu >= 0.5 * own);
    assert_true(cpu < 100.0 * (double)sysconf(_SC_NPROCESSORS_ONLN) + 10.0);
    assert_true(thr >= 2);                   /* main and the flusher/sampler */
    assert_true(samples >= 10);              /* 100 Hz over >= 300 ms, generously */
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ disabled */

static void test_disabled_without_dir(void **state) {
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("TRAINPROF_DIR");
        if (tprof_enabled()) _exit(1);
        tprof_range_push("x");
        tprof_range_pop();
        if (tprof_range_start("y") != 0) _exit(2);
        if (tprof_flush() != TPROF_ERR_DISABLED) _exit(3);
        if (tprof_output_path() != NULL) _exit(4);
        if (tprof_set_rank(0, 1) != TPROF_ERR_DISABLED) _exit(5);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_init_errors(void **state) {
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        tprof_config c;
        if (tprof_config_init(NULL) != TPROF_ERR_INVALID_ARG) _exit(1);
        if (tprof_init(NULL) != TPROF_ERR_INVALID_ARG) _exit(2);
        tprof_config_init(&c);
        c.struct_size = 4;
        if (tprof_init(&c) != TPROF_ERR_INVALID_ARG) _exit(3);
        tprof_config_init(&c);
        c.output_dir = "/proc/no-such-dir-for-trainprof";
        if (tprof_init(&c) != TPROF_ERR_DISABLED) _exit(4);
        if (tprof_init(&c) != TPROF_ERR_ALREADY) _exit(5);
        tprof_range_push("ignored"); /* a no-op, not a crash */
        tprof_range_pop();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_strerror(void **state) {
    (void)state;
    assert_string_equal(tprof_strerror(TPROF_OK), "success");
    assert_string_equal(tprof_strerror(TPROF_ERR_CORRUPT),
                        "corrupt data (checksum or length mismatch)");
    assert_string_equal(tprof_strerror(-9999), "unknown error");
    assert_string_equal(tprof_version(), TPROF_VERSION_STRING);
    assert_non_null(strstr(tprof_build_info(), TPROF_VERSION_STRING));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nesting_names_counters),
        cmocka_unit_test(test_known_sleep),
        cmocka_unit_test(test_cross_thread_and_misuse),
        cmocka_unit_test(test_steps_metadata_report),
        cmocka_unit_test(test_string_bound),
        cmocka_unit_test(test_string_bound_env_report),
        cmocka_unit_test(test_procfs_sampler),
        cmocka_unit_test(test_disabled_without_dir),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
