/*
 * stats.h — the small order statistics the analysis modules share: qsort comparators and
 * nearest-rank percentiles of a sorted array. Header-only (static inline).
 */
#ifndef TPROF_ANALYSIS_STATS_H
#define TPROF_ANALYSIS_STATS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static inline int tp_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline int tp_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline int tp_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0..1] of v[0..n), sorted ascending: v[ceil(p n) - 1]; 0 when
 * n is 0. */
static inline size_t tp_pct_index(size_t n, double p) {
    size_t k = (size_t)ceil(p * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return k - 1;
}
static inline double tp_pct_double(const double *v, size_t n, double p) {
    return n ? v[tp_pct_index(n, p)] : 0;
}
static inline uint64_t tp_pct_u64(const uint64_t *v, size_t n, double p) {
    return n ? v[tp_pct_index(n, p)] : 0;
}

#endif /* TPROF_ANALYSIS_STATS_H */
