/*
 * clocks.h — one timeline for all ranks (clocks.c): collectives matched across rank files,
 * and clock offsets per host refined so that the ends of matched collectives agree.
 *
 * Each rank's times are CLOCK_MONOTONIC of its host. A host's ranks share that clock, so all
 * of them, and the host's other processes, are mapped onto the wall clock through one start
 * pair (realtime, monotonic): that of the host's first rank file whose pair is usable
 * (tp_clock_pair_problem). A host with none starts where the reference starts (its first
 * event at the reference's first event) until collectives place it. A host other than the
 * reference (the first host, in rank order, with a usable pair; else the host of the lowest
 * rank) then gets an offset: the median, over the collectives it shares with hosts already
 * aligned, of how far its ranks' ends lie from theirs. Only collectives whose ends agree by
 * nature count (AllReduce, AllGather, ReduceScatter, AllToAll, Barrier: no rank finishes
 * before every rank has contributed), timed on the GPU (an NCCL GPU interval or matched
 * kernel) or, for MPI, by the blocking call; an NCCL op with only its host enqueue time does
 * not count.
 * Collectives are matched by communicator id, op and sequence number (NCCL's per-communicator
 * seq; the MPI wrappers' seq per communicator).
 */
#ifndef TPROF_CLOCKS_H
#define TPROF_CLOCKS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/results.h"

/* One rank's arrival at a matched collective: which op of which rank, 8 bytes, one per rank
 * and collective of the run, the largest array the merge holds. Its times are not copied
 * here: tp_arrival_start and tp_arrival_end read them from the rank's resolved intervals
 * (tp_clocks.span), which a slim process already holds (model.h, comm_memo), mapped onto
 * the aligned clock. A rank index and an op index each fit 31 bits: tp_clocks_build refuses
 * more ranks, and leaves a rank's ops past 2^31 unmatched. */
typedef struct tp_arrival {
    uint32_t rank;       /* index in tp_clocks.rank */
    unsigned op : 31;    /* index in that rank's communication ops (tp_comm_key_at) */
    unsigned end_ok : 1; /* the end counts for alignment */
} tp_arrival;

typedef struct tp_coll {
    uint64_t hash;
    uint32_t op, seq;
    size_t first, n;     /* arrivals [first, first + n), at least two ranks */
    int64_t earliest;    /* the earliest arrival's start, aligned ns (the lags' origin) */
    int64_t median_end;  /* the lower middle of the ends that count, aligned ns (the
                          * residuals' origin), where two or more count (median_ok) */
    int median_ok;
} tp_coll;

typedef struct tp_host_clock {
    const char *host;
    const tp_process *pair_of; /* the file whose start pair maps the host; NULL: none usable */
    int64_t offset_ns;   /* added to the start-pair mapping */
    int aligned;         /* reference, or offset found from shared collectives */
    size_t shared;       /* collectives used for the offset */
    size_t nresid;       /* arrivals with a residual */
    double resid_median_us, resid_max_us;
} tp_host_clock;

typedef struct tp_clocks {
    const tp_run *run;
    size_t ref;              /* the reference host */
    int64_t *proc_map_ns;    /* per run->procs[i]: aligned ns = monotonic ns + proc_map_ns[i] */
    const char **proc_problem; /* per run->procs[i]: tp_clock_pair_problem, NULL when usable */
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
    /* per rank: its ops' resolved intervals (tp_comm_resolve), on its monotonic clock: the
     * process's own comm_memo where it has one, else computed here (owned[r] set: a process
     * loaded whole, 24 bytes an op of every such rank beside its 112-byte tp_comm_ops) */
    const tp_comm_span **span;
    unsigned char *owned;
    /* the highest level a rank file kept its ops at (comm.h, tp_comm_level, the files'
     * tp_process.comm_level): below 2, every collective of every rank; else each
     * communicator's are matched at the highest level any of its rank files kept, a
     * systematic sample of windows of consecutive collectives that every rank of it has */
    unsigned level;
} tp_clocks;

/* Arrival x's start and end on the aligned clock, ns (after tp_clocks_build). */
int64_t tp_arrival_start(const tp_clocks *c, const tp_arrival *x);
int64_t tp_arrival_end(const tp_clocks *c, const tp_arrival *x);

/* Why the start clock pair of p cannot map its monotonic times onto the wall clock (static
 * text), or NULL when it can: a zero realtime or monotonic reading (never read: the clocks
 * were not read, or the header was zeroed), realtime before 2000-01-01 (no clock of a
 * running host: an unset RTC counts from 1970), realtime more than a day after `now_rt`
 * (the wall clock of the analysis, ns since 1970; 0: not checked), or monotonic after the
 * file's own end (the pair was read when the session started, before every record). */
const char *tp_clock_pair_problem(const tp_process *p, uint64_t now_rt);

/* Matches the collectives and aligns the hosts, and maps every process of the run (ranks
 * and helpers) onto the aligned wall clock (proc_map_ns). Pairs are checked against the
 * wall clock at the call. Returns 0 or TPROF_ERR_NO_MEMORY. */
int tp_clocks_build(const tp_run *run, tp_clocks *c);
void tp_clocks_free(tp_clocks *c);

/* The alignment as typed results (results.h; per_host and its ranks, proc_map_ns and the
 * unusable pairs owned by out, freed by tp_clocks_result_free; host names into the run).
 * Returns TPROF_OK or TPROF_ERR_NO_MEMORY (out still freeable). */
int tp_clocks_result_fill(tp_clocks_result *out, const tp_clocks *c);
void tp_clocks_result_free(tp_clocks_result *r);

/* tp_clocks_build, then tp_clocks_result_fill, the tp_clocks freed: the result alone, as the
 * exporter and the export command need it. Returns TPROF_OK or TPROF_ERR_NO_MEMORY (out
 * still freeable). */
int tp_clocks_compute(const tp_run *run, tp_clocks_result *out);

/* The aligned wall-clock time (ns since 1970) of monotonic time `mono` of run->procs[i]
 * under r; without r (or r not filled), the process's own start pair. */
static inline int64_t tp_clocks_aligned(const tp_clocks_result *r, const tp_process *p,
                                        size_t i, uint64_t mono) {
    if (r && r->proc_map_ns && i < r->nprocs) return (int64_t)mono + r->proc_map_ns[i];
    return (int64_t)(mono - p->hdr.start_mono_ns + p->hdr.start_realtime_ns);
}

/* What a sampled merge matched (r->sample_period > 0), in words: with lags, the report's
 * clocks.sample.note (the stragglers' lags too); without, the export's
 * clock_alignment.sample.note. A static string. */
const char *tp_clocks_sample_note(int lags);

/* Adds "clocks" to the report from r (nothing when r->present is 0). */
void tp_clocks_json(cJSON *rep, const tp_clocks_result *r);

/* Every rank's arrivals, grouped by rank: the indices in c->arr of rank r's are
 * (*out)[off[r] .. off[r + 1]), in the collectives' order (a counting sort, one pass over
 * the arrivals). *out (owned by the caller, free) holds 4 bytes an arrival; off: c->nranks +
 * 1 entries. Returns TPROF_OK, or TPROF_ERR_NO_MEMORY without memory or past 2^32
 * arrivals (*out NULL). */
int tp_clocks_by_rank(const tp_clocks *c, size_t *off, uint32_t **out);

/* The collective holding arrival i (an index in c->arr, which c->coll lies in the order of):
 * its index in c->coll, by bisection. */
size_t tp_clocks_coll_of(const tp_clocks *c, size_t i);

/* Collective start lag of each rank: at every matched collective whose start on that rank
 * lies inside [w0[r], w1[r]] (aligned ns; w1 = 0: no window, all count), its start minus the
 * earliest start of the collective. Per rank: count n[r], median, mean, p90 in ms. Memory,
 * held in the call: 4 bytes an arrival (tp_clocks_by_rank), and 8 bytes for each of the
 * most arrivals one rank has. Returns TPROF_OK, or TPROF_ERR_NO_MEMORY (every figure 0: the
 * caller must not show them). */
int tp_clocks_lags(const tp_clocks *c, const int64_t *w0, const int64_t *w1, size_t *n,
                   double *median_ms, double *mean_ms, double *p90_ms);

#endif
