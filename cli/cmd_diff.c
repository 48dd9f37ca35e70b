/*
 * cmd_diff.c — `trainprof diff RUN_A RUN_B`: what changed between two runs beyond noise
 * (analysis/diff.h), from their rank files or their report.json (docs/cli.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/diff.h"
#include "analysis/kineto.h"
#include "analysis/alloc.h"
#include "common.h"

enum { OPT_FORMAT = OPT_OWN, OPT_OUTPUT, OPT_STEP_NAME, OPT_WARMUP, OPT_NOISE_K, OPT_MIN_CHANGE };

static const cli_opt diff_opts[] = {
    {OPT_FORMAT, "--format", NULL, CLI_VALUE, "text|json", "default text [TRAINPROF_FORMAT]"},
    {OPT_OUTPUT, "--output", "-o", CLI_VALUE, "FILE", "write there instead of standard output"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME",
     "as for report, for both runs [TRAINPROF_STEP_NAME]"},
    {OPT_WARMUP, "--warmup", NULL, CLI_VALUE, "N", "warm-up steps, default 1 [TRAINPROF_WARMUP]"},
    {OPT_NOISE_K, "--noise-k", NULL, CLI_VALUE, "K",
     "standard errors a change must exceed (default 3)"},
    {OPT_MIN_CHANGE, "--min-change", NULL, CLI_VALUE, "PCT",
     "smallest change reported, in % of A (default 1)"},
    CLI_HELP_OPT,
};

static const cli_cmd diff_cmd = {
    "diff",
    "usage: trainprof diff RUN_A RUN_B [options]\n"
    "\n"
    "Compares two runs (directories of rank files, or of a report.json, or report.json files;\n"
    "torch.profiler traces as for report: a trace file, a quoted glob, a directory of them):\n"
    "step time per rank (mean, p50, p90), GPU kernel time by class, the top kernels (by name),\n"
    "communication (by op and communicator size) and energy per step, and names what changed\n"
    "beyond noise: |B - A| > 3 standard errors of the difference of the per-step means and\n"
    "> 1 % of A (without rank files, where the noise is unknown: > 5 % of A).\n"
    "\n"
    "options (environment twin in brackets):\n",
    diff_opts,
    sizeof diff_opts / sizeof *diff_opts,
    NULL,
    0,
};

/* One side of a diff: the rank files when DIR holds some (the report is built from them,
 * with per-step values), else a report.json (DIR/report.json, or DIR itself). */
typedef struct diff_in {
    tp_run run;
    int have_run;
    cJSON *rep;
} diff_in;

static cJSON *read_json_file(const char *path, char *why, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, cap + 1);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    fclose(f);
    cJSON *j = NULL;
    if (buf) {
        buf[len] = 0;
        j = cJSON_Parse(buf);
    }
    free(buf);
    if (!j || !cJSON_IsObject(j) ||
        strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "schema"))
                   ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "schema"))
                   : "",
               "trainprof.report")) {
        snprintf(why, n, "%s is not a trainprof report (schema trainprof.report)", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static int diff_load(const char *dir, const report_args *a, diff_in *in) {
    char err[PATH_MAX + 128] = "", why[PATH_MAX + 128] = "";
    memset(in, 0, sizeof *in);
    struct stat st;
    int found = stat(dir, &st) == 0;
    if (!found && !strpbrk(dir, "*?[")) { /* a glob pattern of traces is not a file */
        fprintf(stderr, "trainprof diff: cannot read %s: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t dl = strlen(dir);
    /* a report.json, unless it is a torch.profiler trace (kineto.h) */
    int is_json = found && S_ISREG(st.st_mode) && dl > 5 && !strcmp(dir + dl - 5, ".json") &&
                  !tp_kineto_sniff(dir);
    /* slim: the report and the per-step samples read each rank file whole one at a time */
    int rc = is_json ? TPROF_ERR_NOT_FOUND : tp_run_load_slim(&dir, 1, &in->run, err, sizeof err);
    if (rc == TPROF_OK) {
        in->have_run = 1;
        tp_report_opts o; /* diff reads the document: a report.json read back is the same */
        report_opts(a, &o);
        in->rep = tp_report_build(&in->run, &o);
        return in->rep ? 0 : -1;
    }
    if (!is_json) tp_run_free(&in->run);
    if (rc == TPROF_ERR_FORMAT && found && S_ISREG(st.st_mode)) {
        /* a trace named by the user that cannot be read: its one line says why */
        fprintf(stderr, "trainprof diff: %s\n", err);
        return -1;
    }
    if (!found) {
        fprintf(stderr, "trainprof diff: cannot read run %s: %s\n", dir, err);
        return -1;
    }
    char path[PATH_MAX + 16];
    if (is_json) snprintf(path, sizeof path, "%s", dir);
    else snprintf(path, sizeof path, "%s/report.json", dir);
    in->rep = read_json_file(path, why, sizeof why);
    if (in->rep) return 0;
    fprintf(stderr, "trainprof diff: cannot read run %s: %s%s%s\n", dir, err[0] ? err : "",
            err[0] && !is_json ? "; and " : "",
            is_json || !err[0] || access(path, F_OK) == 0 ? why : "no report.json there either");
    return -1;
}

int cmd_diff(int argc, char **argv) {
    const char *dirs[2] = {NULL, NULL}, *format = env_or("TRAINPROF_FORMAT", "text"), *out = NULL,
               *v;
    report_args a;
    /* diff reads every rank file whole for its own kernel rows (diff.c): its reports hold
     * every GPU record too, so that both parts are over the same steps, and the bound's
     * variable, which it does not read, cannot refuse it */
    unsetenv("TRAINPROF_GPU_RECORDS");
    report_args_init(&a, "diff");
    a.gpu_records = SIZE_MAX;
    tp_diff_opts dop;
    tp_diff_opts_init(&dop);
    int nd = 0;
    int rest = 0; /* after "--": operands only */
    for (int i = 0; i < argc; i++) {
        switch (rest ? CLI_OPERAND : cli_next(&diff_cmd, argc, argv, &i, &v)) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&diff_cmd, stdout); return 0;
        case OPT_FORMAT: format = v; break;
        case OPT_OUTPUT: out = v; break;
        case OPT_STEP_NAME: a.step_name = v; break;
        case OPT_WARMUP: a.warmup = parse_int("diff", "--warmup", v, 0, 1 << 30); break;
        case OPT_NOISE_K: dop.noise_k = parse_num("diff", "--noise-k", v, 0, 1000); break;
        case OPT_MIN_CHANGE:
            dop.min_rel = parse_num("diff", "--min-change", v, 0, 1000) / 100.0;
            break;
        default: /* an operand */
            if (nd >= 2) die_usage("diff", "unexpected argument '%s'", argv[i]);
            dirs[nd++] = argv[i];
            break;
        }
    }
    if (nd < 2) die_usage("diff", "%s", "needs two runs: trainprof diff RUN_A RUN_B");
    if (strcmp(format, "text") && strcmp(format, "json"))
        die_usage("diff", "unknown format '%s' (text or json)", format);
    diff_in in[2];
    int rc = 1;
    /* a comparison carries no memory note: any refusal from here on keeps it from being
     * written (a figure of one side missing would read as a change) */
    unsigned long nomem = tp_nomem_process();
    if (diff_load(dirs[0], &a, &in[0]) != 0) return 1;
    if (diff_load(dirs[1], &a, &in[1]) != 0) {
        cJSON_Delete(in[0].rep);
        if (in[0].have_run) tp_run_free(&in[0].run);
        return 1;
    }
    tp_report_opts ro;
    report_opts(&a, &ro);
    tp_diff_side sa = {dirs[0], in[0].rep, in[0].have_run ? &in[0].run : NULL, &ro};
    tp_diff_side sb = {dirs[1], in[1].rep, in[1].have_run ? &in[1].run : NULL, &ro};
    cJSON *d = tp_diff_build(&sa, &sb, &dop);
    outfile of;
    if (d && out_open(&of, out) == 0) {
        int w =
            !strcmp(format, "json") ? tp_report_write_json(d, of.f) : tp_diff_write_text(d, of.f);
        int short_ = written_short(of.f == stdout ? "the comparison" : out, nomem);
        rc = out_close(&of, w == TPROF_OK && !short_) == 0 ? 0 : 1;
        if (!rc && of.f != stdout) fprintf(stderr, "trainprof: wrote %s\n", out);
    }
    cJSON_Delete(d);
    for (int i = 0; i < 2; i++) {
        cJSON_Delete(in[i].rep);
        if (in[i].have_run) tp_run_free(&in[i].run);
    }
    return cli_samples_lost("diff") ? 1 : rc;
}
