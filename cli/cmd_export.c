/*
 * cmd_export.c — `trainprof export DIR [--format chrome|perfetto]`: a run as Chrome Trace
 * Event JSON (export/chrome.h), one merged file or one file per rank, or as one Perfetto
 * protobuf trace (export/perfetto.h) (docs/cli.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/alloc.h"
#include "analysis/clocks.h"
#include "common.h"
#include "export/chrome.h"
#include "export/compress.h"
#include "export/perfetto.h"

enum { OPT_FORMAT = OPT_OWN, OPT_OUTPUT, OPT_PER_RANK, OPT_STEP_NAME, OPT_COMPRESS, OPT_RANKS,
       OPT_STEPS, OPT_TIME };

static const cli_opt export_opts[] = {
    {OPT_FORMAT, "--format", NULL, CLI_VALUE, "chrome|perfetto",
     "Chrome Trace Event JSON (the default), or a Perfetto protobuf trace\n"
     "(merged only; default DIR/trace.pftrace)"},
    {OPT_OUTPUT, "--output", "-o", CLI_VALUE, "FILE", "merged trace file"},
    {OPT_PER_RANK, "--per-rank", NULL, CLI_VALUE, "OUTDIR",
     "one file per rank (OUTDIR is created)"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME", "as for report [TRAINPROF_STEP_NAME]"},
    {OPT_COMPRESS, "--compress", NULL, CLI_VALUE, "gz|zst",
     "compress the files whose names trainprof chooses (DIR/trace.json.gz,\n"
     "OUTDIR/rank<N>.json.zst); -o FILE is compressed when its name ends in\n"
     ".gz or .zst"},
    {OPT_RANKS, "--ranks", NULL, CLI_VALUE, "LIST",
     "only these ranks (and their helpers), e.g. 0,8-15"},
    {OPT_STEPS, "--steps", NULL, CLI_VALUE, "A-B",
     "only events that overlap steps A to B (of the lowest selected rank\n"
     "with steps; numbered as the report numbers them)"},
    {OPT_TIME, "--time", NULL, CLI_VALUE, "S:E",
     "only events that overlap seconds S to E from the trace's start"},
    CLI_HELP_OPT,
};

static const cli_cmd export_cmd = {
    "export",
    "usage: trainprof export DIR [--format chrome|perfetto] [-o FILE | --per-rank OUTDIR]\n"
    "\n"
    "Writes Chrome Trace Event JSON that Perfetto UI and chrome://tracing open, shaped like\n"
    "PyTorch profiler traces: one merged file with pid = rank (default DIR/trace.json), or\n"
    "with --per-rank one file per rank (OUTDIR/rank<N>.json) with distributedInfo, as HTA\n"
    "expects. Events of all hosts are on one clock: the report's alignment (offsets\n"
    "from matched collectives, a sample of them past TRAINPROF_COMM_KEEP ops a rank\n"
    "file, as the report says), written into the trace's metadata. --format perfetto\n"
    "writes the same events as a Perfetto protobuf trace (interned names, a track per\n"
    "thread, GPU stream, communicator and counter), for runs whose JSON is too large.\n"
    "\n"
    "options:\n",
    export_opts,
    sizeof export_opts / sizeof *export_opts,
    NULL,
    0,
};

/* One line when no process has a selected rank. */
static void ranks_missing(void) {
    fprintf(stderr, "trainprof export: no process of the selected ranks (nothing written)\n");
}

/* One line when the selection matched nothing to export. */
static void selection_missing(const tp_export_opts *eo) {
    if (eo->has_steps && eo->has_time)
        fprintf(stderr, "trainprof export: no selected rank has steps %llu-%llu within seconds "
                        "%g to %g of the trace (nothing written)\n",
                (unsigned long long)eo->step_lo, (unsigned long long)eo->step_hi, eo->t_lo,
                eo->t_hi);
    else if (eo->has_steps)
        fprintf(stderr, "trainprof export: no selected rank has steps %llu-%llu (nothing "
                        "written)\n", (unsigned long long)eo->step_lo,
                (unsigned long long)eo->step_hi);
    else if (eo->has_time)
        fprintf(stderr, "trainprof export: no selected process ran in seconds %g to %g of the "
                        "trace (nothing written)\n", eo->t_lo, eo->t_hi);
    else
        ranks_missing();
}

/* After a failed export, the rank files that could not be read again (the exporters read
 * each one a second time, whole, while writing it: it went away or changed since the run was
 * read), one line each ending in `what` was written; nothing when none is the cause. */
static void files_changed(const tp_run *run, const char *what) {
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        char why[256];
        if (p->slim && tp_process_file_check(p, why, sizeof why) != TPROF_OK)
            fprintf(stderr, "trainprof: %s: %s (it changed while the run was exported; %s)\n",
                    p->path, why, what);
    }
}

/* A number of --ranks or --steps: digits alone (strtol and sscanf would take blanks and a
 * sign, and "-5" as a step would wrap to 2^64 - 5). The end of its digits, or NULL. */
static const char *digits(const char *s, unsigned long long max, unsigned long long *x) {
    if (*s < '0' || *s > '9') return NULL;
    char *e;
    errno = 0;
    *x = strtoull(s, &e, 10);
    return errno || *x > max ? NULL : e;
}

/* "0,8-15" into a fresh array (*n entries); at most 1,048,576 ranks; NULL when malformed */
static int *parse_ranks(const char *s, size_t *n) {
    size_t cap = 16;
    int *v = malloc(cap * sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (const char *q = s; *q;) {
        unsigned long long a, b;
        const char *e = digits(q, 1048575, &a);
        if (!e) goto bad;
        b = a;
        if (*e == '-' && (!(e = digits(e + 1, 1048575, &b)) || b < a)) goto bad;
        for (unsigned long long r = a; r <= b; r++) {
            if (*n == cap) {
                if (cap >= 1048576) goto bad;
                int *w = realloc(v, 2 * cap * sizeof *v);
                if (!w) goto bad;
                v = w;
                cap *= 2;
            }
            v[(*n)++] = (int)r;
        }
        if (*e == ',' && e[1]) e++; /* a comma between two ranks, not at the end */
        else if (*e) goto bad;
        q = e;
    }
    if (*n) return v;
bad:
    free(v);
    return NULL;
}

/* --steps A-B or A into eo; a usage error otherwise */
static void parse_steps(const char *v, tp_export_opts *eo) {
    unsigned long long a = 0, b = 0;
    const char *e = digits(v, ULLONG_MAX, &a);
    if (e && *e == '-') e = digits(e + 1, ULLONG_MAX, &b);
    else b = a;
    if (!e || *e || b < a)
        die_usage("export", "--steps %s: not A-B or A (step numbers, A <= B)", v);
    eo->has_steps = 1;
    eo->step_lo = a;
    eo->step_hi = b;
}

/* Seconds of --time: a decimal number (digits, a point, an exponent), without the blanks,
 * signs, hexadecimal or "inf" strtod takes; one too large for a double is the largest
 * (HUGE_VAL: the trace's end). The end of the number, or NULL. */
static const char *seconds(const char *s, double *x) {
    if (!((*s >= '0' && *s <= '9') || *s == '.') || (s[0] == '0' && (s[1] | 32) == 'x'))
        return NULL;
    char *e;
    *x = strtod(s, &e);
    return e == s ? NULL : e;
}

/* --time S:E (seconds) into eo; a usage error otherwise */
static void parse_time(const char *v, tp_export_opts *eo) {
    double a = 0, b = 0;
    const char *e = seconds(v, &a);
    if (e && *e == ':') e = seconds(e + 1, &b);
    else e = NULL;
    if (!e || *e || !(b >= a))
        die_usage("export", "--time %s: not S:E seconds (0 <= S <= E)", v);
    eo->has_time = 1;
    eo->t_lo = a;
    eo->t_hi = b;
}

int cmd_export(int argc, char **argv) {
    const char *dir = NULL, *format = "chrome", *out = NULL, *per_rank = NULL, *v;
    tp_export_opts eo = {env_or("TRAINPROF_STEP_NAME", NULL), 1, NULL, NULL, 0, 0, 0, 0, 0, 0, 0};
    int *ranks = NULL;
    tp_compress zc = TP_COMPRESS_NONE;
    int rest = 0; /* after "--": operands only */
    for (int i = 0; i < argc; i++) {
        switch (rest ? CLI_OPERAND : cli_next(&export_cmd, argc, argv, &i, &v)) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&export_cmd, stdout); return 0;
        case OPT_FORMAT: format = v; break;
        case OPT_OUTPUT: out = v; break;
        case OPT_PER_RANK: per_rank = v; break;
        case OPT_STEP_NAME: eo.step_name = v; break;
        case OPT_RANKS:
            free(ranks);
            if (!(ranks = parse_ranks(v, &eo.n_ranks)))
                die_usage("export", "--ranks %s: not a list of ranks such as 0,8-15", v);
            eo.ranks = ranks;
            break;
        case OPT_STEPS: parse_steps(v, &eo); break;
        case OPT_TIME: parse_time(v, &eo); break;
        case OPT_COMPRESS:
            if (!strcmp(v, "gz") || !strcmp(v, "gzip")) zc = TP_COMPRESS_GZIP;
            else if (!strcmp(v, "zst") || !strcmp(v, "zstd")) zc = TP_COMPRESS_ZSTD;
            else if (!strcmp(v, "none")) zc = TP_COMPRESS_NONE;
            else die_usage("export", "unknown compression '%s' (gz, zst, none)", v);
            break;
        default: /* an operand */
            if (dir) die_usage("export", "unexpected argument '%s'", argv[i]);
            dir = argv[i];
            break;
        }
    }
    if (!dir) die_usage("export", "%s", "missing DIR (a trainprof run directory)");
    int perfetto = !strcmp(format, "perfetto");
    if (strcmp(format, "chrome") && !perfetto)
        die_usage("export", "unknown format '%s' (chrome, perfetto)", format);
    if (perfetto && per_rank)
        die_usage("export", "%s", "--per-rank writes Chrome JSON only; --format perfetto "
                                  "writes one merged trace (-o FILE)");
    if (out && per_rank) die_usage("export", "%s", "-o and --per-rank exclude each other");
    /* -o names its file, and its name says how it is compressed */
    if (out && zc != TP_COMPRESS_NONE && tp_compress_by_name(out) != zc)
        die_usage("export", "-o %s: its name decides its compression (.gz, .zst); "
                            "--compress is for the names trainprof chooses", out);
    if (!tp_compress_available(zc)) {
        fprintf(stderr, "trainprof: this trainprof was built without libzstd (install "
                        "libzstd-dev and rebuild): no .zst output\n");
        return 1;
    }
    tp_run run;
    /* a trace carries no note: any refusal from here on keeps it from being written */
    unsigned long nomem = tp_nomem_process();
    if (load_runs_slim(&dir, 1, &run) != 0) return 1;
    /* read slim: the exporters read each selected rank file again whole while they write it */
    if (tp_export_fill_memos(&run, &eo) != TPROF_OK) {
        fprintf(stderr, "trainprof: out of memory\n");
        tp_run_free(&run);
        return 1;
    }
    int rc = 0;
    /* the report's clock alignment, once for every file; unusable start pairs named */
    tp_clocks_result ckr;
    if (tp_clocks_compute(&run, &ckr) == TPROF_OK) eo.clocks = &ckr;
    for (size_t i = 0; i < ckr.nissues; i++) fprintf(stderr, "trainprof: %s\n", ckr.issues[i].line);
    if (!per_rank) {
        char def[PATH_MAX];
        struct stat st;
        if (!out) {
            if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(def, sizeof def, "%s/trace.%s%s", dir, perfetto ? "pftrace" : "json",
                         tp_compress_suffix(zc));
            else
                snprintf(def, sizeof def, "%s.trace.%s%s", dir, perfetto ? "pftrace" : "json",
                         tp_compress_suffix(zc));
            out = def;
        }
        outfile of;
        if (out_open(&of, out) != 0) rc = 1;
        else {
            int w = perfetto ? tp_export_perfetto(&run, of.f, &eo, NULL)
                             : tp_export_chrome(&run, of.f, &eo);
            int short_ = w == TPROF_OK && written_short(out, nomem);
            /* a selection that matched nothing says so in its one line alone */
            rc = out_close(&of, w == TPROF_ERR_NOT_FOUND ? -1 : w == TPROF_OK && !short_) == 0
                     ? 0 : 1;
            if (w == TPROF_ERR_NOT_FOUND) selection_missing(&eo);
            else if (w != TPROF_OK) files_changed(&run, "nothing written");
            if (!rc && of.f != stdout) fprintf(stderr, "trainprof: wrote %s\n", out);
        }
    } else {
        if (mkdir(per_rank, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "trainprof: cannot create %s: %s\n", per_rank, strerror(errno));
            tp_clocks_result_free(&ckr);
            tp_run_free(&run);
            return 1;
        }
        int n = 0;
        for (size_t i = 0; i < run.nprocs && !rc; i++) {
            const tp_process *p = &run.procs[i];
            if (p->role != TP_ROLE_RANK) continue;
            if (!tp_export_rank_selected(&eo, p->rank)) continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/rank%d.json%s", per_rank, p->rank,
                     tp_compress_suffix(zc));
            outfile of;
            if (out_open(&of, path) != 0) { rc = 1; break; }
            int w = tp_export_chrome_rank(&run, p->rank, of.f, &eo);
            int short_ = w == TPROF_OK && written_short(path, nomem);
            /* a rank without the steps asked for gets no file; the others still do */
            if (w == TPROF_ERR_NOT_FOUND) {
                (void)out_close(&of, -1);
                continue;
            }
            rc = out_close(&of, w == TPROF_OK && !short_) == 0 ? 0 : 1;
            if (w != TPROF_OK) files_changed(&run, "the files of the ranks before it "
                                                   "were written, no later one");
            n++;
        }
        if (!rc && !n) { /* as the merged trace's misses */
            if (eo.has_steps) selection_missing(&eo);
            else ranks_missing();
            rc = 1;
        }
        if (!rc) fprintf(stderr, "trainprof: wrote %d file(s) under %s\n", n, per_rank);
    }
    tp_clocks_result_free(&ckr);
    tp_run_free(&run);
    free(ranks);
    return cli_samples_lost("export") ? 1 : rc;
}
