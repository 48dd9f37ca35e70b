/*
 * per_step.h — the throughput figures a user gives per rank and step: tokens, samples and
 * model FLOPs (trainprof run's options, TRAINPROF_TOKENS_PER_STEP / _SAMPLES_PER_STEP /
 * _FLOPS_PER_STEP, tprof_set_metadata's keys, and the rank files' metadata written from
 * them). One check for all of them, so the library, the command line and the report agree
 * on what is a figure and what is junk.
 */
#ifndef TPROF_PER_STEP_H
#define TPROF_PER_STEP_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds, three or more orders of magnitude above any real rank's step: a
 * trillion-parameter model on a million tokens per rank is 6e18 FLOPs (6 x parameters x
 * tokens). Larger values are typing errors, and would print as hundreds of digits. */
#define TPROF_MAX_TOKENS_PER_STEP 1e12
#define TPROF_MAX_FLOPS_PER_STEP 1e21

/* The three figures, k = 0 tokens, 1 samples, 2 FLOPs: their metadata key, and the
 * environment variable that carries each from `trainprof run` to the ranks. */
enum { TPROF_PER_STEP_N = 3 };
static inline const char *tprof__per_step_key(int k) {
    static const char *const keys[TPROF_PER_STEP_N] = {"tokens_per_step", "samples_per_step",
                                                       "flops_per_step"};
    return keys[k];
}
static inline const char *tprof__per_step_env(int k) {
    static const char *const vars[TPROF_PER_STEP_N] = {
        "TRAINPROF_TOKENS_PER_STEP", "TRAINPROF_SAMPLES_PER_STEP", "TRAINPROF_FLOPS_PER_STEP"};
    return vars[k];
}

/* The bound for a key: "tokens_per_step", "samples_per_step", "flops_per_step"; 0 for any
 * other key. */
static inline double tprof__per_step_max(const char *key) {
    if (!strcmp(key, "tokens_per_step") || !strcmp(key, "samples_per_step"))
        return TPROF_MAX_TOKENS_PER_STEP;
    if (!strcmp(key, "flops_per_step")) return TPROF_MAX_FLOPS_PER_STEP;
    return 0;
}

/* 1 and *out when s, as a whole, is a finite number > 0 and at most the key's bound; else
 * 0 (*out untouched). */
static inline int tprof__per_step_parse(const char *key, const char *s, double *out) {
    double max = tprof__per_step_max(key);
    if (!s || !*s || max <= 0) return 0;
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !isfinite(x) || !(x > 0) || x > max) return 0;
    *out = x;
    return 1;
}

#endif /* TPROF_PER_STEP_H */
