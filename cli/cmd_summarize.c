/*
 * cmd_summarize.c — `trainprof summarize DIR`: the first stage of a report, a summary file
 * beside each rank file (analysis/summary.h; docs/cli.md), computed on threads and, under a
 * launcher, by every task for its share of the rank files; `trainprof report` then reads the
 * summaries instead of the rank files again.
 *
 * The tasks are told apart by the launcher's environment alone, so that the command needs no
 * MPI library: file i (in the run's order, the same in every task) goes to task i % size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/summary.h"
#include "common.h"

enum {
    OPT_STEP_NAME = OPT_OWN,
    OPT_DATA_NAMES,
    OPT_WARMUP,
    OPT_TOP,
    OPT_THREADS,
    OPT_HOST,
    OPT_COMM_KEEP
};

static const cli_opt summarize_opts_table[] = {
    {OPT_THREADS, "--threads", NULL, CLI_VALUE, "N",
     "rank sections computed at once (1-64), default one per CPU\n"
     "this process may run on"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME", "as for report [TRAINPROF_STEP_NAME]"},
    {OPT_WARMUP, "--warmup", NULL, CLI_VALUE, "N", "as for report [TRAINPROF_WARMUP]"},
    {OPT_DATA_NAMES, "--data-names", NULL, CLI_VALUE, "A,B,...",
     "as for report [TRAINPROF_DATA_NAMES]"},
    {OPT_TOP, "--top", NULL, CLI_VALUE, "N", "as for report"},
    {OPT_HOST, "--host", NULL, CLI_VALUE, "NAME",
     "only the rank files written on host NAME (NAME-PID.tprof): one\n"
     "node's share, as `trainprof run` takes it on each node of a job\n"
     "it runs on every node"},
    CLI_GPU_RECORDS_OPT,
    {OPT_COMM_KEEP, "--comm-keep", NULL, CLI_VALUE, "N",
     "communication ops a rank file keeps for the merge, as\n"
     "TRAINPROF_COMM_KEEP (which a launcher may not pass on to other\n"
     "nodes; `trainprof run` gives its own to its first stage)"},
    CLI_HELP_OPT,
};

static void summarize_tail(FILE *f) {
    fputs("\n"
          "A summary is used by a report given the same options a section reads (--step-name,\n"
          "--warmup, --data-names, --top, --gpu-records, --comm-keep); one whose rank file, or\n"
          "options, changed since is recomputed, never trusted. Under a launcher each task\n"
          "summarises its share of the files (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE,\n"
          "SLURM_PROCID/NTASKS, or RANK/WORLD_SIZE, the first pair set):\n"
          "  mpirun -np 4 trainprof summarize DIR\n"
          "  srun --ntasks-per-node=1 trainprof summarize DIR\n",
          f);
}

static const cli_cmd summarize_cmd = {
    "summarize",
    "usage: trainprof summarize DIR|FILE... [options]\n"
    "\n"
    "Writes beside each rank file (host-pid.tprof) its summary (host-pid.tprof.sum): what\n"
    "`trainprof report` keeps of the file and computes of that rank, so that a report of\n"
    "the run reads the summaries and decodes no rank file. Files whose summary is valid are\n"
    "left as they are; a file that cannot be read gets none, and one line on stderr.\n"
    "\n"
    "options (environment twin in brackets):\n",
    summarize_opts_table,
    sizeof summarize_opts_table / sizeof *summarize_opts_table,
    summarize_tail,
    0,
    0,
};

/* This task's place among the launcher's tasks: the first of the launchers' variable pairs
 * (cli_task_vars, in their order) that is set and sensible (rank below size). Without any:
 * task 0 of 1. Returns the launcher's name. */
static const char *task_of(long *task, long *ntasks) {
    const char *const(*pairs)[3] = cli_task_vars;
    for (size_t i = 0; i < CLI_TASK_VARS; i++) {
        const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
        if (!r || !s || !*r || !*s) continue;
        char *e1, *e2;
        errno = 0;
        long rv = strtol(r, &e1, 10), sv = strtol(s, &e2, 10);
        if (*e1 || *e2 || errno || sv < 1 || rv < 0 || rv >= sv) {
            /* said, so that a task that does another's share (or all) is not silent */
            fprintf(stderr, "trainprof summarize: ignoring %s=%.24s %s=%.24s (not a task "
                            "number below the number of tasks)\n", pairs[i][0], r, pairs[i][1], s);
            continue;
        }
        *task = rv;
        *ntasks = sv;
        return pairs[i][2];
    }
    *task = 0;
    *ntasks = 1;
    return NULL;
}

/* Under a launcher, the tasks share the slim reads before the sections: file j of the run's
 * rank files (tp_run_rank_files: the same list in every task) is task j % ntasks's, which
 * writes its summary with its slim process (tp_summary_write_slim), then waits for the other
 * tasks' (tp_summary_slim_ready), so that its load (tp_run_load_slim) takes every slim process
 * from a summary instead of decoding every rank file of the run in every task. The wait ends
 * when every file's is there or can never be (this task's own that it failed; another's that
 * no task can summarise: tp_summary_slim_hopeless, looked at once), or when none has come for
 * `quiet` seconds (a task that is not running, or is slower: the load decodes what is
 * missing, as it would have without the share); quiet is 2 s plus three times this task's
 * own time per file. */
typedef struct share {
    char **paths;          /* the run's rank files, in the load's order */
    size_t n;
    unsigned char *wrote;  /* [n]: this task wrote file j's slim process */
    size_t mine, ready;    /* this task's files; files whose slim process was ready at the end */
    double write_s, wait_s;
} share;

static void share_slims(const char *const *ops, size_t nops, long task, long ntasks,
                        share *sh) {
    char err[512], why[512];
    memset(sh, 0, sizeof *sh);
    if (tp_run_rank_files(ops, nops, &sh->paths, &sh->n, err, sizeof err) != 0 || !sh->n ||
        !(sh->wrote = calloc(sh->n, 1)))
        return; /* the load says what is wrong */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t j = (size_t)task; j < sh->n; j += (size_t)ntasks) {
        sh->mine++;
        /* a failure is said once, by the sections' pass, which tries the file again */
        sh->wrote[j] = tp_summary_write_slim(sh->paths[j], why, sizeof why) == 0;
    }
    sh->write_s = cli_elapsed_s(&t0);
    double quiet = 2.0 + 3.0 * (sh->mine ? sh->write_s / (double)sh->mine : 0.0);
    unsigned char *ok = calloc(sh->n, 1);
    if (!ok) return;
    struct timespec tw, last;
    clock_gettime(CLOCK_MONOTONIC, &tw);
    last = tw;
    long pause_ms = 20;
    size_t never = 0; /* files whose summary can never come */
    for (int first = 1;; first = 0) {
        size_t before = sh->ready;
        for (size_t j = 0; j < sh->n; j++) {
            if (ok[j]) continue;
            if ((ok[j] = (unsigned char)tp_summary_slim_ready(sh->paths[j]))) {
                sh->ready++;
            } else if (first && ((size_t)j % (size_t)ntasks == (size_t)task ||
                                 tp_summary_slim_hopeless(sh->paths[j]))) {
                ok[j] = 2;
                never++;
            }
        }
        if (sh->ready + never == sh->n) break;
        if (sh->ready > before) {
            clock_gettime(CLOCK_MONOTONIC, &last);
            pause_ms = 20;
        } else if (cli_elapsed_s(&last) >= quiet) {
            break;
        }
        struct timespec ts = {0, pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (pause_ms < 500) pause_ms *= 2; /* fewer looks at a shared file system */
    }
    sh->wait_s = cli_elapsed_s(&tw);
    free(ok);
}

static void share_free(share *sh) {
    for (size_t j = 0; j < sh->n; j++) free(sh->paths[j]);
    free(sh->paths);
    free(sh->wrote);
}

/* Process i's place in the share's list (SIZE_MAX when it is not there: a file that came
 * after the list was made). The run's processes are in the list's order: the search goes on
 * from the last place found. */
static size_t share_index(const share *sh, const char *path, size_t *from) {
    for (size_t k = 0; k < sh->n; k++) {
        size_t j = (*from + k) % sh->n;
        if (!strcmp(sh->paths[j], path)) {
            *from = j + 1;
            return j;
        }
    }
    return SIZE_MAX;
}

/* The signals that end a task: a launcher's SIGTERM (mpirun's or srun's when one task fails,
 * or at trainprof run's limit for its first stage), the terminal's, a lost session's. Taken by
 * a thread of their own (end_signals), so that a task ended while it writes summaries leaves
 * no temporary file beside the rank files (tp_summary_abandon), then dies of the signal as it
 * would have. One the task was started with ignored (nohup) stays ignored. */
static const int end_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
static sigset_t g_end_set;

static void *end_signal_thread(void *arg) {
    (void)arg;
    int sig = 0;
    while (sigwait(&g_end_set, &sig) != 0) {
    }
    tp_summary_abandon();
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig); /* this thread's: the default action ends the process */
    _exit(128 + sig);
}

/* Blocks end_sigs in this thread (the section threads, created after, inherit the mask) and
 * starts the thread that takes them. Without that thread they are left as they were. */
static void end_signals(void) {
    sigemptyset(&g_end_set);
    for (size_t i = 0; i < sizeof end_sigs / sizeof *end_sigs; i++) {
        struct sigaction old;
        if (sigaction(end_sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaddset(&g_end_set, end_sigs[i]);
    }
    sigset_t prev;
    pthread_sigmask(SIG_BLOCK, &g_end_set, &prev);
    pthread_t t;
    pthread_attr_t at;
    int ok = pthread_attr_init(&at) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &at, end_signal_thread, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    if (!ok) pthread_sigmask(SIG_SETMASK, &prev, NULL);
}

/* --host: the rank files of the operands written on one host, in the run's order. */
typedef struct host_files {
    char **paths;
    size_t n;
} host_files;

static void host_files_free(host_files *hf) {
    for (size_t j = 0; j < hf->n; j++) free(hf->paths[j]);
    free(hf->paths);
}

/* 0 with the host's files in *hf; 1 (said) when there is none, -1 (said) when the operands
 * cannot be listed. */
static int host_files_of(const char *const *ops, size_t nops, const char *host,
                         host_files *hf) {
    char err[512];
    if (cli_host_rank_files(ops, nops, host, &hf->paths, &hf->n, err, sizeof err) != 0) {
        fprintf(stderr, "trainprof summarize: %s\n", err);
        return -1;
    }
    if (hf->n) return 0;
    fprintf(stderr, "trainprof summarize: no rank file of host %s (named %s-PID.tprof)\n", host,
            host);
    return 1;
}

int cmd_summarize(int argc, char **argv) {
    /* a summary that does not fit under a file-size limit (ulimit -f) is a failed write
     * (EFBIG: that file gets no summary, its temporary file removed), not SIGXFSZ, which
     * ended the task and left the temporary file beside the rank file */
    signal(SIGXFSZ, SIG_IGN);
    const char *ops[64], *v;
    report_args a;
    report_args_init(&a, "summarize");
    const char *dn = env_or("TRAINPROF_DATA_NAMES", NULL);
    int threads = 0, rest = 0;
    size_t nops = 0;
    const char *host = NULL;
    for (int i = 0; i < argc; i++) {
        int id = rest ? CLI_OPERAND : cli_next(&summarize_cmd, argc, argv, &i, &v);
        switch (id) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&summarize_cmd, stdout); return 0;
        case OPT_THREADS: threads = parse_int("summarize", "--threads", v, 1, 64); break;
        case OPT_STEP_NAME: a.step_name = v; break;
        case OPT_DATA_NAMES: dn = v; break;
        case OPT_WARMUP: a.warmup = parse_int("summarize", "--warmup", v, 0, 1 << 30); break;
        case OPT_TOP: a.top = parse_int("summarize", "--top", v, 1, 100000); break;
        case OPT_HOST: host = v; break;
        case OPT_GPU_RECORDS: report_opt_set(&a, id, v, "summarize"); break;
        case OPT_COMM_KEEP:
            if (cli_comm_keep("--comm-keep", v) != 0) return EXIT_USAGE;
            break;
        case CLI_OPERAND:
            if (nops == sizeof ops / sizeof *ops)
                die_usage("summarize", "unexpected argument '%s' (64 at most)", argv[i]);
            ops[nops++] = argv[i];
            break;
        default: die_usage("summarize", "unknown option '%s'", argv[i]);
        }
    }
    if (!nops) die_usage("summarize", "%s", "missing DIR (a trainprof run directory)");
    if (host && (!*host || strchr(host, '/')))
        die_usage("summarize", "--host '%s' is no host name", host);
    end_signals();
    host_files hf = {0};
    if (host) {
        int hrc = host_files_of(ops, nops, host, &hf);
        if (hrc != 0) return hrc < 0 ? 1 : 0;
    }
    const char *const *use = host ? (const char *const *)hf.paths : ops;
    size_t nuse = host ? hf.n : nops;
    long task, ntasks;
    const char *launcher = task_of(&task, &ntasks);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *dncopy = dn ? strdup(dn) : NULL;
    a.data_names = dncopy;
    share sh = {0};
    if (ntasks > 1) share_slims(use, nuse, task, ntasks, &sh);
    tp_run run;
    if (load_runs_slim(use, nuse, &run) != 0) {
        share_free(&sh);
        host_files_free(&hf);
        free(dncopy);
        return 1;
    }
    /* each file stays with the task that wrote its slim process (no two tasks write one
     * summary); alone, every file is this task's */
    unsigned char *want = calloc(run.nprocs ? run.nprocs : 1, 1);
    size_t *at = calloc(run.nprocs ? run.nprocs : 1, sizeof *at), from = 0;
    for (size_t i = 0; want && at && i < run.nprocs; i++) {
        at[i] = run.procs[i].slim ? share_index(&sh, run.procs[i].path, &from) : SIZE_MAX;
        want[i] = run.procs[i].slim &&
                  (ntasks == 1 || (at[i] == SIZE_MAX ? (long)(i % (size_t)ntasks) == task
                                                     : (long)(at[i] % (size_t)ntasks) == task));
    }
    if (!at) {
        free(want);
        want = NULL;
    }
    tp_report_opts o;
    report_opts(&a, &o);
    o.threads = threads;
    tp_summarize_stats st;
    int rc = want ? tp_report_summarize(&run, &o, want, &st) : TPROF_ERR_NO_MEMORY;
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof summarize: %s\n", tprof_strerror(rc));
    } else {
        /* the load's unreadable files are every task's: the first names them */
        for (size_t i = 0; task == 0 && i < run.nerrors; i++)
            fprintf(stderr, "trainprof summarize: unreadable: %s\n", run.errors[i]);
        for (size_t i = 0; i < st.nerrors; i++)
            fprintf(stderr, "trainprof summarize: %s\n", st.errors[i]);
        /* a file other than a rank's whose summary the share wrote was found up to date by
         * the sections' pass: it was written by this task all the same */
        for (size_t i = 0; sh.wrote && i < run.nprocs; i++)
            if (want[i] && at[i] != SIZE_MAX && sh.wrote[at[i]] &&
                run.procs[i].role != TP_ROLE_RANK && st.current) {
                st.current--;
                st.written++;
            }
        double s = cli_elapsed_s(&t0);
        char who[96] = "";
        if (launcher) snprintf(who, sizeof who, " task %ld of %ld (%s):", task, ntasks, launcher);
        char shared[160] = "";
        if (sh.n)
            snprintf(shared, sizeof shared, "; %zu of the run's %zu files read from their "
                     "summaries, after %.2f s waiting for the other tasks'", run.from_summaries,
                     sh.n, sh.wait_s);
        fprintf(stderr,
                "trainprof summarize:%s %zu of %zu files summarised (%zu written, %zu "
                "already up to date, %zu failed) in %.2f s%s\n",
                who, st.written + st.current, st.files, st.written, st.current, st.failed, s,
                shared);
        /* nothing could be done: files were given and none has a summary */
        if (st.files && st.failed == st.files) rc = TPROF_ERR_IO;
        tp_summarize_stats_free(&st);
    }
    free(want);
    free(at);
    share_free(&sh);
    host_files_free(&hf);
    tp_run_free(&run);
    free(dncopy);
    return cli_samples_lost("summarize") || rc != TPROF_OK ? 1 : 0;
}
