/*
 * clocks.h — one timeline for all ranks (clocks.c): collectives matched across rank files,
 * and clock offsets per host refined so that the ends of matched collectives agree.
 *
 * Each rank's times are CLOCK_MONOTONIC of its host. A host's ranks share that clock, so all
 * of them are mapped onto the wall clock through the start pair (realtime, monotonic) of the
 * host's first rank file; a host other than the reference (the host of the lowest rank) then
 * gets an offset: the median, over the collectives it shares with hosts already aligned, of
 * how far its ranks' ends lie from theirs. Only collectives whose ends agree by nature count
 * (AllReduce, AllGather, ReduceScatter, AllToAll, Barrier: no rank finishes before every rank
 * has contributed), timed on the GPU (an NCCL GPU interval or matched kernel) or, for MPI,
 * by the blocking call; an NCCL op with only its host enqueue time does not count.
 * Collectives are matched by communicator id, op and sequence number (NCCL's per-communicator
 * seq; the MPI wrappers' seq per communicator).
 */
#ifndef TPROF_CLOCKS_H
#define TPROF_CLOCKS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

typedef struct tp_arrival {
    size_t rank;         /* index in tp_clocks.rank */
    int64_t start, end;  /* aligned wall-clock ns */
    int end_ok;          /* the end counts for alignment */
} tp_arrival;

typedef struct tp_coll {
    uint64_t hash;
    uint32_t op, seq;
    size_t first, n;     /* arrivals [first, first + n), at least two ranks */
} tp_coll;

typedef struct tp_host_clock {
    const char *host;
    int64_t offset_ns;   /* added to the start-pair mapping */
    int aligned;         /* reference, or offset found from shared collectives */
    size_t shared;       /* collectives used for the offset */
    size_t nresid;       /* arrivals with a residual */
    double resid_median_us, resid_max_us;
} tp_host_clock;

typedef struct tp_clocks {
    size_t nranks;
    const tp_process **rank; /* rank processes in rank order */
    size_t *host_of;         /* host index of each rank */
    int64_t *map_ns;         /* aligned ns = monotonic ns + map_ns[rank] */
    tp_host_clock *hosts;
    size_t nhosts;
    tp_coll *coll;
    size_t ncoll;
    tp_arrival *arr;
    size_t narr;
} tp_clocks;

/* Matches the collectives and aligns the hosts. Returns 0 or TPROF_ERR_NO_MEMORY. */
int tp_clocks_build(const tp_run *run, tp_clocks *c);
void tp_clocks_free(tp_clocks *c);

/* The alignment as typed results (results.h; per_host and its ranks owned by out, freed by
 * tp_clocks_result_free; host names into the run). Returns TPROF_OK or TPROF_ERR_NO_MEMORY
 * (out still freeable). */
int tp_clocks_result_fill(tp_clocks_result *out, const tp_clocks *c);
void tp_clocks_result_free(tp_clocks_result *r);

/* Adds "clocks" to the report from r (nothing when r->present is 0). */
void tp_clocks_json(cJSON *rep, const tp_clocks_result *r);

/* Collective start lag of each rank: at every matched collective whose start on that rank
 * lies inside [w0[r], w1[r]] (aligned ns; w1 = 0: no window, all count), its start minus the
 * earliest start of the collective. Per rank: count n[r], median, mean, p90 in ms. */
void tp_clocks_lags(const tp_clocks *c, const int64_t *w0, const int64_t *w1, size_t *n,
                    double *median_ms, double *mean_ms, double *p90_ms);

#endif
