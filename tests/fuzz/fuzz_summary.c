/*
 * fuzz_summary.c — fuzz target: the bodies of a summary file (`<rank file>.sum`, summary.h,
 * docs/format.md "Summary files beside the rank files"; tests/fuzz/README.md). A reader checks
 * a body's key and CRC before it decodes it, but a body whose CRC matches can still hold
 * anything (a rewrite, a bug in a writer, another build under the same key): what the report
 * decodes of it is outside input. So the harness skips the key and the CRC and hands the bytes
 * to the decoders as the report does once they matched: the slim block's body to
 * tp_summary_slim_decode (tp_run_load_slim's slim process; and streamed from a file, as the
 * report reads it, which must decode to the same), the section block's to
 * tp_summary_section_decode, whole (the report's rank section: its JSON, rank result and
 * memos) and memos only (tp_run_fill_memos), with the decoded slim process as the section's
 * process (its comm op count sizes the comm memo). Each outcome must be a clean failure or a
 * decoded value; a decoded one is then used as its readers use it — the slim process's label
 * and metadata (the loader's rank lookup), the report's processes and ended-early sections of
 * a run of that process alone, the section's JSON printed, the rank result and its JSON in
 * the text and HTML reports of a run of that rank alone, the comm memo as comm_rank.c indexes
 * by it, the parts coded again as the writer codes them — and everything is freed (a leak
 * fails the run). The run-level analyses (diagnosis, clocks, stragglers, communication
 * across ranks) are not run here: their results are left empty.
 *
 * The input: the slim body's length (8 bytes, little-endian), the slim body, then the section
 * body (the rest). A length past the input's end makes the whole input after it the slim
 * body, with an empty section body. Without a decoded slim process, the section is decoded
 * for an empty process (no comm ops, an empty host), as a process whose slim block failed.
 */
#define _GNU_SOURCE /* fmemopen */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "analysis/ended.h"
#include "analysis/model.h"
#include "analysis/model_load.h"
#include "analysis/processes.h"
#include "analysis/report.h"
#include "analysis/summary.h"
#include "export/html.h"

/* The body read streamed, as tp_summary_slim_load reads a summary's slim block, through a
 * window of 7 bytes (strings, arrays and packed samples across its edge): decoded exactly
 * when it is decoded from memory (p, else NULL), to the same process (coded again, the same
 * bytes), the CRC then that of the bytes. */
static void streamed_same(tp_run *run, const uint8_t *b, size_t n, const tp_process *p) {
    FILE *f = fmemopen((void *)b, n, "rb");
    if (!f) abort();
    tp_process q;
    uint32_t crc = 0;
    int have = tp_summary_slim_decode_file(run, f, 0, n, 7, &crc, &q);
    fclose(f);
    if (have != (p != NULL) ||
        (have && crc != (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)n)))
        abort();
    if (!have) {
        for (size_t i = 0; i < sizeof q; i++)
            if (((const unsigned char *)&q)[i]) abort();
        return;
    }
    tp_sum_buf x = {0}, y = {0};
    tp_sum_slim(&x, (tp_process *)p, 0);
    tp_sum_slim(&y, &q, 0);
    if (x.bad || y.bad || x.len != y.len || memcmp(x.b, y.b, x.len)) abort();
    free(x.b);
    free(y.b);
    tp_process_free(&q);
}

/* What readers do with a decoded slim process: its label (the report's rank names, the
 * summary key), the metadata the loader reads, and the slim block coded again. */
static void use_slim(tp_run *run, tp_process *p) {
    char label[64];
    tp_process_label(p, label, sizeof label);
    /* as tp_summary_slim_load sets them */
    const char *v;
    p->rank = (v = tp_meta(p, "rank")) ? atoi(v) : -1;
    p->world_size = (v = tp_meta(p, "world_size")) ? atoi(v) : -1;
    p->local_rank = (v = tp_meta(p, "local_rank")) ? atoi(v) : -1;
    /* the header's texts, which the reports print whole (%s): each ends inside its field, as
     * the rank-file loader leaves them (model.c, clean_field); past it, a read runs on into
     * the next fields, where no sanitizer sees it */
    if (!memchr(p->hdr.host, 0, sizeof p->hdr.host) ||
        !memchr(p->hdr.run_id, 0, sizeof p->hdr.run_id) ||
        !memchr(p->hdr.build, 0, sizeof p->hdr.build))
        abort();
    tp_sum_buf w = {0};
    tp_sum_slim(&w, p, 0);
    free(w.b);
    /* the report's processes and ended-early sections of a run of this process alone (a
     * rank: the role's zero value; the load's roles are not decided here) */
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) abort();
    tp_run one = {.procs = p, .nprocs = 1, .pool = run->pool};
    tp_run_results res;
    memset(&res, 0, sizeof res);
    cJSON *rep = cJSON_CreateObject();
    if (!rep) abort();
    tp_processes_compute(&res, &one);
    for (size_t i = 0; i < res.nprocs; i++) cJSON_Delete(tp_process_json(&res.procs[i]));
    tp_ended_section(rep, &res.findings, &one, &res.ended);
    tp_ended_text(null, &res.ended, "", "", "");
    cJSON_Delete(rep);
    tp_run_results_free(&res);
}

/* The section's parts: the JSON printed, the rank result written as the text report writes
 * it from the typed result (report_text.c, in a report of this rank alone), the comm memo
 * read as the run-level analyses read it (comm_rank.c counts a rank's timed ops per time
 * source, an array indexed by it), the results and memos coded again. */
static void use_parts(const tp_process *p, tp_summary_parts *s) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) abort();
    if (s->res) {
        /* the text report of a run of this one rank, its run-level results empty */
        tp_run run = {.procs = (tp_process *)p, .nprocs = 1};
        tp_report rep = {.run = &run};
        rep.res.nranks = 1;
        rep.res.ranks = s->res;
        rep.res.run.dir = "fuzz"; /* the texts the run-level analyses would have set */
        for (size_t c = 0; c < TP_NCAPABILITIES; c++) rep.res.caps[c].name = "";
        for (size_t c = 0; c < TP_NCAPABILITIES; c++) rep.res.caps[c].status = "";
        tp_report_write_text(&rep, null, 1);
        /* and the HTML report, which reads the section's JSON too (its generic views) */
        rep.res.run.run_id = "fuzz";
        rep.doc = cJSON_CreateObject();
        cJSON *ranks = rep.doc ? cJSON_AddArrayToObject(rep.doc, "ranks") : NULL;
        if (!ranks || (s->section && !cJSON_AddItemReferenceToArray(ranks, s->section))) abort();
        tp_html_write(&rep, NULL, null);
        cJSON_Delete(rep.doc);
    }
    uint64_t by_src[3] = {0};
    for (size_t i = 0; s->comm && i < p->ncomm; i++) by_src[s->comm[i].src]++;
    if (by_src[0] + by_src[1] + by_src[2] != (s->comm ? p->ncomm : 0)) abort();
    tp_sum_buf w = {0};
    if (s->section) {
        char *t = cJSON_PrintUnformatted(s->section);
        free(t);
        tp_sum_json_put(&w, s->section);
    }
    if (s->res) {
        w.rr = s->res;
        tp_sum_rank_result(&w, s->res, 0);
    }
    tp_sum_steps(&w, &s->steps, 0);
    tp_sum_comm(&w, &s->comm, p->ncomm, 0);
    free(w.b);
}

static void free_parts(tp_summary_parts *s) {
    cJSON_Delete(s->section);
    if (s->res) tp_rank_result_free(s->res);
    if (s->steps) tp_steps_free(s->steps);
    free(s->steps);
    free(s->comm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t slim_len = 0;
    for (size_t i = 0; i < 8 && i < size; i++) slim_len |= (uint64_t)data[i] << (8 * i);
    const uint8_t *slim = size > 8 ? data + 8 : data + size;
    size_t rest = size > 8 ? size - 8 : 0;
    if (slim_len > rest) slim_len = rest;
    const uint8_t *sec = slim + slim_len;
    size_t sec_len = rest - (size_t)slim_len;

    tp_run run;
    memset(&run, 0, sizeof run);
    run.pool = tp_load_pool_new();
    if (!run.pool) abort();
    tp_process p;
    int have = tp_summary_slim_decode(&run, slim, (size_t)slim_len, &p);
    if (slim_len) streamed_same(&run, slim, (size_t)slim_len, have ? &p : NULL);
    if (have) use_slim(&run, &p);
    else {
        /* a failed decoding leaves p zeroed: the section of an empty process */
        for (size_t i = 0; i < sizeof p; i++)
            if (((const unsigned char *)&p)[i]) abort();
    }
    for (int memos_only = 0; memos_only < 2; memos_only++) {
        tp_rank_result res;
        memset(&res, 0, sizeof res);
        tp_summary_parts parts = {.res = &res};
        if (tp_summary_section_decode(&run, &p, sec, sec_len, memos_only, &parts)) {
            use_parts(&p, &parts);
            free_parts(&parts);
        } else if (parts.section || parts.steps || parts.comm) {
            abort(); /* a failed decoding keeps nothing */
        }
    }
    tp_process_free(&p);
    tp_run_free(&run);
    return 0;
}
