/*
 * test_export_cli.c — the files `trainprof export` and `trainprof report` write, through the
 * command (TPROF_CLI, given by the build): a name ending in .gz or .zst gives a file that
 * zlib or libzstd decompress to exactly the bytes written without compression, for the
 * merged trace, the per-rank traces (--compress), the Perfetto protobuf trace (--format
 * perfetto) and the report; and a rank file whose start pair is unusable is named in one line
 * by both commands.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>
#if TPROF_HAVE_ZSTD
#include <zstd.h>
#endif

#include "spawn.h"
#include "synth.h"

#ifndef TPROF_CLI
#error "TPROF_CLI (path of the trainprof command) must be defined by the build"
#endif

#define RT0 1700000000000000000ull
#define MONO0 5000000000ull
#define MS 1000000ull

typedef struct buf {
    char *p;
    size_t n;
} buf;

/* Runs the command with argv (NULL-terminated after argv[0] = TPROF_CLI); stdout and stderr
 * into files of dir. Returns its exit status. */
static int cli(const char *dir, const char *const *argv) {
    char o[600], e[600];
    snprintf(o, sizeof o, "%s/stdout", dir);
    snprintf(e, sizeof e, "%s/stderr", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) spawn_exec(argv, o, e);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static buf slurp(const char *path) {
    buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    char tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
        b.p = realloc(b.p, b.n + k + 1);
        assert_non_null(b.p);
        memcpy(b.p + b.n, tmp, k);
        b.n += k;
    }
    fclose(f);
    if (!b.p) b.p = calloc(1, 1);
    b.p[b.n] = 0;
    return b;
}

/* The gzip file at path, decompressed by zlib; it must be gzip (magic 1f 8b), not plain. */
static buf gunzip(const char *path) {
    buf raw = slurp(path);
    assert_true(raw.n >= 18);
    assert_int_equal((unsigned char)raw.p[0], 0x1f);
    assert_int_equal((unsigned char)raw.p[1], 0x8b);
    free(raw.p);
    buf b = {0};
    gzFile g = gzopen(path, "rb");
    assert_non_null(g);
    char tmp[65536];
    int k;
    while ((k = gzread(g, tmp, sizeof tmp)) > 0) {
        b.p = realloc(b.p, b.n + (size_t)k + 1);
        assert_non_null(b.p);
        memcpy(b.p + b.n, tmp, (size_t)k);
        b.n += (size_t)k;
    }
    assert_true(k == 0);
    int err = 0;
    gzerror(g, &err);
    assert_int_equal(err, Z_OK);
    gzclose(g);
    return b;
}

#if TPROF_HAVE_ZSTD
/* The zstd file at path, decompressed by libzstd's streaming decoder; the stream must end. */
static buf unzstd(const char *path) {
    buf raw = slurp(path), b = {0};
    assert_true(raw.n >= 4);
    assert_int_equal(memcmp(raw.p, "\x28\xb5\x2f\xfd", 4), 0); /* frame magic, RFC 8878 */
    ZSTD_DStream *d = ZSTD_createDStream();
    assert_non_null(d);
    ZSTD_inBuffer in = {raw.p, raw.n, 0};
    char tmp[65536];
    size_t left = 1;
    while (in.pos < in.size) {
        ZSTD_outBuffer out = {tmp, sizeof tmp, 0};
        left = ZSTD_decompressStream(d, &out, &in);
        assert_false(ZSTD_isError(left));
        b.p = realloc(b.p, b.n + out.pos + 1);
        assert_non_null(b.p);
        memcpy(b.p + b.n, tmp, out.pos);
        b.n += out.pos;
    }
    assert_int_equal(left, 0); /* the frame is complete */
    ZSTD_freeDStream(d);
    free(raw.p);
    return b;
}
#endif

static void same(buf a, buf b) {
    assert_true(a.n > 100);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    free(a.p);
    free(b.p);
}

static void path(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* Two ranks on one host; rank 0's start pair zeroed when `zeroed`. */
static void write_run(const char *dir, int zeroed) {
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, "hostC", 700 + r, zeroed && !r ? 0 : RT0,
                                   zeroed && !r ? 0 : MONO0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        for (uint64_t s = 0; s < 200; s++) {
            synth_step_begin(f, 1, MONO0 + s * MS, s);
            synth_push(f, 1, MONO0 + s * MS + 100, "forward", 0, 0);
            synth_pop(f, 1, MONO0 + s * MS + 400000, 0);
            synth_step_end(f, 1, MONO0 + s * MS + 900000, s);
        }
        synth_end_of_file(f, MONO0 + 300 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

static void test_compressed_files(void **state) {
    (void)state;
    char tmp[512], run[600], p0[700], p1[700], d0[700], d1[700];
    assert_int_equal(synth_tmpdir(tmp, sizeof tmp, "export-cli"), 0);
    path(run, sizeof run, tmp, "run");
    assert_int_equal(mkdir(run, 0755), 0);
    write_run(run, 0);

    /* the merged trace */
    path(p0, sizeof p0, tmp, "t.json");
    const char *plain[] = {TPROF_CLI, "export", run, "-o", p0, NULL};
    assert_int_equal(cli(tmp, plain), 0);
    path(p1, sizeof p1, tmp, "t.json.gz");
    const char *gz[] = {TPROF_CLI, "export", run, "-o", p1, NULL};
    assert_int_equal(cli(tmp, gz), 0);
    same(slurp(p0), gunzip(p1));
    path(p1, sizeof p1, tmp, "t.json.zst");
    const char *zs[] = {TPROF_CLI, "export", run, "-o", p1, NULL};
#if TPROF_HAVE_ZSTD
    assert_int_equal(cli(tmp, zs), 0);
    same(slurp(p0), unzstd(p1));
#else
    assert_int_equal(cli(tmp, zs), 1); /* one clear error, and no file under that name */
    assert_int_not_equal(access(p1, F_OK), 0);
#endif

    /* per rank: --compress names the files */
    path(d0, sizeof d0, tmp, "plain");
    const char *pr[] = {TPROF_CLI, "export", run, "--per-rank", d0, NULL};
    assert_int_equal(cli(tmp, pr), 0);
    path(d1, sizeof d1, tmp, "gz");
    const char *prg[] = {TPROF_CLI, "export", run, "--per-rank", d1, "--compress", "gz", NULL};
    assert_int_equal(cli(tmp, prg), 0);
    for (int r = 0; r < 2; r++) {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/rank%d.json", d0, r);
        snprintf(b, sizeof b, "%s/rank%d.json.gz", d1, r);
        same(slurp(a), gunzip(b));
        snprintf(b, sizeof b, "%s/rank%d.json", d1, r);
        assert_int_not_equal(access(b, F_OK), 0);
    }
#if TPROF_HAVE_ZSTD
    path(d1, sizeof d1, tmp, "zst");
    const char *prz[] = {TPROF_CLI, "export", run, "--per-rank", d1, "--compress", "zst", NULL};
    assert_int_equal(cli(tmp, prz), 0);
    for (int r = 0; r < 2; r++) {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/rank%d.json", d0, r);
        snprintf(b, sizeof b, "%s/rank%d.json.zst", d1, r);
        same(slurp(a), unzstd(b));
    }
#endif
    /* -o with a name that says otherwise than --compress: a usage error */
    const char *clash[] = {TPROF_CLI, "export", run, "-o", p0, "--compress", "gz", NULL};
    assert_int_equal(cli(tmp, clash), 2);

    /* the report, JSON and HTML */
    path(p0, sizeof p0, tmp, "r.json");
    path(p1, sizeof p1, tmp, "r.json.gz");
    const char *rj[] = {TPROF_CLI, "report", run, "--format", "json", "-o", p0, NULL};
    const char *rjz[] = {TPROF_CLI, "report", run, "--format", "json", "-o", p1, NULL};
    assert_int_equal(cli(tmp, rj), 0);
    assert_int_equal(cli(tmp, rjz), 0);
    same(slurp(p0), gunzip(p1));
    path(p0, sizeof p0, tmp, "r.html");
    path(p1, sizeof p1, tmp, "r.html.gz");
    const char *rh[] = {TPROF_CLI, "report", run, "--format", "html", "-o", p0, NULL};
    const char *rhz[] = {TPROF_CLI, "report", run, "--format", "html", "-o", p1, NULL};
    assert_int_equal(cli(tmp, rh), 0);
    assert_int_equal(cli(tmp, rhz), 0);
    same(slurp(p0), gunzip(p1));
    synth_rmtree(tmp);
}

/* --format perfetto: the protobuf trace (a Trace's packets: field 1, length-delimited, so its
 * first byte is 0x0a), plain under its default name and -o FILE, and the same bytes gzip- and
 * zstd-compressed when the name ends in .gz or .zst; --per-rank is Chrome JSON only. */
static void test_perfetto_files(void **state) {
    (void)state;
    char tmp[512], run[600], p0[700], p1[700];
    assert_int_equal(synth_tmpdir(tmp, sizeof tmp, "export-cli-pf"), 0);
    path(run, sizeof run, tmp, "run");
    assert_int_equal(mkdir(run, 0755), 0);
    write_run(run, 0);
    const char *def[] = {TPROF_CLI, "export", run, "--format", "perfetto", NULL};
    assert_int_equal(cli(tmp, def), 0);
    path(p0, sizeof p0, run, "trace.pftrace");
    buf d = slurp(p0);
    assert_true(d.n > 100);
    assert_int_equal((unsigned char)d.p[0], 0x0a);
    path(p0, sizeof p0, tmp, "t.pftrace");
    const char *plain[] = {TPROF_CLI, "export", run, "--format", "perfetto", "-o", p0, NULL};
    assert_int_equal(cli(tmp, plain), 0);
    same(d, slurp(p0));
    path(p1, sizeof p1, tmp, "t.pftrace.gz");
    const char *gz[] = {TPROF_CLI, "export", run, "--format", "perfetto", "-o", p1, NULL};
    assert_int_equal(cli(tmp, gz), 0);
    same(slurp(p0), gunzip(p1));
#if TPROF_HAVE_ZSTD
    path(p1, sizeof p1, tmp, "t.perfetto-trace.zst");
    const char *zs[] = {TPROF_CLI, "export", run, "--format", "perfetto", "-o", p1, NULL};
    assert_int_equal(cli(tmp, zs), 0);
    same(slurp(p0), unzstd(p1));
#endif
    const char *pr[] = {TPROF_CLI, "export", run, "--format", "perfetto", "--per-rank", p1, NULL};
    assert_int_equal(cli(tmp, pr), 2);
    const char *bad[] = {TPROF_CLI, "export", run, "--format", "pftrace", NULL};
    assert_int_equal(cli(tmp, bad), 2);
    synth_rmtree(tmp);
}

static void test_unusable_pair_named(void **state) {
    (void)state;
    char tmp[512], run[600], p0[700], err[700];
    assert_int_equal(synth_tmpdir(tmp, sizeof tmp, "export-cli-pair"), 0);
    path(run, sizeof run, tmp, "run");
    assert_int_equal(mkdir(run, 0755), 0);
    write_run(run, 1);
    const char *line = "clock pair of hostC:700 is not usable (realtime and monotonic are zero): "
                       "placed by the clock pair of hostC:701 (same host, same monotonic clock)";
    path(p0, sizeof p0, tmp, "t.json");
    path(err, sizeof err, tmp, "stderr");
    const char *ex[] = {TPROF_CLI, "export", run, "-o", p0, NULL};
    assert_int_equal(cli(tmp, ex), 0);
    buf e = slurp(err);
    char want[400];
    snprintf(want, sizeof want, "trainprof: %s\n", line);
    assert_non_null(strstr(e.p, want));
    free(e.p);
    const char *rep[] = {TPROF_CLI, "report", run, NULL};
    assert_int_equal(cli(tmp, rep), 0);
    path(p0, sizeof p0, tmp, "stdout");
    buf o = slurp(p0);
    snprintf(want, sizeof want, "  %s\n", line);
    assert_non_null(strstr(o.p, want));
    free(o.p);
    synth_rmtree(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compressed_files),
        cmocka_unit_test(test_perfetto_files),
        cmocka_unit_test(test_unusable_pair_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
