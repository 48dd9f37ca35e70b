/*
 * kwindow.h — the syntax of a kernel-capture window (TRAINPROF_KERNEL_STEPS, `trainprof run
 * --kernel-steps`), shared by the library (core/kwindow.c) and the command line, which
 * rejects a malformed one before the job starts.
 */
#ifndef TPROF_KWINDOW_H
#define TPROF_KWINDOW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* "A-B" (steps A to B inclusive), "A" (step A only) or "A-" (from A to the end), decimal
 * step numbers. Sets *lo and *hi (UINT64_MAX for "A-") and returns 0; -1 when malformed or
 * B < A. */
static inline int tprof__kwin_parse(const char *spec, uint64_t *lo, uint64_t *hi) {
    if (!spec || spec[0] < '0' || spec[0] > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long a = strtoull(spec, &end, 10), b = a;
    if (errno) return -1; /* out of range */
    if (*end == '-') {
        const char *p = end + 1;
        if (!*p) {
            b = UINT64_MAX;
        } else {
            if (*p < '0' || *p > '9') return -1;
            b = strtoull(p, &end, 10);
            if (*end || errno) return -1;
        }
    } else if (*end) {
        return -1;
    }
    if (b < a) return -1;
    *lo = a;
    *hi = b;
    return 0;
}

#endif /* TPROF_KWINDOW_H */
