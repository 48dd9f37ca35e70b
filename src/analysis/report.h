/*
 * report.h — the run report: computed once into typed results (results.h) and, from them,
 * the JSON document (schema in docs/report-json.md); the text form reads the same results,
 * so the two never disagree.
 */
#ifndef TPROF_REPORT_H
#define TPROF_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

#define TP_REPORT_SCHEMA_VERSION 1

typedef struct tp_report_opts {
    const char *step_name;          /* --step-name; NULL = docs/design.md §4 default rule */
    int warmup;                     /* warm-up steps, default 1 */
    const char *const *data_names;  /* range names that mark data loading */
    size_t ndata_names;
    int top_n;                      /* rows in the top-range tables, default 15 */
    double comm_warn_share;         /* exposed communication over this share of the step is a
                                     * warning finding: default 0.10 (docs/design.md §5.2) */
    double comm_crit_share;         /* ... and over this, critical: default 0.30 */

    /* Throughput and MFU (mfu.h): per rank and step (a rank's share of the global
     * batch); 0 / NULL = from the rank files' metadata (tokens_per_step, samples_per_step,
     * flops_per_step, model, dtype), else unknown. */
    double tokens_per_step, samples_per_step, flops_per_step;
    const char *model;              /* transformer description for tp_model_parse */
    const char *dtype;              /* peak-table dtype: bf16 (default), fp16, fp8, tf32, fp32 */

    /* Diagnosis thresholds (diagnose.c; docs/report-json.md "diagnosis"; starting figures in
     * docs/design.md §5.2). */
    double data_share;              /* data-loading range over this share of the step: 0.20 */
    double data_ms_per_sample;      /* ... or over this many ms per sample: 5 */
    double data_start_idle_share;   /* ... or GPU idle at step start while it runs: 0.05 */
    double launch_idle_share;       /* launch-bound: unattributed GPU idle over this: 0.20 */
    double launch_kernel_us;        /* ... with a median kernel shorter than this: 50 us */
    double host_sync_share;         /* GPU idle behind host synchronisation over this: 0.05 */
    double memory_share;            /* memory peak over this share of capacity: 0.90 */
    double fragmentation_share;     /* 1 - allocated/reserved at the peak over this: 0.30 */
    double fragmentation_min_bytes; /* ... with this much reserved unallocated: 1 GiB */
    int leak_min_steps;             /* leak rule (memory_rules.c): at least these steps: 5 */
    double leak_min_bytes;          /* ... growing by at least this: 1 MiB */
    double straggler_share;         /* straggler floor: this share of the median step: 0.05 */
    double throttle_share;          /* throttle reasons set in over this share of samples: 0.05 */
    double clock_drop_share;        /* ... with the SM clock this far below its max: 0.05 */
    double power_limit_share;       /* power at this share of the enforced limit: 0.97 */
    double busy_share;              /* GPU busy below this share of the step: 0.80 */
    int diag_min_steps;             /* rules over steps need this many measured steps: 3 */
    double diag_band;               /* a share rule fires past its threshold by this part of
                                     * it (0.25); nearer it is "near", not a finding */
    int threads;                    /* rank sections computed at once: 0 = one per CPU the
                                     * process may run on (jobs.h), 1 = on the calling
                                     * thread alone */
    int stream_sections;            /* for tests: 1 = every slim rank's section streams its
                                     * ranges (2: compacting them from 16 ranges a thread
                                     * on, model.h; 3: that, and the CPU breakdown's stream
                                     * holding 8 ranges at most, so that it fails over,
                                     * breakdown.h), -1 = none does, 0 (default) = those of
                                     * files holding more ranges than report.c's
                                     * STREAM_SECTION_RANGES; the figures are the same
                                     * either way */
    size_t gpu_records;             /* GPU records (kernels, copies, memsets, syncs and CUDA
                                     * API calls) a rank section holds at most: a rank file
                                     * holding more has its GPU figures over the steps of a
                                     * span of the run at its middle (model.h,
                                     * tp_process_load_bounded; capture.h: TP_CAP_BOUND), or
                                     * without measured steps totals over that span
                                     * (results.h, in_span), said in its section.
                                     * 0 = TP_GPU_RECORDS_DEFAULT; SIZE_MAX = no bound */
    size_t comm_ops;                /* communication ops a rank section holds at most: a
                                     * rank file holding more has them read apart, in
                                     * passes over it, the figures the same (comm.h,
                                     * tp_comm_stream_open). 0 = TP_SECTION_COMM_OPS;
                                     * SIZE_MAX = no bound */
} tp_report_opts;

/* The default bound on the GPU records a rank section holds (tp_report_opts.gpu_records):
 * about 300 MB of them and the analyses' indices, so that two sections at once (report.c
 * budgets them by file size) and the merge stay near 1 GB. */
#define TP_GPU_RECORDS_DEFAULT ((size_t)4 << 20)

/* The bound o sets on the GPU records of a rank section (above): never 0. */
size_t tp_report_gpu_records(const tp_report_opts *o);

/* Defaults: warm-up 1, top 15, data names data, batch, loader, get_batch,
 * batch-generator (matched case-insensitively), exposed-communication thresholds 10 % and
 * 30 % of the step. */
void tp_report_opts_init(tp_report_opts *o);

/* A built report: the document and the typed results it was written from. Owns both
 * (tp_report_free); the results' strings point into `run`, which must outlive the report.
 * Not thread safe. */
typedef struct tp_report {
    cJSON *doc;             /* report.json's document */
    tp_run_results res;     /* what the analyses computed (results.h) */
    const tp_run *run;      /* the run it reports on (not owned) */
    struct tp_section_spill *spill; /* tp_report_make_spilled: the document's "ranks" entries,
                                     * held apart (report_spill.h; "ranks" is then empty in
                                     * doc); NULL: they are in doc. Read them through
                                     * tp_report_section. Owned. */
} tp_report;

/* Builds the report of a loaded run into *out (o NULL: defaults). Returns TPROF_OK, or
 * TPROF_ERR_NO_MEMORY with *out empty. The rank sections are computed by o->threads threads;
 * a slim rank (tp_run_load_slim) has its file read again whole for its section and freed
 * after it, the files in flight together kept under a memory budget (report.c,
 * SECTION_BUDGET), and its steps kept in it for the run-level analyses: the document is the
 * one of the whole run, byte for byte. A slim rank whose file can no longer be read again
 * (gone, shorter, replaced: tp_process_load_whole) has the section of what the slim process
 * holds, and a line in run->errors (and the report's unreadable files) that says so. The run
 * is read, and only a slim rank's memos, run->errors and the string pool (which locks) are
 * written; the run must not be used by another thread meanwhile. */
int tp_report_make(const tp_run *run, const tp_report_opts *o, tp_report *out);

/* tp_report_make, with each rank's section of the document ("ranks"[k]) written to a
 * temporary file as it is made and not held (out->spill; report_spill.h): the report holds
 * no rank's section tree, the run-level analyses reading the typed results alone. doc's
 * "ranks" is then an empty array: write the document with tp_report_write_doc and read a
 * section with tp_report_section, which give what tp_report_make's document holds, byte for
 * byte. For the command's reports (`report`, `run`); out of memory for the store, the
 * sections stay in the document. */
int tp_report_make_spilled(const tp_run *run, const tp_report_opts *o, tp_report *out);

/* The number of rank sections of r (the document's "ranks", wherever they are held). */
size_t tp_report_nsections(const tp_report *r);

/* Rank section k of r (0 <= k < tp_report_nsections) into *section, NULL when that section
 * was never made (out of memory): from the document (*owned NULL) or read back from the spill
 * (*owned: the caller's, cJSON_Delete). Returns TPROF_OK, TPROF_ERR_NO_MEMORY or
 * TPROF_ERR_IO (the spill file could not give it back). Not thread safe. */
int tp_report_section(const tp_report *r, size_t k, const cJSON **section, cJSON **owned);

/* The next writer of r that reads its rank sections (tp_report_write_doc or tp_html_write) is
 * the last: each section it reads is then let go, its space in the spill's temporary file given
 * back as the output grows (tp_spill_read_once), so that an output on the same file system as
 * $TMPDIR finds the room it would have without the spill. A reader after it gets TPROF_ERR_IO.
 * No effect on a report that holds its sections. */
void tp_report_sections_once(tp_report *r);

/* No writer of r reads its rank sections any more (the text alone is left): they are let go,
 * their space in the spill's temporary file given back (for an output on $TMPDIR's file
 * system, as tp_report_sections_once). A reader after it gets TPROF_ERR_IO. No effect on a
 * report that holds its sections. */
void tp_report_sections_drop(tp_report *r);

/* For a reader of a slim run other than the report (the export): reads each slim rank of
 * `run` again whole (those with want[i] set, want indexed as run->procs; NULL: every slim
 * rank), as the report's rank sections do, and keeps in it what the run-level analyses read:
 * its steps found with o->step_name and o->warmup (the steps memo; o->step_name must outlive
 * the run) and its communication ops' resolved times (the comm memo). o NULL: defaults; the
 * files are read by o->threads threads under the sections' memory budget, one file's model
 * at a time with one thread. A file that can no longer be read keeps no memo. Returns
 * TPROF_OK, or TPROF_ERR_NO_MEMORY (also when memory ran out while a memo was kept: one may
 * then be short, alloc.h). Writes the run's slim ranks; not thread safe. */
int tp_run_fill_memos(tp_run *run, const tp_report_opts *o, const unsigned char *want);

/* Frees what tp_report_make allocated; *r reads empty after. NULL-safe. */
void tp_report_free(tp_report *r);

/* The document alone (tp_report_make, the results freed); NULL only when out of memory.
 * Free with cJSON_Delete. For the readers of the JSON (tests, diff). */
cJSON *tp_report_build(const tp_run *run, const tp_report_opts *o);

/* Render. Return 0 or TPROF_ERR_IO. `color` adds ANSI colour (only for terminals). The
 * text reads only the report's typed results (docs/design.md §5.1). */
int tp_report_write_text(const tp_report *rep, FILE *f, int color);
int tp_report_write_json(const cJSON *rep, FILE *f);
/* report.json of r: tp_report_write_json of its document with the rank sections in their
 * place, printed one at a time when they are spilled (the same bytes). Returns 0,
 * TPROF_ERR_IO or TPROF_ERR_NO_MEMORY. */
int tp_report_write_doc(const tp_report *r, FILE *f);

#endif /* TPROF_REPORT_H */
