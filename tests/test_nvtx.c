/*
 * test_nvtx.c — NVTX capture by injection, end to end: `trainprof run` on nvtx_prog (a
 * program built only with the NVTX3 headers), then `trainprof export --format chrome`,
 * and the trace is parsed and checked for names, nesting, threads, domains, categories
 * and durations (the 10 ms sleep within 1 ms). Built only when the NVTX3 headers exist.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "slurp.h"

static char g_dir[512];
static cJSON *g_trace;

static int run_cmd(char *const argv[]) {
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int setup(void **state) {
    (void)state;
    const char *base = getenv("TPROF_TEST_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/nvtx-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    char out[600];
    snprintf(out, sizeof out, "%s/run", g_dir);
    char truth[600];
    snprintf(truth, sizeof truth, "%s/truth.txt", g_dir);
    setenv("NVTX_PROG_TRUTH", truth, 1);
    char *run_argv[] = {TPROF_CLI, "run", "--quiet", "-o", out, "--", NVTX_PROG, NULL};
    if (run_cmd(run_argv) != 0) return -1;
    char trace[700];
    snprintf(trace, sizeof trace, "%s/trace.json", out);
    char *exp_argv[] = {TPROF_CLI, "export", out, "--format", "chrome", "-o", trace, NULL};
    if (run_cmd(exp_argv) != 0) return -1;
    char *text = slurp(trace);
    if (!text) return -1;
    g_trace = cJSON_Parse(text);
    free(text);
    return g_trace ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cJSON_Delete(g_trace);
    return 0;
}

static const char *sget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static double nget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The one event with this name and phase (fails if there are several). */
static const cJSON *event(const char *name, const char *ph) {
    const cJSON *found = NULL, *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(g_trace, "traceEvents")) {
        const char *n = sget(e, "name"), *p = sget(e, "ph");
        if (n && p && !strcmp(n, name) && !strcmp(p, ph)) {
            assert_null(found);
            found = e;
        }
    }
    return found;
}

static double thread_tid(const char *tname) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(g_trace, "traceEvents")) {
        const char *n = sget(e, "name"), *p = sget(e, "ph");
        if (n && p && !strcmp(n, "thread_name") && !strcmp(p, "M")) {
            const char *v = sget(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
            if (v && !strcmp(v, tname)) return nget(e, "tid");
        }
    }
    return -1;
}

/* All events with this name and phase, in file order. */
static size_t events(const char *name, const char *ph, const cJSON **out, size_t max) {
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(g_trace, "traceEvents")) {
        const char *nm = sget(e, "name"), *p = sget(e, "ph");
        if (nm && p && !strcmp(nm, name) && !strcmp(p, ph) && n < max) out[n++] = e;
    }
    return n;
}

static void test_names_nesting_durations(void **state) {
    (void)state;
    const cJSON *outer = event("outer", "X"), *sl[3];
    const cJSON *wide = event("wide_\xc3\xbc", "X");
    assert_non_null(outer);
    assert_int_equal(events("sleep_10ms", "X", sl, 3), 3);
    assert_non_null(wide);
    double main_tid = thread_tid("main");
    assert_true(main_tid > 0);
    assert_true(nget(outer, "tid") == main_tid);
    /* the known sleep: each 10 ms sleep is at least 10 ms, and within 1 ms of the
     * program's own measurement around its push..pop (ts and dur are in microseconds) */
    char tpath[700];
    snprintf(tpath, sizeof tpath, "%s/truth.txt", g_dir);
    FILE *tf = fopen(tpath, "r");
    assert_non_null(tf);
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        double truth = 0;
        assert_int_equal(fscanf(tf, "%lf", &truth), 1);
        assert_true(nget(sl[i], "tid") == main_tid);
        assert_true(nget(sl[i], "ts") >= nget(outer, "ts"));
        assert_true(nget(sl[i], "ts") + nget(sl[i], "dur") <=
                    nget(outer, "ts") + nget(outer, "dur"));
        assert_true(nget(sl[i], "dur") >= 10000.0 && nget(sl[i], "dur") <= truth + 0.001);
        if (truth - nget(sl[i], "dur") > worst) worst = truth - nget(sl[i], "dur");
    }
    fclose(tf);
    printf("sleep_10ms: captured within %.3f us of the program's own clock\n", worst);
    assert_true(worst < 1000.0);
    assert_true(nget(wide, "ts") >= nget(sl[2], "ts") + nget(sl[2], "dur"));
    /* the mark sits inside the wide range */
    const cJSON *mk = event("checkpoint", "i");
    assert_non_null(mk);
    assert_true(nget(mk, "ts") >= nget(wide, "ts") &&
                nget(mk, "ts") <= nget(wide, "ts") + nget(wide, "dur"));
    /* one process: rank 0 (implied) */
    assert_true(nget(outer, "pid") == 0);
}

static void test_domain_category_thread(void **state) {
    (void)state;
    const cJSON *w = event("registered_work", "X");
    assert_non_null(w);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(w, "args");
    assert_string_equal(sget(args, "domain"), "mydomain");
    assert_string_equal(sget(args, "category"), "io");
    double worker_tid = thread_tid("worker");
    assert_true(worker_tid > 0);
    assert_true(nget(w, "tid") == worker_tid);
    assert_true(nget(w, "dur") >= 3000.0);
}

static void test_cross_thread_and_open(void **state) {
    (void)state;
    const cJSON *b = event("cross_thread", "b"), *e = event("cross_thread", "e");
    assert_non_null(b);
    assert_non_null(e);
    assert_string_equal(sget(b, "id"), sget(e, "id"));
    assert_true(nget(e, "ts") > nget(b, "ts"));
    /* it spans the worker's 3 ms range */
    assert_true(nget(e, "ts") - nget(b, "ts") >= 3000.0);
    const cJSON *lo = event("left_open", "X");
    if (!lo) lo = event("left_open", "b");
    assert_non_null(lo);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(lo, "args"), "unclosed")));
}

/* The payload extension: NCCL's core-push / payload-pop range closes, with its 2 ms; the
 * payload-only range (nested in nothing, after it) and mark are named after their
 * schemas; the start/end pair is matched. */
static void test_payload_extension(void **state) {
    (void)state;
    const cJSON *r = event("core_push_payload_pop", "X");
    assert_non_null(r);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(r, "args");
    assert_string_equal(sget(args, "domain"), "payloads");
    assert_null(cJSON_GetObjectItemCaseSensitive(args, "unclosed"));
    assert_true(nget(r, "dur") >= 2000.0);
    const cJSON *st = event("StaticSchema", "X");
    assert_non_null(st);
    assert_null(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "args"), "unclosed"));
    assert_true(nget(st, "ts") >= nget(r, "ts") + nget(r, "dur"));
    const cJSON *mk = event("DynamicSchema", "i");
    assert_non_null(mk);
    assert_true(nget(mk, "ts") >= nget(st, "ts") &&
                nget(mk, "ts") <= nget(st, "ts") + nget(st, "dur"));
    assert_non_null(event("LateSchema", "i")); /* after 5000 registrations of another */
    const cJSON *b = event("DynamicSchema", "b"), *e = event("DynamicSchema", "e");
    assert_non_null(b);
    assert_non_null(e);
    assert_string_equal(sget(b, "id"), sget(e, "id"));
    assert_true(nget(e, "ts") - nget(b, "ts") >= 1000.0);
}

static void test_report_mentions_nvtx(void **state) {
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/run/report.json", g_dir);
    char *text = slurp(path);
    assert_non_null(text);
    cJSON *rep = cJSON_Parse(text);
    free(text);
    assert_non_null(rep);
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(rep, "capabilities"), "nvtx");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(nv, "found")));
    const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rep, "processes"), 0);
    assert_int_equal((int)nget(p0, "unmatched_pops"), 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p0, "complete")));
    cJSON_Delete(rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_nesting_durations),
        cmocka_unit_test(test_domain_category_thread),
        cmocka_unit_test(test_cross_thread_and_open),
        cmocka_unit_test(test_payload_extension),
        cmocka_unit_test(test_report_mentions_nvtx),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
