/*
 * fuzz_kineto.c — fuzz target: torch.profiler / Kineto traces (analysis/kineto.h) through
 * everything `trainprof report`, `export` and `diff` do with them (tests/fuzz/README.md).
 *
 * The input is one trace file, written to a scratch directory as t.json (a gzip input stays
 * gzip: zlib reads either) and loaded as a run (tp_run_load: the streaming scanner, cJSON per
 * event, the model); when it loads, it is reported (text and HTML), compared with itself and
 * exported (merged and per rank). A load that fails must fail with its one line, nothing more.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/diff.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "export/chrome.h"
#include "export/html.h"

static char g_dir[4096], g_path[4200];
static FILE *g_null;

static void cleanup(void) {
    unlink(g_path);
    rmdir(g_dir);
}

static void init(void) {
    if (g_null) return;
    const char *tmp = getenv("TPROF_FUZZ_TMP");
    if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tprof-fuzzk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_path, sizeof g_path, "%s/t.json", g_dir);
    atexit(cleanup);
    g_null = fopen("/dev/null", "w");
    if (!g_null) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    int fd = open(g_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    close(fd);
    tp_run run;
    char err[512];
    if (tp_run_load(g_path, &run, err, sizeof err) != 0) {
        if (!err[0] || strchr(err, '\n')) abort(); /* one line, always */
        tp_run_free(&run);
        return 0;
    }
    tp_report_opts o;
    tp_report_opts_init(&o);
    tp_report tr;
    if (tp_report_make(&run, &o, &tr) == 0) {
        tp_report_write_text(&tr, g_null, 0);
        tp_html_write(&tr, &o, g_null);
        tp_diff_side side = {"fuzz", tr.doc, &run, &o};
        cJSON *d = tp_diff_build(&side, &side, NULL);
        if (d) tp_diff_write_text(d, g_null);
        cJSON_Delete(d);
        tp_report_free(&tr);
    }
    tp_export_opts eo = {NULL, 1, NULL};
    tp_export_chrome(&run, g_null, &eo);
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].role == TP_ROLE_RANK)
            tp_export_chrome_rank(&run, run.procs[i].rank, g_null, &eo);
    tp_run_free(&run);
    return 0;
}
