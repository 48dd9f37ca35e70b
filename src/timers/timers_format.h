/*
 * timers_format.h — the Megatron Timers text formatter (timers_format.c).
 */
#ifndef TPROF_TIMERS_FORMAT_H
#define TPROF_TIMERS_FORMAT_H

#include <stddef.h>

/* m: world x n seconds, row-major (0 = no value). opt: 0 max, 1 minmax, 2 all (the values of
 * tprof_timers_option). Returns the malloc'ed text, or NULL when no timer has a value (or
 * out of memory). */
char *tprof__timers_format(int opt, const char *const *names, size_t n, const double *m,
                           int world, double normalizer);

/* min and max of the positive values of column i; 0 when there is none. */
int tprof__timers_minmax(const double *m, int world, size_t n, size_t i, double *mn, double *mx);

#endif
