/*
 * test_damaged_files.c — what a damaged rank file still yields, and what hostile names do:
 * files torn, flipped, with a bad chunk header, empty or random, read by the loader and by
 * `trainprof report`; names and a run directory with invalid UTF-8 and control bytes.
 *
 * Damaged files are made by damaging real files the library wrote (tests/rel_victim.c,
 * rel_common.h); what a damaged file must still yield is computed from an undamaged copy
 * with the damaged chunk cut out (the reader contract in src/format/reader.h: one bad chunk
 * loses that chunk, not the file). REL_VICTIM, TPROF_CLI are paths given by
 * tests/reliability.cmake.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/steps.h"
#include "format/reader.h"
#include "rel_common.h"
#include "trainprof.h"

#ifndef REL_VICTIM
#error "REL_VICTIM (path of rel_victim) must be defined by the build"
#endif
#ifndef TPROF_CLI
#error "TPROF_CLI (path of the trainprof command) must be defined by the build"
#endif

#define GEN_STEPS 12 /* steps of the fixture's victims (`gen` mode) */

/* ================================================================== 4. damaged files */

static char g_base[PATH_MAX];          /* three healthy rank files, ranks 0..2 */
static char g_rankfile[3][PATH_MAX];

static void fixture(void) {
    if (g_base[0]) return;
    scratch(g_base, sizeof g_base, "gen");
    char envdir[PATH_MAX + 16], envrank[3][16];
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", g_base);
    pid_t pids[3];
    char steps[16];
    fmt(steps, sizeof steps, "%d", GEN_STEPS);
    for (int r = 0; r < 3; r++) {
        fmt(envrank[r], sizeof envrank[r], "RANK=%d", r);
        const char *argv[] = {REL_VICTIM, "gen", steps, NULL};
        const char *env[] = {envdir, envrank[r], "WORLD_SIZE=3", "TRAINPROF_FLUSH_MS=5", NULL};
        pids[r] = spawn(argv, env, NULL, NULL);
    }
    for (int r = 0; r < 3; r++) {
        int st = wait_for(pids[r]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    tp_run run;
    load_ok(g_base, &run);
    assert_int_equal(3, run.nprocs);
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        assert_true(p->rank >= 0 && p->rank < 3);
        assert_int_equal(GEN_STEPS, step_count(p));
        assert_int_equal(1, p->complete);
        assert_int_equal(0, p->ndamage);
        fmt(g_rankfile[p->rank], PATH_MAX, "%s", p->path);
    }
    run_done(&run);
}

typedef struct chunk_pos {
    uint64_t off, len; /* header offset, payload bytes as stored (compressed or not) */
    uint32_t serial;
} chunk_pos;

/* The thread chunk (serial != 0) in the middle of the file, never the thread's first
 * (which defines its strings). */
static chunk_pos middle_thread_chunk(const char *path) {
    tprof_reader *r;
    char err[200];
    assert_int_equal(TPROF_OK, tprof__reader_open(path, &r, err, sizeof err));
    chunk_pos all[512];
    int n = 0;
    tprof_chunk c;
    while (tprof__reader_next(r, &c) && n < 512)
        if (c.thread_serial != 0) all[n++] = (chunk_pos){c.file_offset, c.stored, c.thread_serial};
    assert_int_equal(0, tprof__reader_damage_count(r));
    tprof__reader_close(r);
    if (n < 4) fail_msg("%s has only %d thread chunks", path, n);
    return all[n / 2];
}

static void copy_range(const char *src, const char *dst, uint64_t cut_from, uint64_t cut_len) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(cut_from + cut_len <= n);
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal((ssize_t)cut_from, write(fd, b, cut_from));
    size_t rest = n - cut_from - cut_len;
    assert_int_equal((ssize_t)rest, write(fd, b + cut_from + cut_len, rest));
    close(fd);
    disown(b);
}

static void copy_file(const char *src, const char *dst) { copy_range(src, dst, 0, 0); }

static void copy_truncated(const char *src, const char *dst, uint64_t len) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(len <= n);
    write_bytes(dst, b, len);
    disown(b);
}

static void copy_flipped(const char *src, const char *dst, uint64_t off, uint8_t mask) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(off < n);
    b[off] = (char)(b[off] ^ mask);
    write_bytes(dst, b, n);
    disown(b);
}

static void path_in(char *out, size_t n, const char *dir, const char *name) {
    fmt(out, n, "%s/%s", dir, name);
}

/* Loads `damaged_dir` and `expected_dir` (same file names, rank 0 healthy in both) and
 * checks that every process holds the same events, ranges, counters and steps and is as
 * complete. The damaged run stays loaded in *keep for the caller's own checks. */
static void expect_same(const char *damaged_dir, const char *expected_dir, tp_run *keep) {
    tp_run exp;
    load_ok(expected_dir, &exp);
    load_ok(damaged_dir, keep);
    assert_int_equal(exp.nprocs, keep->nprocs);
    assert_int_equal(0, keep->nerrors);
    for (size_t i = 0; i < exp.nprocs; i++) {
        const tp_process *e = &exp.procs[i];
        const tp_process *d = proc_by_pid(keep, e->hdr.pid);
        assert_non_null(d);
        if (d->events != e->events)
            fail_msg("pid %d: %llu events in the damaged file, %llu without the bad chunk",
                     (int)e->hdr.pid, (unsigned long long)d->events,
                     (unsigned long long)e->events);
        assert_int_equal(e->rank, d->rank);
        assert_int_equal(step_count(e), step_count(d));
        static const char *const names[] = {"data_load", "forward", "matmul", "backward"};
        for (size_t k = 0; k < 4; k++)
            assert_int_equal(count_ranges(e, names[k]), count_ranges(d, names[k]));
        assert_int_equal(count_counters(e, "loss"), count_counters(d, "loss"));
        assert_int_equal(e->complete, d->complete);
    }
    run_done(&exp);
}

static void two_rank_dirs(const char *tag, char *dmg, char *exp, size_t n) {
    fixture();
    char t[64];
    fmt(t, sizeof t, "%s-dmg", tag);
    scratch(dmg, n, t);
    fmt(t, sizeof t, "%s-exp", tag);
    scratch(exp, n, t);
    char p[PATH_MAX + 300];
    path_in(p, sizeof p, dmg, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
    path_in(p, sizeof p, exp, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
}

static void print_damage(const tp_process *p) {
    for (size_t i = 0; i < p->ndamage; i++) print_message("  damage: %s\n", p->damage[i]);
}

/* Cut in the middle of a chunk's payload: everything before that chunk is kept, the file
 * is reported as torn and incomplete, rank 0 is untouched. */
static void test_damage_truncated(void **state) {
    (void)state;
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs("trunc", dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_truncated(g_rankfile[1], p, c.off + sizeof(tprof_chunk_header) + c.len / 2);
    path_in(p, sizeof p, exp, name);
    copy_truncated(g_rankfile[1], p, c.off);
    tp_run run;
    expect_same(dmg, exp, &run);
    const tp_process *r0 = NULL, *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 0) r0 = &run.procs[i];
        else if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r0);
    assert_non_null(r1);
    assert_int_equal(GEN_STEPS, step_count(r0));
    assert_int_equal(0, r0->ndamage);
    assert_true(step_count(r1) < GEN_STEPS);
    assert_true(step_count(r1) >= 2);
    assert_int_equal(0, r1->complete);
    char want[64];
    fmt(want, sizeof want, "at byte %llu", (unsigned long long)c.off);
    print_damage(r1);
    assert_true(has_damage(r1, "torn tail"));
    assert_true(has_damage(r1, want));
    assert_true(has_damage(r1, "no end record"));
    run_done(&run);
}

/* One flipped byte inside a chunk payload loses that chunk only: the reader resumes at
 * the next chunk, so later steps and the end record are still read. */
static void test_damage_flipped_payload(void **state) {
    (void)state;
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs("flip", dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_flipped(g_rankfile[1], p, c.off + sizeof(tprof_chunk_header) + c.len / 2 + 3, 0x5a);
    path_in(p, sizeof p, exp, name);
    copy_range(g_rankfile[1], p, c.off, sizeof(tprof_chunk_header) + c.len);
    tp_run run;
    expect_same(dmg, exp, &run);
    const tp_process *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r1);
    print_damage(r1);
    assert_int_equal(1, r1->complete);
    assert_int_equal(1, r1->ndamage);
    char want[96];
    fmt(want, sizeof want, "chunk checksum mismatch at byte %llu", (unsigned long long)c.off);
    assert_true(has_damage(r1, want));
    run_done(&run);
}

/* A damaged chunk header in the middle of a file (bad magic; a length that runs past the
 * end) is one damaged chunk too: the reader must scan on to the next valid chunk rather
 * than stop as if the file had been torn there. */
static void damaged_header(const char *tag, uint64_t field_off, uint8_t mask,
                           const char *what) {
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs(tag, dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_flipped(g_rankfile[1], p, c.off + field_off, mask);
    path_in(p, sizeof p, exp, name);
    copy_range(g_rankfile[1], p, c.off, sizeof(tprof_chunk_header) + c.len);
    tp_run run;
    load_ok(dmg, &run);
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) print_damage(&run.procs[i]);
    run_done(&run);
    expect_same(dmg, exp, &run);
    const tp_process *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r1);
    assert_int_equal(1, r1->complete);
    assert_true(has_damage(r1, what));
    run_done(&run);
}

static void test_damage_chunk_magic(void **state) {
    (void)state;
    damaged_header("cmagic", offsetof(tprof_chunk_header, magic), 0x01, "bad chunk magic");
}

static void test_damage_chunk_length(void **state) {
    (void)state;
    /* the high byte of payload_bytes: the chunk now claims ~1 GiB */
    damaged_header("clen", offsetof(tprof_chunk_header, payload_bytes) + 3, 0x40, "at byte");
}

static void make_random(const char *path, size_t n) {
    uint8_t *b = malloc(n);
    assert_non_null(b);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
    write_bytes(path, b, n);
    free(b);
}

/* Files that cannot be read at all are named with the reason; the healthy rank is
 * reported in full. */
static void test_damage_unreadable(void **state) {
    (void)state;
    fixture();
    char dir[PATH_MAX], p[PATH_MAX + 300];
    scratch(dir, sizeof dir, "unreadable");
    path_in(p, sizeof p, dir, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
    struct { const char *name, *reason; } bad[] = {
        {"badmagic.tprof", "bad magic"},
        {"empty.tprof", "too short"},
        {"random.tprof", "bad magic"},
        {"headercut.tprof", "too short"},
        {"badcrc.tprof", "header checksum mismatch"},
    };
    path_in(p, sizeof p, dir, bad[0].name);
    copy_file(g_rankfile[1], p);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(8, pwrite(fd, "NOTPROF!", 8, 0));
    close(fd);
    path_in(p, sizeof p, dir, bad[1].name);
    write_bytes(p, "", 0);
    path_in(p, sizeof p, dir, bad[2].name);
    make_random(p, 8192);
    path_in(p, sizeof p, dir, bad[3].name);
    copy_truncated(g_rankfile[1], p, 100);
    path_in(p, sizeof p, dir, bad[4].name);
    copy_flipped(g_rankfile[1], p, offsetof(tprof_file_header, host) + 1, 0x20);

    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    assert_int_equal(0, run.procs[0].rank);
    assert_int_equal(GEN_STEPS, step_count(&run.procs[0]));
    assert_int_equal(0, run.procs[0].ndamage);
    assert_int_equal(5, run.nerrors);
    for (size_t i = 0; i < 5; i++) {
        path_in(p, sizeof p, dir, bad[i].name);
        int found = 0;
        for (size_t k = 0; k < run.nerrors; k++)
            found |= strstr(run.errors[k], p) && strstr(run.errors[k], bad[i].reason);
        if (!found) {
            for (size_t k = 0; k < run.nerrors; k++) print_message("error: %s\n", run.errors[k]);
            fail_msg("no error line names %s with '%s'", p, bad[i].reason);
        }
    }
    run_done(&run);

    /* with no readable file left, report fails and names every file */
    path_in(p, sizeof p, dir, base_name(g_rankfile[0]));
    assert_int_equal(0, unlink(p));
    char *out, *err;
    const char *argv[] = {TPROF_CLI, "report", dir, NULL};
    int st = run_capture(argv, NULL, &out, &err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    for (size_t i = 0; i < 5; i++)
        if (!strstr(err, bad[i].name)) fail_msg("stderr does not name %s: %s", bad[i].name, err);
    assert_string_equal("", out);
    str_done(out);
    str_done(err);
}

static const cJSON *report_rank(const cJSON *rep, int rank) {
    const cJSON *r;
    cJSON_ArrayForEach(r, jget(rep, "ranks"))
        if ((int)jnum(r, "rank") == rank) return r;
    fail_msg("report.json has no rank %d", rank);
    return NULL;
}

static const cJSON *report_process(const cJSON *rep, const char *file_base) {
    const cJSON *p;
    cJSON_ArrayForEach(p, jget(rep, "processes")) {
        const cJSON *f = jget(p, "file");
        if (cJSON_IsString(f) && !strcmp(base_name(f->valuestring), file_base)) return p;
    }
    fail_msg("report.json has no process for %s", file_base);
    return NULL;
}

static int json_array_has(const cJSON *arr, const char *a, const char *b) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        if (cJSON_IsString(e) && strstr(e->valuestring, a) && (!b || strstr(e->valuestring, b)))
            return 1;
    return 0;
}

/* Everything at once, through the command line: the JSON and text reports name each
 * damaged file and its damage, and still report every rank and step that survived. */
static void test_damage_report_cli(void **state) {
    (void)state;
    fixture();
    char dir[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    scratch(dir, sizeof dir, "alldamage");
    scratch(exp, sizeof exp, "alldamage-exp");
    const char *n0 = base_name(g_rankfile[0]), *n1 = base_name(g_rankfile[1]),
               *n2 = base_name(g_rankfile[2]);
    path_in(p, sizeof p, dir, n0);
    copy_file(g_rankfile[0], p);
    chunk_pos c1 = middle_thread_chunk(g_rankfile[1]);
    path_in(p, sizeof p, dir, n1);
    copy_truncated(g_rankfile[1], p, c1.off + sizeof(tprof_chunk_header) + c1.len / 2);
    path_in(p, sizeof p, exp, n1);
    copy_truncated(g_rankfile[1], p, c1.off);
    chunk_pos c2 = middle_thread_chunk(g_rankfile[2]);
    path_in(p, sizeof p, dir, n2);
    copy_flipped(g_rankfile[2], p, c2.off + sizeof(tprof_chunk_header) + c2.len / 2, 0x80);
    path_in(p, sizeof p, exp, n2);
    copy_range(g_rankfile[2], p, c2.off, sizeof(tprof_chunk_header) + c2.len);
    path_in(p, sizeof p, dir, "empty.tprof");
    write_bytes(p, "", 0);
    path_in(p, sizeof p, dir, "random.tprof");
    make_random(p, 4096);

    tp_run e;
    load_ok(exp, &e);
    assert_int_equal(2, e.nprocs);
    size_t steps1 = 0, steps2 = 0;
    uint64_t ev1 = 0, ev2 = 0;
    for (size_t i = 0; i < e.nprocs; i++) {
        if (e.procs[i].rank == 1) { steps1 = step_count(&e.procs[i]); ev1 = e.procs[i].events; }
        if (e.procs[i].rank == 2) { steps2 = step_count(&e.procs[i]); ev2 = e.procs[i].events; }
    }
    run_done(&e);

    char json[PATH_MAX + 16];
    fmt(json, sizeof json, "%s/report.json", exp);
    const char *argv[] = {TPROF_CLI, "report", dir, "--format", "json", "-o", json, NULL};
    char *out, *err;
    int st = run_capture(argv, NULL, &out, &err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("report failed (0x%x): %s", st, err);
    str_done(out);
    str_done(err);
    cJSON *rep = load_json(json);
    const cJSON *run = jget(rep, "run");
    assert_int_equal(3, (int)jnum(run, "processes"));
    assert_int_equal(3, (int)jnum(run, "ranks"));
    assert_int_equal(3, cJSON_GetArraySize(jget(rep, "ranks")));
    /* steps per rank: API steps minus the warm-up step */
    const cJSON *s0 = jget(report_rank(rep, 0), "steps");
    const cJSON *s1 = jget(report_rank(rep, 1), "steps");
    const cJSON *s2 = jget(report_rank(rep, 2), "steps");
    assert_int_equal(GEN_STEPS, (int)jnum(s0, "count"));
    assert_int_equal((int)steps1, (int)jnum(s1, "count"));
    assert_int_equal((int)steps2, (int)jnum(s2, "count"));
    assert_int_equal(GEN_STEPS - 1, (int)jnum(s0, "measured"));
    const cJSON *p0 = report_process(rep, n0), *p1 = report_process(rep, n1),
                *p2 = report_process(rep, n2);
    assert_true(cJSON_IsTrue(jget(p0, "complete")));
    assert_int_equal(0, cJSON_GetArraySize(jget(p0, "damage")));
    assert_true(cJSON_IsFalse(jget(p1, "complete")));
    assert_true(json_array_has(jget(p1, "damage"), "torn tail", NULL));
    assert_true(cJSON_IsTrue(jget(p2, "complete")));
    assert_true(json_array_has(jget(p2, "damage"), "chunk checksum mismatch", NULL));
    assert_int_equal((int)ev1, (int)jnum(p1, "events"));
    assert_int_equal((int)ev2, (int)jnum(p2, "events"));
    const cJSON *un = jget(rep, "unreadable_files");
    assert_int_equal(2, cJSON_GetArraySize(un));
    assert_true(json_array_has(un, "empty.tprof", "too short"));
    assert_true(json_array_has(un, "random.tprof", "bad magic"));
    json_done(rep);

    /* the text report names the damaged and unreadable files */
    const char *targv[] = {TPROF_CLI, "report", dir, NULL};
    st = run_capture(targv, NULL, &out, &err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char want[512];
    fmt(want, sizeof want, "damage in %s: torn tail", n1);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "damage in %s: chunk checksum mismatch at byte %llu", n2,
             (unsigned long long)c2.off);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "unreadable: %s/empty.tprof", dir);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "unreadable: %s/random.tprof", dir);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    assert_non_null(strstr(out, "rank 0"));
    assert_non_null(strstr(out, "rank 1"));
    assert_non_null(strstr(out, "rank 2"));
    str_done(out);
    str_done(err);
}

/* ================================================================== 6. hostile names */

/* What the model must make of each name rel_victim records (same order): bytes that are
 * not valid UTF-8 become U+FFFD, one per byte; everything else is kept as is. */
#define FFFD "\xef\xbf\xbd"
static const char *const names_expected[] = {
    "quote\"back\\slash",
    "new\nline\ttab\rcr",
    "ctl\x01\x02\x1b[31m\x7f",
    "bad" FFFD FFFD " utf8",
    "trunc" FFFD FFFD,
    "overlong" FFFD FFFD,
    "lead" FFFD "(",
    "ok \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
};
#define NNAMES (sizeof names_expected / sizeof *names_expected)

static void run_names_victim(const char *dir) {
    char envdir[PATH_MAX + 16];
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    const char *argv[] = {REL_VICTIM, "names", NULL};
    const char *env[] = {envdir, NULL};
    int st = run_capture(argv, env, NULL, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void check_names_report(const char *json_path) {
    cJSON *rep = load_json(json_path);
    const cJSON *r0 = report_rank(rep, 0);
    const cJSON *rows = jget(jget(r0, "ranges"), "top_inclusive");
    for (size_t i = 0; i < NNAMES; i++) {
        const cJSON *row, *hit = NULL;
        cJSON_ArrayForEach(row, rows) {
            const cJSON *n = jget(row, "name");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, names_expected[i])) hit = row;
        }
        if (!hit) fail_msg("report.json lacks range name #%zu", i);
        assert_int_equal(3, (int)jnum(hit, "count"));
    }
    json_done(rep);
}

static void test_hostile_names(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "names");
    run_names_victim(dir);

    /* the model: every name, as range, mark and counter, made valid UTF-8 */
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    const tp_process *p = &run.procs[0];
    for (size_t i = 0; i < NNAMES; i++) {
        assert_int_equal(3, count_ranges(p, names_expected[i]));
        assert_int_equal(1, count_counters(p, names_expected[i]));
        size_t marks = 0;
        for (size_t t = 0; t < p->nthreads; t++)
            for (size_t k = 0; k < p->threads[t].nmarks; k++)
                marks += !strcmp(p->threads[t].marks[k].name, names_expected[i]);
        assert_int_equal(1, marks);
    }
    run_done(&run);

    char json[PATH_MAX + 16];
    fmt(json, sizeof json, "%s/r.json", dir);
    const char *argv[] = {TPROF_CLI, "report", dir, "--format", "json", "-o", json, NULL};
    int st = run_capture(argv, NULL, NULL, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    check_names_report(json);

    /* the text report: valid UTF-8, control bytes shown as '?', one name per line */
    const char *targv[] = {TPROF_CLI, "report", dir, NULL};
    char *out;
    st = run_capture(targv, NULL, &out, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const unsigned char *s = (const unsigned char *)out;
    for (size_t i = 0; s[i];) {
        if (s[i] >= 0x80) {
            size_t l = utf8_seq(s + i, strlen(out) - i);
            if (!l) fail_msg("text report: invalid UTF-8 at byte %zu", i);
            i += l;
            continue;
        }
        if ((s[i] < 0x20 && s[i] != '\n') || s[i] == 0x7f)
            fail_msg("text report: raw control byte 0x%02x at byte %zu", s[i], i);
        i++;
    }
    assert_non_null(strstr(out, "new?line?tab?cr"));
    assert_non_null(strstr(out, "quote\"back\\slash"));
    assert_non_null(strstr(out, "lead" FFFD "("));
    str_done(out);
}

/* The same through `trainprof run` into a directory whose name is itself hostile (it
 * becomes the run id): report.json must still be valid UTF-8 JSON. */
static void test_hostile_run_dir(void **state) {
    (void)state;
    char parent[PATH_MAX], dir[PATH_MAX + 32];
    scratch(parent, sizeof parent, "hostile-dir");
    fmt(dir, sizeof dir, "%s/run-\xff\xfe-\x01-\"q\"", parent);
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--", REL_VICTIM, "names",
                          NULL};
    char *err;
    int st = run_capture(argv, NULL, NULL, &err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("trainprof run: 0x%x %s", st, err);
    str_done(err);
    char json[PATH_MAX + 64];
    fmt(json, sizeof json, "%s/report.json", dir);
    check_names_report(json);
}

/* ================================================================== main */

int main(void) {
    /* this process never records: make sure no lazy session could start in it */
    unsetenv("TRAINPROF_DIR");
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_damage_truncated, release_all),
        cmocka_unit_test_teardown(test_damage_flipped_payload, release_all),
        cmocka_unit_test_teardown(test_damage_chunk_magic, release_all),
        cmocka_unit_test_teardown(test_damage_chunk_length, release_all),
        cmocka_unit_test_teardown(test_damage_unreadable, release_all),
        cmocka_unit_test_teardown(test_damage_report_cli, release_all),
        cmocka_unit_test_teardown(test_hostile_names, release_all),
        cmocka_unit_test_teardown(test_hostile_run_dir, release_all),
    };
    return cmocka_run_group_tests_name("damaged_files", tests, rel_group_setup, rel_group_teardown);
}
