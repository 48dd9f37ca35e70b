/*
 * cmd_capture.c — `trainprof capture RUN_DIR|PID --steps N`: a GPU capture window in a running
 * job, asked for from outside it, with no restart (docs/cli.md). The sessions of the job write
 * their progress beside their rank files and look for a request file there
 * (core/capture_ctl.h and .c); this command reads the progress of every live process, chooses
 * the first step of the window past the step all of them have reached, with a lead of at least
 * 0.6 s of steps (they look every 0.2 s), and writes the request, which every process then
 * takes: all capture the same step numbers.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "core/capture_ctl.h"

enum { OPT_STEPS = OPT_OWN, OPT_START, OPT_WAIT, OPT_TIMEOUT };

static const cli_opt capture_opts_table[] = {
    {OPT_STEPS, "--steps", "-n", CLI_VALUE, "N", "steps to capture, 1 to 1000000 (required)"},
    {OPT_START, "--start", NULL, CLI_VALUE, "STEP",
     "the window's first step; default: past the step every\n"
     "process has reached, far enough ahead that all of them see\n"
     "the request before it begins"},
    {OPT_WAIT, "--wait", NULL, CLI_FLAG, NULL,
     "return once every process is past the window (or ended)"},
    {OPT_TIMEOUT, "--timeout", NULL, CLI_VALUE, "S", "how long --wait waits, default 600 s"},
    CLI_HELP_OPT,
};

static void capture_tail(FILE *f) {
    fputs("\nThe job's capture plan must have windows (the default auto, run --gpu-capture\n"
          "A-B, A-B/N, ...):\n"
          "with \"all\" every step is captured already, with \"off\" CUPTI is not loaded.\n"
          "Exit status: 0 asked (and, with --wait, the window passed), 1 no process could\n"
          "take it or --wait timed out, 2 usage.\n",
          f);
}

static const cli_cmd capture_cmd = {
    "capture",
    "usage: trainprof capture RUN_DIR|PID --steps N [options]\n"
    "\n"
    "Asks every process of a running job that records into RUN_DIR (or the run directory\n"
    "of process PID) to record GPU activity (kernels, copies, CUDA calls) in N more steps,\n"
    "the same step numbers on every rank, without restarting it. Each process looks for\n"
    "the request every 0.2 s. The report then shows the window's steps with their kernels.\n"
    "Processes on other hosts see the request when RUN_DIR is shared; otherwise run the\n"
    "command on each host.\n"
    "\n"
    "options:\n",
    capture_opts_table,
    sizeof capture_opts_table / sizeof *capture_opts_table,
    capture_tail,
    0,
    0,
};

/* three polls of the sessions: every one has seen the request */
#define LEAD_NS (3ull * TPROF__CTL_POLL_MS * 1000000ull)
/* a progress file not rewritten for three of its rewrite periods: the process is gone */
#define STALE_S (3 * TPROF__CTL_ALIVE_MS / 1000)

typedef struct progress {
    int live, with_step;            /* live processes; those that began a step */
    uint64_t max_step, min_step;    /* over those */
    uint64_t min_step_ns;           /* the fastest pace seen (0: none known) */
} progress;

/* The live processes' progress files in dir: plain files named <host>-<pid>.step whose line
 * names the same pid, rewritten in the last STALE_S seconds (a session rewrites its own
 * every 5 s), and on this host of a pid that exists. */
static int scan(const char *dir, progress *pr) {
    memset(pr, 0, sizeof *pr);
    DIR *d = opendir(dir);
    if (!d) return -1;
    char host[64];
    tprof__file_host(host);
    size_t hl = strlen(host), sl = strlen(TPROF_CTL_STEP_SUFFIX);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= sl || strcmp(e->d_name + n - sl, TPROF_CTL_STEP_SUFFIX) != 0) continue;
        /* <host>-<pid>.step: the pid of the name, which the line must repeat */
        const char *dash = NULL;
        for (const char *p = e->d_name; p < e->d_name + n - sl; p++)
            if (*p == '-') dash = p;
        if (!dash) continue;
        char *pe;
        errno = 0;
        unsigned long long npid = strtoull(dash + 1, &pe, 10);
        if (errno || pe != e->d_name + n - sl || dash[1] < '1' || dash[1] > '9' ||
            npid > INT_MAX)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* never blocking on a FIFO of that name; a plain file only */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        if (fd < 0) continue;
        char buf[TPROF_CTL_LINE + 1];
        struct stat st;
        int have_st = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
        ssize_t r = have_st ? read(fd, buf, TPROF_CTL_LINE) : -1;
        close(fd);
        if (r <= 0 || !have_st) continue;
        buf[r] = 0;
        uint64_t pid, step, step_ns;
        int has;
        if (tprof__ctl_parse_progress(buf, &pid, &has, &step, &step_ns)) continue;
        if (pid != npid) continue;
        /* A live session rewrites its file every 5 s at least, on any host; on this one its
         * pid must exist too (a killed process's file is told at once) */
        if (time(NULL) - st.st_mtime > STALE_S) continue;
        int here = !strncmp(e->d_name, host, hl) && e->d_name[hl] == '-';
        if (here && kill((pid_t)pid, 0) != 0 && errno == ESRCH) continue;
        pr->live++;
        if (has) {
            if (!pr->with_step || step > pr->max_step) pr->max_step = step;
            if (!pr->with_step || step < pr->min_step) pr->min_step = step;
            pr->with_step++;
        }
        if (step_ns && (!pr->min_step_ns || step_ns < pr->min_step_ns))
            pr->min_step_ns = step_ns;
    }
    closedir(d);
    return 0;
}

/* The TRAINPROF_DIR in process `pid`'s environment, in a static buffer: NULL when it has
 * none, or -1 in *err (errno) when the environment cannot be read. */
static const char *env_dir(const char *pid, int *err) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/environ", pid);
    FILE *f = fopen(path, "re");
    *err = 0;
    if (!f) {
        *err = -1;
        return NULL;
    }
    static char env[1 << 20];
    size_t len = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[len] = 0;
    const char *dir = NULL;
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (!strncmp(env + i, "TRAINPROF_DIR=", 14) && env[i + 14]) dir = env + i + 14;
    return dir;
}

/* `trainprof run`'s own pid (the one its user knows) has no TRAINPROF_DIR: it gives it to
 * the job. The first child of `pid` that has one, into child (its pid), else 0. */
static int child_with_dir(const char *pid, char child[24]) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%s/task/%s/children", pid, pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    unsigned long c;
    int found = 0, err;
    while (!found && fscanf(f, "%lu", &c) == 1) {
        snprintf(child, 24, "%lu", c);
        found = env_dir(child, &err) != NULL;
    }
    fclose(f);
    return found;
}

/* The run directory of process `pid`: its TRAINPROF_DIR (or that of its first child that has
 * one: `trainprof run` itself), relative to its working directory when relative. 0, or -1
 * with a line on stderr. */
static int dir_of_pid(const char *arg, char *out, size_t n) {
    int err;
    const char *dir = env_dir(arg, &err);
    if (err) {
        fprintf(stderr, "trainprof capture: process %s: %s\n", arg, strerror(errno));
        return -1;
    }
    static char child[24];
    if (!dir && child_with_dir(arg, child)) {
        arg = child;
        dir = env_dir(arg, &err);
    }
    if (!dir) {
        fprintf(stderr, "trainprof capture: process %s has no TRAINPROF_DIR in its environment "
                "(not started by trainprof run, or recording nothing)\n", arg);
        return -1;
    }
    if (dir[0] == '/') {
        if ((size_t)snprintf(out, n, "%s", dir) < n) return 0;
        fprintf(stderr, "trainprof capture: process %s: its run directory's path is too long\n",
                arg);
        return -1;
    }
    char cwdl[64], cwd[PATH_MAX];
    snprintf(cwdl, sizeof cwdl, "/proc/%s/cwd", arg);
    ssize_t r = readlink(cwdl, cwd, sizeof cwd - 1);
    if (r <= 0) {
        fprintf(stderr, "trainprof capture: process %s: its directory %s is relative and its "
                "working directory unknown (%s)\n", arg, dir, strerror(errno));
        return -1;
    }
    cwd[r] = 0;
    if ((size_t)snprintf(out, n, "%s/%s", cwd, dir) >= n) {
        fprintf(stderr, "trainprof capture: process %s: its run directory's path is too long\n",
                arg);
        return -1;
    }
    return 0;
}

static int write_request(const char *dir, uint64_t first, uint64_t count) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t id = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    char tmp[PATH_MAX + 64], path[PATH_MAX + 64], line[160];
    snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, TPROF_CTL_REQUEST, (int)getpid());
    snprintf(path, sizeof path, "%s/%s", dir, TPROF_CTL_REQUEST);
    int n = snprintf(line, sizeof line, "trainprof-capture 1 id=%" PRIu64 " first=%" PRIu64
                     " count=%" PRIu64 "\n", id, first, count);
    /* a new file of our own: never through a link or into a file someone put under that
     * name (one left by an earlier command of this pid is removed first) */
    const int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(tmp, fl, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, fl, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "trainprof capture: %s: %s\n", path, strerror(errno));
        if (fd >= 0) unlink(tmp);
        return -1;
    }
    return 0;
}

int cmd_capture(int argc, char **argv) {
    const char *target = NULL, *v;
    long steps = 0, timeout = 600;
    int wait = 0, have_start = 0, rest = 0;
    uint64_t start = 0;
    for (int i = 0; i < argc; i++) {
        int id = rest ? CLI_OPERAND : cli_next(&capture_cmd, argc, argv, &i, &v);
        switch (id) {
        case CLI_END: rest = 1; break;
        case OPT_HELP: cli_usage(&capture_cmd, stdout); return 0;
        case OPT_STEPS: steps = parse_int("capture", "--steps", v, 1, 1000000); break;
        case OPT_START: {
            char *e;
            errno = 0;
            unsigned long long s = strtoull(v, &e, 10);
            if (errno || *e || v[0] < '0' || v[0] > '9' || s > UINT64_MAX - 1000000)
                die_usage("capture", "--start needs a step number, not '%s'", v);
            start = s;
            have_start = 1;
            break;
        }
        case OPT_WAIT: wait = 1; break;
        case OPT_TIMEOUT: timeout = parse_int("capture", "--timeout", v, 1, 86400); break;
        case CLI_OPERAND:
            if (target) die_usage("capture", "unexpected argument '%s'", argv[i]);
            target = argv[i];
            break;
        default: break;
        }
    }
    if (!target) die_usage("capture", "%s", "missing RUN_DIR or PID");
    if (!*target) die_usage("capture", "%s", "empty RUN_DIR or PID");
    if (!steps) die_usage("capture", "%s", "missing --steps N");
    char dir[PATH_MAX];
    if (target[strspn(target, "0123456789")] == 0) {
        if (dir_of_pid(target, dir, sizeof dir) != 0) return 1;
    } else {
        snprintf(dir, sizeof dir, "%s", target);
    }
    progress pr;
    if (scan(dir, &pr) != 0) {
        fprintf(stderr, "trainprof capture: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (!pr.live) {
        fprintf(stderr, "trainprof capture: %s: no running process can take a window (none "
                "has a live progress file: the job ended, or its capture plan is \"all\", "
                "which captures every step already, or \"off\")\n", dir);
        return 1;
    }
    uint64_t first = start;
    if (have_start && pr.with_step && start <= pr.max_step) {
        fprintf(stderr, "trainprof capture: step %" PRIu64 " has begun already (a process is at "
                "step %" PRIu64 "): give a later --start, or none\n", start, pr.max_step);
        return 1;
    }
    if (!have_start) {
        uint64_t lead = 2;
        if (pr.min_step_ns) {
            uint64_t l = LEAD_NS / pr.min_step_ns + 2;
            if (l > lead) lead = l;
        }
        first = (pr.with_step ? pr.max_step : 0) + lead;
    }
    uint64_t last = first + (uint64_t)steps - 1;
    if (write_request(dir, first, (uint64_t)steps) != 0) return 1;
    printf("asked %d process%s in %s to capture GPU activity in steps %" PRIu64 "-%" PRIu64,
           pr.live, pr.live == 1 ? "" : "es", dir, first, last);
    if (pr.with_step) {
        printf(" (at step %" PRIu64, pr.max_step);
        /* a --start far ahead gets no figure that only a clock's range could hold */
        double in_s = (double)(first - pr.max_step) * pr.min_step_ns / 1e9;
        if (pr.min_step_ns && in_s <= 7 * 86400.0)
            printf(", %.1f ms per step: it begins in about %.1f s", pr.min_step_ns / 1e6, in_s);
        else if (pr.min_step_ns)
            printf(", %.1f ms per step: it begins in more than a week at that pace",
                   pr.min_step_ns / 1e6);
        printf(")");
    }
    printf("\n");
    fflush(stdout);
    if (!wait) return 0;
    time_t until = time(NULL) + timeout;
    for (;;) {
        progress now;
        if (scan(dir, &now) == 0 &&
            (!now.live || (now.with_step == now.live && now.min_step > last))) {
            printf("steps %" PRIu64 "-%" PRIu64 " are past on every process\n", first, last);
            return 0;
        }
        if (time(NULL) >= until) {
            fprintf(stderr, "trainprof capture: timed out after %ld s before every process "
                    "was past step %" PRIu64 "\n", timeout, last);
            return 1;
        }
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
}
