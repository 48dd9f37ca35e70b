/*
 * diag_scen.h — a synthetic training job for the tests of the run-level analyses
 * (test_diagnose.c, test_headline.c): ranks with steps, GPU kernels, a collective, NVML
 * samples, and the knobs that make each diagnosis rule fire (data loading, host sync, short
 * kernels, a late rank, memory, throttling).
 */
#ifndef TPROF_TEST_DIAG_SCEN_H
#define TPROF_TEST_DIAG_SCEN_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

static const uint64_t T0 = 1000000000ull, MS = 1000000ull, US = 1000ull;
static const uint64_t RT0 = 1700000000000000000ull;
static const uint64_t HASH = 0xabcdef0123456789ull;

typedef struct scen {
    int nranks, hosts;           /* ranks split over hosts in order (hosts 1 or 2) */
    int steps;                   /* including one warm-up */
    uint64_t step;               /* step length */
    double end_frac;             /* GPU work ends at this fraction of the step (0.9) */
    uint64_t data;               /* data range at step start, GPU idle under it */
    int data_over_busy;          /* the data range lies over busy GPU time instead */
    int sync;                    /* a blocking sync call covers the idle tail */
    int short_kernels;           /* compute as 10 us kernels with 10 us gaps */
    int lag_rank;                /* this rank reaches the collective later by lag (-1: none) */
    uint64_t lag;
    int buckets;                 /* small collectives after the main one, every rank on time
                                  * (DDP's later buckets, queued behind the first) */
    int groups;                  /* the collectives on this many communicators, rank r's on
                                  * the (r % groups)-th (0 or 1: one over all ranks) */
    int64_t clock_err;           /* host 1's start pair claims a realtime off by this */
    double mem_share;            /* NVML memory used / total */
    double alloc_share;          /* CUPTI's allocation records: peak / total (0: none) */
    int throttle, power_at_limit;
    const char *meta_model, *meta_tokens;
    const char *cmdline;         /* metadata "cmdline" of every rank */
} scen;

/* Two ranks on one host, 6 steps of 10 ms (one warm-up), GPU work to 0.9 of the step, NVML
 * memory at half the capacity, no late rank. */
scen scen_base(void);

/* Writes rank r of sc into dir (cmocka asserts on failure). */
void scen_write_rank(const char *dir, const scen *sc, int r);

/* Reading a scenario's report (include after <cmocka.h>):
 * J a member, N a number member (asserted), the finding of id (NULL when it did not fire),
 * how many fired. */
static __attribute__((unused)) const cJSON *J(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}
static __attribute__((unused)) double N(const cJSON *o, const char *k) {
    const cJSON *v = J(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}
static __attribute__((unused)) const cJSON *finding(const cJSON *rep, const char *id) {
    const cJSON *f;
    cJSON_ArrayForEach(f, J(rep, "findings")) if (!strcmp(J(f, "id")->valuestring, id)) return f;
    return NULL;
}
static __attribute__((unused)) int count_findings(const cJSON *rep) {
    return cJSON_GetArraySize(J(rep, "findings"));
}

#endif
