/*
 * fmt.h — test helper: fmt(out, n, format, ...), snprintf that aborts rather than truncate
 * silently (and keeps -Wformat-truncation quiet about paths that are PATH_MAX long only in
 * theory). Header-only: each test file that includes it gets its own copy.
 */
#ifndef TPROF_TEST_FMT_H
#define TPROF_TEST_FMT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static __attribute__((unused, format(printf, 3, 4))) void fmt(char *out, size_t n,
                                                              const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int k = vsnprintf(out, n, f, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) {
        fprintf(stderr, "path or text too long: %s\n", out);
        abort();
    }
}

#endif
