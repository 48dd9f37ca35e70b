/*
 * test_nvtx_strings_run.c — NVTX registered strings end to end: `trainprof run` on
 * nvtx_strings_prog (NVTX3 headers only), then `trainprof report --format json` (and text).
 *
 * - 70 000 registered strings (past the 65 536 a linear list once held, and past the
 *   8192 names a thread interns, so most go inline): the report names every range after its
 *   string, with its exact count, and no range "(null)"; nothing is counted past the limit.
 * - TRAINPROF_NVTX_STRINGS_KB=0: every one of the 1001 registrations is past the limit; the
 *   ranges are named "(registered string past the limit)" (1000 + 4 of them), the JSON's
 *   run.nvtx_strings_over_limit is 1001 and the text report says so in a warning line.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "slurp.h"
#include "spawn.h"

#define EXTRA 4 /* nvtx_strings_prog's extra ranges of the last name */

static int run_cmd(char *const argv[], const char *out_path) {
    pid_t pid = fork();
    if (pid == 0) spawn_exec((const char *const *)argv, out_path, NULL);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs nvtx_strings_prog N under trainprof with TRAINPROF_NVTX_STRINGS_KB = kb (NULL:
 * unset) into a fresh directory; the JSON report (--top 100000) parsed, the text in *text. */
static cJSON *run_prog(const char *tag, long n, const char *kb, char **text) {
    const char *base = getenv("TPROF_TEST_TMP");
    char dir[512], out[600], json[700], txt[700], nstr[32];
    snprintf(dir, sizeof dir, "%s/nvtxstr-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    snprintf(txt, sizeof txt, "%s/report.txt", dir);
    snprintf(nstr, sizeof nstr, "%ld", n);
    if (kb) setenv("TRAINPROF_NVTX_STRINGS_KB", kb, 1);
    else unsetenv("TRAINPROF_NVTX_STRINGS_KB");
    char *run_argv[] = {TPROF_CLI, "run", "--quiet", "-o", out, "--", NVTX_STRINGS_PROG,
                        nstr, NULL};
    assert_int_equal(run_cmd(run_argv, NULL), 0);
    unsetenv("TRAINPROF_NVTX_STRINGS_KB");
    char *rep_argv[] = {TPROF_CLI, "report", out, "--format", "json", "--top", "100000", NULL};
    assert_int_equal(run_cmd(rep_argv, json), 0);
    char *txt_argv[] = {TPROF_CLI, "report", out, NULL};
    assert_int_equal(run_cmd(txt_argv, txt), 0);
    *text = slurp(txt);
    assert_non_null(*text);
    char *js = slurp(json);
    assert_non_null(js);
    cJSON *rep = cJSON_Parse(js);
    free(js);
    assert_non_null(rep);
    return rep;
}

static const cJSON *rank_ranges(const cJSON *rep) {
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(rep, "ranks");
    assert_int_equal(cJSON_GetArraySize(ranks), 1);
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ranks, 0), "ranges");
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

#define MANY 70000

static void test_every_registered_name(void **state) {
    (void)state;
    char *text;
    cJSON *rep = run_prog("many", MANY, NULL, &text);
    const cJSON *ranges = rank_ranges(rep);
    assert_int_equal((long)num(ranges, "distinct_names"), MANY);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ranges, "top_inclusive");
    assert_int_equal(cJSON_GetArraySize(rows), MANY);
    char *seen = calloc(MANY, 1);
    assert_non_null(seen);
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "name")->valuestring;
        long i = -1;
        int used = 0;
        if (sscanf(name, "reg_%ld%n", &i, &used) != 1 || used != (int)strlen(name))
            fail_msg("a range named \"%s\"", name);
        assert_true(i >= 0 && i < MANY);
        assert_int_equal(seen[i]++, 0);
        assert_int_equal((long)num(row, "count"), i == MANY - 1 ? EXTRA + 1 : 1);
    }
    free(seen);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(rep, "run");
    assert_null(cJSON_GetObjectItemCaseSensitive(run, "nvtx_strings_over_limit"));
    assert_null(strstr(text, "TRAINPROF_NVTX_STRINGS_KB"));
    free(text);
    cJSON_Delete(rep);
}

#define FEW 1000

static void test_past_the_limit(void **state) {
    (void)state;
    char *text;
    cJSON *rep = run_prog("limit", FEW, "0", &text);
    const cJSON *ranges = rank_ranges(rep);
    assert_int_equal((long)num(ranges, "distinct_names"), 1);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ranges, "top_inclusive");
    const cJSON *row = cJSON_GetArrayItem(rows, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "name")->valuestring,
                        "(registered string past the limit)");
    assert_int_equal((long)num(row, "count"), FEW + EXTRA);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(rep, "run");
    assert_int_equal((long)num(run, "nvtx_strings_over_limit"), FEW + 1);
    const char *w = strstr(text, "warning: 1001 NVTX string registrations were past "
                                 "TRAINPROF_NVTX_STRINGS_KB");
    if (!w) fail_msg("no warning line in the text report:\n%s", text);
    free(text);
    cJSON_Delete(rep);
}

/* fork() while another thread registers: every child registers and exits (none hangs on a
 * lock its parent's registering thread held at the fork) */
static void test_fork_while_registering(void **state) {
    (void)state;
    const char *base = getenv("TPROF_TEST_TMP");
    char dir[512], out[600];
    snprintf(dir, sizeof dir, "%s/nvtxstr-fork-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/run", dir);
    char *run_argv[] = {TPROF_CLI, "run", "--quiet", "-o", out, "--", NVTX_STRINGS_PROG,
                        "--fork", "60", NULL};
    assert_int_equal(run_cmd(run_argv, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_registered_name),
        cmocka_unit_test(test_past_the_limit),
        cmocka_unit_test(test_fork_while_registering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
