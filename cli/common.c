/*
 * common.c — what the trainprof command's subcommands share (common.h): output files,
 * loading a run, the report options, and the checks `run` and `serve` share (an exposed
 * endpoint, NVML).
 */
#define _GNU_SOURCE
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/alloc.h"
#include "analysis/comm.h"
#include "analysis/counter_pack.h"
#include "analysis/mfu.h"
#include "analysis/model.h"
#include "analysis/span_store.h"
#include "common/nvml_shared.h"
#include "export/compress.h"
#include "core/config.h"
#include "core/per_step.h"

/* ------------------------------------------------------------------ output files */

/* Puts the compressor the name asks for over o->f (see outfile). */
static int out_compress(outfile *o) {
    tp_compress c = tp_compress_by_name(o->path);
    if (c == TP_COMPRESS_NONE) return 0;
    FILE *z = tp_compress_open(o->f, c);
    if (!z) {
        fprintf(stderr, "trainprof: cannot write %s: %s compression: %s\n", o->path,
                tp_compress_name(c), strerror(errno));
        fclose(o->f);
        o->f = NULL;
        if (o->tmp[0]) unlink(o->tmp);
        return -1;
    }
    o->raw = o->f;
    o->f = z;
    return 0;
}

int out_open(outfile *o, const char *path) {
    o->path = path;
    o->tmp[0] = 0;
    o->raw = NULL;
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        return 0;
    }
    /* refused before anything is created: never plain text under a compressed name */
    if (!tp_compress_available(tp_compress_by_name(path))) {
        fprintf(stderr, "trainprof: cannot write %s: this trainprof was built without libzstd "
                        "(install libzstd-dev and rebuild), so it writes no .zst file\n",
                path);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        o->f = fopen(path, "w"); /* a device or a pipe: write into it */
        if (!o->f) {
            fprintf(stderr, "trainprof: cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
        return out_compress(o);
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
    return out_compress(o);
}

int out_close(outfile *o, int ok) {
    const int said = ok < 0; /* the caller says why in its own line */
    ok = ok > 0;
    if (o->f == stdout) {
        int bad = fflush(stdout) != 0 || ferror(stdout) || !ok;
        if (bad && !said) fprintf(stderr, "trainprof: writing to standard output failed%s%s\n",
                         errno ? ": " : "", errno ? strerror(errno) : "");
        return bad ? -1 : 0;
    }
    int bad = 0;
    if (o->raw) { /* the compressed stream's end goes into the file before it is closed */
        bad = fclose(o->f) != 0;
        o->f = o->raw;
        o->raw = NULL;
    }
    bad |= fclose(o->f) != 0 || !ok;
    if (!o->tmp[0]) { /* written directly */
        if (bad && !said) fprintf(stderr, "trainprof: writing %s failed\n", o->path);
        return bad ? -1 : 0;
    }
    if (bad) {
        unlink(o->tmp);
        if (!said) fprintf(stderr, "trainprof: writing %s failed\n", o->path);
        return -1;
    }
    if (rename(o->tmp, o->target) != 0) {
        fprintf(stderr, "trainprof: cannot write %s: %s\n", o->path, strerror(errno));
        unlink(o->tmp);
        return -1;
    }
    return 0;
}

static int load_runs_as(const char *const *ops, size_t n, tp_run *run, int slim);

int load_run(const char *dir, tp_run *run) { return load_runs(&dir, 1, run); }

int load_runs(const char *const *ops, size_t n, tp_run *run) {
    return load_runs_as(ops, n, run, 0);
}

int load_runs_slim(const char *const *ops, size_t n, tp_run *run) {
    return load_runs_as(ops, n, run, 1);
}

static int load_runs_as(const char *const *ops, size_t n, tp_run *run, int slim) {
    char err[PATH_MAX + 256];
    int rc = slim ? tp_run_load_slim(ops, n, run, err, sizeof err)
                  : tp_run_load_list(ops, n, run, err, sizeof err);
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof: %s\n", err[0] ? err : tprof_strerror(rc));
        for (size_t i = 0; i < run->nerrors; i++) fprintf(stderr, "  %s\n", run->errors[i]);
        tp_run_free(run);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ report options */

/* Splits "a,b,c" into a NULL-free array (the string is modified). */
static size_t split_names(char *s, const char **out, size_t max) {
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        if (*tok) out[n++] = tok;
    return n;
}

/* A bound on GPU records: a count from 1000 (fewer hold no step of a real job), or "all" (no
 * bound: SIZE_MAX). */
static size_t parse_gpu_records(const char *cmd, const char *opt, const char *v) {
    if (!strcmp(v, "all")) return SIZE_MAX;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || *v == '-' || x < 1000 || x >= SIZE_MAX) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s needs a count from 1000 or 'all', got '%.60s'", opt, v);
        die_usage(cmd, "%s", msg);
    }
    return (size_t)x;
}

void report_args_init(report_args *a, const char *cmd) {
    memset(a, 0, sizeof *a);
    a->step_name = env_or("TRAINPROF_STEP_NAME", NULL);
    a->warmup = 1;
    a->top = 15;
    const char *wu = env_or("TRAINPROF_WARMUP", NULL);
    if (wu) a->warmup = parse_int(cmd, "TRAINPROF_WARMUP", wu, 0, 1 << 30);
    const char *gr = env_or("TRAINPROF_GPU_RECORDS", NULL);
    if (gr) a->gpu_records = parse_gpu_records(cmd, "TRAINPROF_GPU_RECORDS", gr);
    /* the communication ops a rank section holds before it reads them apart: the figures
     * are the same either way, so only an environment variable sets it (docs/cli.md) */
    const char *co = env_or("TRAINPROF_SECTION_COMM_OPS", NULL);
    if (co) a->comm_ops = (size_t)parse_int(cmd, "TRAINPROF_SECTION_COMM_OPS", co, 1, 1 << 30);
}

int report_opt_set(report_args *a, int id, const char *v, const char *cmd) {
    static const char *const num_opts[TPROF_PER_STEP_N] = {
        "--tokens-per-step", "--samples-per-step", "--flops-per-step"};
    double *dst[TPROF_PER_STEP_N] = {&a->tokens_per_step, &a->samples_per_step,
                                     &a->flops_per_step};
    if (id >= OPT_TOKENS && id < OPT_TOKENS + TPROF_PER_STEP_N) {
        int k = id - OPT_TOKENS;
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
    if (id == OPT_MODEL) {
        tp_model_desc m;
        char err[256];
        if (tp_model_parse(v, &m, err, sizeof err) != 0) die_usage(cmd, "--model: %s", err);
        a->model = v;
        return 1;
    }
    if (id == OPT_GPU_RECORDS) {
        a->gpu_records = parse_gpu_records(cmd, "--gpu-records", v);
        return 1;
    }
    if (id == OPT_DTYPE) {
        if (!tp_dtype_known(v))
            die_usage(cmd, "--dtype needs bf16, fp16, fp8, tf32 or fp32, got '%s'", v);
        a->dtype = v;
        return 1;
    }
    return 0;
}

/* The report options of the command line; the HTML writer needs them too (its per-step
 * plots use the same step rule). */
void report_opts(const report_args *a, tp_report_opts *o) {
    tp_report_opts_init(o);
    o->step_name = a->step_name;
    o->warmup = a->warmup;
    if (a->top > 0) o->top_n = a->top;
    o->tokens_per_step = a->tokens_per_step;
    o->samples_per_step = a->samples_per_step;
    o->flops_per_step = a->flops_per_step;
    o->model = a->model;
    o->dtype = a->dtype;
    o->gpu_records = a->gpu_records;
    o->comm_ops = a->comm_ops;
    static const char *names[64];
    if (a->data_names) {
        static size_t nnames;
        if (!nnames) nnames = split_names(a->data_names, names, 64); /* strtok: split once */
        o->ndata_names = nnames;
        o->data_names = names;
    }
}

int make_report(const tp_run *run, const report_args *a, tp_report *out) {
    tp_report_opts o;
    report_opts(a, &o);
    int rc = tp_report_make_spilled(run, &o, out);
    if (rc != TPROF_OK)
        fprintf(stderr, "trainprof: the report could not be made: %s (run it where more memory "
                        "is free)\n", tprof_strerror(rc));
    return rc;
}

int written_short(const char *what, unsigned long nomem) {
    if (tp_nomem_process() == nomem) return 0;
    fprintf(stderr, "trainprof: memory ran out while %s was made or written: it may be "
                    "incomplete (run it again where more memory is free)\n", what);
    return 1;
}

/* ------------------------------------------------------------------ run and serve */

/* One line when an endpoint will listen beyond this host without a token: anyone who reaches
 * the port then reads the job's and the node's figures (rank names, host names, timer names)
 * and may switch detailed capture (POST /capture). Loopback is 127.0.0.0/8 and ::1
 * (RFC 1122 3.2.1.3, RFC 4291 2.5.3), IPv4-mapped included; another address, or one that
 * does not parse, warns. */
void warn_exposed(const char *cmd, const char *addr) {
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

int cli_comm_keep(const char *what, const char *v) {
    if (!v) {
        what = "TRAINPROF_COMM_KEEP";
        v = env_or(what, NULL);
        if (!v) return 0;
    }
    const unsigned long long lo = 1024, hi = 2147483648ull;
    char *end = NULL;
    errno = 0;
    unsigned long long n = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
    if (!end || *end || errno || n < lo || n > hi) {
        int shown = strlen(v) <= 60;
        for (const char *q = v; shown && *q; q++) shown = *q >= 0x20 && *q < 0x7f;
        fprintf(stderr, "trainprof: %s%s%s: not a number of ops from %llu to %llu\n", what,
                shown ? "=" : "", shown ? v : " (unprintable or long)", lo, hi);
        return -1;
    }
    tp_comm_keep_set((size_t)n);
    return 0;
}

int probe_nvml(char *why, size_t n) {
    const tprof__nvml_api *api = tprof__nvml_load(tprof__env(TPROF__OPT_NVML_LIB), why, n);
    if (!api) return -1;
    if (tprof__nvml_init(api, why, n) != 0) return -1;
    unsigned int ngpu = 0;
    int rc = -1;
    if (api->get_count(&ngpu) != NVML_SUCCESS || ngpu == 0) snprintf(why, n, "NVML sees no GPU");
    else rc = (int)ngpu;
    api->nvmlShutdown();
    return rc;
}

/* ------------------------------------------------------------------ programs and time */

/* A regular file this process may execute. */
static int runnable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int cli_find_program(const char *name, const char *default_path, char *out, size_t n) {
    if (strchr(name, '/'))
        return runnable(name) && snprintf(out, n, "%s", name) < (int)n ? 0 : -1;
    const char *path = getenv("PATH");
    if (!path || !*path) path = default_path;
    for (const char *p = path;;) {
        size_t l = strcspn(p, ":");
        int w = l ? snprintf(out, n, "%.*s/%s", (int)l, p, name)
                  : snprintf(out, n, "./%s", name); /* an empty entry: the current directory */
        if (w >= 0 && (size_t)w < n && runnable(out)) return 0;
        if (!p[l]) return -1;
        p += l + 1;
    }
}

double cli_elapsed_s(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

const char *const cli_task_vars[CLI_TASK_VARS][3] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
    {"RANK", "WORLD_SIZE", "torchrun"},
};

size_t cli_rank_file_host(const char *s, size_t n) {
    const char *p = s + n - 6;
    for (int part = 0; part < 2; part++) {
        const char *digits = p;
        while (p > s && p[-1] >= '0' && p[-1] <= '9') p--;
        if (p == digits || p - 1 <= s) return 0; /* no digits, or no host before them */
        if (p[-1] == '-') return (size_t)(p - 1 - s);
        if (p[-1] != '.') return 0;
        p--; /* before ".<k>": the pid's digits next */
    }
    return 0;
}

int cli_host_rank_files(const char *const *ops, size_t nops, const char *host, char ***paths,
                        size_t *n, char *err, size_t errlen) {
    char **all = NULL;
    size_t na = 0, k = 0;
    *paths = NULL;
    *n = 0;
    int rc = tp_run_rank_files(ops, nops, &all, &na, err, errlen);
    if (rc != 0) return rc;
    for (size_t j = 0; j < na; j++) {
        if (cli_rank_file_of(all[j], host)) all[k++] = all[j];
        else free(all[j]);
    }
    if (!k) {
        free(all);
        all = NULL;
    }
    *paths = all;
    *n = k;
    return 0;
}

int cli_rank_file_of(const char *path, const char *host) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b), hl = strlen(host);
    if (n <= 6 || strcmp(b + n - 6, ".tprof") != 0) return 0;
    return cli_rank_file_host(b, n) == hl && memcmp(b, host, hl) == 0;
}

int cli_samples_lost(const char *cmd) {
    int samples = tp_counters_read_failures() != 0, spans = tp_span_store_read_failures() != 0;
    if (!samples && !spans) return 0;
    fprintf(stderr,
            "trainprof %s: %s kept on disk could not be read back (%sthe temporary file "
            "in $TMPDIR, else /tmp, failed): %s; %s\n",
            cmd,
            samples && spans ? "NVML samples, step times or MPI and gloo calls' spans"
            : samples        ? "NVML samples or step times"
                             : "MPI and gloo calls' spans",
            samples ? "a node sampler's summary was changed while the command ran, or " : "",
            !strcmp(cmd, "summarize") ? "the files named above got no summary"
            : spans && !samples
                ? "the ranks whose calls' spans were lost have their sections from their first "
                  "read alone in this output (listed among the unreadable files)"
                : "the figures read from them (NVML figures and curves, steps and stragglers; "
                  "the sections of ranks whose calls' spans were lost) are incomplete in this "
                  "output",
            !strcmp(cmd, "run") ? "run `trainprof report` on the run's directory again"
                                : "run the command again");
    return 1;
}
