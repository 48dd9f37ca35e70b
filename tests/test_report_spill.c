/*
 * test_report_spill.c — the command's report keeps its rank sections in a temporary file
 * (tp_report_make_spilled, report_spill.c) and gives the JSON and HTML of the report that
 * holds them, byte for byte: with section strings that are not UTF-8 (cleaned as the whole
 * document's are), with no usable temporary directory (the sections then held in memory),
 * and with no rank at all. The store itself: slots read back as put, an empty slot, and a
 * section the file no longer holds whole is an error, never a rank silently left out. The
 * runs of test_report_slim, test_report_stream and test_summary are checked the same way
 * (slim_runs.h, slim_spilled_same).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/report_spill.h"
#include "diag_scen.h"
#include "export/html.h"
#include "slim_runs.h"
#include "synth.h"
#include "trainprof.h"

/* Two ranks whose files carry bytes that are not UTF-8 in a host name and a range name (the
 * loader cleans those), to be reported with a step name that is not UTF-8 either (an option
 * reaches the sections as given: "steps"."requested_name"). */
static void bad_utf8_run(const char *dir) {
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, r ? "node\xff\xfe" : "node0", 10 + r, RT0, T0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        synth_thread(f, 1, 10 + (uint32_t)r);
        for (int s = 0; s < 4; s++) {
            uint64_t b = T0 + MS + (uint64_t)s * 10 * MS;
            synth_push(f, 1, b, "train_step", 0, 0);
            synth_push(f, 1, b + MS, "fwd\xc3(\xa9)", 0, 0);
            synth_pop(f, 1, b + 5 * MS, 0);
            synth_pop(f, 1, b + 9 * MS, 0);
        }
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

/* report.json of r into a string (owned), *rc what the writer returned. */
static char *doc_json(const tp_report *r, int *rc) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    assert_non_null(f);
    *rc = tp_report_write_doc(r, f);
    fclose(f);
    return b;
}

/* The report of dir, slim, held and spilled, with step_name (NULL: the default rule): the same
 * JSON and HTML; the JSON into *json (owned) when json is given. */
static void held_and_spilled(const char *dir, const char *step_name, char **json) {
    tp_run run;
    char err[512];
    const char *ops[] = {dir};
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.step_name = step_name;
    tp_report r;
    assert_int_equal(tp_report_make(&run, &o, &r), 0);
    slim_spilled_same(&run, &o, &r);
    if (json) {
        int rc;
        *json = doc_json(&r, &rc);
        assert_int_equal(rc, 0);
    }
    tp_report_free(&r);
    tp_run_free(&run);
}

static void not_utf8(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-spill-utf8"), 0);
    bad_utf8_run(dir);
    char *json = NULL;
    held_and_spilled(dir, "train\xffstep", &json);
    /* the bad bytes reached the sections, and left them as U+FFFD */
    assert_non_null(strstr(json, "\"requested_name\":\t\"train\xef\xbf\xbdstep\""));
    assert_non_null(strstr(json, "\"host\":\t\"node\xef\xbf\xbd\xef\xbf\xbd\""));
    assert_non_null(strstr(json, "fwd\xef\xbf\xbd(\xef\xbf\xbd)"));
    assert_null(strstr(json, "\xff"));
    free(json);
    synth_rmtree(dir);
}

/* No temporary file can be made: the store holds the sections in memory, the same report. */
static void no_tmpdir(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-spill-notmp"), 0);
    four_ranks_run(dir);
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/nonexistent/trainprof-spill-test", 1);
    held_and_spilled(dir, NULL, NULL);
    /* the store without a file: the section is held, and given back as held */
    tp_section_spill *sp = tp_spill_open(1);
    assert_non_null(sp);
    tp_spill_put(sp, 0, cJSON_CreateObject());
    const cJSON *got;
    cJSON *owned;
    assert_int_equal(tp_spill_get(sp, 0, &got, &owned), 0);
    assert_non_null(got);
    assert_null(owned);
    tp_spill_free(sp);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    synth_rmtree(dir);
}

/* A run without a rank (a helper alone): "ranks" stays empty either way. */
static void no_rank(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-spill-norank"), 0);
    synth_file *f = synth_open(dir, "h", 7, RT0, T0);
    assert_non_null(f);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 7);
    synth_counter(f, 1, T0 + MS, "nvml.gpu0.power_w", 100.0);
    synth_end_of_file(f, T0 + 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    char *json = NULL;
    held_and_spilled(dir, NULL, &json);
    assert_non_null(strstr(json, "\n\t\"ranks\":\t[],\n"));
    free(json);
    synth_rmtree(dir);
}

/* The store: what is put is what is read, an empty slot reads NULL, a slot past the end
 * reads NULL, and a file cut short is an error. */
static void store(void **state) {
    (void)state;
    tp_section_spill *s = tp_spill_open(3);
    assert_non_null(s);
    assert_int_equal(tp_spill_count(s), 3);
    cJSON *a = cJSON_Parse("{\"rank\":0,\"x\":[1.5,\"y\",null,true,{\"z\":-0.0}]}");
    assert_non_null(a);
    char *want = cJSON_Print(a);
    tp_spill_put(s, 0, a);
    tp_spill_put(s, 2, cJSON_CreateObject());
    tp_spill_put(s, 1, NULL);
    const cJSON *got;
    cJSON *owned;
    assert_int_equal(tp_spill_get(s, 0, &got, &owned), 0);
    assert_non_null(got);
    assert_ptr_equal(got, owned); /* read back from the file */
    char *have = cJSON_Print(got);
    assert_string_equal(have, want);
    free(have);
    free(want);
    cJSON_Delete(owned);
    assert_int_equal(tp_spill_get(s, 1, &got, &owned), 0);
    assert_null(got);
    assert_null(owned);
    assert_int_equal(tp_spill_get(s, 3, &got, &owned), 0);
    assert_null(got);
    /* the file cut before slot 2's bytes: its section cannot be given back */
    struct {
        int fd;
    } *peek = (void *)s; /* the store's first field is its file (report_spill.c) */
    assert_int_equal(ftruncate(peek->fd, 1), 0);
    assert_int_equal(tp_spill_get(s, 2, &got, &owned), TPROF_ERR_IO);
    assert_null(got);
    assert_null(owned);
    tp_spill_free(s);
    tp_spill_free(NULL);
}

/* With standard input closed (as with standard output closed, `trainprof report >&-`), the
 * file must not take its number: output meant for the closed stream would be written over the
 * sections, and a write that must fail (EBADF) would succeed into the hidden file. */
static void low_fd(void **state) {
    (void)state;
    int in = dup(0);
    assert_true(in > 2);
    assert_int_equal(close(0), 0);
    tp_section_spill *s = tp_spill_open(1);
    int fd0 = fcntl(0, F_GETFD); /* -1: fd 0 still closed */
    assert_int_equal(dup2(in, 0), 0);
    close(in);
    assert_non_null(s);
    struct {
        int fd;
    } *peek = (void *)s; /* the store's first field is its file (report_spill.c) */
    assert_int_equal(fd0, -1);
    assert_true(peek->fd > 2);
    /* and it is still closed on exec */
    assert_true(fcntl(peek->fd, F_GETFD) & FD_CLOEXEC);
    tp_spill_put(s, 0, cJSON_CreateObject());
    const cJSON *got;
    cJSON *owned;
    assert_int_equal(tp_spill_get(s, 0, &got, &owned), 0);
    assert_ptr_equal(got, owned); /* from the file */
    cJSON_Delete(owned);
    tp_spill_free(s);
}

/* Whether dir's file system gives space back (fallocate(2) PUNCH_HOLE): where it does not,
 * the spill keeps its blocks until it is closed, and only that is checked. */
static int punches_holes(const char *dir) {
    char probe[600];
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int pf = open(probe, O_RDWR | O_CREAT, 0600);
    assert_true(pf >= 0);
    char page[4096] = {1};
    assert_int_equal(pwrite(pf, page, sizeof page, 0), (ssize_t)sizeof page);
    int ok = fallocate(pf, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
    close(pf);
    unlink(probe);
    return ok;
}

/* The last writer reads each section once (tp_report_sections_once): the same report.json,
 * the file's space given back as it goes (an output on $TMPDIR's file system needs it: a
 * report that fits there without the spill failed with it), and a reader after it an error,
 * never a report without its ranks. Both with the file and with the sections held. */
static void read_once(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-spill-once"), 0);
    four_ranks_run(dir);
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    int punches = punches_holes(dir);
    const char *tmpdirs[] = {dir, "/nonexistent/trainprof-spill-test"};
    tp_run run;
    char err[512];
    const char *ops[] = {dir};
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report held;
    assert_int_equal(tp_report_make(&run, NULL, &held), 0);
    int rc;
    char *want = doc_json(&held, &rc);
    assert_int_equal(rc, 0);
    for (size_t t = 0; t < 2; t++) {
        setenv("TMPDIR", tmpdirs[t], 1);
        tp_report sp;
        assert_int_equal(tp_report_make_spilled(&run, NULL, &sp), 0);
        assert_non_null(sp.spill);
        struct {
            int fd;
        } *peek = (void *)sp.spill; /* the store's first field is its file (report_spill.c) */
        struct stat st;
        assert_int_equal(peek->fd >= 0, t == 0);
        if (peek->fd >= 0) {
            assert_int_equal(fstat(peek->fd, &st), 0);
            assert_true(st.st_blocks > 0);
        }
        tp_report_sections_once(&sp);
        char *got = doc_json(&sp, &rc);
        assert_int_equal(rc, 0);
        assert_string_equal(got, want);
        free(got);
        if (peek->fd >= 0 && punches) {
            assert_int_equal(fstat(peek->fd, &st), 0);
            assert_int_equal(st.st_blocks, 0);
        }
        got = doc_json(&sp, &rc); /* read again: the sections are gone */
        assert_int_equal(rc, TPROF_ERR_IO);
        free(got);
        tp_report_free(&sp);
    }
    free(want);
    tp_report_free(&held);
    tp_run_free(&run);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    synth_rmtree(dir);
}

/* No writer reads the sections any more (`trainprof report --format text`): they are let go
 * at once, the file's space with them (the text on $TMPDIR's file system found less room than
 * without the spill), and a reader after it gets an error. */
static void drop(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-spill-drop"), 0);
    four_ranks_run(dir);
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("TMPDIR", dir, 1);
    tp_run run;
    char err[512];
    const char *ops[] = {dir};
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report sp;
    assert_int_equal(tp_report_make_spilled(&run, NULL, &sp), 0);
    struct {
        int fd;
    } *peek = (void *)sp.spill; /* the store's first field is its file (report_spill.c) */
    assert_true(peek->fd >= 0);
    /* a second descriptor keeps the file open: what it holds is still seen */
    int fd = dup(peek->fd);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(st.st_blocks > 0);
    tp_report_sections_drop(&sp);
    assert_int_equal(peek->fd, -1);
    assert_int_equal(fstat(fd, &st), 0);
    if (punches_holes(dir)) assert_int_equal(st.st_blocks, 0);
    close(fd);
    const cJSON *got;
    cJSON *owned;
    assert_int_equal(tp_report_section(&sp, 0, &got, &owned), TPROF_ERR_IO);
    assert_null(got);
    tp_report_free(&sp);
    tp_run_free(&run);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(not_utf8),
        cmocka_unit_test(no_tmpdir),
        cmocka_unit_test(no_rank),
        cmocka_unit_test(store),
        cmocka_unit_test(low_fd),
        cmocka_unit_test(read_once),
        cmocka_unit_test(drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
