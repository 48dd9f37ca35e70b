/*
 * run_signals.h — how `trainprof run` passes the signals sent to it on to the job it runs
 * (cli/run_signals.c says how it tells a signal sent to it alone from one sent to the whole
 * process group, which the job gets directly and must not get twice).
 *
 * Used by cmd_run.c alone, from its main thread; the state is this process's (file-scope
 * statics: one job per process). The handlers installed only note the signal and write one
 * byte to a self-pipe (async-signal-safe); the work is done by run_signals_forward in the
 * main loop. No call allocates. Errors are not returned: without a self-pipe the loop wakes
 * on its timeout, without a watcher every signal from outside is forwarded.
 */
#ifndef TPROF_CLI_RUN_SIGNALS_H
#define TPROF_CLI_RUN_SIGNALS_H

#include <sys/types.h>

/* The watcher process and the reading end of its pipe; pid -1 and fd -1 without one. */
typedef struct run_watch {
    pid_t pid;
    int fd;
} run_watch;

/* From here until run_signals_end, the signals to forward (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
 * SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGPIPE) and SIGCHLD are taken by handlers
 * that wake the main loop (run_signals_wait) to pass them to the job with
 * run_signals_forward; those that arrive before a job runs are dropped. */
void run_signals_begin(void);
/* The dispositions as they were before run_signals_begin (called in the job before it
 * execs, so that it inherits them unchanged, and once the job is over). */
void run_signals_end(void);

/* Starts the watcher in this process's group: it holds no descriptor but its pipe, ends with
 * this process (PR_SET_PDEATHSIG) or when killed, and catches the signals to forward. Waits
 * at most 5 s for it to say it is ready; w->pid is -1 without one. */
void run_watch_start(run_watch *w);
/* Kills and reaps the watcher and closes its pipe (nothing without one). */
void run_watch_stop(run_watch *w);

/* Passes to `job` the signals received since the last call, except those the whole process
 * group got (from the terminal, or that the watcher got too) while the job is still in this
 * group. May wait up to 1 s for the watcher's report of a signal it is matching. */
void run_signals_forward(pid_t job, const run_watch *w);
/* Waits until a signal to forward or SIGCHLD arrives, or `ms` milliseconds have passed. */
void run_signals_wait(int ms);

#endif
