/*
 * run_finish.c — `trainprof run` between the job's end and its report (run_finish.h): the
 * job's last writers, the processes that could not create their files, and the report's first
 * stage on the job's nodes through the job's launcher.
 *
 * The first stage is `trainprof summarize` (cmd_summarize.c), one task per node: each task
 * writes the summaries of its share of the rank files on that node's cores, so that the
 * report that follows on this node reads summaries (analysis/summary.h) instead of decoding
 * every rank file here. It is a cache: whatever the stage does, the report's figures are the
 * same, and a stage that fails only leaves the work to this node.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/comm.h"
#include "core/capture_ctl.h"
#include "format/reader.h"
#include "run_finish.h"

/* The processes that opened rank files in `dir` and are still alive, read from each file's
 * header; this process (the node sampler) left out, and so are the files named for another
 * host (a pid there says nothing of the processes here). */
static int writers_alive(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char host[64];
    tprof__file_host(host);
    int alive = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".tprof")) continue;
        if (cli_rank_file_host(e->d_name, n) && !cli_rank_file_of(e->d_name, host)) continue;
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

int run_report_create_failures(const char *dir, time_t since) {
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

void run_wait_for_writers(const char *dir, int ms) {
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

/* ------------------------------------------------------------------ the first stage */

enum { STAGE_WORDS = 48, STAGE_ARGV = STAGE_WORDS + 18, STAGE_BUF = 4096 };

/* `how`'s words into argv (pointing into buf, n bytes): how many (0 for none), or -1 with
 * what is wrong in msg. */
static int split_words(const char *how, char *buf, size_t n, char **argv, char *msg,
                       size_t mn) {
    if (snprintf(buf, n, "%s", how) >= (int)n) {
        snprintf(msg, mn, "--summarize-with is too long (%zu bytes at most)", n - 1);
        return -1;
    }
    int w = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
        if (w == STAGE_WORDS) {
            snprintf(msg, mn, "--summarize-with has more than %d words", STAGE_WORDS);
            return -1;
        }
        argv[w++] = t;
    }
    if (w == 0) snprintf(msg, mn, "--summarize-with is empty: auto, off, or a launcher command");
    return w ? w : -1;
}

int run_first_stage_kind(const char *how) {
    char buf[STAGE_BUF], *argv[STAGE_WORDS], msg[8];
    int w = how ? split_words(how, buf, sizeof buf, argv, msg, sizeof msg) : 0;
    if (w == 1 && strcmp(argv[0], "off") == 0) return 1;
    return how && (w != 1 || strcmp(argv[0], "auto") != 0) ? 2 : 0;
}

int run_first_stage_check(const char *how, char *msg, size_t n) {
    if (!how) return 0;
    char buf[STAGE_BUF], *argv[STAGE_WORDS];
    int w = split_words(how, buf, sizeof buf, argv, msg, n);
    if (w < 0) return -1;
    if (w == 1 && (strcmp(argv[0], "auto") == 0 || strcmp(argv[0], "off") == 0)) return 0;
    char full[PATH_MAX]; /* the stage is started with execvp, whose default PATH this is */
    if (cli_find_program(argv[0], "/bin:/usr/bin", full, sizeof full) == 0) return 0;
    snprintf(msg, n, "--summarize-with: %s is not a program found on PATH: the report's first "
                     "stage will fail (auto, off, or a launcher command)", argv[0]);
    return 1;
}

/* Open MPI's mpirun options (mpirun(1) of 4.x, whose one-dash spellings 5.x still takes)
 * that the scan of the job's own words knows: how many words follow each as its value, and
 * whether the stage copies it. Copied: those that choose the job's nodes (the stage must run
 * on the same ones: orte_hosts(7) for how they combine), and --allow-run-as-root, without
 * which mpirun refuses to start as root as the job's would have. A rankfile names nodes too,
 * but it also places each rank, which --map-by cannot be given with: not copied. The rest
 * are there so that the scan can go past them; its first word that is none of these (the
 * program, or an option this table lacks, whose value count is unknown) ends it. */
typedef struct mpi_opt {
    const char *name;
    unsigned char values; /* words of its value: 0, 1, or 2 (--mca KEY VALUE) */
    unsigned char copy;
} mpi_opt;
static const mpi_opt mpi_opts[] = {
    {"-H", 1, 1}, {"-host", 1, 1}, {"--host", 1, 1}, {"-hostfile", 1, 1}, {"--hostfile", 1, 1},
    {"-machinefile", 1, 1}, {"--machinefile", 1, 1}, {"-default-hostfile", 1, 1},
    {"--default-hostfile", 1, 1}, {"--allow-run-as-root", 0, 1},
    {"-np", 1, 0}, {"--np", 1, 0}, {"-n", 1, 0}, {"--n", 1, 0}, {"-c", 1, 0}, {"-N", 1, 0},
    {"-npernode", 1, 0}, {"--npernode", 1, 0}, {"-npersocket", 1, 0}, {"--npersocket", 1, 0},
    {"-map-by", 1, 0}, {"--map-by", 1, 0}, {"-rank-by", 1, 0}, {"--rank-by", 1, 0},
    {"-bind-to", 1, 0}, {"--bind-to", 1, 0}, {"-x", 1, 0}, {"-prefix", 1, 0}, {"--prefix", 1, 0},
    {"-wdir", 1, 0}, {"--wdir", 1, 0}, {"-wd", 1, 0}, {"--wd", 1, 0}, {"-path", 1, 0},
    {"--path", 1, 0}, {"-output-filename", 1, 0}, {"--output-filename", 1, 0},
    {"-timeout", 1, 0}, {"--timeout", 1, 0}, {"-cpu-set", 1, 0}, {"--cpu-set", 1, 0},
    {"-mca", 2, 0}, {"--mca", 2, 0}, {"-gmca", 2, 0}, {"--gmca", 2, 0}, {"--prtemca", 2, 0},
    {"--pmixmca", 2, 0}, {"-oversubscribe", 0, 0}, {"--oversubscribe", 0, 0},
    {"-nooversubscribe", 0, 0}, {"--nooversubscribe", 0, 0}, {"-pernode", 0, 0},
    {"--pernode", 0, 0}, {"-nolocal", 0, 0}, {"--nolocal", 0, 0}, {"-tag-output", 0, 0},
    {"--tag-output", 0, 0}, {"-timestamp-output", 0, 0}, {"--timestamp-output", 0, 0},
    {"-report-bindings", 0, 0}, {"--report-bindings", 0, 0}, {"-display-map", 0, 0},
    {"--display-map", 0, 0}, {"-display-allocation", 0, 0}, {"--display-allocation", 0, 0},
    {"-use-hwthread-cpus", 0, 0}, {"--use-hwthread-cpus", 0, 0}, {"-v", 0, 0},
    {"--verbose", 0, 0}, {"-q", 0, 0}, {"--quiet", 0, 0},
};

/* The entry of mpi_opts that `word` is, alone (*eq 0) or as NAME=VALUE of one with one value
 * (*eq 1: its value in the word, none follows); NULL for none. */
static const mpi_opt *mpi_opt_of(const char *word, int *eq) {
    for (size_t i = 0; i < sizeof mpi_opts / sizeof *mpi_opts; i++) {
        const mpi_opt *o = &mpi_opts[i];
        size_t l = strlen(o->name);
        if (strncmp(word, o->name, l) != 0) continue;
        *eq = word[l] == '=';
        if (word[l] == 0 || (*eq && o->values == 1)) return o;
    }
    return NULL;
}

/* How many words the launcher option cmd[i] takes after it, its entry in *opt; -1 for a
 * word that is none of the launcher's options: the scan of the job's words ends there. */
typedef int (*opt_words_fn)(char *const *cmd, int i, const mpi_opt **opt);

static int mpi_opt_words(char *const *cmd, int i, const mpi_opt **opt) {
    int eq;
    *opt = mpi_opt_of(cmd[i], &eq);
    return *opt ? (eq ? 0 : (*opt)->values) : -1;
}

/* CMD and the job's options before its program that the launcher's table (of) says to copy,
 * each with its values, into argv, leaving room for `tail` words more; the words point into
 * cmd. How many, or 0 (with a line) when they do not fit. */
static int node_words(char *const *cmd, opt_words_fn of, const char *launcher, int tail,
                      char **argv) {
    int w = 0;
    argv[w++] = cmd[0];
    for (int i = 1; cmd[i] && cmd[i][0] == '-'; i++) {
        const mpi_opt *o;
        int v = of(cmd, i, &o);
        if (v < 0) break;
        if (o->copy && w + 1 + v > STAGE_WORDS - tail) {
            fprintf(stderr, "trainprof run: no first stage: the job's %s node options take "
                            "more than %d words (--summarize-with can give the launcher)\n",
                    launcher, STAGE_WORDS - tail - 1);
            return 0;
        }
        for (int k = 0; o->copy && k <= v && cmd[i + k]; k++) argv[w++] = cmd[i + k];
        for (int k = 0; k < v && cmd[i + 1]; k++) i++;
    }
    return w;
}

/* auto's stage for the job `cmd` (CMD as typed and its words; NULL-terminated) run by Open
 * MPI's mpirun: `CMD <its node options> --map-by ppr:1:node` into argv, one task on each node
 * the job's options (or the allocation mpirun reads, as it did for the job) make available,
 * without -np (mpirun then starts as many as the pattern gives). CMD as the job typed it, so
 * that mpirun takes its --prefix from its path as it did for the job. Only the words before
 * the job's program are scanned (mpi_opts): a program's own arguments are never copied. The
 * words point into cmd. How many, or 0 (with a line) when they do not fit. */
static int mpirun_words(char *const *cmd, char **argv) {
    int w = node_words(cmd, mpi_opt_words, "mpirun", 2, argv); /* room for --map-by's two */
    if (!w) return 0;
    argv[w++] = "--map-by";
    argv[w++] = "ppr:1:node";
    return w;
}

/* The options of the Hydra process manager's mpiexec (MPICH's, and Intel MPI's
 * mpiexec.hydra and mpirun; MPICH's Hydra documentation and `mpiexec -h`, Intel MPI's
 * Developer Reference) that the scan of the job's words knows, as mpi_opts for Open MPI.
 * Hydra takes an option with any number of leading dashes, in any case, and NAME=VALUE for
 * its first value. Copied: those that choose the job's nodes (a host file, a host list) or
 * let Hydra reach them at all (the launcher, its executable and arguments, the network
 * interface, the resource manager), and -skip-launch-node (the job's nodes left this one out:
 * the stage must too). -genv and -env take NAME VALUE, or one word NAME=VALUE (HYDRA_ENV:
 * the count read from the word). Not copied: a rank map (it places every rank), the ranks'
 * environment and placement (-genv, -ppn, -bind-to, ...: the stage sets its own -ppn). */
enum { HYDRA_ENV = 9 };
static const mpi_opt hydra_opts[] = {
    {"f", 1, 1}, {"hostfile", 1, 1}, {"machinefile", 1, 1}, {"machine", 1, 1},
    {"machines", 1, 1}, {"machinelist", 1, 1}, {"host", 1, 1}, {"hosts", 1, 1},
    {"hostlist", 1, 1}, {"launcher", 1, 1}, {"bootstrap", 1, 1}, {"launcher-exec", 1, 1},
    {"bootstrap-exec", 1, 1}, {"bootstrap-exec-args", 1, 1}, {"iface", 1, 1}, {"rmk", 1, 1},
    {"skip-launch-node", 0, 1},
    {"genv", HYDRA_ENV, 0}, {"env", HYDRA_ENV, 0}, {"genvlist", 1, 0}, {"envlist", 1, 0},
    {"genvnone", 0, 0}, {"genvall", 0, 0}, {"envnone", 0, 0}, {"envall", 0, 0}, {"n", 1, 0},
    {"np", 1, 0}, {"ppn", 1, 0}, {"perhost", 1, 0}, {"grr", 1, 0}, {"rr", 0, 0},
    {"rankmap", 1, 0}, {"wdir", 1, 0}, {"configfile", 1, 0}, {"profile", 0, 0},
    {"output-from", 1, 0}, {"prepend-rank", 0, 0}, {"l", 0, 0}, {"prepend-pattern", 1, 0},
    {"outfile-pattern", 1, 0}, {"errfile-pattern", 1, 0}, {"outfile", 1, 0},
    {"errfile", 1, 0}, {"enable-x", 0, 0}, {"disable-x", 0, 0}, {"topolib", 1, 0},
    {"binding", 1, 0}, {"bind-to", 1, 0}, {"map-by", 1, 0}, {"membind", 1, 0},
    {"demux", 1, 0}, {"debug", 0, 0}, {"v", 0, 0}, {"verbose", 0, 0},
    {"disable-auto-cleanup", 0, 0}, {"enable-auto-cleanup", 0, 0},
    {"disable-hostname-propagation", 0, 0}, {"enable-hostname-propagation", 0, 0},
    {"g", 1, 0}, {"gpus-per-proc", 1, 0}, {"gpu-subdevs-per-proc", 1, 0},
    {"hybrid-hosts", 0, 0}, {"localhost", 1, 0}, {"nameserver", 1, 0}, {"order-nodes", 1, 0},
    {"pmi-port", 0, 0}, {"print-all-exitcodes", 0, 0}, {"usize", 1, 0},
    {"print-rank-map", 0, 0}, {"ordered-output", 0, 0}, {"path", 1, 0}, {"tune", 1, 0},
};

/* How many words the Hydra option cmd[i] takes after it, its entry in *opt; -1 (*opt NULL)
 * for a word that is none of hydra_opts: the scan ends there. */
static int hydra_opt_of(char *const *cmd, int i, const mpi_opt **opt) {
    const char *name = cmd[i];
    while (*name == '-') name++;
    size_t l = strcspn(name, "=");
    int eq = name[l] == '=';
    *opt = NULL;
    for (size_t k = 0; k < sizeof hydra_opts / sizeof *hydra_opts; k++) {
        const mpi_opt *o = &hydra_opts[k];
        if (strlen(o->name) != l || strncasecmp(name, o->name, l) != 0) continue;
        /* Hydra would read what follows its '=' as the next word: not followed here */
        if (eq && o->values == 0) return -1;
        *opt = o;
        if (o->values != HYDRA_ENV) return o->values - eq;
        /* NAME=VALUE as one word, or NAME then VALUE; the first is in this word after '=' */
        const char *first = eq ? name + l + 1 : cmd[i + 1];
        if (!first) return eq ? 0 : 1;
        return (strchr(first, '=') ? 1 : 2) - eq;
    }
    return -1;
}

/* auto's stage for the job `cmd` (as mpirun_words) run by Hydra's mpiexec, on files of
 * `hosts` hosts: `CMD <its node and launch options> -ppn 1 -n H` into argv, H (written into
 * buf, n bytes) the hosts, so that Hydra starts one task on each of the first H nodes of the
 * job's host list or allocation, which it fills in order as it did for the job. Only the
 * words before the job's program are scanned (hydra_opts). How many, or 0 (with a line). */
static int hydra_words(char *const *cmd, int hosts, char *buf, size_t n, char **argv) {
    int w = node_words(cmd, hydra_opt_of, "mpiexec", 4, argv); /* room for -ppn 1 -n H */
    if (!w) return 0;
    int k = snprintf(buf, n, "%d", hosts);
    if (k < 0 || (size_t)k >= n) return 0;
    argv[w++] = "-ppn";
    argv[w++] = "1";
    argv[w++] = "-n";
    argv[w++] = buf;
    return w;
}

/* Which MPI's launcher CMD (cmd_exe, found on PATH) is. */
enum { MPI_NONE, MPI_OPEN, MPI_HYDRA };

/* The signals run_catch_begin catches (run_finish.h): while `trainprof run` has started a
 * process group of its own (the --version probe, the stage), which none of them reaches, that
 * group is ended first, then the signal ends this process as it would have; the wait for the
 * other nodes (run_nodes.c) says it stopped. */
static const int stage_sigs[RUN_CATCH_SIGS] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
enum { N_STAGE_SIGS = RUN_CATCH_SIGS };
static volatile sig_atomic_t g_stage_sig; /* the first one received, 0 before */

static void on_stage_signal(int sig) {
    if (!g_stage_sig) g_stage_sig = sig;
}

void run_catch_begin(sigset_t *prev, struct sigaction old[RUN_CATCH_SIGS]) {
    sigset_t block;
    sigemptyset(&block);
    for (int k = 0; k < N_STAGE_SIGS; k++) sigaddset(&block, stage_sigs[k]);
    sigprocmask(SIG_BLOCK, &block, prev);
    g_stage_sig = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stage_signal;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_STAGE_SIGS; k++) {
        sigaction(stage_sigs[k], NULL, &old[k]);
        if (old[k].sa_handler != SIG_IGN) sigaction(stage_sigs[k], &sa, NULL);
    }
}

void run_catch_end(const sigset_t *prev, const struct sigaction old[RUN_CATCH_SIGS]) {
    for (int k = 0; k < N_STAGE_SIGS; k++) sigaction(stage_sigs[k], &old[k], NULL);
    sigprocmask(SIG_SETMASK, prev, NULL);
}

int run_caught(void) { return g_stage_sig; }

static void clean_environment(void);

/* In a child the stage or the probe starts: no input (the job's terminal is not theirs), and
 * its output and errors to fd. */
static void child_stdio(int fd) {
    int in = open("/dev/null", O_RDONLY);
    if (in > 0) {
        dup2(in, 0);
        close(in);
    }
    dup2(fd, 1);
    dup2(fd, 2);
}

/* What `exe --version` says it is: Hydra ("HYDRA build details", MPICH's; "Intel(R) MPI
 * Library", Intel MPI's), Open MPI ("mpirun (Open MPI) 4.1.4"), else MPI_NONE. Its output is
 * read, never shown, for at most PROBE_MS: then it is killed, its process group with it (a
 * script's children), so that a launcher that waits for something never holds the report.
 * It runs as the stage would (clean_environment: trainprof's injection left out). */
enum { PROBE_MS = 3000 };
static int probe_version(const char *exe) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) return MPI_NONE;
    /* the probe's group is reached by none of the signals that end this process (Ctrl-C
     * included), and its PR_SET_PDEATHSIG ends the probe alone: left to their default
     * actions, they ended this process and left the probe's children (a script's) running.
     * Caught here, they end the probe's group first (g_stage_sig: run_first_stage then
     * ends this process by it). Blocked but while the wait below polls (ppoll), so that one
     * that comes before it is not missed. */
    sigset_t prev;
    struct sigaction old[N_STAGE_SIGS];
    run_catch_begin(&prev, old);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        run_catch_end(&prev, old);
        setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent) _exit(127);
        child_stdio(fd[1]);
        signal(SIGPIPE, SIG_DFL);
        clean_environment();
        execl(exe, exe, "--version", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char out[8192];
    size_t got = 0;
    if (pid > 0) {
        setpgid(pid, pid); /* as the child does: whichever runs first */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!g_stage_sig) {
            int left = PROBE_MS - (int)(cli_elapsed_s(&t0) * 1000);
            struct pollfd p = {fd[0], POLLIN, 0};
            struct timespec ts = {left / 1000, (long)(left % 1000) * 1000000L};
            int r = left > 0 ? ppoll(&p, 1, &ts, &prev) : 0;
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            ssize_t k = read(fd[0], out + got, sizeof out - got);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0 || (got += (size_t)k) == sizeof out) break;
        }
        kill(-pid, SIGKILL); /* it has ended, or it is taking too long: either way, done */
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    close(fd[0]);
    run_catch_end(&prev, old);
    if (g_stage_sig) return MPI_NONE;
    if (memmem(out, got, "HYDRA build details", 19) || memmem(out, got, "Intel(R) MPI Library", 20))
        return MPI_HYDRA;
    return memmem(out, got, "(Open MPI)", 10) ? MPI_OPEN : MPI_NONE;
}

/* Whether `s` ends with `suffix`. */
static int ends_with(const char *s, const char *suffix) {
    size_t l = strlen(s), k = strlen(suffix);
    return l >= k && strcmp(s + l - k, suffix) == 0;
}

/* Which MPI's launcher CMD is, found on PATH as cmd_exe. mpirun and mpiexec are the names
 * both Open MPI and Hydra install, which take different options, so the name alone cannot
 * tell. First the names that can: cmd_exe's and, its symbolic links followed, the program's
 * own (MPICH installs mpiexec and mpirun as links to mpiexec.hydra; Debian's alternatives
 * lead mpirun to mpiexec.hydra or orterun, through mpirun.mpich or mpirun.openmpi); then,
 * for a program named mpirun or mpiexec (Open MPI 5's mpirun, Intel MPI's mpirun script),
 * what it says it is (probe_version: a launch more, only when a stage is to run); one that
 * says neither is taken for Open MPI's, as the name alone was before. */
static int mpi_launcher(const char *cmd_exe) {
    char real[PATH_MAX];
    const char *names[2] = {cmd_exe, realpath(cmd_exe, real) ? real : cmd_exe};
    int named = 0;
    for (int i = 0; i < 2; i++) {
        const char *b = strrchr(names[i], '/');
        b = b ? b + 1 : names[i];
        if (strcmp(b, "mpiexec.hydra") == 0 || ends_with(b, ".mpich")) return MPI_HYDRA;
        if (strcmp(b, "orterun") == 0 || strcmp(b, "prterun") == 0 || ends_with(b, ".openmpi"))
            return MPI_OPEN;
        named = named || strcmp(b, "mpirun") == 0 || strcmp(b, "mpiexec") == 0;
    }
    if (!named) return MPI_NONE;
    int said = probe_version(cmd_exe);
    return said == MPI_NONE ? MPI_OPEN : said;
}

/* What the names of `dir`'s rank files (*.tprof) tell: whether there is one (without one
 * there is nothing to summarise), whether every one was written on this host, and on how many
 * hosts they were written. A writer names its file <host>-<pid>.tprof or
 * <host>-<pid>.<k>.tprof (core/writer.c), the host as tprof__file_host spells it; a .tprof
 * file named otherwise counts as another host's, its name less ".tprof" taken for that host.
 * A directory that cannot be read has none, all of them here. */
typedef struct rank_names {
    int any, all_here;
    int hosts; /* distinct hosts named: at least 1 when any */
} rank_names;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry is read (the hosts are counted); the hosts' names are held until the end, then
 * sorted, the same ones counted once. Out of memory, the hosts already held are counted: a
 * smaller count gives the stage fewer tasks, which share the files all the same. */
static rank_names scan_rank_names(const char *dir) {
    rank_names r = {0, 1, 0};
    DIR *d = opendir(dir);
    if (!d) return r;
    char host[64];
    tprof__file_host(host);
    size_t hl = strlen(host), nh = 0, cap = 0;
    char **hosts = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 6 || strcmp(e->d_name + n - 6, ".tprof") != 0) continue;
        r.any = 1;
        size_t l = cli_rank_file_host(e->d_name, n);
        r.all_here = r.all_here && l == hl && memcmp(e->d_name, host, hl) == 0;
        if (nh == cap) {
            size_t c = cap ? 2 * cap : 64;
            char **g = realloc(hosts, c * sizeof *g);
            if (!g) continue;
            hosts = g;
            cap = c;
        }
        if ((hosts[nh] = strndup(e->d_name, l ? l : n - 6)) != NULL) nh++;
    }
    closedir(d);
    if (nh) qsort(hosts, nh, sizeof *hosts, cmp_str);
    for (size_t i = 0; i < nh; i++) r.hosts += i == 0 || strcmp(hosts[i - 1], hosts[i]) != 0;
    for (size_t i = 0; i < nh; i++) free(hosts[i]);
    free(hosts);
    if (r.any && r.hosts == 0) r.hosts = 1;
    return r;
}

/* The stage's launcher words into argv (pointing into buf, n bytes, or into cmd), per
 * run_first_stage's `how`, for the job `cmd` whose CMD resolved is cmd_exe, `names` telling
 * where its rank files were written. Returns how many, 0 for none, -1 (with a line) for a
 * value that cannot be used. */
static int launcher_words(const char *how, const char *cmd_exe, char *const *cmd,
                          const rank_names *names, char *buf, size_t n, char **argv) {
    if (how) {
        char msg[128];
        int w = split_words(how, buf, n, argv, msg, sizeof msg);
        if (w < 0) {
            fprintf(stderr, "trainprof run: %s; no first stage\n", msg);
            return -1;
        }
        if (w == 1 && strcmp(argv[0], "off") == 0) return 0;
        if (w > 1 || strcmp(argv[0], "auto") != 0) return w;
    }
    const char *base = strrchr(cmd_exe, '/');
    base = base ? base + 1 : cmd_exe;
    int here = names->all_here;
    if (strcmp(base, "srun") != 0) {
        /* the stage pays for itself by spreading the files over more nodes' cores: with an
         * MPI launcher, whose nodes are not known here, only when they were written on more
         * than this one (told before mpi_launcher, which may start CMD to ask) */
        int kind = here ? MPI_NONE : mpi_launcher(cmd_exe);
        if (kind == MPI_OPEN) return mpirun_words(cmd, argv);
        return kind == MPI_HYDRA ? hydra_words(cmd, names->hosts, buf, n, argv) : 0;
    }
    const char *job = getenv("SLURM_JOB_ID"), *nn = getenv("SLURM_JOB_NUM_NODES");
    if (!nn || !*nn) nn = getenv("SLURM_NNODES");
    if (!job || !*job || !nn) return 0;
    char *end;
    long nodes = strtol(nn, &end, 10);
    if (*end || nodes < 1 || nodes > 1000000) return 0; /* not an allocation we can read */
    /* one node that is this one: the same cores as the report's, and a launch more */
    if (nodes == 1 && here) return 0;
    /* CMD's path as it is, blanks included: never split */
    argv[0] = (char *)cmd_exe;
    int k = snprintf(buf, n, "--nodes=%ld%c--ntasks=%ld%c--ntasks-per-node=1", nodes, 0, nodes,
                     0);
    if (k < 0 || (size_t)k >= n) return 0;
    for (int i = 1; i < 4; i++) {
        argv[i] = buf;
        buf += strlen(buf) + 1;
    }
    return 4;
}

/* The injection variables as the user had them before the job's were set (run_save_user_env),
 * for the stage: the user's own preloads (a site's network or file-system shim a launcher may
 * need) are the stage's too, trainprof's are not. */
static const char *const inj_names[] = {"LD_PRELOAD", "NVTX_INJECTION64_PATH",
                                        "CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN"};
enum { N_INJ = sizeof inj_names / sizeof *inj_names };
static char *g_user_inj[N_INJ];

void run_save_user_env(void) {
    for (size_t i = 0; i < N_INJ; i++) {
        const char *v = getenv(inj_names[i]);
        free(g_user_inj[i]);
        g_user_inj[i] = v && *v ? strdup(v) : NULL; /* out of memory: as if unset */
    }
}

/* Whether the path p (n bytes) names a trainprof library (libtrainprof.so, libtrainprof_mpi.so,
 * another build's): the summarize tasks would record themselves into the run. */
static int is_trainprof_lib(const char *p, size_t n) {
    size_t b = n;
    while (b > 0 && p[b - 1] != '/') b--;
    return n - b >= 12 && memcmp(p + b, "libtrainprof", 12) == 0;
}

/* In the stage's child: the injection variables back to the user's, without trainprof's
 * libraries (LD_PRELOAD's entries split as ld.so splits them, at colons and spaces). */
static void restore_user_injection(void) {
    for (size_t i = 0; i < N_INJ; i++) {
        unsetenv(inj_names[i]);
        const char *v = g_user_inj[i];
        if (!v) continue;
        if (i > 0) {
            if (!is_trainprof_lib(v, strlen(v))) setenv(inj_names[i], v, 1);
            continue;
        }
        char *kept = malloc(strlen(v) + 1);
        if (!kept) continue;
        size_t k = 0;
        for (const char *q = v; *q;) {
            size_t l = strcspn(q, ": "); /* ld.so's separators: not tabs */
            if (l && !is_trainprof_lib(q, l)) {
                if (k) kept[k++] = ':';
                memcpy(kept + k, q, l);
                k += l;
            }
            q += l;
            if (*q) q++;
        }
        kept[k] = 0;
        if (k) setenv(inj_names[i], kept, 1);
        free(kept);
    }
}

/* The job's variables that must not reach the summarize tasks: the injection (they would
 * record themselves into the run: the user's own are given back), the run's identity, and the
 * report options' twins (the options are passed explicitly, the report's own). In the stage's
 * child alone. */
static void clean_environment(void) {
    static const char *const names[] = {
        "TRAINPROF_DIR",       "TRAINPROF_RUN_ID",     "TRAINPROF_NVML_SAMPLER",
        "TRAINPROF_METRICS_PORT", "TRAINPROF_PYTHON",  "TRAINPROF_STEP_NAME",
        "TRAINPROF_WARMUP",    "TRAINPROF_DATA_NAMES", "TRAINPROF_CUPTI_YIELDED",
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unsetenv(names[i]);
    restore_user_injection();
    /* --python put its sitecustomize's directory first on PYTHONPATH (cmd_run.c): a Python
     * launcher (torchrun) would import it. The user's own path is what follows it. */
    static const char mark[] = "/trainprof/_autostart";
    const size_t ml = sizeof mark - 1;
    const char *pp = getenv("PYTHONPATH");
    if (!pp) return;
    size_t l = strcspn(pp, ":");
    if (l < ml || memcmp(pp + l - ml, mark, ml) != 0) return;
    char *rest = pp[l] ? strdup(pp + l + 1) : NULL; /* setenv may reuse the string */
    if (rest) setenv("PYTHONPATH", rest, 1);
    else unsetenv("PYTHONPATH");
    free(rest);
}

/* The stage's processes: this one; the supervisor, a fork of it that does not exec, in this
 * process's group; and the launcher, the leader of a group of its own, so that its group can
 * be stopped whole. The supervisor holds the limit and ends the launcher's group: at the
 * limit, on this process's request, and when this process dies however it dies (its
 * PR_SET_PDEATHSIG: SIGKILL included, which this process cannot act on), since the
 * launcher's group is reached by none of the signals sent to this process or its group
 * (Ctrl-C, a scheduler's), and a launcher that does not exec its command would leave that
 * command writing into the run directory after this process is gone.
 *
 * The signals that end `trainprof run` (run_signals_end gave them back their dispositions)
 * are caught here while the stage runs (stage_sigs, above probe_version, which catches them
 * too): the group is ended first, then the signal ends this process as it would have. */

/* In the supervisor: ends what the launcher `pgid` left in its group once it has been waited
 * for (a daemon it started, a task it did not wait for), which would otherwise outlive the
 * stage, writing into the run directory and holding its log open: SIGTERM, then SIGKILL to
 * those still there a second later. The group's id is not reused while a member remains;
 * the supervisor is their subreaper, so that one that has ended leaves the group at once. */
static void end_stage_group(pid_t pgid) {
    if (kill(-pgid, 0) != 0) return;
    kill(-pgid, SIGTERM);
    kill(-pgid, SIGCONT); /* a member stopped by job control takes SIGTERM only once resumed */
    struct timespec t0, tick = {0, 20000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int killed = 0;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) { /* the supervisor's orphans: no zombies */
        }
        if (kill(-pgid, 0) != 0 || cli_elapsed_s(&t0) >= 2.0) break;
        if (!killed && cli_elapsed_s(&t0) >= 1.0) killed = kill(-pgid, SIGKILL) == 0;
        nanosleep(&tick, NULL);
    }
}

enum { STAGE_ENDED, STAGE_LIMIT, STAGE_SIGNAL };
typedef struct stage_result {
    int how;    /* STAGE_* */
    int status; /* the launcher's wait status when it ended by itself, else -1 */
} stage_result;

/* In the supervisor, on SIGTSTP (Ctrl-Z: the terminal's foreground group, which holds
 * trainprof run and the supervisor but not the launcher's group): the launcher's group is
 * stopped with them until SIGCONT to this group (`fg`, `bg`), or one of `stop` (blocked, as
 * SIGCONT is: both wait pending, so that one sent before this wait is not lost). The
 * supervisor does not stop itself: a SIGCONT that came between its SIGTSTP and its own stop
 * would have left it stopped for good, the launcher's group with it, and a death signal of
 * trainprof run (SIGKILL while stopped) would never have been taken. The time stopped does
 * not count against the limit: t0 moves on by it. Returns the one of `stop` that came, else 0.
 */
static int stop_with_group(pid_t pgid, struct timespec *t0, const sigset_t *stop) {
    struct timespec a, b;
    sigset_t resume = *stop;
    sigaddset(&resume, SIGCONT);
    clock_gettime(CLOCK_MONOTONIC, &a);
    kill(-pgid, SIGSTOP);
    int sig;
    while ((sig = sigwaitinfo(&resume, NULL)) < 0 && errno == EINTR) {
    }
    kill(-pgid, SIGCONT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    t0->tv_sec += b.tv_sec - a.tv_sec;
    t0->tv_nsec += b.tv_nsec - a.tv_nsec;
    while (t0->tv_nsec >= 1000000000L) t0->tv_sec++, t0->tv_nsec -= 1000000000L;
    while (t0->tv_nsec < 0) t0->tv_sec--, t0->tv_nsec += 1000000000L;
    return sig == SIGCONT || sig < 0 ? 0 : sig;
}

/* In the supervisor: waits for the launcher `pid` at most limit_s, or until one of `stop`
 * (blocked here) arrives: this process's parent's request or death, or a signal to their
 * group. Then SIGTERM to the launcher's group, SIGKILL 5 s later (to the launcher too,
 * should it have left its group); then what it left in its group is ended. SIGTSTP and
 * SIGCONT, blocked here too, stop and resume the launcher's group with the supervisor. */
static stage_result supervise(pid_t pid, int limit_s, const sigset_t *stop) {
    struct timespec t0, tick = {0, 20000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stage_result r = {STAGE_ENDED, -1};
    double termed = -1; /* when SIGTERM was sent, in s */
    sigset_t waited = *stop;
    sigaddset(&waited, SIGTSTP);
    sigaddset(&waited, SIGCONT);
    for (;;) {
        pid_t w = waitpid(pid, &r.status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            r.status = -1;
            break;
        }
        int sig = sigtimedwait(&waited, NULL, &tick); /* the tick's sleep */
        if (sig == SIGTSTP) sig = stop_with_group(pid, &t0, stop);
        if (sig == SIGCONT) kill(-pid, SIGCONT); /* resumed by another's SIGSTOP */
        if (sig == SIGCONT) sig = 0;
        double s = cli_elapsed_s(&t0);
        if (termed < 0 && (s >= limit_s || sig > 0)) {
            r.how = sig > 0 ? STAGE_SIGNAL : STAGE_LIMIT;
            kill(-pid, SIGTERM);
            kill(-pid, SIGCONT);
            termed = s;
        } else if (termed >= 0 && s >= termed + 5.0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
            }
            break;
        }
    }
    end_stage_group(pid);
    if (r.how != STAGE_ENDED) r.status = -1;
    return r;
}

/* In the supervisor (its output already to the log, stage_sigs blocked, `prev` the mask to
 * give the launcher): starts the launcher `argv`, supervises it and writes the result to
 * `wfd`. Never returns. */
static void supervisor(char **argv, int limit_s, const sigset_t *stop, const sigset_t *prev,
                       int wfd) {
    /* what the launcher leaves behind becomes the supervisor's child (end_stage_group) */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t jobctl; /* taken by supervise's sigtimedwait; the launcher gets `prev` */
    sigemptyset(&jobctl);
    sigaddset(&jobctl, SIGTSTP);
    sigaddset(&jobctl, SIGCONT);
    sigprocmask(SIG_BLOCK, &jobctl, NULL);
    pid_t me = getpid(), pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != me) _exit(128 + SIGTERM);
        sigprocmask(SIG_SETMASK, prev, NULL);
        execvp(argv[0], argv);
        fprintf(stderr, "trainprof run: cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    stage_result r = {STAGE_ENDED, -1};
    if (pid > 0) {
        setpgid(pid, pid); /* as the launcher does: whichever runs first */
        r = supervise(pid, limit_s, stop);
    } else {
        fprintf(stderr, "trainprof run: no first stage: fork: %s\n", strerror(errno));
    }
    ssize_t k = write(wfd, &r, sizeof r);
    _exit(k == (ssize_t)sizeof r ? 0 : 1);
}

/* Runs the stage: the launcher `argv`, its output to `fd`, through the supervisor, at most
 * limit_s; stage_sigs caught in this process meanwhile (their actions as they were after).
 * `alone`: argv is this program's summarize with no launcher (a node's own stage), which then
 * must not see the launcher variables this process was started with: `trainprof run` under
 * `srun --ntasks-per-node=1` has SLURM_PROCID and SLURM_NTASKS, from which summarize would take
 * itself for one task of several and leave most of its node's files to tasks that never come.
 * Its result; how = STAGE_SIGNAL when one of them arrived (in g_stage_sig). */
static stage_result stage_run(char **argv, int fd, int limit_s, int alone) {
    stage_result r = {STAGE_ENDED, -1};
    sigset_t block, prev;
    sigemptyset(&block);
    for (int k = 0; k < N_STAGE_SIGS; k++) sigaddset(&block, stage_sigs[k]);
    int res[2];
    if (pipe2(res, O_CLOEXEC) != 0) {
        fprintf(stderr, "trainprof run: no first stage: pipe: %s\n", strerror(errno));
        return r;
    }
    /* blocked across the fork: in the supervisor they stay blocked, taken by sigtimedwait */
    struct sigaction old[N_STAGE_SIGS];
    run_catch_begin(&prev, old);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(res[0]);
        for (int k = 0; k < N_STAGE_SIGS; k++) sigaction(stage_sigs[k], &old[k], NULL);
        /* ignored by this process for its own writes (cmd_run.c), not by the stage's */
        signal(SIGPIPE, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != parent) _exit(128 + SIGTERM);
        child_stdio(fd);
        clean_environment();
        for (int k = 0; alone && k < CLI_TASK_VARS; k++) {
            unsetenv(cli_task_vars[k][0]);
            unsetenv(cli_task_vars[k][1]);
        }
        supervisor(argv, limit_s, &block, &prev, res[1]);
    }
    int err = errno;
    close(res[1]);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    if (pid < 0) {
        fprintf(stderr, "trainprof run: no first stage: fork: %s\n", strerror(err));
    } else {
        struct timespec tick = {0, 20000000};
        int asked = 0, status;
        for (;;) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid || (w < 0 && errno != EINTR)) break;
            if (g_stage_sig && !asked++) kill(pid, SIGTERM);
            nanosleep(&tick, NULL);
        }
        if (read(res[0], &r, sizeof r) != (ssize_t)sizeof r) r = (stage_result){STAGE_ENDED, -1};
    }
    close(res[0]);
    run_catch_end(&prev, old);
    if (g_stage_sig) r.how = STAGE_SIGNAL;
    return r;
}

/* The stage: the launcher's words argv[0..w) (none: this node's own, `host`'s files alone),
 * then this program's `summarize` with the report's options a, `--host host` when host is
 * given, and absdir; its output in absdir/summarize.log (summarize-HOST.log for a host's).
 * One line says how it went. Returns as run_first_stage. */
static int summarize_stage(char **argv, int w, const char *absdir, const report_args *a,
                           int limit_s, const char *host) {
    char self[PATH_MAX], warmup[16], top[16], grec[24], keep[24], log[PATH_MAX + 96], via[96];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0 || (size_t)sl >= sizeof self - 1) {
        fprintf(stderr, "trainprof run: no first stage: this program's path is unknown\n");
        return -1;
    }
    self[sl] = 0;
    if (w > 0) {
        const char *base = strrchr(argv[0], '/');
        snprintf(via, sizeof via, "through %s", base ? base + 1 : argv[0]);
        snprintf(log, sizeof log, "%s/summarize.log", absdir);
    } else {
        snprintf(via, sizeof via, "of this node (%s)", host);
        snprintf(log, sizeof log, "%s/summarize-%s.log", absdir, host);
    }
    snprintf(warmup, sizeof warmup, "%d", a->warmup);
    snprintf(top, sizeof top, "%d", a->top);
    argv[w++] = self;
    argv[w++] = "summarize";
    argv[w++] = "--warmup";
    argv[w++] = warmup;
    argv[w++] = "--top";
    argv[w++] = top;
    if (a->step_name) {
        argv[w++] = "--step-name";
        argv[w++] = (char *)a->step_name;
    }
    if (a->data_names) {
        argv[w++] = "--data-names";
        argv[w++] = a->data_names;
    }
    if (a->gpu_records) { /* the summaries' key holds it: the report's own must be given */
        if (a->gpu_records == SIZE_MAX) snprintf(grec, sizeof grec, "all");
        else snprintf(grec, sizeof grec, "%zu", a->gpu_records);
        argv[w++] = "--gpu-records";
        argv[w++] = grec;
    }
    if (tp_comm_keep()) { /* configured: the summaries' key holds it too */
        snprintf(keep, sizeof keep, "%zu", tp_comm_keep());
        argv[w++] = "--comm-keep";
        argv[w++] = keep;
    }
    if (host) {
        argv[w++] = "--host";
        argv[w++] = (char *)host;
    }
    argv[w++] = "--";
    argv[w++] = (char *)absdir;
    argv[w] = NULL;
    /* a file created for this stage: whatever has the name (a previous log, or a FIFO, whose
     * open would block until a reader comes, a symbolic link, a hard link to another file) is
     * replaced, never opened */
    int fd = -1;
    if (unlink(log) == 0 || errno == ENOENT)
        fd = open(log, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        fprintf(stderr, "trainprof run: no first stage: cannot create %s: %s\n", log,
                strerror(errno));
        return -1;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stage_result r = stage_run(argv, fd, limit_s, host != NULL);
    int ended = r.how, status = r.status;
    struct stat lst;
    int said = fstat(fd, &lst) == 0 && lst.st_size > 0;
    close(fd);
    double s = cli_elapsed_s(&t0);
    int rc = -1;
    if (ended == STAGE_SIGNAL) {
        fprintf(stderr, "trainprof run: signal %d: the first stage %s stopped after "
                        "%.1f s, and no report (trainprof report %s makes it)\n",
                g_stage_sig, via, s, absdir);
    } else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (host)
            fprintf(stderr, "trainprof run: this node's rank summaries (%s) written in %.1f s "
                            "(its line in %s)\n", host, s, log);
        else
            fprintf(stderr, "trainprof run: rank summaries written %s in %.1f s (each task's "
                            "line in %s)\n", via, s, log);
        rc = 1;
    } else {
        char why[64];
        if (ended == STAGE_LIMIT) snprintf(why, sizeof why, "stopped after %d s", limit_s);
        else if (status < 0) snprintf(why, sizeof why, "no exit status");
        else if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
        else snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
        fprintf(stderr, "trainprof run: the first stage %s failed (%s, %.1f s; %s %s); "
                        "the report computes what has no summary here\n", via, why, s, log,
                said ? "says why" : "is empty");
    }
    /* a signal caught while the stage ran (even one that came as it ended) now does what it
     * would have done: the report phase ends (cmd_run.c) */
    if (g_stage_sig) {
        fflush(NULL);
        raise(g_stage_sig);
    }
    return rc;
}

int run_first_stage(const char *how, const char *cmd_exe, char *const *cmd,
                    const char *absdir, const report_args *a, int limit_s) {
    char words[STAGE_BUF];
    char *argv[STAGE_ARGV];
    rank_names names = scan_rank_names(absdir);
    g_stage_sig = 0;
    int w = launcher_words(how, cmd_exe, cmd, &names, words, sizeof words, argv);
    if (g_stage_sig) { /* while asking CMD --version (probe_version): its group is ended */
        fprintf(stderr, "trainprof run: signal %d: no first stage (it was asking %s "
                        "--version), and no report (trainprof report %s makes it)\n",
                g_stage_sig, cmd_exe, absdir);
        fflush(NULL);
        raise(g_stage_sig);
        return -1;
    }
    if (w <= 0 || !names.any) return w < 0 ? -1 : 0;
    return summarize_stage(argv, w, absdir, a, limit_s, NULL);
}

void run_host_name(char out[64]) { tprof__file_host(out); }

int run_node_stage(const char *absdir, const char *host, const report_args *a, int limit_s) {
    char *argv[STAGE_ARGV];
    g_stage_sig = 0;
    return summarize_stage(argv, 0, absdir, a, limit_s, host);
}
