/*
 * rel_common.h — what the reliability tests share (test_kill_fork.c: signals and fork of a
 * profiled process; test_damaged_files.c: damaged rank files and hostile names).
 *
 * The processes under test are real: tests/rel_victim.c, linked with libtrainprof, run as
 * a child (fork + exec) with a clean environment and default signal dispositions, and
 * reports progress through a pipe only after the events it speaks of were flushed, so the
 * tests can assert lower bounds (or exact counts) on what the rank file holds.
 *
 * Scratch files live under $TPROF_TEST_TMP (else /tmp) in g_root, made by rel_group_setup
 * and removed by rel_group_teardown unless REL_KEEP is set. What a test holds is registered
 * with own() and released by the per-test teardown release_all, so that a failing
 * assertion (a longjmp out of the test) does not show up as a leak in the ASan build.
 * Single-threaded, as cmocka runs the tests: one after the other in one process. Failures
 * are cmocka failures (fail_msg), never return codes, except where said.
 */
#ifndef TPROF_TESTS_REL_COMMON_H
#define TPROF_TESTS_REL_COMMON_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "fmt.h"

#define WAIT_MS 30000 /* the longest a victim may take to report or to end */

extern char g_root[PATH_MAX]; /* the group's scratch directory */

/* The scratch directory of the group; its removal (unless REL_KEEP). cmocka group
 * setup/teardown: 0, or -1 with a line on stderr. */
int rel_group_setup(void **state);
int rel_group_teardown(void **state);

/* ------------------------------------------------------------------ small helpers */

/* A fresh directory g_root/TAG-XXXXXX in out. */
void scratch(char *out, size_t n, const char *tag);
/* The whole file, NUL-terminated (malloc'ed, the caller frees), its length in *len (may be
 * NULL); NULL when it cannot be read. */
char *slurp(const char *path, size_t *len);
void write_bytes(const char *path, const void *data, size_t n);
/* What follows the last '/' of p. */
const char *base_name(const char *p);
/* Names of the *.tprof files of dir (count returned, up to max). */
int tprof_files(const char *dir, char names[][256], int max);

/* ------------------------------------------------------------------ cleanup on failure */

/* Registers fn(arg) under key, to run at disown(key) or at the test's teardown. */
void own(const void *key, void (*fn)(void *), void *arg);
void disown(const void *key);
/* The per-test teardown: runs everything still registered. */
int release_all(void **state);
/* Frees a run loaded by load_ok, a document of load_json, a string of run_capture. */
void run_done(tp_run *run);
void json_done(cJSON *j);
void str_done(char *s);

/* ------------------------------------------------------------------ processes */

/* Starts argv with default SIGTERM/SIGINT/SIGPIPE, an empty signal mask, no TRAINPROF_* or
 * launcher rank variables from the outside (and no process or NVML sampler), plus `env`
 * (NAME=VALUE, NULL-terminated); stdout and stderr to the paths when not NULL. */
pid_t spawn(const char *const argv[], const char *const env[], const char *out_path,
            const char *err_path);
/* The wait status; the process is killed and the test fails after WAIT_MS. */
int wait_for(pid_t pid);
/* Runs argv to completion; stdout/stderr captured (owned). Returns the wait status. */
int run_capture(const char *const argv[], const char *const env[], char **out, char **err);

/* A pipe whose write end survives exec (as "FD" text) and whose read end does not. */
typedef struct progress {
    int rd, wr;
    char wr_text[16];
    char buf[8192];
    size_t len;
} progress;
void progress_open(progress *p);
/* Call after spawning the writer(s): only they hold the write end then. */
void progress_started(progress *p);
/* 1 with a line, 0 at EOF, -1 on timeout. */
int progress_line(progress *p, char *out, size_t n, int timeout_ms);
void progress_close(progress *p);

/* ------------------------------------------------------------------ model queries */

const tp_process *proc_by_pid(const tp_run *run, long pid);
size_t count_ranges(const tp_process *p, const char *name);
size_t count_counters(const tp_process *p, const char *name);
/* Every range, mark and counter name of p starts with `prefix`: NULL; else the offender. */
const char *name_not_prefixed(const tp_process *p, const char *prefix);
/* The steps of p marked through the API (0 when its steps come from elsewhere). */
size_t step_count(const tp_process *p);
/* Whether a damage note of p holds `needle`. */
int has_damage(const tp_process *p, const char *needle);
/* tp_run_load, owned; the test fails when it does. */
void load_ok(const char *dir, tp_run *run);
/* The file of a `loop`/`handler` victim: returns M, the number of "iter" samples, after
 * checking that they are exactly 0..M-1, that M >= `at_least`, that "work" ranges number
 * M or M+1, that nothing was dropped, and that the file is complete (`complete`). */
size_t check_loop_file(const char *dir, unsigned long long at_least, int complete);

/* ------------------------------------------------------------------ JSON validity */

/* Length of the valid UTF-8 sequence at s (RFC 3629), or 0. */
size_t utf8_seq(const unsigned char *s, size_t n);
/* Reads, checks (valid UTF-8, no raw control byte in a string) and parses a JSON file the
 * command wrote; owned. */
cJSON *load_json(const char *path);
/* Member k of o (the test fails without it); its number. */
const cJSON *jget(const cJSON *o, const char *k);
double jnum(const cJSON *o, const char *k);

#endif
