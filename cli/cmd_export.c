/*
 * cmd_export.c — `trainprof export DIR [--format chrome]`: a run as Chrome Trace Event JSON
 * (export/chrome.h), one merged file or one file per rank (docs/cli.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"
#include "export/chrome.h"

enum { OPT_FORMAT = OPT_OWN, OPT_OUTPUT, OPT_PER_RANK, OPT_STEP_NAME };

static const cli_opt export_opts[] = {
    {OPT_FORMAT, "--format", NULL, CLI_VALUE, "chrome",
     "the only format in this version, and the default"},
    {OPT_OUTPUT, "--output", "-o", CLI_VALUE, "FILE", "merged trace file"},
    {OPT_PER_RANK, "--per-rank", NULL, CLI_VALUE, "OUTDIR",
     "one file per rank (OUTDIR is created)"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME", "as for report [TRAINPROF_STEP_NAME]"},
    CLI_HELP_OPT,
};

static const cli_cmd export_cmd = {
    "export",
    "usage: trainprof export DIR [--format chrome] [-o FILE | --per-rank OUTDIR]\n"
    "\n"
    "Writes Chrome Trace Event JSON that Perfetto UI and chrome://tracing open, shaped like\n"
    "PyTorch profiler traces: one merged file with pid = rank (default DIR/trace.json), or\n"
    "with --per-rank one file per rank (OUTDIR/rank<N>.json) with distributedInfo, as HTA\n"
    "expects.\n"
    "\n"
    "options:\n",
    export_opts,
    sizeof export_opts / sizeof *export_opts,
    NULL,
    0,
};

int cmd_export(int argc, char **argv) {
    const char *dir = NULL, *format = "chrome", *out = NULL, *per_rank = NULL, *v;
    tp_export_opts eo = {env_or("TRAINPROF_STEP_NAME", NULL), 1};
    int rest = 0; /* after "--": operands only */
    for (int i = 0; i < argc; i++) {
        switch (rest ? CLI_OPERAND : cli_next(&export_cmd, argc, argv, &i, &v)) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&export_cmd, stdout); return 0;
        case OPT_FORMAT: format = v; break;
        case OPT_OUTPUT: out = v; break;
        case OPT_PER_RANK: per_rank = v; break;
        case OPT_STEP_NAME: eo.step_name = v; break;
        default: /* an operand */
            if (dir) die_usage("export", "unexpected argument '%s'", argv[i]);
            dir = argv[i];
            break;
        }
    }
    if (!dir) die_usage("export", "%s", "missing DIR (a trainprof run directory)");
    if (strcmp(format, "chrome")) die_usage("export", "unknown format '%s' (chrome)", format);
    if (out && per_rank) die_usage("export", "%s", "-o and --per-rank exclude each other");
    tp_run run;
    if (load_run(dir, &run) != 0) return 1;
    int rc = 0;
    if (!per_rank) {
        char def[PATH_MAX];
        struct stat st;
        if (!out) {
            if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(def, sizeof def, "%s/trace.json", dir);
            else
                snprintf(def, sizeof def, "%s.trace.json", dir);
            out = def;
        }
        outfile of;
        if (out_open(&of, out) != 0) rc = 1;
        else {
            int w = tp_export_chrome(&run, of.f, &eo);
            rc = out_close(&of, w == TPROF_OK) == 0 ? 0 : 1;
            if (!rc && of.f != stdout) fprintf(stderr, "trainprof: wrote %s\n", out);
        }
    } else {
        if (mkdir(per_rank, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "trainprof: cannot create %s: %s\n", per_rank, strerror(errno));
            tp_run_free(&run);
            return 1;
        }
        int n = 0;
        for (size_t i = 0; i < run.nprocs && !rc; i++) {
            const tp_process *p = &run.procs[i];
            if (p->role != TP_ROLE_RANK) continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/rank%d.json", per_rank, p->rank);
            outfile of;
            if (out_open(&of, path) != 0) { rc = 1; break; }
            int w = tp_export_chrome_rank(&run, p->rank, of.f, &eo);
            rc = out_close(&of, w == TPROF_OK) == 0 ? 0 : 1;
            n++;
        }
        if (!rc) fprintf(stderr, "trainprof: wrote %d file(s) under %s\n", n, per_rank);
    }
    tp_run_free(&run);
    return rc;
}
