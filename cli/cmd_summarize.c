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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/summary.h"
#include "common.h"

enum { OPT_STEP_NAME = OPT_OWN, OPT_DATA_NAMES, OPT_WARMUP, OPT_TOP, OPT_THREADS };

static const cli_opt summarize_opts_table[] = {
    {OPT_THREADS, "--threads", NULL, CLI_VALUE, "N",
     "rank sections computed at once, default one per core"},
    {OPT_STEP_NAME, "--step-name", NULL, CLI_VALUE, "NAME", "as for report [TRAINPROF_STEP_NAME]"},
    {OPT_WARMUP, "--warmup", NULL, CLI_VALUE, "N", "as for report [TRAINPROF_WARMUP]"},
    {OPT_DATA_NAMES, "--data-names", NULL, CLI_VALUE, "A,B,...",
     "as for report [TRAINPROF_DATA_NAMES]"},
    {OPT_TOP, "--top", NULL, CLI_VALUE, "N", "as for report"},
    CLI_HELP_OPT,
};

static void summarize_tail(FILE *f) {
    fputs("\n"
          "A summary is used by a report given the same four options; one whose rank file, or\n"
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
 * that is set and sensible (rank below size). Open MPI's first (mpirun inside a Slurm
 * allocation leaves Slurm's too), then PMI (MPICH, Intel MPI, srun --mpi=pmi2), Slurm's own,
 * then torchrun's. Without any: task 0 of 1. Returns the launcher's name. */
static const char *task_of(long *task, long *ntasks) {
    static const char *const pairs[][3] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
        {"PMI_RANK", "PMI_SIZE", "PMI"},
        {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
        {"RANK", "WORLD_SIZE", "torchrun"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
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
        case CLI_OPERAND:
            if (nops == sizeof ops / sizeof *ops)
                die_usage("summarize", "unexpected argument '%s' (64 at most)", argv[i]);
            ops[nops++] = argv[i];
            break;
        default: die_usage("summarize", "unknown option '%s'", argv[i]);
        }
    }
    if (!nops) die_usage("summarize", "%s", "missing DIR (a trainprof run directory)");
    long task, ntasks;
    const char *launcher = task_of(&task, &ntasks);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *dncopy = dn ? strdup(dn) : NULL;
    a.data_names = dncopy;
    tp_run run;
    if (load_runs_slim(ops, nops, &run) != 0) {
        free(dncopy);
        return 1;
    }
    /* the files every task lists alike: the run's files in its order, ranks first (their
     * sections are the work; the other processes' summaries hold their slim process alone) */
    unsigned char *want = calloc(run.nprocs ? run.nprocs : 1, 1);
    size_t nth = 0;
    for (int ranks = 1; ranks >= 0; ranks--)
        for (size_t i = 0; want && i < run.nprocs; i++)
            if (run.procs[i].slim && (run.procs[i].role == TP_ROLE_RANK) == ranks)
                want[i] = (long)(nth++ % (size_t)ntasks) == task;
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
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        char who[96] = "";
        if (launcher) snprintf(who, sizeof who, " task %ld of %ld (%s):", task, ntasks, launcher);
        fprintf(stderr,
                "trainprof summarize:%s %zu of %zu files summarised (%zu written, %zu "
                "already up to date, %zu failed) in %.2f s\n",
                who, st.written + st.current, st.files, st.written, st.current, st.failed, s);
        /* nothing could be done: files were given and none has a summary */
        if (st.files && st.failed == st.files) rc = TPROF_ERR_IO;
        tp_summarize_stats_free(&st);
    }
    free(want);
    tp_run_free(&run);
    free(dncopy);
    return rc == TPROF_OK ? 0 : 1;
}
