/*
 * capture_ctl.c — GPU capture windows asked for from outside a running job (`trainprof
 * capture RUN_DIR|PID --steps N`), through two small files in the run directory, on the
 * flusher thread only: nothing here runs on a thread of the job.
 *
 *  - <host>-<pid>.step, written by each session whose capture plan has windows (the only
 *    plans where a window can be added: "all" captures every step, "off" never loads CUPTI):
 *    one fixed-size line, "trainprof-step 1 pid=P step=K step_ns=M plan=SPEC", rewritten in
 *    place when the step changed (at most every TPROF__CTL_POLL_MS) and at least every
 *    TPROF__CTL_ALIVE_MS so that its age tells a live process from a dead one; removed when
 *    the session ends. step=- until the first step began. K is the step last begun, as the
 *    report numbers steps; M the mean time between step beginnings (ns).
 *  - capture.request, written by the command (to a temporary name, then renamed, so a
 *    reader sees a whole line or none): "trainprof-capture 1 id=I first=A count=N". Each
 *    session looks at its status (one stat) every TPROF__CTL_POLL_MS and takes a request
 *    whose id it has not taken yet and that was written after the session started (id is
 *    the command's CLOCK_REALTIME ns): the window of steps A..A+N-1 (core/kwindow.c,
 *    tprof__kwin_demand). The command chooses A past the step every live rank has reached,
 *    so that all ranks capture the same step numbers.
 *
 * Cost: one stat() every TPROF__CTL_POLL_MS and one pwrite of 128 bytes when the step
 * changed, on the flusher thread; the step count itself is kwindow.c's (a name compare per
 * range push while a window may come). The progress file's descriptor is a private one
 * (core/writer.h: close-on-exec, in the reserved range).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_ctl.h"
#include "internal.h"
#include "session_state.h"
#include "writer.h"

static struct {
    int fd;              /* the progress file, -1: not open */
    dev_t dev;           /* and the file it was opened on: a descriptor that no longer */
    ino_t ino;           /* names it (the program closed or dup2'd over it) is not ours */
    pid_t pid;           /* whose file it is (a forked child makes its own) */
    char path[PATH_MAX];
    char line[TPROF_CTL_LINE];
    uint64_t last_poll, last_write, written_step; /* written_step: step + 1, 0 none */
    uint64_t taken_id;   /* the last request taken */
    struct timespec req_mtime;
    off_t req_size;
    ino_t req_ino;
    int failed;          /* the progress file could not be written: not tried again */
} C = {.fd = -1};

/* The session may take windows from outside: a capture plan with windows, and a directory. */
static int wanted(void) {
    const char *spec = tprof__kwin_spec();
    return !tprof__S.no_file && tprof__S.dir[0] && tprof__kwin_active() &&
           strcmp(spec, "off") != 0;
}

/* The descriptor still names the progress file this session opened. */
static int still_ours(int fd) {
    return tprof__fd_is(fd, (uint64_t)C.dev, (uint64_t)C.ino, NULL);
}

/* Opens (creates) this process's progress file; the descriptor, or -1 with errno. Never
 * through a symbolic link, never blocking (a FIFO of that name), never on a file that is not
 * a plain file of this user with one link: the run directory may hold anything under that
 * name, and the session writes only a file that is its own. One that exists already is one
 * this pid left (an exec keeps the pid; a killed process's pid may come again): rewritten. */
static int open_progress(const char *path) {
    const int fl = O_WRONLY | O_NOFOLLOW | O_NONBLOCK;
    int fd = tprof__open_private(path, fl | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) fd = tprof__open_private(path, fl, 0);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        st.st_nlink != 1) {
        close(fd);
        errno = EEXIST;
        return -1;
    }
    if (st.st_size > TPROF_CTL_LINE && ftruncate(fd, TPROF_CTL_LINE) != 0) {
        close(fd);
        return -1;
    }
    C.dev = st.st_dev;
    C.ino = st.st_ino;
    return fd;
}

static void write_progress(uint64_t now) {
    uint64_t step, step_ns;
    int have = tprof__kwin_progress(&step, &step_ns) == 0;
    uint64_t mark = have ? step + 1 : 0;
    if (C.last_write && mark == C.written_step &&
        now - C.last_write < (uint64_t)TPROF__CTL_ALIVE_MS * 1000000u)
        return;
    if (C.fd < 0 || C.pid != getpid()) {
        char host[64];
        tprof__file_host(host);
        snprintf(C.path, sizeof C.path, "%.3900s/%.63s-%d" TPROF_CTL_STEP_SUFFIX, tprof__S.dir,
                 host, (int)getpid());
        tprof__flusher_io_begin();
        C.fd = open_progress(C.path);
        tprof__flusher_io_end();
        if (C.fd < 0) {
            C.failed = 1;
            tprof__log(TPROF_LOG_WARN, "%s: %s: `trainprof capture` cannot see this process",
                       C.path, strerror(errno));
            return;
        }
        C.pid = getpid();
    }
    char stepv[24] = "-";
    if (have) snprintf(stepv, sizeof stepv, "%" PRIu64, step);
    int n = snprintf(C.line, sizeof C.line, "trainprof-step 1 pid=%d step=%s step_ns=%" PRIu64
                     " plan=%.40s", (int)getpid(), stepv, step_ns, tprof__kwin_spec());
    if (n < 0) return;
    /* fixed length, space-filled, so that a rewrite in place never leaves an older tail */
    memset(C.line + n, ' ', sizeof C.line - 1 - (size_t)n);
    C.line[sizeof C.line - 1] = '\n';
    tprof__flusher_io_begin();
    ssize_t w = -1;
    if (still_ours(C.fd)) w = pwrite(C.fd, C.line, sizeof C.line, 0);
    else C.fd = -1; /* the number is the program's now: reopened at the next write */
    tprof__flusher_io_end();
    if (w == (ssize_t)sizeof C.line) {
        C.last_write = now;
        C.written_step = mark;
    }
}

/* The request file, when it changed since last looked at: a window asked for. */
static void poll_request(void) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.3900s/" TPROF_CTL_REQUEST, tprof__S.dir);
    struct stat st;
    tprof__flusher_io_begin();
    int rc = stat(path, &st);
    tprof__flusher_io_end();
    if (rc != 0 || !S_ISREG(st.st_mode)) return;
    if (st.st_ino == C.req_ino && st.st_size == C.req_size &&
        st.st_mtim.tv_sec == C.req_mtime.tv_sec && st.st_mtim.tv_nsec == C.req_mtime.tv_nsec)
        return;
    C.req_ino = st.st_ino;
    C.req_size = st.st_size;
    C.req_mtime = st.st_mtim;
    char buf[256];
    tprof__flusher_io_begin();
    /* never blocking (a FIFO put there after the stat), and only a plain file of this user
     * or of root: anyone else who can write in the directory does not decide what this job
     * captures */
    int fd = tprof__open_private(path, O_RDONLY | O_NONBLOCK, 0);
    struct stat fs;
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) &&
        (fs.st_uid == geteuid() || fs.st_uid == 0))
        n = read(fd, buf, sizeof buf - 1);
    if (fd >= 0) close(fd);
    tprof__flusher_io_end();
    if (n <= 0) return;
    buf[n] = 0;
    uint64_t id, first, count;
    if (tprof__ctl_parse_request(buf, &id, &first, &count) != 0) {
        tprof__log(TPROF_LOG_WARN, "%s: not a capture request, ignored", path);
        return;
    }
    if (id == C.taken_id || id < tprof__S.start_rt) return; /* taken, or older than us */
    C.taken_id = id;
    int r = tprof__kwin_demand(first, count, id);
    if (r == 0)
        tprof__log(TPROF_LOG_INFO, "GPU capture asked for steps %" PRIu64 "-%" PRIu64
                   " (request %" PRIu64 ")", first, first + count - 1, id);
    else
        tprof__log(TPROF_LOG_WARN, "GPU capture request %" PRIu64 " not taken: %s", id,
                   r == TPROF_ERR_ALREADY ? "every step is captured already (plan all)"
                                          : "no GPU capture in this process");
}

void tprof__capture_ctl_tick(int final) {
    if (final || C.failed || !wanted()) return;
    uint64_t now = tprof__now();
    if (C.last_poll && now - C.last_poll < (uint64_t)TPROF__CTL_POLL_MS * 1000000u) return;
    C.last_poll = now;
    poll_request();
    write_progress(now);
}

void tprof__capture_ctl_end(void) {
    if (C.fd < 0 || C.pid != getpid()) return;
    int ours = still_ours(C.fd);
    if (ours) close(C.fd); /* else the number is the program's */
    C.fd = -1;
    struct stat st; /* the name still is our file: never remove another's */
    if (ours && lstat(C.path, &st) == 0 && st.st_dev == C.dev && st.st_ino == C.ino)
        unlink(C.path);
}

void tprof__capture_ctl_after_fork(void) {
    /* the parent's descriptor and file stay the parent's; the child makes its own */
    if (still_ours(C.fd)) close(C.fd);
    C.fd = -1;
    C.last_poll = C.last_write = C.written_step = 0;
    C.failed = 0;
}
