/*
 * fuzz_rankfile.c — fuzz target: .tprof rank files through everything `trainprof report`,
 * `trainprof export` and `trainprof diff` do with them (tests/fuzz/README.md).
 *
 * The input is one or more rank files laid end to end: it is cut before every file magic
 * ("TPROFRK\n") found at a multiple of 8 bytes (at most TP_FUZZ_MAX_FILES pieces), so a
 * corpus entry made of two ranks' files is a two-rank run (clock alignment, stragglers and
 * collective matching across ranks). Each piece becomes a file of a scratch directory, which
 * is loaded as a run (tp_run_load: the reader and the model), reported (tp_report_build,
 * then its text and HTML forms), exported (Chrome trace, merged and per rank) and compared
 * with itself (tp_diff_build, text); then loaded as the report loads it (tp_run_load_slim:
 * step events and GPU samples packed as they are read) and reported again, text and HTML.
 * The scratch directory is on /dev/shm when it can be (TPROF_FUZZ_TMP chooses another), else
 * in TMPDIR.
 *
 * Checksums: a fuzzer cannot make a zlib CRC-32 match what it mutated, so it would never get
 * past the header and chunk checks. Unless bit 0 of a piece's header `reserved` field is
 * set, the harness writes the correct CRC into the header and into every chunk header it
 * finds (walking chunks as the reader does, and scanning 8 bytes at a time past garbage);
 * with the bit set the piece is written as it came, so the damage paths (checksum
 * mismatches, resynchronisation) stay reachable. Real files have the bit clear and correct
 * checksums, which the repair leaves as they are.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include <cjson/cJSON.h>

#include "analysis/diff.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "export/chrome.h"
#include "export/html.h"
#include "format/format.h"

#define TP_FUZZ_MAX_FILES 4

static char g_dir[4096];
static size_t g_nfiles; /* files left in g_dir by the previous input */
static FILE *g_null;

static void cleanup(void) {
    char path[4200];
    for (size_t i = 0; i < TP_FUZZ_MAX_FILES; i++) {
        snprintf(path, sizeof path, "%s/r%zu.tprof", g_dir, i);
        unlink(path);
    }
    rmdir(g_dir);
}

static int init(void) {
    if (g_null) return 0;
    /* in memory where there is a tmpfs: each input is written and read back */
    const char *tmp = getenv("TPROF_FUZZ_TMP");
    if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tprof-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_rankfile: mkdtemp");
        abort();
    }
    atexit(cleanup);
    g_null = fopen("/dev/null", "w");
    if (!g_null) abort();
    return 0;
}

/* Correct checksums in place (see the file comment). */
static void repair(uint8_t *b, size_t n) {
    tprof_file_header h;
    if (n < sizeof h) return;
    memcpy(&h, b, sizeof h);
    if (memcmp(h.magic, TPROF_FILE_MAGIC, 8) != 0 || (h.reserved & 1)) return;
    h.header_crc = tprof__crc32(0, &h, offsetof(tprof_file_header, header_crc));
    memcpy(b + offsetof(tprof_file_header, header_crc), &h.header_crc, sizeof h.header_crc);
    if (h.header_bytes < sizeof h || h.header_bytes > n || (h.header_bytes & 7)) return;
    size_t pos = h.header_bytes;
    while (n - pos >= sizeof(tprof_chunk_header)) {
        tprof_chunk_header c;
        memcpy(&c, b + pos, sizeof c);
        if (c.magic != TPROF_CHUNK_MAGIC || c.payload_bytes > n - pos - sizeof c) {
            pos += 8;
            continue;
        }
        c.crc32 = tprof__crc32(0, b + pos + sizeof c, c.payload_bytes);
        memcpy(b + pos + offsetof(tprof_chunk_header, crc32), &c.crc32, sizeof c.crc32);
        pos += sizeof c + tprof__align8(c.payload_bytes);
        if (pos > n) break;
    }
}

static int write_file(size_t i, const uint8_t *data, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/r%zu.tprof", g_dir, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    return off == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    /* the pieces: cut before each file magic at a multiple of 8 bytes */
    size_t cut[TP_FUZZ_MAX_FILES + 1], ncut = 0;
    cut[ncut++] = 0;
    for (size_t off = 8; off + 8 <= size && ncut < TP_FUZZ_MAX_FILES; off += 8)
        if (!memcmp(data + off, TPROF_FILE_MAGIC, 8)) cut[ncut++] = off;
    cut[ncut] = size;
    for (size_t i = 0; i < ncut; i++) {
        size_t n = cut[i + 1] - cut[i];
        uint8_t *piece = malloc(n ? n : 1);
        if (!piece) return 0;
        memcpy(piece, data + cut[i], n);
        repair(piece, n);
        int w = write_file(i, piece, n);
        free(piece);
        if (w != 0) abort(); /* the scratch directory must work, or nothing is tested */
    }
    for (size_t i = ncut; i < g_nfiles; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/r%zu.tprof", g_dir, i);
        unlink(path);
    }
    g_nfiles = ncut;

    tp_run run;
    char err[512];
    if (tp_run_load(g_dir, &run, err, sizeof err) != 0) {
        tp_run_free(&run);
        return 0;
    }
    tp_report_opts o;
    tp_report_opts_init(&o);
    tp_report tr;
    if (tp_report_make(&run, &o, &tr) == 0) {
        tp_report_write_text(&tr, g_null, 0); /* (the JSON form is cJSON's printer alone) */
        tp_html_write(&tr, &o, g_null);
        tp_diff_side side = {"fuzz", tr.doc, &run, &o};
        cJSON *d = tp_diff_build(&side, &side, NULL);
        if (d) tp_diff_write_text(d, g_null);
        cJSON_Delete(d);
        tp_report_free(&tr);
    }
    tp_export_opts eo = {NULL, 1};
    tp_export_chrome(&run, g_null, &eo);
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].role == TP_ROLE_RANK)
            tp_export_chrome_rank(&run, run.procs[i].rank, g_null, &eo);
    tp_run_free(&run);
    /* the report's own load: slim (step events and GPU samples packed as read, the ranges
     * compacted), each section from its file read again whole */
    const char *ops[] = {g_dir};
    if (tp_run_load_slim(ops, 1, &run, err, sizeof err) != 0) {
        tp_run_free(&run);
        return 0;
    }
    if (tp_report_make(&run, &o, &tr) == 0) {
        tp_report_write_text(&tr, g_null, 0);
        tp_html_write(&tr, &o, g_null);
        tp_report_free(&tr);
    }
    tp_run_free(&run);
    return 0;
}
