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

/* Saturating int64_t sums for nanoseconds combined across clocks (clock offsets, aligned
 * times): real clocks stay far from the limits, and damaged ones stop there rather than
 * overflow, which C leaves undefined. */
static inline int64_t tp_add_sat(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}
static inline int64_t tp_sub_sat(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Running sum of device memory: + an allocation's bytes, - a release's. The sizes come from
 * the file as u64; the sum saturates (see tp_add_sat). */
static inline int64_t tp_mem_step(int64_t cur, uint64_t bytes, int alloc) {
    const int64_t b = bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
    return alloc ? tp_add_sat(cur, b) : tp_sub_sat(cur, b);
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

/* tp_pct_double of v[0..n) unsorted, reordering v: the element of rank tp_pct_index(n, p),
 * found by selection (Hoare's FIND, CACM 4(7), 1961) in O(n) expected time instead of a sort's
 * O(n log n), the same value a sort would put there. For one percentile of a large array (a
 * median of every kernel's duration); v must hold no NaN. */
static inline double tp_select_double(double *v, size_t n, double p) {
    if (!n) return 0;
    size_t k = tp_pct_index(n, p), lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return v[k]; /* between the two parts: equal to the pivot */
    }
    return v[k];
}

#endif /* TPROF_ANALYSIS_STATS_H */
