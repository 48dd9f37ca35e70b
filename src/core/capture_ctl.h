/*
 * capture_ctl.h — the two files through which `trainprof capture` asks running sessions for a
 * GPU capture window (core/capture_ctl.c writes and reads them in the session, cli/cmd_capture.c
 * in the command; docs/format.md describes them). Header-only parsers: no allocation, no
 * global state, any thread.
 */
#ifndef TPROF_CAPTURE_CTL_H
#define TPROF_CAPTURE_CTL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TPROF_CTL_REQUEST "capture.request" /* in the run directory */
#define TPROF_CTL_STEP_SUFFIX ".step"       /* <host>-<pid>.step beside the rank file */
#define TPROF_CTL_LINE 128                  /* bytes of a progress file, newline included */
#define TPROF__CTL_POLL_MS 200              /* the flusher looks for a request this often */
#define TPROF__CTL_ALIVE_MS 5000            /* and rewrites its progress file at least this often */

/* This host's name as the run directory's file names spell it (<host>-<pid>.tprof, its
 * .tprof-create-failed marker, <host>-<pid>.step): at most 63 bytes, '/' (which a file name
 * cannot hold) as '_', "host" when the system gives no name. The session names its files
 * with it and `trainprof capture` tells this host's files by it. */
static inline void tprof__file_host(char out[64]) {
    memset(out, 0, 64);
    gethostname(out, 63);
    for (char *p = out; *p; p++)
        if (*p == '/') *p = '_';
    if (!out[0]) memcpy(out, "host", 5);
}

/* `key=` followed by a decimal number in `s` (a whole word): 0 with *v, else -1. */
static inline int tprof__ctl_u64(const char *s, const char *key, uint64_t *v) {
    size_t kl = strlen(key);
    for (const char *p = s; (p = strstr(p, key)) != NULL; p += kl) {
        if (p != s && p[-1] != ' ') continue;
        if (p[kl] < '0' || p[kl] > '9') return -1;
        char *e;
        errno = 0;
        unsigned long long x = strtoull(p + kl, &e, 10);
        if (errno || (*e && *e != ' ' && *e != '\n')) return -1;
        *v = x;
        return 0;
    }
    return -1;
}

/* A request line "trainprof-capture 1 id=I first=A count=N": 0 with the three numbers
 * (count >= 1, A + N - 1 within 64 bits), else -1. */
static inline int tprof__ctl_parse_request(const char *s, uint64_t *id, uint64_t *first,
                                          uint64_t *count) {
    static const char magic[] = "trainprof-capture 1 ";
    if (strncmp(s, magic, sizeof magic - 1) != 0) return -1;
    if (tprof__ctl_u64(s, "id=", id) || tprof__ctl_u64(s, "first=", first) ||
        tprof__ctl_u64(s, "count=", count) || *count == 0 || *count - 1 > UINT64_MAX - *first)
        return -1;
    return 0;
}

/* A progress line "trainprof-step 1 pid=P step=K|- step_ns=M plan=SPEC": 0 with *pid,
 * *has_step (0 for "-"), *step and *step_ns, else -1. The plan is there for a person
 * reading the file; a line without it is not a progress line. */
static inline int tprof__ctl_parse_progress(const char *s, uint64_t *pid, int *has_step,
                                           uint64_t *step, uint64_t *step_ns) {
    static const char magic[] = "trainprof-step 1 ";
    if (strncmp(s, magic, sizeof magic - 1) != 0) return -1;
    if (tprof__ctl_u64(s, "pid=", pid) || tprof__ctl_u64(s, "step_ns=", step_ns)) return -1;
    const char *st = strstr(s, " step=");
    if (!st) return -1;
    *has_step = st[6] != '-';
    if (*has_step && tprof__ctl_u64(s, "step=", step)) return -1;
    if (!*has_step) *step = 0;
    return strstr(s, " plan=") ? 0 : -1;
}

#endif /* TPROF_CAPTURE_CTL_H */
