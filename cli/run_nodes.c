/*
 * run_nodes.c — `trainprof run` as one of several, one on each node of a job whose launcher is
 * started once per node (torchrun with --nnodes, or --nodes N), all writing into one shared
 * directory: how many nodes the job has, which node writes the report (the one holding rank
 * 0's file), and that node's wait for the other nodes' summaries (run_finish.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "run_finish.h"

/* torchrun's options that take no value (torch/distributed/run.py's parser): every other
 * option of it takes one, as the next word unless written NAME=VALUE. */
static const char *const torchrun_flags[] = {
    "--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
    "--virtual-local-rank", "--virtual_local_rank",
};

static int is_torchrun_flag(const char *w) {
    for (size_t i = 0; i < sizeof torchrun_flags / sizeof *torchrun_flags; i++)
        if (strcmp(w, torchrun_flags[i]) == 0) return 1;
    return 0;
}

/* --nnodes's value: N, or MIN:MAX (elastic: at most MAX nodes). 0 when it is neither. */
static int nnodes_value(const char *v) {
    const char *colon = strchr(v, ':');
    const char *n = colon ? colon + 1 : v;
    char *end;
    long k = strtol(n, &end, 10);
    if (end == n || *end || k < 1 || k > 1000000) return 0;
    return (int)k;
}

/* Whether w is --NAME or an abbreviation of it that argparse takes (torchrun's parser allows
 * them: a prefix of at least `least` bytes, unique among torchrun's options), before any '='. */
static int is_option(const char *w, const char *name, size_t least) {
    size_t n = strcspn(w, "=");
    return n >= least && n <= strlen(name) && strncmp(w, name, n) == 0;
}

/* The index of the first word after `python [OPTIONS] -m MODULE` in cmd when MODULE is
 * torchrun's (torch.distributed.run, or .launch, its older name); 0 when cmd is not that.
 * Python's options before -m: flags, combined or not (-u, -uB, -OO), -W and -X with their
 * value attached or next; -m's module attached (-mtorch.distributed.run) or next. */
static int python_torchrun(char *const *cmd) {
    const char *mod = NULL;
    int i = 1;
    for (; !mod && cmd[i] && cmd[i][0] == '-' && cmd[i][1] && cmd[i][1] != '-'; i++) {
        for (const char *c = cmd[i] + 1; *c; c++) {
            if (strchr("bBdEiIOPqsSuvx", *c)) continue;
            if (*c == 'm' && !c[1] && !cmd[i + 1]) return 0; /* -m last: no module */
            if (*c == 'm') mod = c[1] ? c + 1 : cmd[++i];
            else if ((*c == 'W' || *c == 'X') && !c[1] && cmd[i + 1]) i++; /* its value */
            else if (*c != 'W' && *c != 'X') return 0;                      /* -c, -h, ... */
            break;
        }
    }
    if (!mod || (strcmp(mod, "torch.distributed.run") != 0 &&
                 strcmp(mod, "torch.distributed.launch") != 0))
        return 0;
    return i;
}

int run_nodes_auto(const char *cmd_exe, char *const *cmd) {
    const char *base = strrchr(cmd_exe, '/');
    base = base ? base + 1 : cmd_exe;
    int i = 1;
    if (strcmp(base, "torchrun") != 0) {
        /* python -m torch.distributed.run (torchrun's module) or .launch (its older name) */
        if (strncmp(base, "python", 6) != 0 || (i = python_torchrun(cmd)) == 0) return 0;
    }
    /* torchrun takes each option's default from PET_<NAME> (torch/distributed/argparse_util.py:
     * PET_NNODES a value, PET_STANDALONE an integer flag) when the option is not given */
    const char *pet = getenv("PET_STANDALONE");
    if (pet && atoi(pet) != 0) return 0;
    pet = getenv("PET_NNODES");
    int nodes = pet ? nnodes_value(pet) : 0;
    for (; cmd[i] && cmd[i][0] == '-' && strcmp(cmd[i], "--") != 0; i++) {
        const char *w = cmd[i], *eq = strchr(w, '=');
        if (is_option(w, "--standalone", 6)) return 0; /* one node */
        if (is_option(w, "--nnodes", 4)) {
            const char *v = eq ? eq + 1 : cmd[i + 1];
            if (!v) return 0;
            nodes = nnodes_value(v);
        }
        if (!eq && !is_torchrun_flag(w) && cmd[i + 1]) i++; /* its value */
    }
    return nodes > 1 ? nodes : 0;
}

/* Whether one of this host's rank files in absdir (read slim, from their summaries where
 * valid) is rank 0's as a launcher told it (RANK=0, not the rank a lone process is given). */
static int holds_rank0(const char *absdir, const char *host) {
    char err[512];
    char **paths = NULL;
    size_t k = 0;
    const char *ops[] = {absdir};
    if (cli_host_rank_files(ops, 1, host, &paths, &k, err, sizeof err) != 0) return 0;
    int holds = 0;
    tp_run run;
    if (k && tp_run_load_slim((const char *const *)paths, k, &run, err, sizeof err) ==
                 TPROF_OK) {
        for (size_t i = 0; i < run.nprocs && !holds; i++)
            holds = run.procs[i].rank == 0 && !run.procs[i].rank_implied;
        tp_run_free(&run);
    }
    for (size_t j = 0; j < k; j++) free(paths[j]);
    free(paths);
    return holds;
}

/* The mark a node's run leaves in the directory once its job's writers are done and its
 * stage has run: .trainprof-run-<host>.done. */
static int done_path(char *buf, size_t n, const char *absdir, const char *host, size_t hl) {
    return snprintf(buf, n, "%s/.trainprof-run-%.*s.done", absdir, (int)hl, host) < (int)n ? 0
                                                                                          : -1;
}

void run_node_done(const char *absdir, const char *host, int done) {
    char path[PATH_MAX + 96];
    if (done_path(path, sizeof path, absdir, host, strlen(host)) != 0) return;
    if (!done) {
        unlink(path);
        return;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) close(fd);
    else fprintf(stderr, "trainprof run: cannot mark this node done (%s: %s): the node of "
                         "rank 0, if another, will wait for it\n", path, strerror(errno));
}

void run_node_stale_marks(const char *absdir, const char *host) {
    DIR *d = opendir(absdir);
    if (!d) return;
    static const char pre[] = ".trainprof-run-", suf[] = ".done";
    const size_t pl = sizeof pre - 1, sl = sizeof suf - 1;
    size_t n = 0, hl = strlen(host);
    char first[72] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l <= pl + sl || strncmp(e->d_name, pre, pl) || strcmp(e->d_name + l - sl, suf))
            continue;
        if (l - pl - sl == hl && memcmp(e->d_name + pl, host, hl) == 0) continue;
        if (!n++) snprintf(first, sizeof first, "%.*s", (int)(l - pl - sl), e->d_name + pl);
    }
    closedir(d);
    /* no node of this job can be done before this one has started: its ranks have not joined
     * the job yet */
    if (n)
        fprintf(stderr, "trainprof run: %s holds the marks of %zu node%s (%s%s) done with an "
                        "earlier run on every node: their rank files will be read into this "
                        "job's report; give each job a new -o DIR\n", absdir, n,
                n == 1 ? "" : "s", first, n > 1 ? ", ..." : "");
}

typedef struct host_name {
    const char *s;
    size_t n;
} host_name;

static int cmp_host(const void *a, const void *b) {
    const host_name *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, m);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* The distinct hosts named by the rank files `paths` (n) and how many of them are done
 * (their mark is there; `self`, this node, is done whether or not its mark could be made),
 * and the bytes of all the files. Files named otherwise are nobody's to wait for. */
static void hosts_done(const char *absdir, const char *self, char *const *paths, size_t n,
                       int *hosts, int *done, uint64_t *bytes) {
    *hosts = *done = 0;
    *bytes = 0;
    for (size_t j = 0; j < n; j++) { /* the nodes still writing: their files grow */
        struct stat st;
        if (stat(paths[j], &st) == 0) *bytes += (uint64_t)st.st_size;
    }
    host_name *h = calloc(n ? n : 1, sizeof *h);
    if (!h) return;
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        const char *b = strrchr(paths[j], '/');
        b = b ? b + 1 : paths[j];
        size_t l = cli_rank_file_host(b, strlen(b));
        if (l) h[k++] = (host_name){b, l};
    }
    qsort(h, k, sizeof *h, cmp_host);
    for (size_t j = 0; j < k; j++) {
        if (j && cmp_host(&h[j - 1], &h[j]) == 0) continue;
        char path[PATH_MAX + 96];
        struct stat st;
        (*hosts)++;
        *done += (h[j].n == strlen(self) && memcmp(h[j].s, self, h[j].n) == 0) ||
                 (done_path(path, sizeof path, absdir, h[j].s, h[j].n) == 0 &&
                  stat(path, &st) == 0 && S_ISREG(st.st_mode));
    }
    free(h);
}

/* Ends the wait after a signal (run_caught): its line, the signals' actions and mask given
 * back, then the signal raised again, which ends this process as it would have without the
 * wait (no report: a wait of a minute or more, ended by Slurm's SIGTERM at a job's end, says
 * so rather than the process vanishing without a word). */
static void wait_stopped(const char *absdir, const struct timespec *t0, const sigset_t *prev,
                         const struct sigaction old[RUN_CATCH_SIGS]) {
    int sig = run_caught();
    fprintf(stderr, "trainprof run: signal %d: stopped waiting for the other nodes after %.1f s, "
                    "and no report (trainprof report %s makes it)\n", sig, cli_elapsed_s(t0),
            absdir);
    fflush(NULL);
    run_catch_end(prev, old);
    raise(sig);
}

/* The reporting node's wait for the others: until absdir holds rank files of at least `nodes`
 * hosts (cli_rank_file_host) and each of those hosts' runs has left its mark
 * (run_node_done); or until nothing new came (a host, a mark, a byte more in the rank files)
 * for quiet_s seconds (a node that never started,
 * an elastic job of fewer nodes, a node's run killed), or limit_s in all. Looks again after
 * 50 ms, then twice as long each time up to 1.6 s. One line says which. Returns 0, or -1
 * when a signal stopped it (run_catch_begin's; said: no report). */
static int wait_for_nodes(const char *absdir, const char *self, int nodes, double quiet_s,
                          int limit_s) {
    struct timespec t0, last;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    last = t0;
    sigset_t prev;
    struct sigaction old[RUN_CATCH_SIGS];
    run_catch_begin(&prev, old);
    const char *ops[] = {absdir};
    size_t n = 0;
    int hosts = 0, done = 0, best = 0, all = 0;
    uint64_t bytes = 0, last_bytes = 0;
    long pause_ms = 50;
    for (;;) {
        char err[512];
        char **paths = NULL;
        n = 0;
        if (tp_run_rank_files(ops, 1, &paths, &n, err, sizeof err) != 0) break;
        hosts_done(absdir, self, paths, n, &hosts, &done, &bytes);
        for (size_t j = 0; j < n; j++) free(paths[j]);
        free(paths);
        if (done == hosts && hosts >= nodes) {
            fprintf(stderr, "trainprof run: the runs of the job's %d nodes are done (%zu rank "
                            "files), after %.1f s waiting for the other nodes\n", hosts, n,
                    cli_elapsed_s(&t0));
            all = 1;
            break;
        }
        if (done + hosts > best || bytes != last_bytes) { /* a node more, one more done, or a
                                                           * node's files grew: progress */
            best = done + hosts;
            last_bytes = bytes;
            clock_gettime(CLOCK_MONOTONIC, &last);
        }
        if (cli_elapsed_s(&last) >= quiet_s || cli_elapsed_s(&t0) >= limit_s) break;
        /* 1.6 s: past a second, the seconds apart (a tv_nsec of a second or more is EINVAL,
         * and the sleep returns at once) */
        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
        ppoll(NULL, 0, &ts, &prev); /* the signals let in while it sleeps alone */
        if (run_caught()) {
            wait_stopped(absdir, &t0, &prev, old);
            return -1;
        }
        if (pause_ms < 1000) pause_ms *= 2; /* fewer looks at a shared file system */
    }
    run_catch_end(&prev, old);
    if (all) return 0;
    fprintf(stderr, "trainprof run: waited %.1f s for the other nodes: rank files of %d of %d "
                    "nodes, %d of them done; reporting what is written (a file still being "
                    "written is read as far as it goes)\n",
            cli_elapsed_s(&t0), hosts, nodes, done);
    return 0;
}

/* The rank files in absdir written on `host` (*mine) and on other hosts (*others: named
 * <host>-<pid>.tprof for another host); both 0 when the directory cannot be listed. */
static void count_files(const char *absdir, const char *host, size_t *mine, size_t *others) {
    char err[64];
    char **paths = NULL;
    size_t n = 0;
    const char *ops[] = {absdir};
    *mine = *others = 0;
    if (tp_run_rank_files(ops, 1, &paths, &n, err, sizeof err) != 0) return;
    for (size_t j = 0; j < n; j++) {
        const char *b = strrchr(paths[j], '/');
        b = b ? b + 1 : paths[j];
        if (cli_rank_file_of(b, host)) (*mine)++;
        else if (cli_rank_file_host(b, strlen(b))) (*others)++;
        free(paths[j]);
    }
    free(paths);
}

int run_host_has_files(const char *absdir, const char *host) {
    size_t mine, others;
    count_files(absdir, host, &mine, &others);
    return mine > 0;
}

void run_refused(const char *dir, const char *absdir, const char *lockpath, const char *owner,
                 int nodes, const char *host) {
    static const char hint[] = "if this is one node of a job run on every node, give each "
                               "node's run --nodes N (TRAINPROF_NODES)";
    if (!owner) {
        /* none of them this host's: the other nodes' files, more likely than another run's */
        int other = !nodes && !run_host_has_files(absdir, host);
        fprintf(stderr, "trainprof run: %s already holds rank files %s; choose another -o "
                        "DIR%s%s\n", dir, nodes ? "from another run on this host"
                                      : other ? "of other hosts" : "from another run",
                other ? "; or, " : "", other ? hint : "");
        return;
    }
    if (!nodes && !owner[0]) { /* the nodes' shared lock: its holders write nothing */
        fprintf(stderr, "trainprof run: %s is in use by the trainprof runs of a job run on "
                        "every node (they hold %s)\n", dir, lockpath);
        return;
    }
    size_t pl = strcspn(owner, " ");
    const char *oh = owner[pl] ? owner + pl + 1 : "";
    int other = *oh && strcmp(oh, host) != 0;
    int tell = other && !nodes;
    fprintf(stderr, "trainprof run: %s is in use by another trainprof run%s (pid %.*s%s%s holds "
                    "%s)%s%s\n", dir, nodes ? " on this host" : "", pl ? (int)pl : 1,
            pl ? owner : "?", other ? " on host " : "", other ? oh : "", lockpath,
            tell ? "; " : "", tell ? hint : "");
}

int run_share_lock(const char *path) {
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return -1;
        if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return e == EWOULDBLOCK ? -2 : -1;
        }
        /* unlinked by a run of one node as it let go (run_unlock): take the one at the path */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino)
            return fd;
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

int run_node_share(const char *how, const char *absdir, const char *host, const report_args *a,
                   int limit_s, int nodes) {
    int kind = run_first_stage_kind(how), off = kind == 1;
    if (kind == 2) /* each node's launcher would start a stage on every node */
        fprintf(stderr, "trainprof run: --summarize-with '%s' not used: each node's run "
                        "summarises its own rank files\n", how);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t mine, others;
    count_files(absdir, host, &mine, &others);
    int staged = !off && mine && run_node_stage(absdir, host, a, limit_s) == 1;
    double stage_s = cli_elapsed_s(&t0);
    run_node_done(absdir, host, 1);
    if (!others) {
        /* the nodes' jobs start together and open their rank files as they start: by the
         * time this one's has ended, a directory the nodes share holds theirs */
        fprintf(stderr, "trainprof run: no other node's rank files in %s (a directory the "
                        "nodes do not share?): its report covers this node alone\n", absdir);
        return 1;
    }
    if (!holds_rank0(absdir, host)) {
        fprintf(stderr, "trainprof run: this node's rank files%s in %s; the report is written "
                        "by the run on the node of rank 0 (or: trainprof report %s)\n",
                staged ? " and their summaries" : "", absdir, absdir);
        return 0;
    }
    /* the nodes end together, and each one's stage takes about as long as this one's */
    return wait_for_nodes(absdir, host, nodes, 60.0 + 2.0 * stage_s, limit_s) == 0;
}

void run_nodes_rank0_hosts(const tp_run *run) {
    const char *first = NULL;
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *q = &run->procs[i];
        if (q->rank != 0 || q->rank_implied || q->role == TP_ROLE_SAMPLER) continue;
        if (!first) {
            first = q->hdr.host;
        } else if (strcmp(first, q->hdr.host) != 0) {
            fprintf(stderr, "trainprof run: rank 0 was told to processes on %s and on %s: two "
                            "jobs in one directory? The node of each writes this report, each "
                            "over the other's\n", first, q->hdr.host);
            return;
        }
    }
}
