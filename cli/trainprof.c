/*
 * trainprof.c — the command line (docs/design.md §7): run, report, export.
 *
 * A client of the library and of the analysis code only, as curl's tool is of libcurl.
 * `run` never changes what the profiled program does: it sets the injection variables,
 * runs the command with them in a process group of its own (given the terminal when this
 * process holds it), forwards the SIGTERM, SIGINT, SIGHUP and SIGQUIT it gets to it, waits,
 * writes the reports next to the rank files, and exits with the command's own status
 * (re-raising the command's terminating signal on itself).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "core/kwindow.h"
#include "core/per_step.h"
#include "format/reader.h"
#include "analysis/mfu.h"
#include "analysis/report.h"
#include "analysis/diff.h"
#include "export/chrome.h"
#include "export/html.h"
#include "trainprof.h"
#include "top.h"

#define EXIT_USAGE 2

static void die_usage(const char *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "trainprof%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'trainprof %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    exit(EXIT_USAGE);
}

static const char *const main_help =
    "usage: trainprof <command> [options]\n"
    "\n"
    "Profile a distributed training job and report why its steps take as long as they do.\n"
    "\n"
    "commands:\n"
    "  run [options] -- CMD [ARGS...]   run CMD (any launcher) under the profiler, then report\n"
    "  report DIR [options]             report on the rank files of a run\n"
    "  export DIR --format chrome ...   write a Chrome/Perfetto trace (PyTorch profiler shape)\n"
    "  diff RUN_A RUN_B [options]       what changed between two runs, beyond noise\n"
    "  top --endpoints HOST:PORT,...    live view of a running job's ranks (metrics endpoints)\n"
    "  serve [--listen ADDR:PORT]       export this node's GPU and host metrics (Prometheus)\n"
    "\n"
    "  trainprof --version             version and build information\n"
    "  trainprof COMMAND --help        the options of a command\n";

static const char *const run_help =
    "usage: trainprof run [options] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD and every process it starts with the trainprof library injected: NVTX3 ranges\n"
    "(NVTX_INJECTION64_PATH), GPU activity through CUPTI (CUDA_INJECTION64_PATH), and the\n"
    "library preloaded so every process gets signal-safe flushing and run metadata. Each\n"
    "process that records something writes DIR/<host>-<pid>.tprof.\n"
    "When CMD ends, writes DIR/report.txt, DIR/report.json and DIR/report.html and prints\n"
    "the report.\n"
    "The exit status is CMD's.\n"
    "\n"
    "options (environment twin in brackets):\n"
    "  -o, --output DIR      output directory [TRAINPROF_DIR]; default trainprof-DATE-TIME;\n"
    "                        must not already hold rank files\n"
    "  --step-name NAME      range that marks a step: exact name, or a glob with * or ?\n"
    "                        [TRAINPROF_STEP_NAME]; default: API steps, ProfilerStep#*,\n"
    "                        train_step, training_step, step, iteration, train_iter\n"
    "  --warmup N            steps excluded from the statistics [TRAINPROF_WARMUP]; default 1\n"
    "  --ring-kb N           per-thread event ring in KiB [TRAINPROF_RING_KB]; default 4096\n"
    "  --sample-hz N         process sampler (CPU, RSS, threads, context switches) per second\n"
    "                        [TRAINPROF_SAMPLE_HZ]; default 10, 0 = off\n"
    "  --kernel-steps A-B    GPU kernel/copy capture (CUPTI) only in steps A to B (also A,\n"
    "                        A-), numbered from 0 as the report numbers them; the rest is\n"
    "                        recorded in every step [TRAINPROF_KERNEL_STEPS]\n"
    "  --no-report           do not print the report (it is still written) [TRAINPROF_QUIET]\n"
    "  --metrics-port PORT   live Prometheus metrics: each process serves /metrics on PORT +\n"
    "                        its local rank, on 127.0.0.1 [TRAINPROF_METRICS_PORT;\n"
    "                        TRAINPROF_METRICS_ADDR, TRAINPROF_METRICS_TOKEN]; the node's GPUs\n"
    "                        on PORT + 1000 [TRAINPROF_METRICS_NODE_PORT]; docs/metrics.md\n"
    "  --python              instrument PyTorch programs with no code change: every Python\n"
    "                        process gets trainprof's sitecustomize (PYTHONPATH), which calls\n"
    "                        trainprof.torch.autostart() when torch is imported: steps at\n"
    "                        optimizer steps, data/forward/backward/optimizer ranges,\n"
    "                        torch.distributed traffic [TRAINPROF_PYTHON=1]; the module is\n"
    "                        found beside the library (BUILD/python) or in\n"
    "                        [TRAINPROF_PYTHON_DIR]; docs/python.md\n"
    "  --tokens-per-step N   tokens one rank processes per step (the global batch / world\n"
    "                        size); --samples-per-step N likewise in samples: throughput\n"
    "  --flops-per-step N    model FLOPs per step per rank, for TFLOP/s and MFU; or\n"
    "  --model SPEC          a transformer: layers=,hidden=,heads=,seq=,vocab= [,ffn=,groups=,\n"
    "                        experts=,topk=,moe_ffn=,kv_channels=,gated=1,dtype=] (Megatron-LM's\n"
    "                        FLOPs formula, with --tokens-per-step)\n"
    "  --dtype T             peak rate for MFU: bf16 (default), fp16, fp8, tf32, fp32\n"
    "  -h, --help            this text\n"
    "\n"
    "Other variables read by the library: TRAINPROF_FLUSH_MS (flush period, default 50),\n"
    "TRAINPROF_MAX_THREADS (1024), TRAINPROF_MAX_STRINGS (8192), TRAINPROF_LOG\n"
    "(error|warn|info|debug), TRAINPROF_ENABLE (0 disables), TRAINPROF_LIB (library path).\n"
    "GPU: TRAINPROF_CUPTI=0 (no GPU activity), TRAINPROF_CUPTI_KINDS (kernel,memcpy,memset,\n"
    "memory,sync,runtime[,driver]), TRAINPROF_NVML_HZ (GPU power/energy sampling, default 10;\n"
    "off where CUPTI records, see README). Details: docs/cli.md.\n";

static const char *const report_help =
    "usage: trainprof report DIR [options]\n"
    "\n"
    "Reports on the rank files in DIR (or one .tprof file): processes and ranks, steps\n"
    "(count, mean, p50, p90, max; warm-up apart), top ranges by inclusive and exclusive time\n"
    "per step, and the share of data loading. Damaged files are named and read as far as\n"
    "they are valid.\n"
    "\n"
    "options (environment twin in brackets):\n"
    "  --format text|json|html  default text [TRAINPROF_FORMAT]; html is one self-contained\n"
    "                        file (inline CSS and SVG plots, no script, no network)\n"
    "  -o, --output FILE     write there instead of standard output\n"
    "  --step-name NAME      as for run [TRAINPROF_STEP_NAME]\n"
    "  --warmup N            warm-up steps, default 1 [TRAINPROF_WARMUP]\n"
    "  --data-names A,B,...  range names that mark data loading (case-insensitive)\n"
    "                        [TRAINPROF_DATA_NAMES]; default data,batch,loader,get_batch,\n"
    "                        batch-generator\n"
    "  --top N               rows in the top-range tables, default 15\n"
    "  --tokens-per-step N   tokens one rank processes per step (the global batch / world\n"
    "                        size); --samples-per-step N likewise in samples: throughput\n"
    "  --flops-per-step N    model FLOPs per step per rank, for TFLOP/s and MFU; or\n"
    "  --model SPEC          a transformer: layers=,hidden=,heads=,seq=,vocab= [,ffn=,groups=,\n"
    "                        experts=,topk=,moe_ffn=,kv_channels=,gated=1,dtype=] (Megatron-LM's\n"
    "                        FLOPs formula, with --tokens-per-step)\n"
    "  --dtype T             peak rate for MFU: bf16 (default), fp16, fp8, tf32, fp32\n"
    "  -h, --help            this text\n";

static const char *const export_help =
    "usage: trainprof export DIR --format chrome [-o FILE | --per-rank OUTDIR]\n"
    "\n"
    "Writes Chrome Trace Event JSON that Perfetto UI and chrome://tracing open, shaped like\n"
    "PyTorch profiler traces: one merged file with pid = rank (default DIR/trace.json), or\n"
    "with --per-rank one file per rank (OUTDIR/rank<N>.json) with distributedInfo, as HTA\n"
    "expects.\n"
    "\n"
    "options:\n"
    "  --format chrome       the only format in this version\n"
    "  -o, --output FILE     merged trace file\n"
    "  --per-rank OUTDIR     one file per rank (OUTDIR is created)\n"
    "  --step-name NAME      as for report [TRAINPROF_STEP_NAME]\n"
    "  -h, --help            this text\n";

static const char *const diff_help =
    "usage: trainprof diff RUN_A RUN_B [options]\n"
    "\n"
    "Compares two runs (directories of rank files, or of a report.json, or report.json files):\n"
    "step time per rank (mean, p50, p90), GPU kernel time by class, the top kernels (by name),\n"
    "communication (by op and communicator size) and energy per step, and names what changed\n"
    "beyond noise: |B - A| > 3 standard errors of the difference of the per-step means and\n"
    "> 1 % of A (without rank files, where the noise is unknown: > 5 % of A).\n"
    "\n"
    "options (environment twin in brackets):\n"
    "  --format text|json    default text [TRAINPROF_FORMAT]\n"
    "  -o, --output FILE     write there instead of standard output\n"
    "  --step-name NAME      as for report, for both runs [TRAINPROF_STEP_NAME]\n"
    "  --warmup N            warm-up steps, default 1 [TRAINPROF_WARMUP]\n"
    "  --noise-k K           standard errors a change must exceed (default 3)\n"
    "  --min-change PCT      smallest change reported, in % of A (default 1)\n"
    "  -h, --help            this text\n";

/* --------------------------------------------------------------------- helpers */

static int parse_int(const char *cmd, const char *opt, const char *v, int lo, int hi) {
    char *end;
    errno = 0;
    long x = strtol(v ? v : "", &end, 10);
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "trainprof %s: %s needs an integer from %d to %d, got '%s'\n", cmd, opt,
                lo, hi, v ? v : "");
        exit(EXIT_USAGE);
    }
    return (int)x;
}

static double parse_num(const char *cmd, const char *opt, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v ? v : "", &end);
    if (!v || !*v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "trainprof %s: %s needs a number from %g to %g, got '%s'\n", cmd, opt,
                lo, hi, v ? v : "");
        exit(EXIT_USAGE);
    }
    return x;
}

static const char *env_or(const char *name, const char *def) {
    const char *v = getenv(name);
    return v && *v ? v : def;
}

/* Option with a value: "--opt VALUE" or "--opt=VALUE". */
static int opt_val(int argc, char **argv, int *i, const char *lng, const char *shrt,
                   const char **out, const char *cmd) {
    const char *a = argv[*i];
    size_t n = strlen(lng);
    if (!strcmp(a, lng) || (shrt && !strcmp(a, shrt))) {
        if (*i + 1 >= argc || !strcmp(argv[*i + 1], "--"))
            die_usage(cmd, "option %s needs a value", a);
        *out = argv[++*i];
    } else if (!strncmp(a, lng, n) && a[n] == '=') {
        *out = a + n + 1;
    } else {
        return 0;
    }
    if (!**out) die_usage(cmd, "option %s needs a non-empty value", lng);
    return 1;
}

/* Writes through a temporary file renamed into place, so a failure leaves nothing behind
 * and an existing file is replaced only by a complete one. A symlink is written through (the
 * temporary file goes beside its target, which the rename replaces, so the link stays); a
 * path that exists and is not a regular file (/dev/null, a FIFO, a terminal) is written
 * directly, never replaced. */
typedef struct outfile {
    FILE *f;
    char tmp[PATH_MAX];
    char target[PATH_MAX]; /* what the rename replaces: path, or a symlink's target */
    const char *path;
} outfile;

static int out_open(outfile *o, const char *path) {
    o->path = path;
    o->tmp[0] = 0;
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        return 0;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        o->f = fopen(path, "w"); /* a device or a pipe: write into it */
        if (!o->f) {
            fprintf(stderr, "trainprof: cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    snprintf(o->target, sizeof o->target, "%s", path);
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && !realpath(path, o->target))
        snprintf(o->target, sizeof o->target, "%s", path);
    snprintf(o->tmp, sizeof o->tmp, "%.*s.tmp.%d", (int)(sizeof o->tmp - 24), o->target,
             (int)getpid());
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        fprintf(stderr, "trainprof: cannot write %s: %s\n", path, strerror(errno));
        o->tmp[0] = 0;
        return -1;
    }
    return 0;
}

static int out_close(outfile *o, int ok) {
    if (o->f == stdout) {
        int bad = fflush(stdout) != 0 || ferror(stdout) || !ok;
        if (bad) fprintf(stderr, "trainprof: writing to standard output failed%s%s\n",
                         errno ? ": " : "", errno ? strerror(errno) : "");
        return bad ? -1 : 0;
    }
    int bad = fclose(o->f) != 0 || !ok;
    if (!o->tmp[0]) { /* written directly */
        if (bad) fprintf(stderr, "trainprof: writing %s failed\n", o->path);
        return bad ? -1 : 0;
    }
    if (bad) {
        unlink(o->tmp);
        fprintf(stderr, "trainprof: writing %s failed\n", o->path);
        return -1;
    }
    if (rename(o->tmp, o->target) != 0) {
        fprintf(stderr, "trainprof: cannot write %s: %s\n", o->path, strerror(errno));
        unlink(o->tmp);
        return -1;
    }
    return 0;
}

static int load_run(const char *dir, tp_run *run) {
    char err[PATH_MAX + 128];
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof: %s\n", err[0] ? err : tprof_strerror(rc));
        for (size_t i = 0; i < run->nerrors; i++) fprintf(stderr, "  %s\n", run->errors[i]);
        tp_run_free(run);
        return -1;
    }
    return 0;
}

/* Splits "a,b,c" into a NULL-free array (the string is modified). */
static size_t split_names(char *s, const char **out, size_t max) {
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        if (*tok) out[n++] = tok;
    return n;
}

/* --------------------------------------------------------------------- report */

typedef struct report_args {
    const char *step_name;
    int warmup;
    char *data_names;
    int top;
    /* throughput and MFU inputs (0 / NULL: from the rank files' metadata) */
    double tokens_per_step, samples_per_step, flops_per_step;
    const char *model, *dtype;
} report_args;

/* --tokens-per-step, --samples-per-step, --flops-per-step, --model, --dtype (report and run):
 * 1 when argv[*i] was one of them. */
static int throughput_opt(int argc, char **argv, int *i, report_args *a, const char *cmd) {
    static const char *const num_opts[3] = {"--tokens-per-step", "--samples-per-step",
                                            "--flops-per-step"};
    double *dst[3] = {&a->tokens_per_step, &a->samples_per_step, &a->flops_per_step};
    const char *v;
    for (int k = 0; k < TPROF_PER_STEP_N; k++) {
        if (!opt_val(argc, argv, i, num_opts[k], NULL, &v, cmd)) continue;
        double x;
        if (!tprof__per_step_parse(tprof__per_step_key(k), v, &x)) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s needs a number > 0 and at most %g, got '%.60s'",
                     num_opts[k], tprof__per_step_max(tprof__per_step_key(k)), v);
            die_usage(cmd, "%s", msg);
        }
        *dst[k] = x;
        return 1;
    }
    if (opt_val(argc, argv, i, "--model", NULL, &a->model, cmd)) {
        tp_model_desc m;
        char err[256];
        if (tp_model_parse(a->model, &m, err, sizeof err) != 0) die_usage(cmd, "--model: %s", err);
        return 1;
    }
    if (opt_val(argc, argv, i, "--dtype", NULL, &a->dtype, cmd)) {
        if (!tp_dtype_known(a->dtype))
            die_usage(cmd, "--dtype needs bf16, fp16, fp8, tf32 or fp32, got '%s'", a->dtype);
        return 1;
    }
    return 0;
}

/* The report options of the command line; the HTML writer needs them too (its per-step
 * plots use the same step rule). */
static void report_opts(const report_args *a, tp_report_opts *o) {
    tp_report_opts_init(o);
    o->step_name = a->step_name;
    o->warmup = a->warmup;
    if (a->top > 0) o->top_n = a->top;
    o->tokens_per_step = a->tokens_per_step;
    o->samples_per_step = a->samples_per_step;
    o->flops_per_step = a->flops_per_step;
    o->model = a->model;
    o->dtype = a->dtype;
    static const char *names[64];
    if (a->data_names) {
        static size_t nnames;
        if (!nnames) nnames = split_names(a->data_names, names, 64); /* strtok: split once */
        o->ndata_names = nnames;
        o->data_names = names;
    }
}

static cJSON *make_report(const tp_run *run, const report_args *a) {
    tp_report_opts o;
    report_opts(a, &o);
    return tp_report_build(run, &o);
}

static int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *format = env_or("TRAINPROF_FORMAT", "text"), *out = NULL, *v;
    report_args a = {env_or("TRAINPROF_STEP_NAME", NULL), 1, NULL, 15};
    const char *dn = env_or("TRAINPROF_DATA_NAMES", NULL);
    const char *wu = env_or("TRAINPROF_WARMUP", NULL);
    if (wu) a.warmup = parse_int("report", "TRAINPROF_WARMUP", wu, 0, 1 << 30);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(report_help, stdout);
            return 0;
        } else if (opt_val(argc, argv, &i, "--format", NULL, &format, "report")) {
        } else if (opt_val(argc, argv, &i, "--output", "-o", &out, "report")) {
        } else if (opt_val(argc, argv, &i, "--step-name", NULL, &a.step_name, "report")) {
        } else if (opt_val(argc, argv, &i, "--data-names", NULL, &dn, "report")) {
        } else if (opt_val(argc, argv, &i, "--warmup", NULL, &v, "report")) {
            a.warmup = parse_int("report", "--warmup", v, 0, 1 << 30);
        } else if (opt_val(argc, argv, &i, "--top", NULL, &v, "report")) {
            a.top = parse_int("report", "--top", v, 1, 100000);
        } else if (throughput_opt(argc, argv, &i, &a, "report")) {
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage("report", "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            die_usage("report", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!dir) die_usage("report", "%s", "missing DIR (a trainprof run directory)");
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "html"))
        die_usage("report", "unknown format '%s' (text, json or html)", format);
    char *dncopy = dn ? strdup(dn) : NULL;
    a.data_names = dncopy;
    tp_run run;
    if (load_run(dir, &run) != 0) { free(dncopy); return 1; }
    cJSON *rep = make_report(&run, &a);
    int rc = 1;
    outfile of;
    if (rep && out_open(&of, out) == 0) {
        tp_report_opts o;
        report_opts(&a, &o);
        int w = !strcmp(format, "json") ? tp_report_write_json(rep, of.f)
                : !strcmp(format, "html")
                    ? tp_html_write(rep, &run, &o, of.f)
                    : tp_report_write_text(rep, of.f,
                                           of.f == stdout && isatty(1) && !getenv("NO_COLOR"));
        rc = out_close(&of, w == TPROF_OK) == 0 ? 0 : 1;
    }
    cJSON_Delete(rep);
    tp_run_free(&run);
    free(dncopy);
    return rc;
}

/* --------------------------------------------------------------------- diff */

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
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "trainprof diff: cannot read %s: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t dl = strlen(dir);
    int is_json = S_ISREG(st.st_mode) && dl > 5 && !strcmp(dir + dl - 5, ".json");
    if (!is_json && tp_run_load(dir, &in->run, err, sizeof err) == TPROF_OK) {
        in->have_run = 1;
        in->rep = make_report(&in->run, a);
        return in->rep ? 0 : -1;
    }
    if (!is_json) tp_run_free(&in->run);
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

static int cmd_diff(int argc, char **argv) {
    const char *dirs[2] = {NULL, NULL}, *format = env_or("TRAINPROF_FORMAT", "text"), *out = NULL,
               *v;
    report_args a = {env_or("TRAINPROF_STEP_NAME", NULL), 1, NULL, 15};
    const char *wu = env_or("TRAINPROF_WARMUP", NULL);
    if (wu) a.warmup = parse_int("diff", "TRAINPROF_WARMUP", wu, 0, 1 << 30);
    tp_diff_opts dop;
    tp_diff_opts_init(&dop);
    int nd = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(diff_help, stdout);
            return 0;
        } else if (opt_val(argc, argv, &i, "--format", NULL, &format, "diff")) {
        } else if (opt_val(argc, argv, &i, "--output", "-o", &out, "diff")) {
        } else if (opt_val(argc, argv, &i, "--step-name", NULL, &a.step_name, "diff")) {
        } else if (opt_val(argc, argv, &i, "--warmup", NULL, &v, "diff")) {
            a.warmup = parse_int("diff", "--warmup", v, 0, 1 << 30);
        } else if (opt_val(argc, argv, &i, "--noise-k", NULL, &v, "diff")) {
            dop.noise_k = parse_num("diff", "--noise-k", v, 0, 1000);
        } else if (opt_val(argc, argv, &i, "--min-change", NULL, &v, "diff")) {
            dop.min_rel = parse_num("diff", "--min-change", v, 0, 1000) / 100.0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage("diff", "unknown option '%s'", argv[i]);
        } else if (nd < 2) {
            dirs[nd++] = argv[i];
        } else {
            die_usage("diff", "unexpected argument '%s'", argv[i]);
        }
    }
    if (nd < 2) die_usage("diff", "%s", "needs two runs: trainprof diff RUN_A RUN_B");
    if (strcmp(format, "text") && strcmp(format, "json"))
        die_usage("diff", "unknown format '%s' (text or json)", format);
    diff_in in[2];
    int rc = 1;
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
        rc = out_close(&of, w == TPROF_OK) == 0 ? 0 : 1;
    }
    cJSON_Delete(d);
    for (int i = 0; i < 2; i++) {
        cJSON_Delete(in[i].rep);
        if (in[i].have_run) tp_run_free(&in[i].run);
    }
    return rc;
}

/* --------------------------------------------------------------------- export */

static int cmd_export(int argc, char **argv) {
    const char *dir = NULL, *format = NULL, *out = NULL, *per_rank = NULL;
    tp_export_opts eo = {env_or("TRAINPROF_STEP_NAME", NULL), 1};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(export_help, stdout);
            return 0;
        } else if (opt_val(argc, argv, &i, "--format", NULL, &format, "export")) {
        } else if (opt_val(argc, argv, &i, "--output", "-o", &out, "export")) {
        } else if (opt_val(argc, argv, &i, "--per-rank", NULL, &per_rank, "export")) {
        } else if (opt_val(argc, argv, &i, "--step-name", NULL, &eo.step_name, "export")) {
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage("export", "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            die_usage("export", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!dir) die_usage("export", "%s", "missing DIR (a trainprof run directory)");
    if (!format) die_usage("export", "%s", "missing --format (chrome)");
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

/* --------------------------------------------------------------------- run */

static pid_t g_child = -1;

/* The job runs in a process group of its own (job_start), so that no signal reaches it both
 * directly and through this process: whatever reaches `trainprof run` (a kill of its pid, or
 * of the process group it was started in) did not reach the job, and is forwarded once. */
static void forward_signal(int sig) {
    if (g_child > 0) kill(g_child, sig);
}

/* Gives the terminal's foreground to process group `pg`, as a shell does for a job:
 * SIGTTOU blocked for the call, which a process outside the foreground group would
 * otherwise get (tcsetpgrp(3)). The calling thread's mask is restored before returning. */
static void tty_give(int ttyfd, pid_t pg) {
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    (void)tcsetpgrp(ttyfd, pg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The controlling terminal when this process's group is its foreground group (the job is
 * then given the foreground for its life), else -1. Close-on-exec: the job never holds it. */
static int tty_foreground(void) {
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (tcgetpgrp(fd) != getpgrp()) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The job stopped on a terminal's job-control signal (Ctrl-Z, or a terminal read or write
 * from the background): this process stops with the same signal, so that the shell that
 * started it sees its job stopped and takes the terminal back; once continued (`fg`, `bg`),
 * it hands the terminal on to the job if it holds it itself, and continues the job. A stop
 * by SIGSTOP is left to whoever sent it, who will continue the job: this process never stops
 * on it (nobody would continue it). In an orphaned process group the kernel discards the
 * stop signal (POSIX, 2.4.3): this process then continues the job at once. */
static void job_stopped(pid_t job, int sig, int ttyfd) {
    if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU) return;
    if (ttyfd >= 0 && tcgetpgrp(ttyfd) == job) tty_give(ttyfd, getpgrp());
    kill(getpid(), sig);
    if (ttyfd >= 0 && tcgetpgrp(ttyfd) == getpgrp()) tty_give(ttyfd, job);
    kill(-job, SIGCONT);
}

/* Whether NVML loads and initialises here, and how many GPUs it sees (the sampler itself
 * only says so in its capability): the count, or -1 with `why` filled. For `run`'s node
 * sampler and for `serve`. */
static int probe_nvml(char *why, size_t n) {
    const char *lib = env_or("TRAINPROF_NVML_LIB", "libnvidia-ml.so.1");
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        snprintf(why, n, "%s cannot be loaded", lib);
        return -1;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*fini)(void) = (int (*)(void))dlsym(h, "nvmlShutdown");
    unsigned ngpu = 0;
    int rc = -1;
    if (!init || !count || !fini) {
        snprintf(why, n, "%s lacks nvmlInit_v2 or nvmlDeviceGetCount_v2", lib);
    } else if (init() != 0) {
        snprintf(why, n, "nvmlInit failed (no driver or no GPU)");
    } else {
        if (count(&ngpu) != 0 || ngpu == 0) snprintf(why, n, "NVML sees no GPU");
        else rc = (int)ngpu;
        fini();
    }
    dlclose(h);
    return rc;
}

/* The node sampler runs when NVML initialises and sees a GPU, and TRAINPROF_NVML_HZ is not 0. */
static int node_sampler_wanted(void) {
    const char *hz = getenv("TRAINPROF_NVML_HZ");
    if (hz && *hz && strtoul(hz, NULL, 10) == 0) return 0;
    char why[256];
    return probe_nvml(why, sizeof why) > 0; /* no driver or no GPU: the ranks will say so */
}

/* Starts this process's own recording session: no ranges, no process sampler, only the
 * NVML sampler on the session's flusher thread, into the run directory; the report sees
 * the file's role and uses its GPU series for the ranks of this host. Signals stay ours
 * (TRAINPROF_NO_SIGNALS). A failure only means no node samples: the job is unaffected. */
static void node_sampler_start(const char *dir, const char *run_id) {
    const char *ns = getenv("TRAINPROF_NO_SIGNALS");
    char *had = ns ? strdup(ns) : NULL;
    setenv("TRAINPROF_NO_SIGNALS", "1", 1);
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = dir;
    c.run_id = run_id;
    c.sample_hz = 0;
    const char *hz = getenv("TRAINPROF_NVML_HZ");
    if (hz && *hz) c.nvml_hz = (uint32_t)strtoul(hz, NULL, 10);
    int rc = tprof_init(&c);
    /* the job inherits the environment: its processes take their signals as usual */
    if (had) setenv("TRAINPROF_NO_SIGNALS", had, 1);
    else unsetenv("TRAINPROF_NO_SIGNALS");
    free(had);
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof run: no node GPU sampler (the session did not start)\n");
        return;
    }
    tprof_set_metadata("trainprof.role", "node-sampler");
    tprof_flush(); /* one flusher pass: NVML is open and the first sample taken */
}

/* Absolute path of libtrainprof.so: $TRAINPROF_LIB, else beside the executable or in
 * ../lib relative to it. */
static int find_library(char *out, size_t n) {
    const char *env = getenv("TRAINPROF_LIB");
    if (env && *env) {
        if (!realpath(env, out) || access(out, R_OK) != 0) {
            fprintf(stderr, "trainprof run: TRAINPROF_LIB=%s: %s\n", env, strerror(errno));
            return -1;
        }
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *const rel[] = {"libtrainprof.so", "../lib/libtrainprof.so",
                                      "../lib64/libtrainprof.so"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
        if (realpath(cand, out) && access(out, R_OK) == 0 && strlen(out) < n) return 0;
    }
    fprintf(stderr, "trainprof run: cannot find libtrainprof.so beside %s; set TRAINPROF_LIB\n",
            exe);
    return -1;
}

/* The directory holding the trainprof Python package built with this CLI (for --python):
 * TRAINPROF_PYTHON_DIR, else python/ beside the library (a build tree) or beside this
 * binary, else lib/trainprof/python of an installation (cmake --install). It must hold
 * trainprof/_autostart/sitecustomize.py. */
static int find_python_dir(const char *lib, char *out, size_t n) {
    char cands[4][PATH_MAX + 64];
    size_t nc = 0;
    const char *env = getenv("TRAINPROF_PYTHON_DIR");
    if (env && *env) {
        snprintf(cands[nc++], sizeof cands[0], "%s", env);
    } else {
        const char *slash = strrchr(lib, '/');
        snprintf(cands[nc++], sizeof cands[0], "%.*s/python", (int)(slash ? slash - lib : 1),
                 slash ? lib : ".");
        char exe[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k > 0) {
            exe[k] = 0;
            char *es = strrchr(exe, '/');
            if (es) *es = 0;
            snprintf(cands[nc++], sizeof cands[0], "%s/python", exe);
            snprintf(cands[nc++], sizeof cands[0], "%s/../lib/trainprof/python", exe);
        }
    }
    for (size_t i = 0; i < nc; i++) {
        char probe[PATH_MAX + 128];
        if (!realpath(cands[i], out) || strlen(out) + 1 > n) continue;
        snprintf(probe, sizeof probe, "%s/trainprof/_autostart/sitecustomize.py", out);
        if (access(probe, R_OK) == 0) return 0;
    }
    fprintf(stderr, "trainprof run: --python: no trainprof Python package found (looked in "
                    "%s%s); build it (CMake builds it when the Python headers are installed) "
                    "or set TRAINPROF_PYTHON_DIR to the directory holding trainprof/\n",
            cands[0], nc > 1 ? " and beside this binary" : "");
    return -1;
}

static int find_command(const char *cmd, char *out, size_t n) {
    if (strchr(cmd, '/')) {
        struct stat st;
        if (stat(cmd, &st) != 0 || !S_ISREG(st.st_mode) || access(cmd, X_OK) != 0) return -1;
        snprintf(out, n, "%s", cmd);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = strdup(path);
    if (!copy) return -1;
    int found = -1;
    for (char *d = strtok(copy, ":"); d && found; d = strtok(NULL, ":")) {
        snprintf(out, n, "%s/%s", *d ? d : ".", cmd);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) found = 0;
    }
    free(copy);
    return found;
}

static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int dir_has_rank_files(const char *dir) {
    tp_run probe;
    char err[64];
    int rc = tp_run_load(dir, &probe, err, sizeof err);
    int has = rc == TPROF_OK || probe.nerrors > 0;
    tp_run_free(&probe);
    return has;
}

/* The processes that opened rank files in `dir` and are still alive (a launcher such as
 * mpirun may exit before its ranks have written the end of their files, e.g. on SIGTERM),
 * read from each file's header; this process (the node sampler) left out. */
static int writers_alive(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int alive = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".tprof")) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        tprof_reader *rd;
        if (tprof__reader_open(path, &rd, NULL, 0) != TPROF_OK) continue;
        int32_t pid = tprof__reader_header(rd)->pid;
        tprof__reader_close(rd);
        if (pid <= 0 || pid == (int32_t)getpid()) continue;
        if (kill(pid, 0) == 0 || errno == EPERM) alive++;
    }
    closedir(d);
    return alive;
}

/* The processes of this run that could not create their rank files: each left a symbolic
 * link <host>-<pid>.tprof-create-failed whose target is the reason (core/writer.h; it takes
 * them no descriptor, which may be what they lacked). Each is said on stderr; older ones (of
 * an earlier run in the same directory) are left out by their time. How many. */
static int report_create_failures(const char *dir, time_t since) {
    static const char suffix[] = ".tprof-create-failed";
    const size_t sl = sizeof suffix - 1;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l <= sl || strcmp(e->d_name + l - sl, suffix)) continue;
        char path[PATH_MAX], why[256];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || st.st_mtime < since) continue;
        ssize_t k = readlink(path, why, sizeof why - 1);
        if (k < 0) k = 0;
        why[k] = 0;
        fprintf(stderr, "trainprof run: process %.*s could not create its rank file: %s; it "
                        "recorded nothing\n", (int)(l - sl), e->d_name, k ? why : "reason unknown");
        n++;
    }
    closedir(d);
    return n;
}

/* Waits (at most `ms`) for the job's remaining processes to finish their rank files. */
static void wait_for_writers(const char *dir, int ms) {
    int n = writers_alive(dir), said = 0;
    for (int waited = 0; n > 0 && waited < ms; waited += 100) {
        if (!said++)
            fprintf(stderr, "trainprof run: waiting for %d process%s still writing rank files\n",
                    n, n == 1 ? "" : "es");
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        n = writers_alive(dir);
    }
    if (n > 0)
        fprintf(stderr, "trainprof run: %d process%s still running after %d s; reporting what "
                        "is written\n", n, n == 1 ? "" : "es", ms / 1000);
}

/* One line when an endpoint will listen beyond this host without a token: anyone who reaches
 * the port then reads the job's and the node's figures (rank names, host names, timer names)
 * and may switch detailed capture (POST /capture). Loopback is 127.0.0.0/8 and ::1
 * (RFC 1122 3.2.1.3, RFC 4291 2.5.3), IPv4-mapped included; another address, or one that
 * does not parse, warns. */
static void warn_exposed(const char *cmd, const char *addr) {
    const char *tok = getenv("TRAINPROF_METRICS_TOKEN");
    if (tok && *tok) return;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127) return;
    if (inet_pton(AF_INET6, addr, &a6) == 1 &&
        (IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127)))
        return;
    fprintf(stderr,
            "trainprof %s: warning: listening on %s with no token: anyone who can reach the port "
            "can read /metrics and switch capture (POST /capture); set TRAINPROF_METRICS_TOKEN "
            "to require \"Authorization: Bearer <token>\"\n",
            cmd, addr);
}

/* Takes the run lock of a directory: `path` opened and locked with flock(LOCK_EX), which the
 * kernel drops when this process ends however it ends (SIGKILL included), so a lock file a
 * dead run left behind is taken over and never mistaken for a live run (a pid written in
 * it could belong to another process by now; it is there for people to read). Returns the
 * descriptor to keep until the run ends (close-on-exec: the job never holds it), -2 when
 * another live run holds the lock (its pid, as it wrote it, in `owner`), -1 on error. */
static int run_lock(const char *path, char *owner, size_t n) {
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            ssize_t k = read(fd, owner, n - 1);
            owner[k > 0 ? (size_t)k : 0] = 0;
            owner[strcspn(owner, "\n")] = 0;
            close(fd);
            if (e == EWOULDBLOCK) return -2;
            errno = e;
            return -1;
        }
        /* the file may have been unlinked by the run that held it, just before it let go:
         * then the lock is on a file nobody else will see; take the one at the path */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            char me[24];
            int len = snprintf(me, sizeof me, "%d\n", (int)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)len, 0) != len) {
                /* the pid is informative only: the lock is held */
            }
            return fd;
        }
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

static void run_unlock(const char *path, int fd) {
    unlink(path); /* while still holding it: the next run then makes a new file */
    close(fd);
}

static int cmd_run(int argc, char **argv) {
    const char *dir = env_or("TRAINPROF_DIR", NULL), *v;
    report_args a = {env_or("TRAINPROF_STEP_NAME", NULL), 1, NULL, 15};
    const char *wu = env_or("TRAINPROF_WARMUP", NULL);
    if (wu) a.warmup = parse_int("run", "TRAINPROF_WARMUP", wu, 0, 1 << 30);
    const char *ring_kb = NULL, *sample_hz = NULL, *kernel_steps = NULL;
    const char *metrics_port = env_or("TRAINPROF_METRICS_PORT", NULL);
    int quiet = getenv("TRAINPROF_QUIET") != NULL;
    const char *pyenv = getenv("TRAINPROF_PYTHON");
    int python = pyenv && *pyenv && strcmp(pyenv, "0") != 0;
    int i = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(run_help, stdout);
            return 0;
        } else if (opt_val(argc, argv, &i, "--output", "-o", &dir, "run")) {
        } else if (opt_val(argc, argv, &i, "--step-name", NULL, &a.step_name, "run")) {
        } else if (opt_val(argc, argv, &i, "--warmup", NULL, &v, "run")) {
            a.warmup = parse_int("run", "--warmup", v, 0, 1 << 30);
        } else if (opt_val(argc, argv, &i, "--ring-kb", NULL, &ring_kb, "run")) {
            parse_int("run", "--ring-kb", ring_kb, 64, 1 << 22);
        } else if (opt_val(argc, argv, &i, "--sample-hz", NULL, &sample_hz, "run")) {
            parse_int("run", "--sample-hz", sample_hz, 0, 1000);
        } else if (throughput_opt(argc, argv, &i, &a, "run")) {
        } else if (opt_val(argc, argv, &i, "--kernel-steps", NULL, &kernel_steps, "run")) {
            uint64_t lo, hi;
            if (tprof__kwin_parse(kernel_steps, &lo, &hi) != 0)
                die_usage("run", "--kernel-steps needs A-B, A or A- (step numbers, A <= B), "
                                 "got '%s'", kernel_steps);
        } else if (opt_val(argc, argv, &i, "--metrics-port", NULL, &metrics_port, "run")) {
            parse_int("run", "--metrics-port", metrics_port, 0, 65535);
        } else if (!strcmp(argv[i], "--no-report")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--python")) {
            python = 1;
        } else if (argv[i][0] == '-') {
            die_usage("run", "unknown option '%s'", argv[i]);
        } else {
            break; /* the command starts here (no "--") */
        }
    }
    if (!kernel_steps) { /* the environment twin is checked as the option is */
        const char *ks = env_or("TRAINPROF_KERNEL_STEPS", NULL);
        uint64_t lo, hi;
        if (ks && tprof__kwin_parse(ks, &lo, &hi) != 0)
            die_usage("run", "TRAINPROF_KERNEL_STEPS needs A-B, A or A- (step numbers, A <= B), "
                             "got '%s'", ks);
    }
    if (i >= argc) die_usage("run", "%s", "missing the command to run (trainprof run -- CMD ...)");
    char **cmd = argv + i;

    char exe[PATH_MAX];
    if (find_command(cmd[0], exe, sizeof exe) != 0) {
        /* as shells answer: 126 when the path names something that cannot be run */
        struct stat sb;
        int there = strchr(cmd[0], '/') && stat(cmd[0], &sb) == 0;
        fprintf(stderr, "trainprof run: %s: %s\n", cmd[0],
                there ? "not executable" : "command not found or not executable");
        return there ? 126 : 127;
    }
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) != 0) return 1;
    char pydir[PATH_MAX];
    if (python && find_python_dir(lib, pydir, sizeof pydir) != 0) return 1;

    char defdir[96];
    if (!dir) {
        /* a fresh directory: two runs started in the same second get -2, -3, ... */
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char base[64];
        strftime(base, sizeof base, "trainprof-%Y%m%d-%H%M%S", &tm);
        int made = 0;
        for (int k = 1; k < 1000 && !made; k++) {
            if (k == 1) snprintf(defdir, sizeof defdir, "%s", base);
            else snprintf(defdir, sizeof defdir, "%s-%d", base, k);
            if (mkdir(defdir, 0755) == 0) made = 1;
            else if (errno != EEXIST) break;
        }
        if (!made) {
            fprintf(stderr, "trainprof run: cannot create an output directory here (%s): %s\n",
                    defdir, strerror(errno));
            return 1;
        }
        dir = defdir;
    }
    struct stat dst;
    if (stat(dir, &dst) == 0 && !S_ISDIR(dst.st_mode)) {
        fprintf(stderr, "trainprof run: %s exists and is not a directory\n", dir);
        return 1;
    }
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "trainprof run: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char absdir[PATH_MAX];
    if (!realpath(dir, absdir) || access(absdir, W_OK | X_OK) != 0) {
        fprintf(stderr, "trainprof run: %s is not a writable directory: %s\n", dir,
                strerror(errno));
        return 1;
    }
    /* one run per directory: the lock is a flock() on this file, held for the whole run */
    char lockpath[PATH_MAX + 32];
    snprintf(lockpath, sizeof lockpath, "%s/.trainprof-run.lock", absdir);
    char owner[32] = "";
    int lockfd = run_lock(lockpath, owner, sizeof owner);
    if (lockfd == -2) {
        fprintf(stderr, "trainprof run: %s is in use by another trainprof run (pid %s holds "
                        "%s)\n", dir, owner[0] ? owner : "?", lockpath);
        return 1;
    }
    if (lockfd < 0) {
        fprintf(stderr, "trainprof run: cannot lock %s: %s\n", lockpath, strerror(errno));
        return 1;
    }
    if (dir_has_rank_files(absdir)) {
        fprintf(stderr, "trainprof run: %s already holds rank files from another run; "
                        "choose another -o DIR\n", dir);
        run_unlock(lockpath, lockfd);
        return 1;
    }

    /* the environment every process of the job inherits */
    const char *pre = getenv("LD_PRELOAD");
    /* the PMPI wrappers (built when Open MPI was found) sit beside libtrainprof.so; they link
     * no MPI library, so preloading them into a program without MPI changes nothing */
    char mpilib[PATH_MAX + 32] = "";
    {
        const char *slash = strrchr(lib, '/');
        snprintf(mpilib, sizeof mpilib, "%.*s/libtrainprof_mpi.so",
                 (int)(slash ? slash - lib : 1), slash ? lib : ".");
        if (access(mpilib, R_OK) != 0) mpilib[0] = 0;
    }
    size_t plen = strlen(lib) + strlen(mpilib) + (pre ? strlen(pre) : 0) + 3;
    char *preload = malloc(plen);
    if (!preload) return 1;
    snprintf(preload, plen, "%s%s%s%s%s", lib, mpilib[0] ? ":" : "", mpilib,
             pre && *pre ? ":" : "", pre && *pre ? pre : "");
    char run_id[64];
    const char *base = strrchr(absdir, '/');
    snprintf(run_id, sizeof run_id, "%.63s", base ? base + 1 : absdir);
    /* never cut a UTF-8 character in two */
    for (size_t n = strlen(run_id); n > 0 && ((unsigned char)run_id[n - 1] & 0x80); n--) {
        unsigned char c = (unsigned char)run_id[n - 1];
        if (c >= 0xC0) { /* lead byte: complete only if all its continuation bytes fit */
            size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (strlen(run_id) - (n - 1) < want) run_id[n - 1] = 0;
            break;
        }
    }
    const char *old_nvtx = getenv("NVTX_INJECTION64_PATH");
    if (old_nvtx && *old_nvtx && strcmp(old_nvtx, lib))
        fprintf(stderr, "trainprof run: replacing NVTX_INJECTION64_PATH=%s (another NVTX tool, "
                        "e.g. Nsight Systems, cannot be attached at the same time)\n", old_nvtx);
    setenv("TRAINPROF_DIR", absdir, 1);
    setenv("TRAINPROF_RUN_ID", run_id, 1);
    setenv("NVTX_INJECTION64_PATH", lib, 1);
    /* one CUDA injection tool per process: one attached first (Nsight Systems around us) keeps
     * its place and GPU activity capture backs off; a trainprof library left in the
     * environment (another build) is replaced */
    const char *old_cuda = getenv("CUDA_INJECTION64_PATH");
    const char *old_base = old_cuda ? strrchr(old_cuda, '/') : NULL;
    old_base = old_base ? old_base + 1 : old_cuda;
    if (old_cuda && *old_cuda && strcmp(old_cuda, lib) && strncmp(old_base, "libtrainprof", 12)) {
        fprintf(stderr, "trainprof run: CUDA_INJECTION64_PATH=%s belongs to another CUDA tool "
                        "(Nsight Systems?), attached first: GPU activity capture off, all else "
                        "is captured\n", old_cuda);
        setenv("TRAINPROF_CUPTI_YIELDED", old_cuda, 1);
    } else {
        unsetenv("TRAINPROF_CUPTI_YIELDED");
        setenv("CUDA_INJECTION64_PATH", lib, 1);
    }
    /* NCCL (also the copy inside PyTorch) dlopens the profiler plugin named here */
    const char *old_nccl = getenv("NCCL_PROFILER_PLUGIN");
    if (old_nccl && *old_nccl && strcmp(old_nccl, lib))
        fprintf(stderr, "trainprof run: replacing NCCL_PROFILER_PLUGIN=%s (NCCL loads one "
                        "profiler plugin)\n", old_nccl);
    setenv("NCCL_PROFILER_PLUGIN", lib, 1);
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    if (a.step_name) setenv("TRAINPROF_STEP_NAME", a.step_name, 1);
    if (ring_kb) setenv("TRAINPROF_RING_KB", ring_kb, 1);
    if (sample_hz) setenv("TRAINPROF_SAMPLE_HZ", sample_hz, 1);
    if (kernel_steps) setenv("TRAINPROF_KERNEL_STEPS", kernel_steps, 1);
    char mport[16];
    if (metrics_port) {
        /* the environment twin is checked as the option is; a copy, as setenv below
         * replaces the variable's string */
        parse_int("run", "TRAINPROF_METRICS_PORT", metrics_port, 0, 65535);
        snprintf(mport, sizeof mport, "%s", metrics_port);
        metrics_port = mport;
        setenv("TRAINPROF_METRICS_PORT", metrics_port, 1);
        const char *maddr = getenv("TRAINPROF_METRICS_ADDR");
        if (maddr && *maddr) warn_exposed("run", maddr); /* once, not once per rank */
    }
    /* the throughput figures go to the ranks, which keep them in their files' metadata (a
     * later `trainprof report` of the files has them) and feed the live counters */
    double x[4] = {a.tokens_per_step, a.samples_per_step, a.flops_per_step, 0};
    tp_model_desc m; /* --model with --tokens-per-step: the report's formula, for the live
                      * counters only (the files keep the model, not a FLOPs figure) */
    if (a.model && x[0] > 0 && tp_model_parse(a.model, &m, NULL, 0) == 0)
        x[3] = tp_model_flops(&m, x[0]);
    for (int k = 0; k < 4; k++) {
        char num[64];
        snprintf(num, sizeof num, "%.17g", x[k]);
        if (x[k] > 0 && x[k] <= TPROF_MAX_FLOPS_PER_STEP)
            setenv(k < TPROF_PER_STEP_N ? tprof__per_step_env(k) : "TRAINPROF_MODEL_FLOPS_PER_STEP",
                   num, 1);
    }
    if (a.model) setenv("TRAINPROF_MODEL", a.model, 1);
    if (a.dtype) setenv("TRAINPROF_DTYPE", a.dtype, 1);
    if (python) {
        /* the autostart directory first (its sitecustomize chains to the one it hides),
         * then the package itself; nothing is installed into the user's environment */
        const char *pp = getenv("PYTHONPATH");
        size_t len = 2 * strlen(pydir) + (pp ? strlen(pp) : 0) + 64;
        char *ppv = malloc(len);
        if (!ppv) return 1;
        snprintf(ppv, len, "%s/trainprof/_autostart:%s%s%s", pydir, pydir, pp && *pp ? ":" : "",
                 pp && *pp ? pp : "");
        setenv("PYTHONPATH", ppv, 1);
        free(ppv);
        setenv("TRAINPROF_PYTHON", "1", 1);
    }

    static const int fwd_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    struct sigaction sa, old_sa[4];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 4; k++) sigaction(fwd_sigs[k], &sa, &old_sa[k]);

    /* One NVML sampler per node, in this process: the job's processes then leave NVML
     * alone (NVML sampled inside a process whose GPU activity CUPTI records hung it once;
     * docs/design-notes.md), and ranks sharing a node do not sample the same GPUs twice. */
    int node_sampler = node_sampler_wanted();
    if (node_sampler) {
        char me[24];
        snprintf(me, sizeof me, "%d", (int)getpid());
        setenv("TRAINPROF_NVML_SAMPLER", me, 1);
        /* before the job starts, so that its first step lies between two samples; with
         * --metrics-port it serves the node's GPU metrics (PORT + 1000 unless
         * TRAINPROF_METRICS_NODE_PORT says otherwise; 0 there: none) */
        const char *np = getenv("TRAINPROF_METRICS_NODE_PORT");
        long node_port = np && *np ? strtol(np, NULL, 10)
                         : metrics_port && atoi(metrics_port) > 0 ? atoi(metrics_port) + 1000
                                                                  : 0;
        if (metrics_port && node_port > 0 && node_port <= 65535) {
            char pn[16];
            snprintf(pn, sizeof pn, "%ld", node_port);
            setenv("TRAINPROF_METRICS_PORT", pn, 1);
            setenv("TRAINPROF_METRICS_RANK_OFFSET", "0", 1);
        } else {
            unsetenv("TRAINPROF_METRICS_PORT");
        }
        node_sampler_start(absdir, run_id);
        unsetenv("TRAINPROF_METRICS_RANK_OFFSET");
        if (metrics_port) setenv("TRAINPROF_METRICS_PORT", metrics_port, 1);
        else unsetenv("TRAINPROF_METRICS_PORT");
    }

    /* The job in a process group of its own: a signal sent to the group this process was
     * started in (a shell's `kill %1`, kill -INT -PGID, a batch system) reaches it once,
     * forwarded, instead of twice (directly and forwarded), and one sent to this process
     * alone is forwarded as before. When that group holds the terminal's foreground, the
     * job is given it, as a shell gives it to a job: Ctrl-C, Ctrl-\ and Ctrl-Z go to the
     * job's processes only, and it reads and writes the terminal as it does bare. */
    int ttyfd = tty_foreground();
    fflush(NULL);
    pid_t launcher = getpid();
    time_t run_started = time(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "trainprof run: fork: %s\n", strerror(errno));
        if (ttyfd >= 0) close(ttyfd);
        run_unlock(lockpath, lockfd);
        return 1;
    }
    if (pid == 0) {
        /* both here and in the parent, so that neither can run ahead of it (as shells do) */
        setpgid(0, 0);
        if (ttyfd >= 0) {
            tty_give(ttyfd, getpid());
            close(ttyfd);
        }
        for (int k = 0; k < 4; k++) sigaction(fwd_sigs[k], &old_sa[k], NULL);
        /* The job ends with its launcher: if this process dies (even by SIGKILL, which it
         * cannot forward), the kernel sends the job SIGTERM, as a forwarded SIGTERM would
         * (launchers such as torchrun and mpirun pass it on to their workers; a bare job
         * finishes its rank file on it). The setting belongs to this process only: its
         * children do not inherit it, and the kernel clears it when it execs a set-user-ID
         * or file-capability program (prctl(2)). A launcher that died before the prctl
         * leaves this process re-parented: do not start the job then. (Should prctl fail,
         * the job runs as it would have without it.) */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != launcher) _exit(128 + SIGTERM);
        execv(exe, cmd);
        int err = errno;
        fprintf(stderr, "trainprof run: cannot execute %s: %s\n", exe, strerror(err));
        /* as shells do: 127 not found, 126 found but not executable */
        _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
    }
    setpgid(pid, pid); /* fails (harmlessly) once the child has exec'ed: it did it itself */
    if (ttyfd >= 0) tty_give(ttyfd, pid);
    g_child = pid;
    int status = 0;
    for (;;) {
        if (waitpid(pid, &status, WUNTRACED) < 0) {
            if (errno == EINTR) continue;
            status = 1 << 8;
            break;
        }
        if (!WIFSTOPPED(status)) break;
        job_stopped(pid, WSTOPSIG(status), ttyfd);
    }
    g_child = -1;
    /* the terminal back to this process's group, for the report, unless the shell or another
     * job has taken it meanwhile */
    if (ttyfd >= 0) {
        if (tcgetpgrp(ttyfd) == pid) tty_give(ttyfd, getpgrp());
        close(ttyfd);
    }
    /* the job is over: a signal now ends the report phase at once (reports are written
     * through temporary files, so none is left half-written) */
    for (int k = 0; k < 4; k++) sigaction(fwd_sigs[k], &old_sa[k], NULL);

    /* a launcher can end before its ranks (mpirun on SIGTERM): give them the time their
     * signal handlers take to finish the files (3 s each at most), then report */
    wait_for_writers(absdir, 10000);
    if (node_sampler) tprof_shutdown(); /* its last sample, then the end of its file */

    /* the report: its failure is reported but never changes the exit status */
    tp_run run;
    char err[PATH_MAX + 128];
    unsetenv("LD_PRELOAD");
    if (tp_run_load(absdir, &run, err, sizeof err) != TPROF_OK) {
        fprintf(stderr, "trainprof run: no report: %s\n", err);
        int uncreated = report_create_failures(absdir, run_started);
        if (run.nerrors == 0 && uncreated == 0)
            fprintf(stderr, "trainprof run: no process recorded anything (a program must use "
                            "NVTX3 or the trainprof API to record ranges)\n");
        tp_run_free(&run);
    } else {
        report_create_failures(absdir, run_started);
        cJSON *rep = make_report(&run, &a);
        if (rep) {
            static const char *const names[3] = {"report.txt", "report.json", "report.html"};
            int ok[3] = {0, 0, 0};
            char path[PATH_MAX + 32];
            outfile of;
            snprintf(path, sizeof path, "%s/report.txt", absdir);
            if (out_open(&of, path) == 0)
                ok[0] = out_close(&of, tp_report_write_text(rep, of.f, 0) == 0) == 0;
            snprintf(path, sizeof path, "%s/report.json", absdir);
            if (out_open(&of, path) == 0)
                ok[1] = out_close(&of, tp_report_write_json(rep, of.f) == 0) == 0;
            snprintf(path, sizeof path, "%s/report.html", absdir);
            tp_report_opts ho;
            report_opts(&a, &ho);
            if (out_open(&of, path) == 0)
                ok[2] = out_close(&of, tp_html_write(rep, &run, &ho, of.f) == 0) == 0;
            if (!quiet) {
                fputc('\n', stdout);
                tp_report_write_text(rep, stdout, isatty(1) && !getenv("NO_COLOR"));
            }
            if (ok[0] && ok[1] && ok[2]) {
                fprintf(stderr, "trainprof: rank files and reports in %s\n", absdir);
            } else {
                /* say only what is true: which reports are there, which are not */
                char made[64] = "", missed[64] = "";
                for (int k = 0; k < 3; k++) {
                    char *b = ok[k] ? made : missed;
                    size_t bl = strlen(b);
                    snprintf(b + bl, sizeof made - bl, "%s%s", bl ? ", " : "", names[k]);
                }
                fprintf(stderr, "trainprof: rank files in %s; %s%s%s not written\n", absdir,
                        made[0] ? made : "", made[0] ? " written, " : "", missed);
            }
            cJSON_Delete(rep);
        }
        tp_run_free(&run);
    }
    run_unlock(lockpath, lockfd);
    fflush(NULL);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        raise(sig);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ------------------------------------------------------------------- serve */


static const char *const serve_help =
    "usage: trainprof serve [--listen ADDR:PORT] [--nvml-hz N] [--sample-hz N]\n"
    "\n"
    "A per-node exporter, like dcgm-exporter, without any training process: serves the\n"
    "node's GPU metrics (NVML) and this process's own metrics on /metrics (Prometheus text\n"
    "0.0.4, OpenMetrics when asked), /healthz, until SIGTERM or SIGINT; then exits 0.\n"
    "Writes no file. Without NVML it serves the host metrics and says so in one line.\n"
    "\n"
    "options:\n"
    "  --listen ADDR:PORT    numeric address and port [TRAINPROF_SERVE_LISTEN]; default\n"
    "                        127.0.0.1:9400; PORT alone = on 127.0.0.1, [V6]:PORT for IPv6,\n"
    "                        port 0 = an ephemeral one (printed on stderr); a bearer token\n"
    "                        from TRAINPROF_METRICS_TOKEN\n"
    "  --nvml-hz N           GPU sampling rate [TRAINPROF_NVML_HZ]; default 10, 0 = no GPU\n"
    "                        metrics, at most 100\n"
    "  --sample-hz N         process sampler rate [TRAINPROF_SAMPLE_HZ]; default 1, 0 = off\n";

static int cmd_serve(int argc, char **argv) {
    const char *listen = env_or("TRAINPROF_SERVE_LISTEN", "127.0.0.1:9400");
    int nvml_hz =
        parse_int("serve", "TRAINPROF_NVML_HZ", env_or("TRAINPROF_NVML_HZ", "10"), 0, 100);
    int sample_hz =
        parse_int("serve", "TRAINPROF_SAMPLE_HZ", env_or("TRAINPROF_SAMPLE_HZ", "1"), 0, 1000);
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(serve_help, stdout);
            return 0;
        }
        if (i + 1 >= argc &&
            (!strcmp(o, "--listen") || !strcmp(o, "--nvml-hz") || !strcmp(o, "--sample-hz")))
            die_usage("serve", "%s needs a value", o);
        if (!strcmp(o, "--listen")) listen = argv[++i];
        else if (!strcmp(o, "--nvml-hz")) nvml_hz = parse_int("serve", o, argv[++i], 0, 100);
        else if (!strcmp(o, "--sample-hz")) sample_hz = parse_int("serve", o, argv[++i], 0, 1000);
        else die_usage("serve", "unknown option '%s'", o);
    }
    /* ADDR:PORT, [V6]:PORT or PORT */
    char addr[128];
    const char *colon = strrchr(listen, ':'), *port = colon ? colon + 1 : listen;
    size_t alen = colon ? (size_t)(colon - listen) : 0;
    if (alen >= 2 && listen[0] == '[' && listen[alen - 1] == ']') {
        listen++;
        alen -= 2;
    }
    if (alen >= sizeof addr) die_usage("serve", "--listen: address too long: '%s'", listen);
    snprintf(addr, sizeof addr, "%.*s", (int)alen, listen);
    if (!addr[0]) snprintf(addr, sizeof addr, "127.0.0.1");
    parse_int("serve", "--listen's port", port, 0, 65535);

    /* The library's session in this process, as for run's node sampler, but writing no
     * file (TRAINPROF_NO_FILE): the NVML sampler and the process sampler on its flusher
     * feed the registry, and its endpoint serves it. This process is the node's sampler
     * whatever launcher variables it inherited: no rank labels, no local-rank port offset. */
    static const char *const job_vars[] = {
        "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID",
        "TRAINPROF_DIR", NULL};
    for (int i = 0; job_vars[i]; i++) unsetenv(job_vars[i]);
    char me[24];
    snprintf(me, sizeof me, "%d", (int)getpid());
    setenv("TRAINPROF_NVML_SAMPLER", me, 1);
    setenv("TRAINPROF_METRICS_ADDR", addr, 1);
    setenv("TRAINPROF_METRICS_PORT", port, 1);
    setenv("TRAINPROF_METRICS_RANK_OFFSET", "0", 1);
    setenv("TRAINPROF_NO_FILE", "1", 1);
    setenv("TRAINPROF_NO_SIGNALS", "1", 1);

    /* signals are taken here with sigwait: blocked before any thread starts, so that none
     * of the library's threads takes them */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    char why[256] = "";
    int ngpu = nvml_hz ? probe_nvml(why, sizeof why) : -1;
    tprof_config c;
    tprof_config_init(&c);
    c.sample_hz = (uint32_t)sample_hz;
    c.nvml_hz = ngpu > 0 ? (uint32_t)nvml_hz : 0;
    int rc = tprof_init(&c);
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof serve: the session did not start: %s\n", tprof_strerror(rc));
        return 1;
    }
    int bound = tprof_metrics_port();
    if (bound <= 0) {
        fprintf(stderr, "trainprof serve: cannot serve on %s:%s (%s)\n", addr, port,
                bound == TPROF_ERR_UNAVAILABLE ? "built without libmicrohttpd"
                                               : "see the warning above");
        tprof_shutdown();
        return 1;
    }
    tprof_set_metadata("trainprof.role", "node-exporter");
    tprof_flush(); /* one flusher pass: NVML open, the first samples taken */
    const char *br = strchr(addr, ':') ? "[" : "", *kt = strchr(addr, ':') ? "]" : "";
    fprintf(stderr, "trainprof serve: listening on http://%s%s%s:%d/metrics\n", br, addr, kt,
            bound);
    warn_exposed("serve", addr);
    if (ngpu > 0)
        fprintf(stderr, "trainprof serve: GPU metrics of %d GPU%s (NVML, %d Hz)\n", ngpu,
                ngpu > 1 ? "s" : "", nvml_hz);
    else if (nvml_hz == 0)
        fprintf(stderr, "trainprof serve: GPU metrics off (--nvml-hz 0); host metrics only\n");
    else
        fprintf(stderr, "trainprof serve: GPU metrics unavailable (%s); host metrics only\n", why);
    fflush(stderr);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    tprof_shutdown(); /* stops the endpoint and the samplers */
    fprintf(stderr, "trainprof serve: stopped (%s)\n", strsignal(sig));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(main_help, stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        fputs(main_help, stdout);
        return 0;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        /* the build line starts with "trainprof <version>" */
        printf("%s\nrank file format %u, report schema %d\n", tprof_build_info(),
               TPROF_FORMAT_VERSION, TP_REPORT_SCHEMA_VERSION);
        return 0;
    }
    if (!strcmp(c, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(c, "report")) return cmd_report(argc - 2, argv + 2);
    if (!strcmp(c, "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(c, "diff")) return cmd_diff(argc - 2, argv + 2);
    if (!strcmp(c, "top")) return cmd_top(argc - 2, argv + 2);
    if (!strcmp(c, "serve")) return cmd_serve(argc - 2, argv + 2);
    die_usage(NULL, "unknown command '%s'", c);
    return EXIT_USAGE;
}
