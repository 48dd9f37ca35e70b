/*
 * kwindow.h — the syntax of a GPU capture plan (TRAINPROF_GPU_CAPTURE, `trainprof run
 * --gpu-capture`; the older TRAINPROF_KERNEL_STEPS, `--kernel-steps`, is one window of it),
 * shared by the library (core/kwindow.c) and the command line, which rejects a malformed one
 * before the job starts. Header-only; no allocation, no global state, any thread.
 */
#ifndef TPROF_KWINDOW_H
#define TPROF_KWINDOW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One window "A-B" (steps A to B inclusive), "A" (step A only) or "A-" (from A to the end),
 * decimal step numbers, read from the start of `s`. Sets *lo, *hi (UINT64_MAX for "A-") and
 * *end (the first character after it) and returns 0; -1 when malformed or B < A. */
static inline int tprof__kwin_parse_one(const char *s, uint64_t *lo, uint64_t *hi,
                                        const char **end) {
    if (!s || s[0] < '0' || s[0] > '9') return -1;
    char *e;
    errno = 0;
    unsigned long long a = strtoull(s, &e, 10), b = a;
    if (errno) return -1; /* out of range */
    if (*e == '-') {
        const char *p = e + 1;
        if (*p < '0' || *p > '9') {
            b = UINT64_MAX;
            e = (char *)p;
        } else {
            b = strtoull(p, &e, 10);
            if (errno) return -1;
        }
    }
    if (b < a) return -1;
    *lo = a;
    *hi = b;
    *end = e;
    return 0;
}

/* The whole of `spec` is one window (the syntax of TRAINPROF_KERNEL_STEPS): as above, 0 or
 * -1. */
static inline int tprof__kwin_parse(const char *spec, uint64_t *lo, uint64_t *hi) {
    const char *end;
    uint64_t a, b;
    if (tprof__kwin_parse_one(spec, &a, &b, &end) != 0 || *end) return -1;
    *lo = a;
    *hi = b;
    return 0;
}

#define TPROF__KPLAN_MAX 32         /* windows one explicit list may hold */
#define TPROF__KPLAN_SPEC_MAX 2000  /* characters of a plan */

enum { TPROF__KPLAN_ALL = 0, TPROF__KPLAN_OFF = 1, TPROF__KPLAN_WINDOWS = 2 };

/* A capture plan: every step (ALL), none (OFF), or windows of steps. */
typedef struct tprof__kplan {
    int mode;                                            /* TPROF__KPLAN_* */
    unsigned n;                                          /* windows listed (WINDOWS) */
    uint64_t lo[TPROF__KPLAN_MAX], hi[TPROF__KPLAN_MAX]; /* inclusive; hi UINT64_MAX: to the end */
    uint64_t every; /* > 0: the one window listed comes back every `every` steps */
    int from_start; /* capture is on from the session's start, before the first step too */
} tprof__kplan;

/* "auto", the default plan: GPU activity from the start of the process through step
 * TPROF__KPLAN_AUTO_LAST (a program that never marks a step is captured whole; a training
 * job shows the kernels of its first steps), then TPROF__KPLAN_AUTO_LAST + 1 steps every
 * TPROF__KPLAN_AUTO_EVERY steps (1000-1004, 2000-2004, ...): 0.5 % of the steps of a long
 * run, so that a job whose steps run 45 % slower under capture (Megatron-LM's small kernels
 * on an H200, about 1,700 launches per step) pays about 0.2 % of its time after its start. */
#define TPROF__KPLAN_AUTO_LAST 4
#define TPROF__KPLAN_AUTO_EVERY 1000

/* Parses a plan: "auto" (above), "all", "off", "A-B[,C-D...]" (windows as
 * tprof__kwin_parse_one reads them,
 * ascending, at least one step apart (C > B + 1), only the last open-ended, at most
 * TPROF__KPLAN_MAX), or "A-B/N" (the window A..B, then A+N..B+N, A+2N..B+2N, ...; N > B-A+1,
 * so that a step lies between two windows). NULL on success, else what is wrong (a static
 * string, for one error line); *p is then left as ALL. */
static inline const char *tprof__kplan_parse(const char *spec, tprof__kplan *p) {
    p->mode = TPROF__KPLAN_ALL;
    p->n = 0;
    p->every = 0;
    p->from_start = 0;
    if (!spec || !*spec) return "empty";
    if (strlen(spec) > TPROF__KPLAN_SPEC_MAX) return "longer than 2000 characters";
    const char *s = spec;
    if (s[0] == 'a' && s[1] == 'l' && s[2] == 'l' && !s[3]) return NULL;
    if (!strcmp(s, "auto")) {
        p->mode = TPROF__KPLAN_WINDOWS;
        p->n = 1;
        p->lo[0] = 0;
        p->hi[0] = TPROF__KPLAN_AUTO_LAST;
        p->every = TPROF__KPLAN_AUTO_EVERY;
        p->from_start = 1;
        return NULL;
    }
    if (s[0] == 'o' && s[1] == 'f' && s[2] == 'f' && !s[3]) {
        p->mode = TPROF__KPLAN_OFF;
        return NULL;
    }
    unsigned n = 0;
    uint64_t every = 0;
    for (;;) {
        uint64_t lo, hi;
        const char *end;
        if (tprof__kwin_parse_one(s, &lo, &hi, &end) != 0)
            return "a window is A-B, A or A- (step numbers, A <= B)";
        if (n == TPROF__KPLAN_MAX) return "more than 32 windows";
        if (n && (p->hi[n - 1] == UINT64_MAX || lo <= p->hi[n - 1] + 1))
            return "windows must be ascending with at least one step between them";
        p->lo[n] = lo;
        p->hi[n] = hi;
        n++;
        s = end;
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '/') {
            if (n != 1) return "/N repeats one window only";
            if (hi == UINT64_MAX) return "/N repeats a window with an end (A-B/N)";
            s++;
            if (*s < '0' || *s > '9') return "/N needs a step count N";
            char *e;
            errno = 0;
            every = strtoull(s, &e, 10);
            if (errno || *e) return "/N needs a step count N";
            if (every <= hi - lo + 1) return "A-B/N needs N > B-A+1 (a step between windows)";
            s = e;
        }
        if (*s) return "a window is A-B, A or A- (step numbers, A <= B), windows separated by ','";
        break;
    }
    p->mode = TPROF__KPLAN_WINDOWS;
    p->n = n;
    p->every = every;
    return NULL;
}

/* Window i (from 0) of a WINDOWS plan: 0 with *lo, *hi set; -1 when the plan has no such
 * window (past the list, or a repetition beyond UINT64_MAX). */
static inline int tprof__kplan_window(const tprof__kplan *p, uint64_t i, uint64_t *lo,
                                      uint64_t *hi) {
    if (p->mode != TPROF__KPLAN_WINDOWS) return -1;
    if (!p->every) {
        if (i >= p->n) return -1;
        *lo = p->lo[i];
        *hi = p->hi[i];
        return 0;
    }
    if (i && i > (UINT64_MAX - p->hi[0]) / p->every) return -1;
    *lo = p->lo[0] + i * p->every;
    *hi = p->hi[0] + i * p->every;
    return 0;
}

#endif /* TPROF_KWINDOW_H */
