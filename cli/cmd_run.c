/*
 * cmd_run.c — `trainprof run [options] -- CMD [ARGS...]` (docs/cli.md): runs CMD with the
 * trainprof library injected, then writes and prints the reports.
 *
 * `run` never changes what the profiled program does: it sets the injection variables,
 * runs the command with them in its own process group, forwards the signals sent to it
 * alone (run_signals.c), waits,
 * writes the reports next to the rank files, and exits with the command's own status
 * (re-raising the command's terminating signal on itself). cmd_run is its steps in order:
 * run_parse, run_prepare (command, library, output directory and its lock),
 * run_environment (what every process of the job inherits), node_sampler_begin, job_run
 * (spawn, forward, wait), run_reports, exit_as.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/alloc.h"
#include "analysis/mfu.h"
#include "analysis/model.h"
#include "common.h"
#include "core/config.h"
#include "core/kwindow.h"
#include "core/per_step.h"
#include "export/html.h"
#include "format/reader.h"
#include "run_finish.h"
#include "run_signals.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ options */

enum {
    OPT_OUTPUT = OPT_OWN,
    OPT_STEP_NAME,
    OPT_WARMUP,
    OPT_RING_KB,
    OPT_SAMPLE_HZ,
    OPT_GPU_CAPTURE,
    OPT_KERNEL_STEPS,
    OPT_NO_REPORT,
    OPT_QUIET,
    OPT_METRICS_PORT,
    OPT_PYTHON,
    OPT_SUMMARIZE_WITH,
    OPT_NODES,
};

static const cli_opt run_opts_table[] = {
    {OPT_OUTPUT, "--output", "-o", CLI_VALUE, "DIR",
     "output directory [TRAINPROF_DIR]; default trainprof-DATE-TIME;\n"
     "must not already hold rank files"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME",
     "range that marks a step: exact name, or a glob with * or ?\n"
     "[TRAINPROF_STEP_NAME]; default: API steps, ProfilerStep#*,\n"
     "train_step, training_step, step, iteration, train_iter"},
    {OPT_WARMUP, "--warmup", NULL, CLI_VALUE, "N",
     "steps excluded from the statistics [TRAINPROF_WARMUP]; default 1"},
    {OPT_RING_KB, "--ring-kb", NULL, CLI_VALUE, "N",
     "per-thread event ring in KiB [TRAINPROF_RING_KB]; default 4096"},
    {OPT_SAMPLE_HZ, "--sample-hz", NULL, CLI_VALUE, "N",
     "process sampler (CPU, RSS, threads, context switches) per second\n"
     "[TRAINPROF_SAMPLE_HZ]; default 10, 0 = off"},
    {OPT_GPU_CAPTURE, "--gpu-capture", NULL, CLI_VALUE, "PLAN",
     "GPU activity capture (CUPTI kernels, copies, ...) plan\n"
     "[TRAINPROF_GPU_CAPTURE]: auto (default: from the start through\n"
     "step 4, then steps 1000-1004, 2000-2004, ...), all (every\n"
     "step), off (none, CUPTI not loaded), A-B[,C-D...] (steps A to B inclusive, A: one\n"
     "step, last may be A-: to the end) or A-B/N (A-B, then every N\n"
     "steps again, N > B-A+1); steps numbered from 0 as the report\n"
     "numbers them; the rest is recorded in every step"},
    {OPT_KERNEL_STEPS, "--kernel-steps", NULL, CLI_VALUE, "A-B",
     "older spelling of --gpu-capture A-B (one window: A-B, A, A-)\n"
     "[TRAINPROF_KERNEL_STEPS]; not with --gpu-capture"},
    {OPT_QUIET, "--quiet", "-q", CLI_FLAG, NULL,
     "do not print the report (it is still written) [TRAINPROF_QUIET]"},
    {OPT_NO_REPORT, "--no-report", NULL, CLI_FLAG, NULL,
     "no report at all: the run is not even read (the rank files stay;\n"
     "trainprof report DIR makes it later) [TRAINPROF_NO_REPORT]"},
    {OPT_SUMMARIZE_WITH, "--summarize-with", NULL, CLI_VALUE, "HOW",
     "the report's first stage on the job's nodes: auto (default: one task\n"
     "per node through CMD when it is srun in a Slurm allocation, or Open\n"
     "MPI's mpirun or Hydra's mpiexec (MPICH, Intel MPI) with rank files\n"
     "of other hosts), off, or a launcher\n"
     "command, e.g. 'mpirun --map-by ppr:1:node'\n"
     "[TRAINPROF_SUMMARIZE_WITH]"},
    {OPT_NODES, "--nodes", NULL, CLI_VALUE, "N",
     "this trainprof run is one of N, one on each node of the job, all\n"
     "writing into one shared -o DIR: each summarises its node's rank\n"
     "files, and the node of rank 0 writes the report once the other\n"
     "nodes' runs are done [TRAINPROF_NODES]; default: N from torchrun's\n"
     "--nnodes (or PET_NNODES) when CMD is torchrun, else 1"},
    {OPT_METRICS_PORT, "--metrics-port", NULL, CLI_VALUE, "PORT",
     "live Prometheus metrics: each process serves /metrics on PORT +\n"
     "its local rank, on 127.0.0.1 [TRAINPROF_METRICS_PORT;\n"
     "TRAINPROF_METRICS_ADDR, TRAINPROF_METRICS_TOKEN]; the node's GPUs\n"
     "on PORT + 1000 [TRAINPROF_METRICS_NODE_PORT]; docs/metrics.md"},
    {OPT_PYTHON, "--python", NULL, CLI_FLAG, NULL,
     "instrument PyTorch programs with no code change: every Python\n"
     "process gets trainprof's sitecustomize (PYTHONPATH), which calls\n"
     "trainprof.torch.autostart() when torch is imported: steps at\n"
     "optimizer steps, data/forward/backward/optimizer ranges,\n"
     "torch.distributed traffic [TRAINPROF_PYTHON=1]; the program's\n"
     "own trainprof module is used, else this command's when it is\n"
     "built for that Python (found beside the library: BUILD/python,\n"
     "the wheel's package; or in [TRAINPROF_PYTHON_DIR]); docs/python.md"},
    CLI_THROUGHPUT_OPTS,
    CLI_GPU_RECORDS_OPT,
    CLI_HELP_OPT,
};

/* The variables the library reads that have no option of `run`: the one place that lists
 * them for the usage. */
/* After the options: the library's variables, printed from the table they are read through
 * (core/config.h), so that --help cannot drift from what the library reads. */
static void run_env_help(FILE *f) {
    fputs("\nTRAINPROF_LIB: the library run injects (default: beside this program).\n", f);
    tprof__config_print_env(f);
}

static const cli_cmd run_cmd = {
    "run",
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
    "options (environment twin in brackets):\n",
    run_opts_table,
    sizeof run_opts_table / sizeof *run_opts_table,
    run_env_help,
    1,
};

/* What the command line asks for. */
typedef struct run_opts {
    const char *dir; /* -o, or TRAINPROF_DIR; NULL: a fresh trainprof-DATE-TIME */
    report_args a;
    const char *ring_kb, *sample_hz, *gpu_capture, *kernel_steps, *metrics_port;
    char mport[16]; /* metrics_port's copy (setenv replaces the variable's string) */
    const char *summarize_with; /* --summarize-with */
    int summarize_limit_s;      /* TRAINPROF_SUMMARIZE_LIMIT_S, checked before the job */
    int nodes;                  /* --nodes; -1: from CMD (run_nodes_auto) */
    int quiet, python, no_report;
    char **cmd; /* CMD ARGS..., NULL-terminated */
} run_opts;

/* What run_prepare found and made. */
typedef struct run_plan {
    char exe[PATH_MAX];   /* CMD resolved on PATH */
    char lib[PATH_MAX];   /* libtrainprof.so */
    char pydir[PATH_MAX]; /* --python: the directory holding trainprof/ */
    char defdir[96];
    const char *dir;       /* the output directory as the user named it */
    char absdir[PATH_MAX]; /* and its absolute path */
    char lockpath[PATH_MAX + 96];
    int lockfd;
    /* one of several runs, one on each node (nodes > 1): the lock above is this host's, and
     * this one, the directory's, is held shared by every node's run */
    int nodes;
    char host[64]; /* this host, as the rank files' names spell it */
    char sharepath[PATH_MAX + 32];
    int sharefd;
    char run_id[64];
} run_plan;

/* ------------------------------------------------------------------ helpers */

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

/* dl_iterate_phdr callback: the path of the libtrainprof this command was loaded with. */
static int loaded_library(struct dl_phdr_info *info, size_t size, void *path) {
    (void)size;
    const char *name = info->dlpi_name, *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libtrainprof.so", 15) != 0) return 0;
    snprintf(path, PATH_MAX, "%s", name);
    return 1;
}

/* Absolute path of libtrainprof.so: $TRAINPROF_LIB, else beside the executable or in
 * ../lib or ../lib64 relative to it (a build tree, an installation), or, in the wheel
 * (cmake/wheel.cmake: the command in trainprof/_bin), the package's libtrainprof.so.0 in the
 * directory above, else the copy the dynamic linker loaded for this command, which it found
 * through the command's RUNPATH wherever the installation's libdir is (GNUInstallDirs:
 * lib/<multiarch> under /usr on Debian) and which an installation without the unversioned
 * libtrainprof.so link also has. */
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
                                      "../lib64/libtrainprof.so", "../libtrainprof.so.0"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
        if (realpath(cand, out) && access(out, R_OK) == 0 && strlen(out) < n) return 0;
    }
    char loaded[PATH_MAX] = "";
    if (dl_iterate_phdr(loaded_library, loaded) && realpath(loaded, out) &&
        access(out, R_OK) == 0 && strlen(out) < n)
        return 0;
    fprintf(stderr, "trainprof run: cannot find libtrainprof.so beside %s; set TRAINPROF_LIB\n",
            exe);
    return -1;
}

/* The directory holding the trainprof Python package built with this CLI (for --python):
 * TRAINPROF_PYTHON_DIR, else python/ beside the library (a build tree), the directory above
 * the library when the library sits in the package (the wheel: site-packages), python/
 * beside this binary, else lib/trainprof/python of an installation (cmake --install). It must
 * hold trainprof/_autostart/sitecustomize.py. */
static int find_python_dir(const char *lib, char *out, size_t n) {
    char cands[5][PATH_MAX + 64];
    size_t nc = 0;
    const char *env = getenv("TRAINPROF_PYTHON_DIR");
    if (env && *env) {
        snprintf(cands[nc++], sizeof cands[0], "%s", env);
    } else {
        const char *slash = strrchr(lib, '/');
        snprintf(cands[nc++], sizeof cands[0], "%.*s/python", (int)(slash ? slash - lib : 1),
                 slash ? lib : ".");
        /* the wheel's layout: the library in the package, site-packages/trainprof/ */
        size_t dl = slash ? (size_t)(slash - lib) : 0, pl = strlen("/trainprof");
        if (dl > pl && memcmp(lib + dl - pl, "/trainprof", pl) == 0)
            snprintf(cands[nc++], sizeof cands[0], "%.*s", (int)(dl - pl), lib);
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

static int dir_has_rank_files(const char *dir, const char *host) {
    tp_run probe;
    char err[64];
    const char *ops[] = {dir}; /* a probe: the slim read, in bounded memory */
    if (host) return run_host_has_files(dir, host); /* a run on every node */
    int rc = tp_run_load_slim(ops, 1, &probe, err, sizeof err);
    int has = rc == TPROF_OK || probe.nerrors > 0;
    tp_run_free(&probe);
    return has;
}

/* Takes the run lock of a directory: `path` opened and locked with flock(LOCK_EX), which the
 * kernel drops when this process ends however it ends (SIGKILL included), so a lock file a
 * dead run left behind is taken over and never mistaken for a live run (a pid written in
 * it could belong to another process by now; it is there for people to read). Returns the
 * descriptor to keep until the run ends (close-on-exec: the job never holds it), -2 when
 * another live run holds the lock (its "PID HOST", as it wrote it, in `owner`), -1 on error.
 * `host`: this one, written after the pid, since the directory may be shared by nodes. */
static int run_lock(const char *path, const char *host, char *owner, size_t n) {
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
            char me[96];
            int len = snprintf(me, sizeof me, "%d %s\n", (int)getpid(), host);
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

/* Lets go of the run's locks (fd: its own, when not yet in p). The directory's shared lock
 * file stays: other nodes' runs may still hold it. */
static void run_unlock(const run_plan *p, int fd) {
    unlink(p->lockpath); /* while still holding it: the next run then makes a new file */
    close(fd);
    if (p->sharefd >= 0) close(p->sharefd);
}
/* ------------------------------------------------------------------ the steps */

/* A malformed capture plan (`what` names the option or the variable): one line, exit 2. */
static void bad_plan(const char *what, const char *why, const char *v) {
    fprintf(stderr, "trainprof run: %s %s, got '%s'\n", what, why, v);
    exit(EXIT_USAGE);
}

/* The GPU capture plan of --gpu-capture, --kernel-steps and their environment twins, checked
 * before anything is started: an option beats both variables; both options, or both
 * variables without an option, are an error. */
static void check_plan(run_opts *o, int gpu_opt, int ks_opt) {
    tprof__kplan plan;
    uint64_t lo, hi;
    const char *why;
    if (gpu_opt && ks_opt) {
        fprintf(stderr, "trainprof run: --gpu-capture and --kernel-steps both given: "
                        "--kernel-steps A-B is --gpu-capture A-B, keep one\n");
        exit(EXIT_USAGE);
    }
    if (!gpu_opt && !ks_opt) {
        o->gpu_capture = env_or("TRAINPROF_GPU_CAPTURE", NULL);
        o->kernel_steps = env_or("TRAINPROF_KERNEL_STEPS", NULL);
        if (o->gpu_capture && !*o->gpu_capture) o->gpu_capture = NULL;
        if (o->kernel_steps && !*o->kernel_steps) o->kernel_steps = NULL;
        if (o->gpu_capture && o->kernel_steps) {
            fprintf(stderr, "trainprof run: TRAINPROF_GPU_CAPTURE and TRAINPROF_KERNEL_STEPS "
                            "both set: keep one\n");
            exit(EXIT_USAGE);
        }
    }
    const int env = !gpu_opt && !ks_opt;
    if (o->gpu_capture && (why = tprof__kplan_parse(o->gpu_capture, &plan)))
        bad_plan(env ? "TRAINPROF_GPU_CAPTURE:" : "--gpu-capture:", why, o->gpu_capture);
    if (o->kernel_steps && tprof__kwin_parse(o->kernel_steps, &lo, &hi) != 0)
        bad_plan(env ? "TRAINPROF_KERNEL_STEPS needs" : "--kernel-steps needs",
                 "A-B, A or A- (step numbers, A <= B)", o->kernel_steps);
}

/* The options, checked (with their environment twins) before anything is started. -1 to go
 * on, else the exit status (0 after --help). */
static int run_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->dir = env_or("TRAINPROF_DIR", NULL);
    report_args_init(&o->a, "run");
    o->metrics_port = env_or("TRAINPROF_METRICS_PORT", NULL);
    o->quiet = getenv("TRAINPROF_QUIET") != NULL;
    o->no_report = getenv("TRAINPROF_NO_REPORT") != NULL;
    o->summarize_with = env_or("TRAINPROF_SUMMARIZE_WITH", NULL);
    const char *lim = env_or("TRAINPROF_SUMMARIZE_LIMIT_S", NULL);
    o->summarize_limit_s = lim ? parse_int("run", "TRAINPROF_SUMMARIZE_LIMIT_S", lim, 1, 86400)
                               : 600;
    const char *nodes = env_or("TRAINPROF_NODES", NULL);
    o->nodes = nodes ? parse_int("run", "TRAINPROF_NODES", nodes, 1, 1000000) : -1;
    const char *pyenv = getenv("TRAINPROF_PYTHON");
    o->python = pyenv && *pyenv && strcmp(pyenv, "0") != 0;
    const char *v;
    int i = 0, gpu_opt = 0, ks_opt = 0;
    for (; i < argc; i++) {
        int id = cli_next(&run_cmd, argc, argv, &i, &v);
        if (id == CLI_END) { /* the command follows "--" */
            i++;
            break;
        }
        if (id == CLI_OPERAND) break; /* the command starts here (no "--") */
        switch (id) {
        case OPT_HELP: cli_usage(&run_cmd, stdout); return 0;
        case OPT_OUTPUT: o->dir = v; break;
        case OPT_STEP_NAME: o->a.step_name = v; break;
        case OPT_WARMUP: o->a.warmup = parse_int("run", "--warmup", v, 0, 1 << 30); break;
        case OPT_RING_KB:
            o->ring_kb = v;
            parse_int("run", "--ring-kb", v, 64, 1 << 22);
            break;
        case OPT_SAMPLE_HZ:
            o->sample_hz = v;
            parse_int("run", "--sample-hz", v, 0, 1000);
            break;
        case OPT_GPU_CAPTURE:
            o->gpu_capture = v;
            gpu_opt = 1;
            break;
        case OPT_KERNEL_STEPS:
            o->kernel_steps = v;
            ks_opt = 1;
            break;
        case OPT_METRICS_PORT:
            o->metrics_port = v;
            parse_int("run", "--metrics-port", v, 0, 65535);
            break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_NO_REPORT: o->no_report = 1; break;
        case OPT_PYTHON: o->python = 1; break;
        case OPT_SUMMARIZE_WITH: o->summarize_with = v; break;
        case OPT_NODES: o->nodes = parse_int("run", "--nodes", v, 1, 1000000); break;
        default: report_opt_set(&o->a, id, v, "run"); break;
        }
    }
    check_plan(o, gpu_opt, ks_opt);
    char msg[PATH_MAX];
    int stage = run_first_stage_check(o->summarize_with, msg, sizeof msg);
    if (stage < 0) die_usage("run", "%s", msg);
    if (stage > 0 && !o->no_report) fprintf(stderr, "trainprof run: %s\n", msg);
    if (i >= argc) die_usage("run", "%s", "missing the command to run (trainprof run -- CMD ...)");
    o->cmd = argv + i;
    return -1;
}

/* A fresh output directory in the current one: trainprof-DATE-TIME, or -2, -3, ... for two
 * runs started in the same second. 0, or -1 with a line on stderr. */
static int make_default_dir(char *out, size_t n) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char base[64];
    strftime(base, sizeof base, "trainprof-%Y%m%d-%H%M%S", &tm);
    for (int k = 1; k < 1000; k++) {
        if (k == 1) snprintf(out, n, "%s", base);
        else snprintf(out, n, "%s-%d", base, k);
        if (mkdir(out, 0755) == 0) return 0;
        if (errno != EEXIST) break;
    }
    fprintf(stderr, "trainprof run: cannot create an output directory here (%s): %s\n", out,
            strerror(errno));
    return -1;
}

/* The command, the library (and the Python package), the output directory, created and
 * locked for this run, with no rank files of another run in it. -1 to go on (the lock is
 * then held: run_unlock), else the exit status. */
static int run_prepare(const run_opts *o, run_plan *p) {
    memset(p, 0, sizeof *p);
    p->lockfd = -1;
    char **cmd = o->cmd;
    if (cli_find_program(cmd[0], "/usr/local/bin:/usr/bin:/bin", p->exe, sizeof p->exe) != 0) {
        /* as shells answer: 126 when the path names something that cannot be run */
        struct stat sb;
        int there = strchr(cmd[0], '/') && stat(cmd[0], &sb) == 0;
        fprintf(stderr, "trainprof run: %s: %s\n", cmd[0],
                there ? "not executable" : "command not found or not executable");
        return there ? 126 : 127;
    }
    if (find_library(p->lib, sizeof p->lib) != 0) return 1;
    if (o->python && find_python_dir(p->lib, p->pydir, sizeof p->pydir) != 0) return 1;

    p->dir = o->dir;
    if (!p->dir) {
        if (make_default_dir(p->defdir, sizeof p->defdir) != 0) return 1;
        p->dir = p->defdir;
    }
    const char *dir = p->dir;
    struct stat dst;
    if (stat(dir, &dst) == 0 && !S_ISDIR(dst.st_mode)) {
        fprintf(stderr, "trainprof run: %s exists and is not a directory\n", dir);
        return 1;
    }
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "trainprof run: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (!realpath(dir, p->absdir) || access(p->absdir, W_OK | X_OK) != 0) {
        fprintf(stderr, "trainprof run: %s is not a writable directory: %s\n", dir,
                strerror(errno));
        return 1;
    }
    p->nodes = o->nodes >= 0 ? o->nodes : run_nodes_auto(p->exe, cmd);
    if (p->nodes < 2) p->nodes = 0;
    run_host_name(p->host);
    p->sharefd = -1;
    /* one run per directory, or per host of it when a run goes on every node: the lock is a
     * flock() on this file, held for the whole run */
    if (p->nodes) {
        snprintf(p->sharepath, sizeof p->sharepath, "%s/.trainprof-run.lock", p->absdir);
        if ((p->sharefd = run_share_lock(p->sharepath)) == -2) {
            fprintf(stderr, "trainprof run: %s is in use by a trainprof run of one node (it "
                            "holds %s)\n", dir, p->sharepath);
            return 1;
        }
        if (p->sharefd < 0) {
            fprintf(stderr, "trainprof run: cannot lock %s: %s\n", p->sharepath, strerror(errno));
            return 1;
        }
        snprintf(p->lockpath, sizeof p->lockpath, "%s/.trainprof-run-%s.lock", p->absdir,
                 p->host);
    } else {
        snprintf(p->lockpath, sizeof p->lockpath, "%s/.trainprof-run.lock", p->absdir);
    }
    char owner[96] = "";
    int lockfd = run_lock(p->lockpath, p->host, owner, sizeof owner);
    if (lockfd == -2) {
        run_refused(dir, p->absdir, p->lockpath, owner, p->nodes, p->host);
    } else if (lockfd < 0) {
        fprintf(stderr, "trainprof run: cannot lock %s: %s\n", p->lockpath, strerror(errno));
    } else if (dir_has_rank_files(p->absdir, p->nodes ? p->host : NULL)) {
        run_refused(dir, p->absdir, p->lockpath, NULL, p->nodes, p->host);
        unlink(p->lockpath);
        close(lockfd);
    } else {
        p->lockfd = lockfd;
        if (p->nodes) {
            run_node_done(p->absdir, p->host, 0);
            run_node_stale_marks(p->absdir, p->host);
        }
        return -1;
    }
    if (p->sharefd >= 0) close(p->sharefd);
    return 1;
}

/* The run's id: the directory's name, at most 63 bytes, never cutting a UTF-8 character. */
static void make_run_id(const char *absdir, char *run_id, size_t n) {
    const char *base = strrchr(absdir, '/');
    snprintf(run_id, n, "%.63s", base ? base + 1 : absdir);
    for (size_t k = strlen(run_id); k > 0 && ((unsigned char)run_id[k - 1] & 0x80); k--) {
        unsigned char c = (unsigned char)run_id[k - 1];
        if (c >= 0xC0) { /* lead byte: complete only if all its continuation bytes fit */
            size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (strlen(run_id) - (k - 1) < want) run_id[k - 1] = 0;
            break;
        }
    }
}

/* ld.so splits LD_PRELOAD at spaces and colons and has no escape: a library whose path holds
 * one (an installation under "My Files", a venv in such a directory) is preloaded through a
 * link in a directory of our own whose path holds none, removed when the job is over
 * (preload_cleanup). The other variables name one path each and take it as it is. */
static char g_preload_dir[64];
static char g_preload_links[2][96];

static void preload_cleanup(void) {
    for (size_t i = 0; i < 2; i++)
        if (g_preload_links[i][0]) unlink(g_preload_links[i]);
    if (g_preload_dir[0]) rmdir(g_preload_dir);
}

/* path, or a link to it without spaces or colons, into out (slot: which link). -1 when a link
 * was needed and could not be made (the caller says so in one line). */
static int preload_path(const char *path, size_t slot, char *out, size_t n) {
    if (!strpbrk(path, " :\t\n")) {
        snprintf(out, n, "%s", path);
        return 0;
    }
    if (!g_preload_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp || strpbrk(tmp, " :\t\n") || strlen(tmp) > 24) tmp = "/tmp";
        snprintf(g_preload_dir, sizeof g_preload_dir, "%s/trainprof-preload-XXXXXX", tmp);
        if (!mkdtemp(g_preload_dir)) {
            g_preload_dir[0] = 0;
            return -1;
        }
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(g_preload_links[slot], sizeof g_preload_links[slot], "%s/%s", g_preload_dir,
             strpbrk(base, " :\t\n") ? (slot ? "libtrainprof_mpi.so" : "libtrainprof.so") : base);
    if (symlink(path, g_preload_links[slot]) != 0) {
        g_preload_links[slot][0] = 0;
        return -1;
    }
    snprintf(out, n, "%s", g_preload_links[slot]);
    return 0;
}

/* The injection variables: the library as the NVTX, CUDA and NCCL tool of every process,
 * preloaded with the PMPI wrappers. 0, or -1 (out of memory). */
static int set_injection(const char *lib) {
    const char *pre = getenv("LD_PRELOAD");
    /* the PMPI wrappers (built when Open MPI was found) sit beside libtrainprof.so; they link
     * no MPI library, so preloading them into a program without MPI changes nothing */
    char mpilib[PATH_MAX + 32] = "";
    const char *slash = strrchr(lib, '/');
    snprintf(mpilib, sizeof mpilib, "%.*s/libtrainprof_mpi.so", (int)(slash ? slash - lib : 1),
             slash ? lib : ".");
    if (access(mpilib, R_OK) != 0) mpilib[0] = 0;
    char plib[PATH_MAX + 32], pmpi[PATH_MAX + 32] = "";
    if (preload_path(lib, 0, plib, sizeof plib) != 0 ||
        (mpilib[0] && preload_path(mpilib, 1, pmpi, sizeof pmpi) != 0)) {
        fprintf(stderr, "trainprof run: %s holds a space or colon, which LD_PRELOAD cannot "
                        "hold, and no link could be made in /tmp (%s): set TRAINPROF_LIB to a "
                        "copy in a path without them\n", lib, strerror(errno));
        preload_cleanup();
        return -2;
    }
    size_t plen = strlen(plib) + strlen(pmpi) + (pre ? strlen(pre) : 0) + 3;
    char *preload = malloc(plen);
    if (!preload) return -1;
    snprintf(preload, plen, "%s%s%s%s%s", plib, pmpi[0] ? ":" : "", pmpi,
             pre && *pre ? ":" : "", pre && *pre ? pre : "");
    const char *old_nvtx = getenv("NVTX_INJECTION64_PATH");
    if (old_nvtx && *old_nvtx && strcmp(old_nvtx, lib))
        fprintf(stderr, "trainprof run: replacing NVTX_INJECTION64_PATH=%s (another NVTX tool, "
                        "e.g. Nsight Systems, cannot be attached at the same time)\n", old_nvtx);
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
    return 0;
}

/* The throughput figures go to the ranks, which keep them in their files' metadata (a later
 * `trainprof report` of the files has them) and feed the live counters. */
static void set_throughput(const report_args *a) {
    double x[4] = {a->tokens_per_step, a->samples_per_step, a->flops_per_step, 0};
    tp_model_desc m; /* --model with --tokens-per-step: the report's formula, for the live
                      * counters only (the files keep the model, not a FLOPs figure) */
    if (a->model && x[0] > 0 && tp_model_parse(a->model, &m, NULL, 0) == 0)
        x[3] = tp_model_flops(&m, x[0]);
    for (int k = 0; k < 4; k++) {
        char num[64];
        snprintf(num, sizeof num, "%.17g", x[k]);
        if (x[k] > 0 && x[k] <= TPROF_MAX_FLOPS_PER_STEP)
            setenv(k < TPROF_PER_STEP_N ? tprof__per_step_env(k) : "TRAINPROF_MODEL_FLOPS_PER_STEP",
                   num, 1);
    }
    if (a->model) setenv("TRAINPROF_MODEL", a->model, 1);
    if (a->dtype) setenv("TRAINPROF_DTYPE", a->dtype, 1);
}

/* The environment every process of the job inherits. 0, or -1 (out of memory). */
static int run_environment(run_opts *o, run_plan *p) {
    make_run_id(p->absdir, p->run_id, sizeof p->run_id);
    setenv("TRAINPROF_DIR", p->absdir, 1);
    setenv("TRAINPROF_RUN_ID", p->run_id, 1);
    run_save_user_env(); /* the first stage gets the user's own back */
    if (set_injection(p->lib) != 0) return -1;
    if (o->a.step_name) setenv("TRAINPROF_STEP_NAME", o->a.step_name, 1);
    if (o->ring_kb) setenv("TRAINPROF_RING_KB", o->ring_kb, 1);
    if (o->sample_hz) setenv("TRAINPROF_SAMPLE_HZ", o->sample_hz, 1);
    /* one spelling reaches the job: the one checked (an option beats the other variable) */
    if (o->gpu_capture) {
        setenv("TRAINPROF_GPU_CAPTURE", o->gpu_capture, 1);
        unsetenv("TRAINPROF_KERNEL_STEPS");
    } else if (o->kernel_steps) {
        setenv("TRAINPROF_KERNEL_STEPS", o->kernel_steps, 1);
        unsetenv("TRAINPROF_GPU_CAPTURE");
    }
    if (o->metrics_port) {
        /* the environment twin is checked as the option is; a copy, as setenv below
         * replaces the variable's string */
        parse_int("run", "TRAINPROF_METRICS_PORT", o->metrics_port, 0, 65535);
        snprintf(o->mport, sizeof o->mport, "%s", o->metrics_port);
        o->metrics_port = o->mport;
        setenv("TRAINPROF_METRICS_PORT", o->metrics_port, 1);
        const char *maddr = getenv("TRAINPROF_METRICS_ADDR");
        if (maddr && *maddr) warn_exposed("run", maddr); /* once, not once per rank */
    }
    set_throughput(&o->a);
    if (o->python) {
        /* the autostart directory only, first (its sitecustomize chains to the one it
         * hides): the package itself is not put on the path, where it would hide the
         * interpreter's own trainprof, and could be built for another Python. The
         * sitecustomize uses the interpreter's own, else this package when its extension
         * is built for that interpreter. Nothing is installed into the user's environment */
        const char *pp = getenv("PYTHONPATH");
        size_t len = strlen(p->pydir) + (pp ? strlen(pp) : 0) + 64;
        char *ppv = malloc(len);
        if (!ppv) return -1;
        snprintf(ppv, len, "%s/trainprof/_autostart%s%s", p->pydir, pp && *pp ? ":" : "",
                 pp && *pp ? pp : "");
        setenv("PYTHONPATH", ppv, 1);
        free(ppv);
        setenv("TRAINPROF_PYTHON", "1", 1);
    }
    return 0;
}

/* One NVML sampler per node, in this process: the job's processes then leave NVML alone
 * (NVML sampled inside a process whose GPU activity CUPTI records can hang; docs/design.md),
 * and ranks sharing a node do not sample the same GPUs twice. Started before the job, so that
 * its first step lies between two samples; with --metrics-port it serves the node's GPU
 * metrics (PORT + 1000 unless TRAINPROF_METRICS_NODE_PORT says otherwise; 0 there: none).
 * 1 when it runs (tprof_shutdown ends it), else 0. */
static int node_sampler_begin(const run_opts *o, const run_plan *p) {
    if (!node_sampler_wanted()) return 0;
    const char *metrics_port = o->metrics_port;
    char me[24];
    snprintf(me, sizeof me, "%d", (int)getpid());
    setenv("TRAINPROF_NVML_SAMPLER", me, 1);
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
    node_sampler_start(p->absdir, p->run_id);
    unsetenv("TRAINPROF_METRICS_RANK_OFFSET");
    if (metrics_port) setenv("TRAINPROF_METRICS_PORT", metrics_port, 1);
    else unsetenv("TRAINPROF_METRICS_PORT");
    return 1;
}

/* Runs the command and waits for it, forwarding signals (run_signals_begin was called): its
 * wait status in *status and the time it started in *started. 0, or -1 when it could not be
 * started (fork failed). */
static int job_run(char *exe, char **cmd, int *status, time_t *started) {
    run_watch watch;
    run_watch_start(&watch);
    fflush(NULL);
    pid_t launcher = getpid();
    *started = time(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "trainprof run: fork: %s\n", strerror(errno));
        run_watch_stop(&watch);
        return -1;
    }
    if (pid == 0) {
        run_signals_end();
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
    for (;;) {
        run_signals_forward(pid, &watch);
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            *status = 1 << 8;
            break;
        }
        /* until a signal or the job's end (SIGCHLD); the timeout only bounds a wake-up lost
         * to a full self-pipe */
        run_signals_wait(1000);
    }
    run_watch_stop(&watch);
    return 0;
}

/* report.txt, report.json and report.html in the run directory, and the text on stdout
 * (unless --no-report); one line on stderr says which were written. */
static void write_reports(const run_opts *o, const char *absdir, tp_run *run) {
    tp_report rep;
    if (make_report(run, &o->a, &rep) != TPROF_OK) return;
    static const char *const names[3] = {"report.txt", "report.json", "report.html"};
    int ok[3] = {0, 0, 0};
    char path[PATH_MAX + 32];
    outfile of;
    tp_report_opts ho;
    report_opts(&o->a, &ho);
    unsigned long nomem;
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", absdir, names[k]);
        if (k == 2) tp_report_sections_once(&rep); /* the HTML reads them last: cmd_report.c */
        nomem = tp_nomem_process(); /* one written short of memory is not whole */
        if (out_open(&of, path) != 0) continue;
        int w = k == 0   ? tp_report_write_text(&rep, of.f, 0)
                : k == 1 ? tp_report_write_doc(&rep, of.f)
                         : tp_html_write(&rep, &ho, of.f);
        ok[k] = out_close(&of, w == 0 && !written_short(path, nomem)) == 0;
    }
    if (!o->quiet) {
        fputc('\n', stdout);
        nomem = tp_nomem_process();
        if (tp_report_write_text(&rep, stdout, isatty(1) && !getenv("NO_COLOR")) != 0)
            fprintf(stderr, "trainprof: the report on standard output could not be written "
                            "whole (report.txt is the report)\n");
        else (void)written_short("the report on standard output", nomem);
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
    tp_report_free(&rep);
}

/* The report phase: once the job's last writers are done, the reports of what they wrote.
 * Its failure is said but never changes the exit status. */
static void run_reports(const run_opts *o, const run_plan *p, int node_sampler,
                        time_t started) {
    /* a launcher can end before its ranks (mpirun on SIGTERM): give them the time their
     * signal handlers take to finish the files (3 s each at most), then report */
    run_wait_for_writers(p->absdir, 10000);
    if (node_sampler) tprof_shutdown(); /* its last sample, then the end of its file */
    if (o->no_report) { /* nothing read: a long run's report needs memory this node may lack */
        run_report_create_failures(p->absdir, started);
        fprintf(stderr, "trainprof: rank files in %s (no report: trainprof report %s)\n",
                p->absdir, p->absdir);
        return;
    }
    tp_run run;
    char err[PATH_MAX + 128];
    unsetenv("LD_PRELOAD");
    if (p->nodes) {
        if (!run_node_share(o->summarize_with, p->absdir, p->host, &o->a, o->summarize_limit_s,
                            p->nodes))
            return;
    } else { /* the report's first stage on the job's nodes, as long as a big report may take */
        run_first_stage(o->summarize_with, p->exe, o->cmd, p->absdir, &o->a,
                        o->summarize_limit_s);
    }
    const char *ops[] = {p->absdir}; /* read for its report alone: in bounded memory */
    if (tp_run_load_slim(ops, 1, &run, err, sizeof err) != TPROF_OK) {
        fprintf(stderr, "trainprof run: no report: %s\n", err);
        int uncreated = run_report_create_failures(p->absdir, started);
        if (run.nerrors == 0 && uncreated == 0)
            fprintf(stderr, "trainprof run: no process recorded anything (a program must use "
                            "NVTX3 or the trainprof API to record ranges)\n");
    } else {
        run_report_create_failures(p->absdir, started);
        if (p->nodes) run_nodes_rank0_hosts(&run);
        write_reports(o, p->absdir, &run);
    }
    tp_run_free(&run);
    cli_samples_lost("run"); /* the job's exit status stays the command's */
}

/* The job's exit status as this process's: the same code, or death by the same signal. */
static int exit_as(int status) {
    fflush(NULL);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        /* no core of this process: with a core_pattern without %p it would replace the
         * job's own core file (core(5)); the job's wait status had the core flag, ours not */
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
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

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = run_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    run_plan p;
    rc = run_prepare(&o, &p);
    if (rc >= 0) return rc;
    if (run_environment(&o, &p) != 0) {
        preload_cleanup();
        run_unlock(&p, p.lockfd);
        return 1;
    }
    run_signals_begin();
    int node_sampler = node_sampler_begin(&o, &p);
    int status = 0;
    time_t started;
    int started_ok = job_run(p.exe, o.cmd, &status, &started) == 0;
    /* the job is over: a signal now ends the report phase at once (reports are written
     * through temporary files, so none is left half-written) */
    run_signals_end();
    /* the report phase writes to standard output and error, which may be a pipe whose
     * reader is gone (`trainprof run ... | head`): a failed write, not SIGPIPE, so that the
     * exit status stays the job's (the job itself was started with the disposition as it
     * was) */
    signal(SIGPIPE, SIG_IGN);
    /* and the run directory may be on a file system, or under a file-size limit (ulimit -f),
     * that cannot take the reports: a failed write (EFBIG; the temporary file removed), not
     * SIGXFSZ, which ended this process with its own status and left the temporary file */
    signal(SIGXFSZ, SIG_IGN);
    if (!started_ok) {
        preload_cleanup();
        run_unlock(&p, p.lockfd);
        return 1;
    }
    preload_cleanup();
    run_reports(&o, &p, node_sampler, started);
    run_unlock(&p, p.lockfd);
    return exit_as(status);
}
