/*
 * test_summary.c — rank summaries (analysis/summary.h, `trainprof summarize`): the report of a
 * run read from its summaries is the report read from its rank files, byte for byte in JSON,
 * text and HTML; a summary made stale (its rank file touched, appended or replaced, the NVML
 * sampler's file touched, an option a section reads changed) or damaged (truncated, garbage,
 * a byte of its key or body flipped) is never used: its section is computed again, the report
 * is the one without summaries, and its text says how many were recomputed. The options a
 * section does not read leave every summary valid, and the report the same as without them.
 * Inputs: the synthetic run of slim_runs.h (four ranks on two hosts, a node sampler, a helper)
 * and the fuzz corpus's rank files (each alone, as one run, and beside a torch.profiler
 * trace), copied into a temporary directory since summaries are written beside rank files.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "analysis/clocks.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/summary.h"
#include "export/chrome.h"
#include "trainprof.h"
#include "chrome_out.h" /* after the headers it needs */
#include "report_text.h"
#include "slim_runs.h"
#include "synth.h"

/* The report of ops (slim) with options o, rendered three ways into one string (owned); the
 * summaries it read and found stale, the processes its load took from summaries and the
 * run's slim processes into used (slim_render_used). */
static char *render(const char *const *ops, size_t nops, const tp_report_opts *o,
                    size_t used[4]) {
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, nops, &run, err, sizeof err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    slim_render_used(&run, o, f, used);
    fclose(f);
    tp_run_free(&run);
    return buf;
}

/* `trainprof summarize` of ops with options o on 3 threads: its count into *st (errors
 * freed). */
static void summarize(const char *const *ops, size_t nops, const tp_report_opts *o,
                      tp_summarize_stats *st) {
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, nops, &run, err, sizeof err), 0);
    tp_report_opts so = *o;
    so.threads = 3;
    assert_int_equal(tp_report_summarize(&run, &so, NULL, st), 0);
    for (size_t i = 0; i < st->nerrors; i++) fprintf(stderr, "  summarize: %s\n", st->errors[i]);
    assert_int_equal(st->written + st->current + st->failed, st->files);
    tp_run_free(&run);
    for (size_t i = 0; i < st->nerrors; i++) free(st->errors[i]);
    free(st->errors);
    st->errors = NULL;
    st->nerrors = 0;
}

/* Renames every summary in the directories dirs[0..n) (or beside the files) from suffix
 * `from` to `to`: hidden from the report (".hidden") and back. Returns how many. */
static size_t rename_sums(char dirs[][600], size_t n, const char *from, const char *to) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name), fl = strlen(from);
            if (l < fl || strcmp(e->d_name + l - fl, from)) continue;
            char a[1400], b[1400];
            snprintf(a, sizeof a, "%s/%s", dirs[i], e->d_name);
            snprintf(b, sizeof b, "%s/%.*s%s", dirs[i], (int)(l - fl), e->d_name, to);
            assert_int_equal(rename(a, b), 0);
            k++;
        }
        closedir(d);
    }
    return k;
}

static const char STALE_LINE[] =
    " out of date, recomputed from the rank files (the rank file, or this report's --step-name, "
    "--warmup, --data-names, --top or --gpu-records, or TRAINPROF_COMM_KEEP, changed since "
    "`trainprof summarize`, the run "
    "was copied, another trainprof build wrote it, or the summary is damaged or could not be "
    "read)\n";

/* Removes the text's line "  N summar(y|ies) out of date, recomputed ..." (there must be
 * one). */
static void drop_stale_line(char *s) {
    char *at = strstr(s, STALE_LINE);
    assert_non_null(at);
    char *from = at;
    while (from > s && from[-1] != '\n') from--;
    memmove(from, at + strlen(STALE_LINE), strlen(at + strlen(STALE_LINE)) + 1);
    assert_null(strstr(s, STALE_LINE));
}

/* A copied run: the operands' copies (directories dirs[], each operand's files in one). */
typedef struct copied {
    char top[512];
    char dirs[4][600];
    char ops[4][1400];
    const char *opv[4];
    size_t n;
} copied;

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0) assert_int_equal(fwrite(buf, 1, k, b), k);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

/* Copies each operand (a directory's files, or one file) into a directory of its own. */
static void copy_ops(copied *c, const char *const *ops, size_t n) {
    assert_true(n <= 4);
    assert_int_equal(synth_tmpdir(c->top, sizeof c->top, "summary"), 0);
    c->n = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(c->dirs[i], sizeof c->dirs[i], "%s/op%zu", c->top, i);
        assert_int_equal(mkdir(c->dirs[i], 0755), 0);
        struct stat st;
        assert_int_equal(stat(ops[i], &st), 0);
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(ops[i]);
            assert_non_null(d);
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                char a[1400], b[1400];
                snprintf(a, sizeof a, "%s/%s", ops[i], e->d_name);
                snprintf(b, sizeof b, "%s/%s", c->dirs[i], e->d_name);
                if (stat(a, &st) == 0 && S_ISREG(st.st_mode)) copy_file(a, b);
            }
            closedir(d);
            snprintf(c->ops[i], sizeof c->ops[i], "%s", c->dirs[i]);
        } else {
            const char *base = strrchr(ops[i], '/');
            snprintf(c->ops[i], sizeof c->ops[i], "%s/%s", c->dirs[i], base ? base + 1 : ops[i]);
            copy_file(ops[i], c->ops[i]);
        }
        c->opv[i] = c->ops[i];
    }
}

/* The report of c with options o without its summaries (hidden meanwhile). */
static char *without_sums(copied *c, const tp_report_opts *o) {
    size_t hidden = rename_sums(c->dirs, c->n, TP_SUMMARY_SUFFIX, ".hidden");
    size_t used[4];
    char *r = render(c->opv, c->n, o, used);
    assert_int_equal(used[0] + used[1] + used[2], 0);
    assert_int_equal(rename_sums(c->dirs, c->n, ".hidden", TP_SUMMARY_SUFFIX), hidden);
    return r;
}

/* Every slim process of the run taken from its summary: no rank file decoded. */
#define ALL_SLIM SIZE_MAX

/* The report of c with options o read from its summaries equals the one without them; then
 * `expect_read` sections are read from summaries, `expect_stale` of them are stale and the
 * text says so, and the load took `expect_slims` processes from their summaries (ALL_SLIM:
 * every one, no rank file decoded). */
static void same_with_sums(copied *c, const tp_report_opts *o, size_t expect_read,
                           size_t expect_stale, size_t expect_slims, const char *label) {
    size_t used[4];
    char *with = render(c->opv, c->n, o, used);
    char *plain = without_sums(c, o);
    if (expect_slims == ALL_SLIM) {
        assert_true(used[3] >= 1);
        expect_slims = used[3];
    }
    if (used[0] != expect_read || used[1] != expect_stale || used[2] != expect_slims)
        fprintf(stderr, "%s: %zu summaries read, %zu stale, %zu slim processes; expected %zu, "
                        "%zu and %zu\n",
                label, used[0], used[1], used[2], expect_read, expect_stale, expect_slims);
    assert_int_equal(used[0], expect_read);
    assert_int_equal(used[1], expect_stale);
    assert_int_equal(used[2], expect_slims);
    if (expect_stale) drop_stale_line(with);
    else assert_null(strstr(with, STALE_LINE));
    slim_same(c->ops[0], label, "without summaries", plain, "with summaries", with);
    free(with);
    free(plain);
}

/* The corpus and the synthetic run: every operand list given to this, the report from
 * summaries against the report without, and a changed option making all of them stale. */
static void summarized_same(const char *const *ops, size_t n, int must_compare) {
    copied c;
    copy_ops(&c, ops, n);
    tp_report_opts o;
    tp_report_opts_init(&o);
    tp_summarize_stats st;
    summarize(c.opv, c.n, &o, &st);
    assert_int_equal(st.current, 0);
    assert_int_equal(st.written, st.files); /* every file's: the other processes' too */
    if (must_compare) assert_true(st.ranks >= 2);
    same_with_sums(&c, &o, st.ranks, 0, ALL_SLIM, "from summaries");
    /* once more: every summary is current and left as it is */
    tp_summarize_stats again;
    summarize(c.opv, c.n, &o, &again);
    assert_int_equal(again.current, st.written);
    assert_int_equal(again.written, 0);
    /* a warm-up the summaries were not made with: all recomputed */
    o.warmup = 2;
    same_with_sums(&c, &o, 0, st.ranks, ALL_SLIM, "another warm-up");
    synth_rmtree(c.top);
}

static void corpus(void **state) {
    (void)state;
    slim_corpus(summarized_same);
}

/* The diagnosis scenarios: memory timelines, NVML throttling, host synchronisation, data
 * loading, two hosts. */
static void scenarios(void **state) {
    (void)state;
    slim_scenarios(summarized_same);
}

/* Summaries of a node sampler whose first thread has more GPU names than a packed table
 * holds (its counters coded as an array) and whose second has one (coded packed): the report
 * from them is the one without. */
static void wide_sampler(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "summary-wide-sampler"), 0);
    slim_wide_sampler_run(dir);
    const char *ops[] = {dir};
    summarized_same(ops, 1, 0);
    synth_rmtree(dir);
}

/* The synthetic run of four ranks, summarised, in a copy of its own. */
static void four_ranks_summarised(copied *c, tp_report_opts *o) {
    char src[512];
    assert_int_equal(synth_tmpdir(src, sizeof src, "summary-src"), 0);
    four_ranks_run(src);
    const char *ops[] = {src};
    copy_ops(c, ops, 1);
    synth_rmtree(src);
    tp_report_opts_init(o);
    tp_summarize_stats st;
    summarize(c->opv, 1, o, &st);
    assert_int_equal(st.files, 6); /* the ranks, the node sampler and the helper */
    assert_int_equal(st.ranks, 4); /* a section in the ranks' alone */
    assert_int_equal(st.written, 6);
}

/* The path of the rank file with process id pid in c, and its summary's. */
static void rank_path(const copied *c, int pid, char file[700], char sum[800]) {
    snprintf(file, 700, "%s/h%d-%d.tprof", c->dirs[0], (pid - 100) / 2, pid);
    snprintf(sum, 800, "%s%s", file, TP_SUMMARY_SUFFIX);
    assert_true(synth_file_size(file) > 0);
}

static void synthetic_run(void **state) {
    (void)state;
    const char *ops[1];
    char src[512];
    assert_int_equal(synth_tmpdir(src, sizeof src, "summary-four"), 0);
    four_ranks_run(src);
    ops[0] = src;
    summarized_same(ops, 1, 1);
    synth_rmtree(src);
}

/* Where summary file `sum`'s blocks are (summary.c's head comment): the slim block's key and
 * body, the section block's key, each its first byte. */
typedef struct sum_layout {
    long slim_key, slim_body, section_key;
} sum_layout;

static sum_layout layout_of(const char *sum) {
    FILE *f = fopen(sum, "rb");
    assert_non_null(f);
    uint64_t klen, blen;
    sum_layout l;
    assert_int_equal(fseek(f, 12, SEEK_SET), 0);
    assert_int_equal(fread(&klen, 8, 1, f), 1);
    l.slim_key = 20;
    assert_int_equal(fseek(f, (long)klen, SEEK_CUR), 0);
    assert_int_equal(fread(&blen, 8, 1, f), 1);
    l.slim_body = 20 + (long)klen + 12;
    l.section_key = l.slim_body + (long)blen + 8;
    assert_int_equal(fseek(f, l.section_key - 8, SEEK_SET), 0);
    assert_int_equal(fread(&klen, 8, 1, f), 1);
    assert_true(klen > 0 && l.section_key + (long)klen < synth_file_size(sum));
    assert_true(blen > 100); /* a slim process: its metadata and threads at least */
    fclose(f);
    return l;
}

/* Each way a summary goes out of date or is damaged: the part concerned is computed again
 * (the counts say which: the slim process decoded from the rank file, the section read from
 * it), and the report is the one without summaries. */
static void stale_and_damaged(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "fresh");
    char file[700], sum[800], other[700], osum[800];
    rank_path(&c, 100, file, sum);
    rank_path(&c, 101, other, osum);
    sum_layout l = layout_of(sum);
    /* damaged summaries: truncated, garbage, a byte of either key or either body */
    char keep[900];
    snprintf(keep, sizeof keep, "%s.keep", sum);
    copy_file(sum, keep);
    assert_int_equal(synth_truncate(sum, synth_file_size(sum) - 100), 0);
    same_with_sums(&c, &o, 3, 1, ALL_SLIM, "truncated in its section");
    assert_int_equal(synth_truncate(sum, l.slim_body + 10), 0);
    same_with_sums(&c, &o, 3, 1, 5, "truncated in its slim block");
    FILE *g = fopen(sum, "wb");
    assert_non_null(g);
    fputs("not a summary at all\n", g);
    fclose(g);
    same_with_sums(&c, &o, 3, 1, 5, "garbage");
    /* the slim block's: the file decoded, its section still read from the summary */
    copy_file(keep, sum);
    assert_int_equal(synth_flip_byte(sum, l.slim_key + 20, 0x10), 0);
    same_with_sums(&c, &o, 4, 0, 5, "slim key byte");
    copy_file(keep, sum);
    assert_int_equal(synth_flip_byte(sum, l.slim_body + 30, 0x01), 0);
    same_with_sums(&c, &o, 4, 0, 5, "slim body byte");
    /* the section block's: the slim process still taken from the summary */
    copy_file(keep, sum);
    assert_int_equal(synth_flip_byte(sum, l.section_key + 20, 0x10), 0);
    same_with_sums(&c, &o, 3, 1, ALL_SLIM, "section key byte");
    copy_file(keep, sum);
    assert_int_equal(synth_flip_byte(sum, -3, 0x01), 0);
    same_with_sums(&c, &o, 3, 1, ALL_SLIM, "section body byte");
    copy_file(keep, sum);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "restored");
    /* the rank file touched (its time), then appended to, then replaced by another's */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 5}};
    assert_int_equal(utimensat(AT_FDCWD, file, ts, 0), 0);
    same_with_sums(&c, &o, 3, 1, 5, "rank file touched");
    tp_summarize_stats st;
    summarize(c.opv, 1, &o, &st);
    assert_int_equal(st.written, 1);
    assert_int_equal(st.current, 5);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "summarised again");
    /* a damaged slim block alone is no current summary: summarize writes it again */
    assert_int_equal(synth_flip_byte(sum, layout_of(sum).slim_body + 30, 0x01), 0);
    summarize(c.opv, 1, &o, &st);
    assert_int_equal(st.written, 1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "slim block written again");
    FILE *a = fopen(file, "ab");
    assert_non_null(a);
    fputs("appended", a);
    fclose(a);
    same_with_sums(&c, &o, 3, 1, 5, "rank file appended");
    /* rank 0's file now holds rank 1's process: the file of the same process read second
     * becomes its helper (no section); ranks 2 and 3 keep theirs */
    copy_file(other, file);
    same_with_sums(&c, &o, 2, 1, 5, "rank file replaced");
    synth_rmtree(c.top);
}

/* Summary `sum`'s slim body with n bytes at `at` (from the body's start; from its end when
 * negative) replaced by v, its CRC made right: a body the reader cannot tell from a true one
 * by its checksum. The bytes replaced go into old (n bytes) when it is given. */
static void forge_slim(const char *sum, long at, const void *v, size_t n, void *old) {
    sum_layout l = layout_of(sum);
    FILE *f = fopen(sum, "r+b");
    assert_non_null(f);
    uint64_t blen;
    assert_int_equal(fseek(f, l.slim_body - 12, SEEK_SET), 0);
    assert_int_equal(fread(&blen, 8, 1, f), 1);
    unsigned char *body = malloc(blen);
    assert_non_null(body);
    assert_int_equal(fseek(f, l.slim_body, SEEK_SET), 0);
    assert_int_equal(fread(body, 1, blen, f), blen);
    size_t off = at < 0 ? (size_t)((long)blen + at) : (size_t)at;
    assert_true(off + n <= blen);
    if (old) memcpy(old, body + off, n);
    memcpy(body + off, v, n);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), body, (uInt)blen);
    assert_int_equal(fseek(f, l.slim_body - 4, SEEK_SET), 0);
    assert_int_equal(fwrite(&crc, 4, 1, f), 1);
    assert_int_equal(fwrite(body, 1, blen, f), blen);
    assert_int_equal(fclose(f), 0);
    free(body);
}

/* Summarize on c writes `written` summaries and finds the rest (of 6 files) current. */
static void summarize_writes(copied *c, const tp_report_opts *o, size_t written) {
    tp_summarize_stats st;
    summarize(c->opv, 1, o, &st);
    assert_int_equal(st.written, written);
    assert_int_equal(st.current, 6 - written);
}

/* Slim bodies that decode, their CRCs made right, that do not stand for their file:
 * - record counts that lie, with the section damaged so that the section is computed again
 *   from the rank file: the whole load sizes its arrays by the slim process's counts
 *   (model.c, reserve_like), where 2^63 GPU records wrapped the allocation's size to nothing.
 *   The count is more records than the file has bytes: the slim block is not valid, the file
 *   is decoded, and the report is the one without summaries. With the section whole,
 *   summarize does not leave as current a slim block the reader refuses: it writes it again;
 * - another file size, or a header other than the file's (its start time, its host): the
 *   load decodes the file, and summarize writes the summary again. */
static void lying_counts(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char file[700], sum[800], keep[900];
    rank_path(&c, 100, file, sum);
    snprintf(keep, sizeof keep, "%s.keep", sum);
    copy_file(sum, keep);
    /* the body ends with the file's size and the seven record counts (summary_slim.c) */
    uint64_t file_bytes, nrec[5], big = (uint64_t)1 << 63;
    forge_slim(sum, -56, &big, 8, nrec);
    /* given as its own old bytes: read, and written back as it was */
    forge_slim(sum, -64, &file_bytes, 8, &file_bytes);
    assert_int_equal(file_bytes, (uint64_t)synth_file_size(file));
    assert_true(nrec[0] > 0 && nrec[0] < file_bytes); /* the rank's GPU records */
    char forged[900];
    snprintf(forged, sizeof forged, "%s.forged", sum);
    copy_file(sum, forged);
    assert_int_equal(synth_flip_byte(sum, -3, 0x01), 0);
    same_with_sums(&c, &o, 3, 1, 5, "slim counts past the file");
    copy_file(forged, sum);
    summarize_writes(&c, &o, 1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "refused slim block written again");
    /* another size */
    copy_file(keep, sum);
    uint64_t other = file_bytes + 1;
    forge_slim(sum, -64, &other, 8, NULL);
    same_with_sums(&c, &o, 4, 0, 5, "slim block of another size");
    summarize_writes(&c, &o, 1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "other size written again");
    /* another start time (the header first in the body), another host */
    copy_file(keep, sum);
    uint64_t rt;
    forge_slim(sum, offsetof(tprof_file_header, start_realtime_ns), &rt, 8, &rt);
    rt ^= (uint64_t)1 << 46;
    forge_slim(sum, offsetof(tprof_file_header, start_realtime_ns), &rt, 8, NULL);
    same_with_sums(&c, &o, 4, 0, 5, "slim block of another start time");
    summarize_writes(&c, &o, 1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "other start time written again");
    copy_file(keep, sum);
    forge_slim(sum, offsetof(tprof_file_header, host), "zz", 2, NULL);
    same_with_sums(&c, &o, 4, 0, 5, "slim block of another host");
    summarize_writes(&c, &o, 1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "other host written again");
    /* the first half of summarize under a launcher judges a slim block as the load does */
    char why[256];
    assert_int_equal(tp_summary_write_slim(file, why, sizeof why), 1);
    forge_slim(sum, -64, &other, 8, NULL);
    assert_int_equal(tp_summary_write_slim(file, why, sizeof why), 0);
    assert_int_equal(tp_summary_write_slim(file, why, sizeof why), 1);
    synth_rmtree(c.top);
}

/* A summary of a process other than a rank (the node sampler, a helper) ends with an empty
 * section block at the file's end: one with a byte more, or cut inside that block, is not
 * current, and summarize writes it again (its slim block alone was checked, and it stayed). */
static void tail_damaged(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char file[700], sum[800];
    static const int pids[] = {90, 91};
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/h0-%d.tprof", c.dirs[0], pids[i]);
        snprintf(sum, sizeof sum, "%s%s", file, TP_SUMMARY_SUFFIX);
        struct stat st;
        assert_int_equal(stat(sum, &st), 0);
        FILE *f = fopen(sum, "ab");
        assert_non_null(f);
        assert_int_equal(fputc(0, f), 0);
        assert_int_equal(fclose(f), 0);
        summarize_writes(&c, &o, 1);
        assert_int_equal(truncate(sum, st.st_size - 5), 0);
        summarize_writes(&c, &o, 1);
        struct stat again;
        assert_int_equal(stat(sum, &again), 0);
        assert_int_equal(again.st_size, st.st_size);
        summarize_writes(&c, &o, 0);
    }
    synth_rmtree(c.top);
}

/* A rank's section reads the NVML samples of its host's sampler (tp_gpu_samples_for): the node
 * sampler's for ranks 0 and 1 of host h0, rank 2's own for ranks 2 and 3 of h1. */
static void sampler_touched(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char sampler[700], file[700], sum[800];
    snprintf(sampler, sizeof sampler, "%s/h0-90.tprof", c.dirs[0]);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 7}};
    assert_int_equal(utimensat(AT_FDCWD, sampler, ts, 0), 0);
    same_with_sums(&c, &o, 2, 2, 5, "node sampler touched");
    tp_summarize_stats st;
    summarize(c.opv, 1, &o, &st);
    assert_int_equal(st.written, 3); /* ranks 0 and 1, and the sampler's own slim process */
    rank_path(&c, 102, file, sum);
    assert_int_equal(utimensat(AT_FDCWD, file, ts, 0), 0);
    same_with_sums(&c, &o, 2, 2, 5, "rank 2, rank 3's sampler, touched");
    synth_rmtree(c.top);
}

/* The options a section reads each make every summary stale; the others leave them valid,
 * and the report from summaries is the one without under those options. */
static void options_key(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    static const char *const forward[] = {"forward"};
    for (int k = 0; k < 5; k++) {
        tp_report_opts x;
        tp_report_opts_init(&x);
        if (k == 0) x.step_name = "train_step";
        if (k == 1) x.step_name = "";
        if (k == 2) x.warmup = 0;
        if (k == 3) x.top_n = 1;
        if (k == 4) x.data_names = forward, x.ndata_names = 1;
        char label[32];
        snprintf(label, sizeof label, "key option %d", k);
        same_with_sums(&c, &x, 0, 4, ALL_SLIM, label); /* the slim block reads no option */
    }
    for (int k = 0; k < 29; k++) {
        tp_report_opts x;
        tp_report_opts_init(&x);
        double *d[] = {&x.comm_warn_share, &x.comm_crit_share, &x.tokens_per_step,
                       &x.samples_per_step, &x.flops_per_step, &x.data_share,
                       &x.data_ms_per_sample, &x.data_start_idle_share, &x.launch_idle_share,
                       &x.launch_kernel_us, &x.host_sync_share, &x.memory_share,
                       &x.fragmentation_share, &x.fragmentation_min_bytes, &x.leak_min_bytes,
                       &x.straggler_share, &x.throttle_share, &x.clock_drop_share,
                       &x.power_limit_share, &x.busy_share, &x.diag_band};
        size_t nd = sizeof d / sizeof *d;
        if ((size_t)k < nd) *d[k] = *d[k] ? *d[k] * 0.01 : 4096; /* every rule fires sooner */
        else if (k == 21) x.model = "layers=2,hidden=64,heads=4,seq=128,vocab=1000";
        else if (k == 22) x.dtype = "fp16";
        else if (k == 23) x.leak_min_steps = 2;
        else if (k == 24) x.diag_min_steps = 1;
        else if (k == 25) x.threads = 1;
        else if (k == 26) x.stream_sections = 1;
        else if (k == 27) x.stream_sections = -1;
        else x.tokens_per_step = 2048, x.model = "layers=2,hidden=64,heads=4,seq=128,vocab=1000";
        char label[32];
        snprintf(label, sizeof label, "other option %d", k);
        same_with_sums(&c, &x, 4, 0, ALL_SLIM, label);
    }
    synth_rmtree(c.top);
}

/* The slim processes (every field coded) and the memos alone (tp_run_fill_memos, the
 * export's) from summaries: the same as from the rank files. */
static void memos(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    tp_run a, b;
    char err[512];
    assert_int_equal(tp_run_load_slim(c.opv, 1, &a, err, sizeof err), 0);
    assert_int_equal(tp_run_fill_memos(&a, &o, NULL), 0);
    assert_int_equal(a.from_summaries, a.nprocs);
    assert_int_equal(rename_sums(c.dirs, 1, TP_SUMMARY_SUFFIX, ".hidden"), 6);
    assert_int_equal(tp_run_load_slim(c.opv, 1, &b, err, sizeof err), 0);
    assert_int_equal(tp_run_fill_memos(&b, &o, NULL), 0);
    assert_int_equal(a.nprocs, b.nprocs);
    assert_int_equal(b.from_summaries, 0);
    size_t ranks = 0;
    for (size_t i = 0; i < a.nprocs; i++) {
        const tp_process *p = &a.procs[i], *q = &b.procs[i];
        /* the slim process from its summary is the one decoded from its file, field by field,
         * and what the run decided of it the same */
        tp_sum_buf x = {0}, y = {0};
        tp_sum_slim(&x, (tp_process *)p, 0);
        tp_sum_slim(&y, (tp_process *)q, 0);
        assert_false(x.bad || y.bad);
        assert_int_equal(x.len, y.len);
        assert_memory_equal(x.b, y.b, x.len);
        free(x.b);
        free(y.b);
        assert_string_equal(p->path, q->path);
        int pv[] = {p->rank, p->world_size, p->local_rank, p->rank_implied, (int)p->role,
                    p->helper_of, p->launched, p->launched_lo, p->launched_hi};
        int qv[] = {q->rank, q->world_size, q->local_rank, q->rank_implied, (int)q->role,
                    q->helper_of, q->launched, q->launched_lo, q->launched_hi};
        assert_memory_equal(pv, qv, sizeof pv);
        assert_int_equal(!p->steps_memo, !q->steps_memo);
        assert_int_equal(!p->comm_memo, !q->comm_memo);
        if (!p->steps_memo) continue;
        ranks++;
        assert_int_equal(p->steps_memo->nsteps, q->steps_memo->nsteps);
        assert_int_equal(p->steps_memo->nwarmup, q->steps_memo->nwarmup);
        assert_true(p->steps_memo->nsteps >= 5);
        assert_string_equal(p->steps_memo->name, q->steps_memo->name);
        /* the steps themselves, each from its packed form (step_pack.h) */
        assert_non_null(p->steps_memo->packed);
        tp_steps sp, sq;
        assert_int_equal(tp_find_steps(p, p->steps_memo_name, p->steps_memo_warmup, &sp), 0);
        assert_int_equal(tp_find_steps(q, q->steps_memo_name, q->steps_memo_warmup, &sq), 0);
        assert_int_equal(sp.nsteps, p->steps_memo->nsteps);
        assert_int_equal(sq.nsteps, sp.nsteps);
        for (size_t k = 0; k < sp.nsteps; k++) { /* field by field: not the padding */
            assert_true(sp.steps[k].start == sq.steps[k].start);
            assert_true(sp.steps[k].end == sq.steps[k].end);
            assert_true(sp.steps[k].app_step == sq.steps[k].app_step);
            assert_int_equal(sp.steps[k].warmup, sq.steps[k].warmup);
        }
        tp_steps_free(&sp);
        tp_steps_free(&sq);
        assert_int_equal(p->ncomm, q->ncomm);
        assert_true(p->ncomm >= 5);
        for (size_t k = 0; k < p->ncomm; k++) {
            assert_true(p->comm_memo[k].start == q->comm_memo[k].start);
            assert_true(p->comm_memo[k].end == q->comm_memo[k].end);
            assert_int_equal(p->comm_memo[k].src, q->comm_memo[k].src);
        }
    }
    assert_int_equal(ranks, 4);
    tp_run_free(&a);
    tp_run_free(&b);
    synth_rmtree(c.top);
}

/* A summary that cannot be written (its name is taken by a directory) is one error line; the
 * other files are summarised. */
static void write_error(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char file[700], sum[800];
    rank_path(&c, 103, file, sum);
    assert_int_equal(unlink(sum), 0);
    assert_int_equal(mkdir(sum, 0755), 0);
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(c.opv, 1, &run, err, sizeof err), 0);
    tp_summarize_stats st;
    assert_int_equal(tp_report_summarize(&run, &o, NULL, &st), 0);
    assert_int_equal(st.files, 6);
    assert_int_equal(st.current, 5);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.nerrors, 1);
    assert_non_null(strstr(st.errors[0], "h1-103.tprof: no summary written: "));
    tp_summarize_stats_free(&st);
    assert_int_equal(st.nerrors, 0);
    tp_run_free(&run);
    assert_int_equal(rmdir(sum), 0);
    synth_rmtree(c.top);
}

/* A rank file whose byte changed in place and whose time was put back (or a byte rotted on
 * disk) keeps its size and time: the slim load finds its chunk's CRC wrong, so its summary,
 * made from the sound file, is stale; the report is the one without summaries, which names
 * the damage. */
static void damaged_in_place(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char file[700], sum[800];
    rank_path(&c, 103, file, sum); /* rank 3: no other section reads its file */
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(synth_flip_byte(file, synth_file_size(file) / 2, 0x40), 0);
    struct timespec ts[2] = {{0, UTIME_OMIT}, st.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, file, ts, 0), 0);
    same_with_sums(&c, &o, 3, 1, 5, "rank file damaged, time put back");
    synth_rmtree(c.top);
}

/* Names of summaries taken by what is not one: a FIFO is stale without a wait for a writer
 * that never comes, and summarize replaces it; a link planted under the temporary name
 * summarize writes (its pid and tid: one thread here, the caller's) is not written through. */
static void hostile_names(void **state) {
    (void)state;
    copied c;
    tp_report_opts o;
    four_ranks_summarised(&c, &o);
    char file[700], sum[800], victim[700], tmp[900];
    rank_path(&c, 101, file, sum);
    assert_int_equal(unlink(sum), 0);
    assert_int_equal(mkfifo(sum, 0644), 0);
    same_with_sums(&c, &o, 3, 1, 5, "a FIFO as a summary");
    tp_summarize_stats st;
    summarize(c.opv, 1, &o, &st);
    assert_int_equal(st.written, 1);
    struct stat sb;
    assert_int_equal(lstat(sum, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "the FIFO replaced");
    /* rank 0's summary to be written again, its temporary name a link to another file */
    rank_path(&c, 100, file, sum);
    assert_int_equal(unlink(sum), 0);
    snprintf(victim, sizeof victim, "%s/victim", c.top);
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("not yours\n", v);
    assert_int_equal(fclose(v), 0);
    char host[65] = "";
    assert_int_equal(gethostname(host, sizeof host - 1), 0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s.%ld.%ld", sum, host, (long)getpid(), (long)getpid());
    assert_int_equal(symlink(victim, tmp), 0);
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(c.opv, 1, &run, err, sizeof err), 0);
    o.threads = 1; /* the caller's thread: tid == pid */
    assert_int_equal(tp_report_summarize(&run, &o, NULL, &st), 0);
    o.threads = 0;
    assert_int_equal(st.written, 1);
    tp_summarize_stats_free(&st);
    tp_run_free(&run);
    assert_int_equal(synth_file_size(victim), 10);
    assert_int_equal(lstat(sum, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(lstat(tmp, &sb), -1);
    same_with_sums(&c, &o, 4, 0, ALL_SLIM, "written past a planted link");
    synth_rmtree(c.top);
}

/* One rank of what the other inputs lack, in a directory of its own: API steps with step 3
 * lost to a drop (steps.missing), the caching allocator's samples at the phase boundaries
 * (the memory timeline) and an out-of-memory post-mortem with its largest allocations, GPU
 * capture paused with a reason, and torch.distributed ops (their backends). */
static void features_run(char *dir, size_t n) {
    assert_int_equal(synth_tmpdir(dir, n, "summary-features"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_meta(f, "torch.cuda.device", "0");
    synth_meta(f, "cuda.0.memory_total_bytes", "85899345920");
    synth_meta(f, "torch.pg.0", "backend=gloo size=1 ranks=0");
    char pauses[96];
    snprintf(pauses, sizeof pauses, "%llu-%llu", (unsigned long long)(T0 + 25 * MS),
             (unsigned long long)(T0 + 32 * MS));
    synth_meta(f, "gpu_capture.pauses", pauses);
    synth_meta(f, "gpu_capture.pause_reasons", "torch.profiler");
    synth_meta(f, "memory.history_entries", "1000");
    synth_meta(f, "memory.oom.source", "torch");
    synth_meta(f, "memory.oom.request_bytes", "2147483648");
    synth_meta(f, "memory.oom.step", "7");
    synth_meta(f, "memory.oom.phase", "backward");
    synth_meta(f, "memory.oom.count", "1");
    synth_meta(f, "memory.oom.top", "[{\"bytes\":4294967296,\"stream\":0,\"frames\":"
                                    "\"train.py:42 forward\"},{\"bytes\":1024,\"stream\":7,"
                                    "\"frames\":\"\"}]");
    static const char *const phases[] = {"data", "forward", "backward", "optimizer"};
    for (uint32_t k = 0; k < 8; k++) {
        if (k == 3) { /* lost: the ring dropped its events */
            synth_set_dropped(f, 1, 40);
            continue;
        }
        uint64_t t = T0 + k * 10 * MS;
        synth_step_begin(f, 1, t, k);
        for (int ph = 0; ph < 4; ph++) {
            uint64_t a = t + (uint64_t)ph * 2 * MS;
            synth_push(f, 1, a, phases[ph], 0, 0);
            double alloc = (1.0 + k * 0.25 + ph) * (1u << 30);
            synth_counter(f, 1, a + 1000, "cuda.memory_allocated_bytes", alloc);
            synth_counter(f, 1, a + 2000, "cuda.memory_reserved_bytes", 8.0 * (1u << 30));
            synth_counter(f, 1, a + 3000, "cuda.max_memory_allocated_bytes", alloc);
            synth_pop(f, 1, a + 2 * MS - 1000, 0);
        }
        synth_kernel(f, 2, t + 2 * MS, t + 6 * MS, 0, 7, 10 + k, "ampere_gemm_kernel");
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.end_ns = t + 9 * MS;
        c.bytes = 4096;
        c.nranks = 1;
        c.op = TPROF_COMM_ALLREDUCE;
        c.source = TPROF_COMM_SRC_TORCH;
        synth_comm(f, 1, t + 8 * MS, &c, NULL);
        synth_step_end(f, 1, t + 10 * MS - 1000, k);
        synth_flush(f);
    }
    assert_int_equal(synth_close(f), 0); /* no end record: it died of the OOM */
}

static void features(void **state) {
    (void)state;
    char dir[512];
    features_run(dir, sizeof dir);
    const char *ops[] = {dir};
    summarized_same(ops, 1, 0);
    synth_rmtree(dir);
}

/* A run long enough for its merge to match a sample of the collectives (comm.h,
 * TP_COMM_KEEP): ranks 0 and 1 with 100 steps of 100 MPI all-reduces (10000 ops: level 2,
 * window 0 and the odd windows of 64 sequence numbers, 5056 kept), rank 1 starting each
 * 0.2 ms late, and rank 2 with 9000 sends alone (level 1, none kept: the key form without a
 * key). The report from summaries is the one from the rank files, and each rank section gave
 * its process the whole file's times of the ops it kept. With world (not NULL), the files
 * name that world size: past 1024 ranks the bound is less (comm.h, tp_comm_keep_of), and
 * ranks 0 and 1 keep `kept` at `level`, of period `period`. */
static void sampled_world(const char *world, unsigned level, size_t kept, double period,
                          size_t keep) {
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "summary-sampled"), 0);
    for (uint32_t r = 0; r < 3; r++) {
        synth_file *f = synth_open(dir, "h", (int32_t)(60 + r), RT0, T0);
        synth_rank(f, (int)r, 3);
        if (world) synth_meta(f, "world_size", world); /* the last value holds */
        synth_thread(f, 1, 60 + r);
        for (uint32_t k = 0; k < 100; k++) {
            uint64_t t = T0 + k * 100 * MS;
            synth_step_begin(f, 1, t, k);
            for (uint32_t i = 0; i < (r < 2 ? 100u : 90u); i++) {
                tprof_pl_comm c;
                memset(&c, 0, sizeof c);
                uint64_t at = t + (i + 1) * 900 * 1000 + (r == 1 ? 200 * 1000 : 0);
                c.end_ns = at + 500 * 1000;
                c.bytes = 1 << 20;
                c.nranks = r < 2 ? 2 : 3;
                c.rank = r;
                c.seq = k * 100 + i;
                c.comm_hash = r < 2 ? 0xa0 : 0xc0;
                c.op = r < 2 ? TPROF_COMM_ALLREDUCE : TPROF_COMM_SEND;
                c.peer = r < 2 ? TPROF_COMM_NO_PEER : 0;
                c.source = TPROF_COMM_SRC_MPI;
                synth_comm(f, 1, at, &c, NULL);
            }
            synth_step_end(f, 1, t + 99 * MS, k);
        }
        synth_end_of_file(f, T0 + 100 * 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    const char *ops[] = {dir};
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report r;
    assert_int_equal(tp_report_make(&run, NULL, &r), 0);
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        assert_int_equal(p->comm_level, p->rank < 2 ? level : 1);
        assert_int_equal(p->ncomm, p->rank < 2 ? kept : 0);
        assert_int_equal(p->comm_memo_whole, p->rank < 2);
    }
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(r.doc, "clocks");
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(ck, "sample");
    assert_non_null(sm);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sm, "period")->valuedouble, period);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sm, "keep_per_rank")->valuedouble, keep);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(ck, "collectives_matched")->valuedouble,
                     kept);
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(r.doc, "stragglers");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sj, "sample_period")->valuedouble, period);
    /* the text says it, where the bound came from and how to match every collective */
    char *txt = report_text(&run, NULL), want[512];
    snprintf(want, sizeof want, "matched on a sample: a rank file holds more than %zu "
             "collectives (%s); each communicator's collectives with sequence numbers below 64 "
             "or in the last 64 of each period of up to %.0f; TRAINPROF_COMM_KEEP=2147483648 "
             "matches every one", keep,
             world ? "the default for 4096 ranks; TRAINPROF_COMM_KEEP sets another"
                   : "the default for 3 ranks; TRAINPROF_COMM_KEEP sets another",
             period);
    if (world && strcmp(world, "4096")) /* 1024: the default for 1024 ranks */
        snprintf(want, sizeof want, "the default for %s ranks", world);
    if (!strstr(txt, want)) fprintf(stderr, "no '%s' in:\n%s\n", want, txt);
    assert_non_null(strstr(txt, want));
    free(txt);
    /* the export's alignment says so too, with the report's note */
    chrome_out eo = export_run(&run, -1, NULL);
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(eo.root, "trainprof.clock_alignment");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(al, "sample");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(es, "period")->valuedouble, period);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(es, "window")->valuedouble, 64);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(es, "keep_per_rank")->valuedouble, keep);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(es, "note")->valuestring,
                        tp_clocks_sample_note(0));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(sm, "note")->valuestring,
                        tp_clocks_sample_note(1));
    out_free(&eo);
    tp_report_free(&r);
    tp_run_free(&run);
    summarized_same(ops, 1, 1);
    synth_rmtree(dir);
}

static void sampled_run(void **state) {
    (void)state;
    sampled_world(NULL, 2, 5056, 128, 8192);
    sampled_world("1024", 2, 5056, 128, 8192);
    /* 2^23 / 4096: 2048 a file; level 3 would keep 40 windows (2560), level 4 keeps 20 */
    sampled_world("4096", 4, 1280, 512, 2048);
}

/* The codec alone on every rank of a report (the scenario with memory samples and the
 * corpus): a result read back codes to the same bytes, its pointer-free parts are the same
 * bytes as computed, and each section's JSON prints the same. */
static void codec_ranks(const char *const *ops, size_t nops, int must_compare) {
    (void)must_compare;
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, nops, &run, err, sizeof err), 0);
    tp_report r;
    assert_int_equal(tp_report_make(&run, NULL, &r), 0);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(r.doc, "ranks");
    assert_int_equal((size_t)cJSON_GetArraySize(ranks), r.res.nranks);
    for (size_t i = 0; i < r.res.nranks; i++) {
        tp_sum_buf a = {0}, b = {0}, j = {0};
        /* a flag no run here sets (memory ran out summing the ops) goes through too */
        r.res.ranks[i].comm.rows_no_memory = (int)(i % 2);
        tp_sum_rank_result(&a, &r.res.ranks[i], 0);
        tp_rank_result back;
        tp_sum_buf in = a;
        in.run = &run;
        tp_sum_rank_result(&in, &back, 1);
        assert_false(in.bad);
        assert_int_equal(in.at, a.len);
        tp_sum_rank_result(&b, &back, 0);
        assert_false(a.bad || b.bad);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.b, b.b, a.len);
        assert_memory_equal(&back.capture, &r.res.ranks[i].capture, sizeof back.capture);
        assert_memory_equal(&back.process, &r.res.ranks[i].process, sizeof back.process);
        assert_int_equal(back.comm.rows_no_memory, (int)(i % 2));
        tp_rank_result_free(&back);
        const cJSON *sec = cJSON_GetArrayItem(ranks, (int)i);
        tp_sum_json_put(&j, sec);
        tp_sum_buf jin = j;
        cJSON *sback = tp_sum_json_get(&jin);
        assert_false(jin.bad);
        char *x = cJSON_Print(sec), *y = cJSON_Print(sback);
        assert_string_equal(x, y);
        free(x);
        free(y);
        cJSON_Delete(sback);
        free(a.b);
        free(b.b);
        free(j.b);
    }
    tp_report_free(&r);
    tp_run_free(&run);
}

static void codec(void **state) {
    (void)state;
    char dir[512];
    features_run(dir, sizeof dir);
    const char *ops[] = {dir};
    codec_ranks(ops, 1, 1);
    synth_rmtree(dir);
    slim_scenarios(codec_ranks);
    slim_corpus(codec_ranks);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(synthetic_run),  cmocka_unit_test(stale_and_damaged),
        cmocka_unit_test(sampler_touched), cmocka_unit_test(options_key),
        cmocka_unit_test(memos),          cmocka_unit_test(write_error),
        cmocka_unit_test(lying_counts),
        cmocka_unit_test(damaged_in_place), cmocka_unit_test(hostile_names),
        cmocka_unit_test(scenarios),      cmocka_unit_test(corpus),
        cmocka_unit_test(features),       cmocka_unit_test(codec),
        cmocka_unit_test(sampled_run),    cmocka_unit_test(wide_sampler),
        cmocka_unit_test(tail_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
