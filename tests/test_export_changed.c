/*
 * test_export_changed.c — a rank file that changes between the slim load of a run and the
 * reads of it whole that follow (the memos, the export's write): truncated (a run being
 * rewritten), or deleted. The slim process's counts are no longer the file's, so what is read
 * again must not be taken for it: the memos are not kept from it and the export fails
 * instead of writing a trace that looks complete; tp_process_file_check says why. Replaced
 * by another process's file too; one that grew is read as far as it was.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include <cjson/cJSON.h>
#include "export/chrome.h"
#include "export/perfetto.h"
#include "slim_runs.h"
#include "trainprof.h"

/* The slim run of the four-rank run in a fresh directory (dir), rank 0's process in *p0. */
static void load_four(char *dir, size_t n, tp_run *run, const tp_process **p0) {
    assert_int_equal(synth_tmpdir(dir, n, "export-changed"), 0);
    for (int r = 0; r < 4; r++) four_ranks_write(dir, r);
    const char *ops[] = {dir};
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, run, err, sizeof err), 0);
    *p0 = NULL;
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK && run->procs[i].rank == 0) *p0 = &run->procs[i];
    assert_non_null(*p0);
    assert_int_equal((*p0)->ncomm, 6); /* an AllReduce in each of its 6 steps */
}

/* Rank 0's file cut to its first step's chunks after the slim load: its memos are not kept
 * (the 6 communication ops of the slim process would be read from a memo of fewer), and
 * both exports fail. */
/* What the merged Chrome export (rc[0]) and the Perfetto export (rc[1]) of the run answer,
 * their output dropped. */
static void export_rcs(const tp_run *run, int rc[2]) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rc[0] = tp_export_chrome(run, f, NULL);
    fclose(f);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    rc[1] = tp_export_perfetto(run, f, NULL, NULL);
    fclose(f);
    free(buf);
}

static void truncated(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    const tp_process *p0;
    load_four(dir, sizeof dir, &run, &p0);
    assert_int_equal(synth_truncate(p0->file, (int64_t)p0->file_bytes / 3), 0);
    char why[200];
    assert_int_equal(tp_process_file_check(p0, why, sizeof why), TPROF_ERR_TRUNCATED);
    char want[200];
    snprintf(want, sizeof want, "now %llu bytes, shorter than the %llu read before",
             (unsigned long long)(p0->file_bytes / 3), (unsigned long long)p0->file_bytes);
    assert_string_equal(why, want);
    assert_int_equal(tp_export_fill_memos(&run, NULL), TPROF_OK);
    assert_false(p0->comm_memo_whole); /* the load's times alone */
    tp_comm_time t[6];
    assert_int_equal(tp_comm_resolve(p0, t), TPROF_OK); /* from what the slim one holds */
    int rc[2];
    export_rcs(&run, rc);
    assert_int_equal(rc[0], TPROF_ERR_TRUNCATED);
    assert_int_equal(rc[1], TPROF_ERR_TRUNCATED);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The merged Chrome trace of the run into a fresh buffer (freed by the caller). */
static char *chrome_of(const tp_run *run, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_int_equal(tp_export_chrome(run, f, NULL), TPROF_OK);
    fclose(f);
    return buf;
}

/* Rank 0's file grows after the slim load (a run still being written: here its chunks once
 * more): what is read again is what the slim load read, so the trace does not change. */
static void grown(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    const tp_process *p0;
    load_four(dir, sizeof dir, &run, &p0);
    assert_int_equal(tp_export_fill_memos(&run, NULL), TPROF_OK);
    size_t n1, n2;
    char *before = chrome_of(&run, &n1);
    FILE *f = fopen(p0->file, "r+b");
    assert_non_null(f);
    size_t body = (size_t)p0->file_bytes - sizeof(tprof_file_header);
    char *chunks = malloc(body);
    assert_non_null(chunks);
    assert_int_equal(fseek(f, (long)sizeof(tprof_file_header), SEEK_SET), 0);
    assert_int_equal(fread(chunks, 1, body, f), body);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    assert_int_equal(fwrite(chunks, 1, body, f), body);
    fclose(f);
    free(chunks);
    assert_int_equal(tp_process_file_check(p0, NULL, 0), TPROF_OK);
    char *after = chrome_of(&run, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(before, after, n1);
    free(before);
    free(after);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Rank 0's file deleted after the slim load: both exports fail. */
static void deleted(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    const tp_process *p0;
    load_four(dir, sizeof dir, &run, &p0);
    assert_int_equal(tp_export_fill_memos(&run, NULL), TPROF_OK);
    assert_true(p0->comm_memo_whole);
    assert_int_equal(unlink(p0->file), 0);
    char why[200];
    assert_int_equal(tp_process_file_check(p0, why, sizeof why), TPROF_ERR_IO);
    assert_string_equal(why, "cannot open: No such file or directory");
    int rc[2];
    export_rcs(&run, rc);
    assert_int_not_equal(rc[0], TPROF_OK);
    assert_int_not_equal(rc[1], TPROF_OK);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Rank 0's file replaced by rank 2's (longer: it also samples NVML) after the slim load:
 * the prefix read again is another process's, so no memo is kept and both exports fail. */
static void replaced(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    const tp_process *p0, *p2 = NULL;
    load_four(dir, sizeof dir, &run, &p0);
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].role == TP_ROLE_RANK && run.procs[i].rank == 2) p2 = &run.procs[i];
    assert_non_null(p2);
    assert_true(p2->file_bytes > p0->file_bytes);
    assert_int_equal(rename(p2->file, p0->file), 0);
    char why[200];
    assert_int_equal(tp_process_file_check(p0, why, sizeof why), TPROF_ERR_FORMAT);
    assert_string_equal(why, "replaced by the file of another process (h1:102) since it was "
                             "read");
    assert_int_equal(tp_export_fill_memos(&run, NULL), TPROF_OK);
    assert_false(p0->comm_memo_whole); /* the load's times alone */
    int rc[2];
    export_rcs(&run, rc);
    assert_int_equal(rc[0], TPROF_ERR_FORMAT);
    assert_int_equal(rc[1], TPROF_ERR_FORMAT);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The report of the run with rank 0's file deleted after the slim load: rank 0's section is
 * what the slim process holds, and the report says why among its unreadable files. */
static void report_deleted(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    const tp_process *p0;
    load_four(dir, sizeof dir, &run, &p0);
    assert_int_equal(unlink(p0->file), 0);
    assert_int_equal(run.nerrors, 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = 1;
    tp_report r;
    assert_int_equal(tp_report_make(&run, &o, &r), TPROF_OK);
    assert_int_equal(run.nerrors, 1);
    char want[1024];
    snprintf(want, sizeof want, "%s: could not be read again for its section (cannot open: No "
             "such file or directory); the section holds only what its first read kept (no "
             "GPU records, steps, communication ops, or counters other than the GPU samples)",
             p0->path);
    assert_string_equal(run.errors[0], want);
    cJSON *u = cJSON_GetObjectItem(r.doc, "unreadable_files");
    assert_int_equal(cJSON_GetArraySize(u), 1);
    assert_string_equal(cJSON_GetArrayItem(u, 0)->valuestring, want);
    /* the first read kept its 6 all-reduces' keys (the merge matches them) but not the ops a
     * communication section shows: the section has none, said in the line above, never a
     * section of 0 ops */
    const tp_rank_result *r0 = NULL;
    for (size_t i = 0; i < r.res.nranks; i++)
        if (r.res.ranks[i].rank == 0) r0 = &r.res.ranks[i];
    assert_non_null(r0);
    assert_false(r0->comm.present);
    /* its host the run's process's, not the section job's copy of it (a stack that is gone
     * by now: the text printed garbage as the host) */
    assert_ptr_equal(r0->host, p0->hdr.host);
    const tp_process *q = tp_rank_process(&run, p0->hdr.host, p0->hdr.pid);
    assert_non_null(q);
    assert_int_equal(q->ncomm, 6);
    tp_report_free(&r);
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(truncated),
        cmocka_unit_test(grown),
        cmocka_unit_test(deleted),
        cmocka_unit_test(replaced),
        cmocka_unit_test(report_deleted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
