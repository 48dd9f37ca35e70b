/*
 * slurp.h — test helper: a whole file as a NUL-terminated string the caller frees (NULL when
 * it cannot be opened, or read whole, or memory is short). Header-only, as fmt.h and spawn.h.
 */
#ifndef TPROF_TEST_SLURP_H
#define TPROF_TEST_SLURP_H

#include <stdio.h>
#include <stdlib.h>

static __attribute__((unused)) char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

#endif
