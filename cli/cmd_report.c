/*
 * cmd_report.c — `trainprof report DIR`: the report of a run's rank files, as text, JSON or
 * one self-contained HTML file (docs/cli.md).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/alloc.h"
#include "common.h"
#include "export/html.h"

enum { OPT_FORMAT = OPT_OWN, OPT_OUTPUT, OPT_STEP_NAME, OPT_DATA_NAMES, OPT_WARMUP, OPT_TOP };

static const cli_opt report_opts_table[] = {
    {OPT_FORMAT, "--format", NULL, CLI_VALUE, "text|json|html",
     "default text [TRAINPROF_FORMAT]; html is one self-contained\n"
     "file (inline CSS and SVG plots, no script, no network)"},
    {OPT_OUTPUT, "--output", "-o", CLI_VALUE, "FILE", "write there instead of standard output"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME", "as for run [TRAINPROF_STEP_NAME]"},
    {OPT_WARMUP, "--warmup", NULL, CLI_VALUE, "N", "warm-up steps, default 1 [TRAINPROF_WARMUP]"},
    {OPT_DATA_NAMES, "--data-names", NULL, CLI_VALUE, "A,B,...",
     "range names that mark data loading (case-insensitive)\n"
     "[TRAINPROF_DATA_NAMES]; default data,batch,loader,get_batch,\n"
     "batch-generator"},
    {OPT_TOP, "--top", NULL, CLI_VALUE, "N", "rows in the top-range tables, default 15"},
    CLI_THROUGHPUT_OPTS,
    CLI_GPU_RECORDS_OPT,
    CLI_HELP_OPT,
};

static const cli_cmd report_cmd = {
    "report",
    "usage: trainprof report DIR|FILE... [options]\n"
    "\n"
    "Reports on the rank files in DIR (or one .tprof file): processes and ranks, steps\n"
    "(count, mean, p50, p90, max; warm-up apart), top ranges by inclusive and exclusive time\n"
    "per step, and the share of data loading. Damaged files are named and read as far as\n"
    "they are valid. torch.profiler (Kineto) traces are read too: trace files\n"
    "(*.pt.trace.json[.gz], one per rank), a quoted glob of them, or a directory holding\n"
    "them; a trace that cannot be read whole is named, with what is wrong.\n"
    "\n"
    "Clocks and stragglers match collectives across ranks; a rank file of more than\n"
    "TRAINPROF_COMM_KEEP communication ops (default 8192, fewer past 1024 ranks) gives a\n"
    "sample of them, which the report says (2147483648: every one).\n"
    "\n"
    "options (environment twin in brackets):\n",
    report_opts_table,
    sizeof report_opts_table / sizeof *report_opts_table,
    NULL,
    0,
};

int cmd_report(int argc, char **argv) {
    /* a file-size limit (ulimit -f) is a failed write, never SIGXFSZ: the rank sections'
     * temporary file (report_spill.c) then stays in memory, and an output that does not fit
     * is an error with its line, where the signal ended the command mid-write */
    signal(SIGXFSZ, SIG_IGN);
    const char *ops[64], *format = env_or("TRAINPROF_FORMAT", "text"), *out = NULL, *v;
    report_args a;
    report_args_init(&a, "report");
    const char *dn = env_or("TRAINPROF_DATA_NAMES", NULL);
    int rest = 0; /* after "--": operands only */
    size_t nops = 0;
    for (int i = 0; i < argc; i++) {
        int id = rest ? CLI_OPERAND : cli_next(&report_cmd, argc, argv, &i, &v);
        switch (id) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&report_cmd, stdout); return 0;
        case OPT_FORMAT: format = v; break;
        case OPT_OUTPUT: out = v; break;
        case OPT_STEP_NAME: a.step_name = v; break;
        case OPT_DATA_NAMES: dn = v; break;
        case OPT_WARMUP: a.warmup = parse_int("report", "--warmup", v, 0, 1 << 30); break;
        case OPT_TOP: a.top = parse_int("report", "--top", v, 1, 100000); break;
        case CLI_OPERAND:
            if (nops == sizeof ops / sizeof *ops)
                die_usage("report", "unexpected argument '%s' (64 at most)", argv[i]);
            ops[nops++] = argv[i];
            break;
        default: report_opt_set(&a, id, v, "report"); break;
        }
    }
    if (!nops) die_usage("report", "%s", "missing DIR (a trainprof run directory)");
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "html"))
        die_usage("report", "unknown format '%s' (text, json or html)", format);
    char *dncopy = dn ? strdup(dn) : NULL;
    if (dn && !dncopy) {
        fprintf(stderr, "trainprof report: out of memory\n");
        return 1;
    }
    a.data_names = dncopy;
    tp_run run;
    if (load_runs_slim(ops, nops, &run) != 0) {
        free(dncopy);
        return 1;
    }
    tp_report rep;
    int made = make_report(&run, &a, &rep) == TPROF_OK;
    unsigned long nomem = tp_nomem_process(); /* a refusal before is in the report's notes */
    int rc = 1;
    outfile of;
    if (made && out_open(&of, out) == 0) {
        tp_report_opts o;
        report_opts(&a, &o);
        /* the one writer: the sections' space in $TMPDIR goes back as the output takes its own
         * (an output there found less room than without them); the text reads none */
        if (!strcmp(format, "text")) tp_report_sections_drop(&rep);
        else tp_report_sections_once(&rep);
        int w = !strcmp(format, "json") ? tp_report_write_doc(&rep, of.f)
                : !strcmp(format, "html")
                    ? tp_html_write(&rep, &o, of.f)
                    : tp_report_write_text(&rep, of.f,
                                           of.f == stdout && isatty(1) && !getenv("NO_COLOR"));
        int short_ = written_short(of.f == stdout ? "the report" : out, nomem);
        rc = out_close(&of, w == TPROF_OK && !short_) == 0 ? 0 : 1;
        if (!rc && of.f != stdout) fprintf(stderr, "trainprof: wrote %s\n", out);
    }
    if (made) tp_report_free(&rep);
    tp_run_free(&run);
    free(dncopy);
    return cli_samples_lost("report") ? 1 : rc;
}
