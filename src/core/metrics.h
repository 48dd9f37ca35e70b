/*
 * metrics.h — the live metrics registry (core/metrics.c) and its HTTP endpoint
 * (core/metrics_http.c): counters, gauges and histograms with a few low-cardinality labels,
 * rendered as Prometheus text 0.0.4 or OpenMetrics 1.0 (docs/metrics.md).
 *
 * Writers are off the training threads: the flusher (step records it drains, drop counts),
 * the samplers that run on it (procfs, NVML) and setup calls (metadata). Values are atomics
 * written with plain stores or CAS adds, so a scrape (the HTTP thread) reads them without a
 * lock and never makes a writer wait; series are created under a mutex, published with a
 * release store of the series count, and never move or disappear.
 *
 * This file has no dependency on the rest of the library beyond libc, so the benchmark can
 * compile it in (bench/bench_metrics_scrape.c).
 */
#ifndef TPROF_METRICS_H
#define TPROF_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { TPROF_M_COUNTER = 0, TPROF_M_GAUGE = 1, TPROF_M_HISTOGRAM = 2 };

/* A double's bits in a 64-bit word and back: how values live in atomic words. */
static inline uint64_t tprof__m_d2u(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static inline double tprof__m_u2d(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

#define TPROF_M_MAX_FAMILIES 128
#define TPROF_M_MAX_SERIES 4096
#define TPROF_M_MAX_BUCKETS 24
#define TPROF_M_LABELS_MAX 200 /* preformatted `k="v",k="v"` of one series */

/* Nonzero once the registry is on in this process (TRAINPROF_METRICS_PORT, or the bench).
 * Read by the samplers and the flusher before they feed anything: when metrics are off,
 * this one load is their whole cost, and the recording hot path never reads it. */
extern int tprof__metrics_on;
#define TPROF__METRICS_ON() __atomic_load_n(&tprof__metrics_on, __ATOMIC_ACQUIRE)

/* Allocates the registry (idempotent). 0, or -1 without memory. The feeds start when their
 * owner sets tprof__metrics_on (release), after registering its families. */
int tprof__m_enable(void);

/* A metric family: `name` in Prometheus form with its unit and, for a counter, the `_total`
 * suffix (OpenMetrics drops it from the family name itself). `bounds` (histograms) are the
 * upper bounds, ascending, without +Inf. Returns the family id (>= 0; the same id for the
 * same name), or -1 when full or malformed. */
int tprof__m_family(const char *name, const char *help, int type, const double *bounds,
                    int nbounds);

/* The series of family `fam` with `labels` (NULL-terminated key, value, key, value, ...
 * list), found or created. Values may hold any bytes: each is made valid UTF-8 here (an
 * invalid sequence becomes U+FFFD) and escaped (backslash, double quote, line feed), so a
 * host name or a user's timer name can never make a scrape unparsable. Returns its id, or
 * -1 when the registry is full or the formatted labels exceed TPROF_M_LABELS_MAX - 1
 * bytes. Not for a hot path: it takes the registry mutex. */
int tprof__m_series(int fam, const char *const *labels);
/* The same with labels already formatted (`k="v",...`, escaped, may be ""); -1 also when
 * they are not valid UTF-8. */
int tprof__m_series_raw(int fam, const char *labels);

/* The length of the longest prefix of s that has at most `max` bytes and does not end
 * inside a UTF-8 sequence: where a name is cut to a fixed size, the cut falls between
 * characters. Bytes that are invalid anyway may be kept or dropped. Any thread; no
 * allocation. */
size_t tprof__m_utf8_cut(const char *s, size_t max);

void tprof__m_set(int series, double v);     /* gauges (a counter set to a running total) */
void tprof__m_add(int series, double v);     /* counters; v >= 0 */
void tprof__m_observe(int series, double v); /* histograms */

/* A busy-time counter fed by a sampled ratio: utilisation as NVML reports it, "percent of
 * time over the past sample period during which one or more kernels was executing" (NVML
 * API reference, nvmlUtilization_t). Each sample is taken to describe the interval since the
 * previous one, so the counter grows by ratio x that interval: seconds of busy time, which
 * rate() turns back into a utilisation over any window, whatever the scrape interval (a
 * gauge scraped every 15 s shows 15 s-apart snapshots of a ~1 s average, 0 or 1 on a bursty
 * job). The first sample only starts the clock. An interval longer than max_gap_ns (the
 * sampler stalled) adds nothing: the last sample says nothing about most of it, and a
 * counter must not invent busy time. Ratios are clamped to [0, 1]; NaN adds nothing. One
 * writer per state (the sampler); the counter is read by scrapes like any other. */
typedef struct tprof__m_integ {
    uint64_t last_ns; /* the previous sample's time; 0 = none yet */
} tprof__m_integ;
void tprof__m_integrate(int series, tprof__m_integ *st, double ratio, uint64_t now_ns,
                        uint64_t max_gap_ns);

/* Labels every series carries (rank, local_rank), as `k="v",` ready to prepend; "" when
 * none. Changed by tprof_set_rank and the metadata; copied under a mutex by each scrape. */
void tprof__m_set_const_labels(const char *const *labels);

/* Renders every series. *out is malloc'ed (the caller frees), *len its length. Returns 0,
 * or TPROF_ERR_NO_MEMORY (nothing in *out). `openmetrics`: OpenMetrics 1.0 (family names
 * without `_total`, `# EOF`), else Prometheus text 0.0.4. */
int tprof__m_render(int openmetrics, char **out, size_t *len);

/* -------------------------------------------------- the endpoint (core/metrics_http.c) */

typedef struct tprof__http_cfg {
    const char *addr;  /* numeric IPv4 or IPv6 address to bind; NULL = 127.0.0.1 */
    int port;          /* 0 = an ephemeral port (tests) */
    const char *token; /* bearer token required on /metrics and /capture; NULL = none */
    /* POST /capture?detail=on|off: asks for detailed capture at the next step; returns 0 when
     * accepted, -1 when not possible in this process. NULL: /capture answers 404. */
    int (*on_detail)(int on);
} tprof__http_cfg;

/* Starts the endpoint on an internal thread of libmicrohttpd (dlopen'ed now). Returns the
 * bound port (> 0), or -1 with `why` filled (library missing, address in use, ...). The
 * calling thread's signal mask is inherited by the server thread: callers block signals
 * around it. */
int tprof__http_start(const tprof__http_cfg *cfg, char *why, size_t whylen);
/* Stops it (joins its thread); a no-op when not running. */
void tprof__http_stop(void);
/* After fork() in the child: the server thread is not there; forget it without touching it. */
void tprof__http_forget(void);
/* The bound port, or 0. */
int tprof__http_port(void);

#endif /* TPROF_METRICS_H */
