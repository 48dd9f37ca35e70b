/*
 * run_finish.h — what `trainprof run` does between the job's end and its report (cmd_run.c):
 * waits for the job's last writers, names the processes that could not create their rank
 * files, and runs the report's first stage (`trainprof summarize`) on the job's nodes through
 * the job's own launcher, so that the report that follows reads summaries.
 *
 * Called from cmd_run.c's main thread alone, after the job has ended and its signal handlers
 * are gone (run_signals_end). Each function prints its own lines on stderr and returns no
 * error the caller must act on: the report goes on with whatever is there.
 */
#ifndef TPROF_CLI_RUN_FINISH_H
#define TPROF_CLI_RUN_FINISH_H

#include <signal.h>
#include <time.h>

#include "common.h"

/* The signals that end `trainprof run` (SIGTERM, SIGINT, SIGHUP, SIGQUIT), caught while it
 * waits on something of its own (the --version probe, the first stage, the wait for the other
 * nodes), so that it can end that first and say so: run_catch_begin blocks them (the mask
 * before into *prev) and catches them (their actions before into old; one that is ignored
 * stays ignored: nohup), clearing what run_caught answers; a wait then sleeps with the mask
 * *prev (ppoll, sigtimedwait), so that none is missed between its looks. run_catch_end gives
 * the actions and the mask back. run_caught: the first of them received since
 * run_catch_begin, 0 for none. Main thread only. */
enum { RUN_CATCH_SIGS = 4 };
void run_catch_begin(sigset_t *prev, struct sigaction old[RUN_CATCH_SIGS]);
void run_catch_end(const sigset_t *prev, const struct sigaction old[RUN_CATCH_SIGS]);
int run_caught(void);

/* Waits (at most `ms`) for the processes that opened rank files in `dir` and are still alive
 * to finish them (a launcher such as mpirun may exit before its ranks on SIGTERM); this
 * process (the node sampler) is left out. One line when it waits, one when some are still
 * running at the end. */
void run_wait_for_writers(const char *dir, int ms);

/* The processes of this run that could not create their rank files: each left a symbolic link
 * <host>-<pid>.tprof-create-failed whose target is the reason (core/writer.h). Each one made
 * since `since` is said on stderr. Returns how many. */
int run_report_create_failures(const char *dir, time_t since);

/* Checks --summarize-with's value `how` (NULL: none given) before the job starts. 0 when it
 * can be used; -1 when it cannot (empty, over 4095 bytes or 48 words: a usage error); 1 when
 * its launcher is not found on PATH (a warning: the stage would fail, and the report would be
 * computed here). What is wrong in msg (n bytes) when not 0. */
int run_first_stage_check(const char *how, char *msg, size_t n);

/* --summarize-with's value `how` as its words tell (split as the stage splits them, blanks
 * around them allowed): 0 auto (or NULL: none given), 1 off, 2 a launcher command (or a value
 * run_first_stage_check refuses). */
int run_first_stage_kind(const char *how);

/* Keeps the injection variables (LD_PRELOAD, NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH,
 * NCCL_PROFILER_PLUGIN) as they are now, the user's, before the job's are set: the first
 * stage gets them back, without trainprof's libraries. Called once, before the job starts. */
void run_save_user_env(void);

/* The first stage of the report on the job's nodes, for the job `cmd` (CMD as typed and its
 * arguments, NULL-terminated; CMD resolved on PATH is `cmd_exe`) whose rank files are in
 * `absdir`. `how` is --summarize-with:
 *   "auto" (or NULL): a stage only where it spreads the work over more nodes than this one:
 *     - CMD Slurm's srun and this process in a Slurm allocation (SLURM_JOB_ID set) of N nodes
 *       (SLURM_JOB_NUM_NODES, else SLURM_NNODES): `srun --nodes=N --ntasks=N
 *       --ntasks-per-node=1`; none when N is 1 and every rank file is this host's (named
 *       <this host>-<pid>.tprof);
 *     - CMD Open MPI's mpirun (mpiexec, orterun, prterun) and a rank file of another host:
 *       `CMD <the job's node options> --map-by ppr:1:node`, the node options (--host, -H,
 *       --hostfile, --machinefile, --default-hostfile, one-dash spellings and NAME=VALUE forms
 *       included) and --allow-run-as-root copied from the words before the job's program, the
 *       scan ending at the first word that is not an mpirun option it knows;
 *     - CMD the Hydra process manager's mpiexec (MPICH's, Intel MPI's) and a rank file of
 *       another host: `CMD <the job's node and launch options> -ppn 1 -n H`, H the distinct
 *       hosts the rank files' names give, the options (-f, -hostfile, -machinefile, -hosts,
 *       -host, -launcher, -bootstrap, -launcher-exec, -bootstrap-exec, -iface, -rmk,
 *       -skip-launch-node, ...) copied as for Open MPI. mpirun and mpiexec are told apart by
 *       the name of the program their links lead to (mpiexec.hydra, *.mpich; orterun,
 *       prterun, *.openmpi), else by what `CMD --version` prints within 3 s (output not
 *       shown, killed after), else taken for Open MPI's;
 *     - else nothing (the report computes every rank's section on this machine's cores);
 *   "off": nothing;
 *   anything else: the words of a launcher command, split at blanks (no quoting; at most 48),
 *       e.g. "mpirun --map-by ppr:1:node --hostfile hosts".
 * The launcher runs `<this trainprof> summarize --warmup W --top T [--step-name S]
 * [--data-names D] DIR` with the report's own options `a` (so that the summaries are valid for
 * this report), in a process group of its own, its output in DIR/summarize.log (created for
 * it, replacing whatever had the name), the job's injection variables as the user had them
 * (run_save_user_env: trainprof's libraries left out, so that the summarize tasks record
 * nothing) and SIGPIPE at its default action, for at most `limit_s` seconds (then
 * SIGTERM to its group, SIGKILL 5 s later). The group ends with the stage: what the launcher
 * leaves in it is ended when it exits; SIGTERM, SIGINT, SIGHUP or SIGQUIT to this process
 * while it waits end the group as the limit does, then this process by that signal (no
 * report); so does this process's death, SIGKILL included (a supervisor process, a fork of
 * this one, holds the group). One line on stderr says what ran, how long, and how it ended.
 * Returns 1 when a stage ran and exited 0, 0 when none was asked for, -1 when it failed (the
 * report then reads the rank files for what has no valid summary: the same report, computed
 * here). */
int run_first_stage(const char *how, const char *cmd_exe, char *const *cmd,
                    const char *absdir, const report_args *a, int limit_s);

/* The first stage of the report when `trainprof run` runs on every node of the job (one of
 * several sharing `absdir`: run_nodes_auto, --nodes): `<this trainprof> summarize` with the
 * report's options `a` and `--host host`, on this node's rank files alone (named
 * <host>-<pid>.tprof), run as run_first_stage runs a launcher's (own process group, at most
 * limit_s, the same signals), its output in absdir/summarize-<host>.log. One line. Returns
 * as run_first_stage. */
int run_node_stage(const char *absdir, const char *host, const report_args *a, int limit_s);

/* How many nodes the job `cmd` (CMD resolved is cmd_exe) says it runs on when its launcher is
 * started once on each of them: torchrun (or `python [OPTIONS] -m torch.distributed.run`,
 * `.launch`) with `--nnodes N` or `--nnodes MIN:MAX` (MAX), among its options before the
 * script (torch/distributed/run.py: every option takes a value but --standalone, --no-python,
 * -m, --module, --run-path and --virtual-local-rank, in either spelling, _ or -; argparse's
 * abbreviations `--nn` to `--nnode` too), else in PET_NNODES, torchrun's default for it. 0
 * when not (one node, --standalone or PET_STANDALONE, another CMD, a value that is no
 * number). Reads the environment: not thread-safe against setenv. */
int run_nodes_auto(const char *cmd_exe, char *const *cmd);

/* This host's name as the rank files' names spell it (tprof__file_host). */
void run_host_name(char out[64]);

/* Whether absdir holds a rank file written on `host` (named <host>-<pid>.tprof). 1 or 0 (also
 * when the directory cannot be listed: the run's own open says why). */
int run_host_has_files(const char *absdir, const char *host);

/* The directory's lock file `path` held shared (flock LOCK_SH) by each node's run of a job run
 * on every node, so that they hold it together while a run of one node, which holds it
 * exclusively, is refused (and they while it does). Nothing is written in it; it is never
 * removed (another node's run may hold it). The descriptor (close-on-exec) to keep until the
 * run ends, -2 when a run of one node holds it, -1 on error (errno). */
int run_share_lock(const char *path);

/* Says in one line why this run cannot have the directory `dir` (absdir its real path; this
 * run is one of `nodes` when nodes > 1, on `host`): another live run holds its lock `lockpath`
 * (owner: what that run wrote in it, "PID HOST"; empty for the nodes' shared lock, which
 * holds nothing), or, with owner NULL, it holds rank files of another run (of this host, for
 * one of several nodes). A run of one node kept out by another host's run or files is told of
 * --nodes: a job run on every node whose node count was not seen refuses all but one node. */
void run_refused(const char *dir, const char *absdir, const char *lockpath, const char *owner,
                 int nodes, const char *host);

/* A node's mark in absdir that its run is done with the directory (its job's writers have
 * ended, its stage has run: .trainprof-run-<host>.done): made when `done`, else removed (as
 * a node's run starts, so that a mark of an earlier run is not taken for this one's). A mark
 * that cannot be made is said in one line. */
void run_node_done(const char *absdir, const char *host, int done);

/* As a node's run starts: one line when absdir holds another host's mark (run_node_done),
 * which no node of this job can have left yet: an earlier job's, whose rank files the report
 * will read with this job's. */
void run_node_stale_marks(const char *absdir, const char *host);

/* On the node that writes the report of a job run on every node, once `run` is loaded: one
 * line when processes of two hosts were told rank 0 (RANK=0), whose nodes each write the
 * report, one over the other's: two jobs in one directory, or a launcher misconfigured. */
void run_nodes_rank0_hosts(const tp_run *run);

/* The end of a run on every node (one of `nodes`, this one `host`): unless `how`
 * (--summarize-with) is "off", this node's first stage (run_node_stage, with the report's
 * options a, at most limit_s); then its mark (run_node_done). A node whose directory holds
 * no other host's rank file (one not shared between the nodes) reports its own at once. Else
 * the node whose rank files
 * include rank 0's as a launcher told it (RANK=0, not the rank a lone process is given; read
 * slim, from the summaries just written) then waits for the others: until absdir holds rank
 * files of at least `nodes` hosts and each of those hosts' runs has left its mark, or until
 * nothing new came (a host, a mark, a byte more in the rank files: a node still writing) for
 * 60 s plus twice this node's stage time (a node that never started, an
 * elastic job of fewer nodes, a node's run killed), or limit_s in all; it looks again after
 * 50 ms, then twice as long each time up to 1.6 s, and one line says how the wait ended. The
 * other nodes say in one line that rank 0's node writes the report. Returns 1 on the node
 * that is to write the report, else 0. */
int run_node_share(const char *how, const char *absdir, const char *host, const report_args *a,
                   int limit_s, int nodes);

#endif
