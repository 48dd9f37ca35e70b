/*
 * internal.h — what the parts of libtrainprof share and the public header does not show:
 * the session state, the per-thread ring and its append primitives, interning, logging.
 *
 * The hot path is: tprof__thread_get() (one TLS load and a state check), reserve a record
 * in the thread's ring, fill it, commit it with one release store. Everything else
 * (registration, string copies, file I/O) happens off that path.
 */
#ifndef TPROF_INTERNAL_H
#define TPROF_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "trainprof.h"
#include "../format/format.h"

#define TPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define TPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TPROF_HIDDEN __attribute__((visibility("hidden")))

enum tprof__state {
    TPROF__UNINIT = 0,   /* lazy start not tried yet */
    TPROF__STARTING = 1, /* one thread is setting up */
    TPROF__ON = 2,       /* recording */
    TPROF__OFF = 3,      /* disabled (no dir, TRAINPROF_ENABLE=0, or set-up failed) */
    TPROF__DOWN = 4      /* shut down */
};

extern _Atomic int tprof__g_state;

/* One interned string of a thread's table. */
typedef struct tprof__istr {
    uint64_t hash;
    uint32_t id;  /* 0 = empty slot */
    uint32_t len;
    char *str;
} tprof__istr;

/* Per-thread state. The ring is single-producer (this thread) single-consumer (the
 * flusher): head is written only by the owner, tail only by the flusher. */
#define TPROF__NVTX_LEVELS 16

typedef struct tprof__thread {
    uint8_t *buf;
    uint64_t mask;          /* ring size - 1; the size is a power of two */
    _Atomic uint64_t head;  /* bytes ever committed */
    _Atomic uint64_t tail;  /* bytes ever consumed by the flusher */
    uint64_t tail_cache;    /* producer's last view of tail */
    _Atomic uint64_t dropped;
    uint32_t serial;        /* unique per process, from 1 */
    uint32_t os_tid;
    _Atomic int exited;     /* set by the TLS destructor; the flusher frees after draining */
    /* NVTX push/pop nesting per domain, for the level NVTX's push and pop return: domain ids
     * below TPROF__NVTX_LEVELS each, the rest together (capture/nvtx_inject.c) */
    int nvtx_level[TPROF__NVTX_LEVELS + 1];
    /* interning: a direct-mapped cache keyed by the caller's pointer (most names are
     * literals passed again and again), confirmed by strcmp, in front of an open-addressing
     * table keyed by content; capacity a power of two */
    struct { const char *ptr; const tprof__istr *e; } pcache[64];
    tprof__istr *strs;
    uint32_t str_cap;
    uint32_t str_count;
    uint32_t str_max;
    void *m_scan;           /* live metrics: the flusher's step-range state (metrics_feed.c) */
    /* runtime allocation calls in progress (capture/cupti_oom.c): the driver allocations a
     * cudaMalloc makes are part of it. Here, not in a TLS variable of its own: the library's
     * TLS is static (initial-exec), and a dlopen'ed library's share of it is scarce */
    int cuda_alloc_depth;
    /* the driver launch whose entry callback ran and whose exit has not yet (capture/cupti.c):
     * its entry time (0: none), correlation id and callback id; here for the same reason */
    uint64_t launch_start;
    uint32_t launch_corr, launch_cbid;
    /* the flusher's: name definitions (STRING, THREAD_NAME records) of chunks the writer
     * could not write, written ahead of the thread's next chunk (core/writer.c) */
    uint8_t *w_defs;
    size_t w_defs_len, w_defs_cap;
} tprof__thread;

/* The calling thread's state, creating it on first use; NULL when not recording or when
 * the thread limit is reached (the event is then counted as dropped process-wide). */
tprof__thread *tprof__thread_slow(void);
extern __thread tprof__thread *tprof__tls __attribute__((tls_model("initial-exec")));

/* Values of tprof__tls that are not rings: a thread whose destructor ran, and a thread
 * beyond max_threads (its events are counted as dropped). */
#define TPROF__DEAD_THREAD ((tprof__thread *)(uintptr_t)1)
#define TPROF__OVER_LIMIT ((tprof__thread *)(uintptr_t)2)
#define TPROF__TLS_SENTINELS 2u

static inline tprof__thread *tprof__thread_get(void) {
    tprof__thread *t = tprof__tls;
    if (TPROF_LIKELY((uintptr_t)t > TPROF__TLS_SENTINELS &&
                     atomic_load_explicit(&tprof__g_state, memory_order_relaxed) == TPROF__ON))
        return t;
    return tprof__thread_slow();
}

#include <time.h>
static inline uint64_t tprof__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reserve `size` bytes (multiple of 8, <= TPROF_MAX_RECORD) in t's ring. Returns NULL when
 * the ring is full, counting a drop if the record is an event. Must be followed by
 * tprof__commit(t, size). */
static inline void *tprof__reserve_ex(tprof__thread *t, uint32_t size, int is_event) {
    uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
    uint64_t ring = t->mask + 1;
    uint64_t off = head & t->mask;
    uint64_t contig = ring - off;
    uint64_t need = contig < size ? contig + size : size;
    if (TPROF_UNLIKELY(head + need - t->tail_cache > ring)) {
        t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
        if (head + need - t->tail_cache > ring) {
            if (is_event) /* name definitions are not events: their loss is not a drop */
                atomic_store_explicit(&t->dropped,
                                      atomic_load_explicit(&t->dropped, memory_order_relaxed) + 1,
                                      memory_order_relaxed);
            return NULL;
        }
    }
    if (TPROF_UNLIKELY(contig < size)) {
        /* pad to the end of the lap so that no record straddles the wrap */
        tprof_rec *pad = (tprof_rec *)(t->buf + off);
        pad->kind = TPROF_REC_PAD;
        pad->size = (uint16_t)contig; /* contig < size <= 65528, so it fits */
        head += contig;
        atomic_store_explicit(&t->head, head, memory_order_relaxed);
        off = 0;
    }
    return t->buf + off;
}

static inline void *tprof__reserve(tprof__thread *t, uint32_t size) {
    return tprof__reserve_ex(t, size, 1);
}

static inline void tprof__commit(tprof__thread *t, uint32_t size) {
    uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
    atomic_store_explicit(&t->head, head + size, memory_order_release);
}

/* A non-application recording thread waits (bounded) for room in its ring instead of
 * dropping (flusher.c). 1 when there is room. */
int tprof__ring_wait_room(tprof__thread *t, uint32_t bytes, int max_ms);

/* Name reference for a record: the id of `name` in t's table (interning it and emitting
 * its STRING record on first use), or TPROF_INLINE_NAME when the table is full or the
 * string record could not be written. *len gets strlen(name). */
uint32_t tprof__intern(tprof__thread *t, const char *name, size_t *len);

/* Append a named record with a fixed payload of pl_bytes (multiple of 8). Returns the
 * payload pointer to fill (then call tprof__commit with *out_size), or NULL on drop. */
void *tprof__begin_named(tprof__thread *t, uint16_t kind, const char *name, uint32_t pl_bytes,
                         uint64_t ts, uint32_t *out_size);

/* Recording primitives shared by the public API and the NVTX injection. */
void tprof__push(tprof__thread *t, uint32_t domain, const char *name, uint32_t category);
void tprof__pop(tprof__thread *t, uint32_t domain);
uint64_t tprof__range_start(tprof__thread *t, uint32_t domain, const char *name,
                            uint32_t category);
void tprof__range_end(tprof__thread *t, uint64_t id);
/* The same with a timestamp the caller already read (one clock read per timer edge). */
uint64_t tprof__range_start_ts(tprof__thread *t, uint32_t domain, const char *name,
                               uint32_t category, uint64_t ts);
void tprof__range_end_ts(tprof__thread *t, uint64_t id, uint64_t ts);
void tprof__mark(tprof__thread *t, uint32_t domain, const char *name, uint32_t category);
void tprof__thread_name(tprof__thread *t, uint64_t os_tid, const char *name);

/* Process-level records (metadata, domains, categories): appended to a locked process
 * stream that the flusher writes as thread serial 0. Not hot path. */
int tprof__proc_record(uint16_t kind, uint32_t arg, const void *payload, size_t pl_bytes,
                       const char *s1, const char *s2);
int tprof__set_meta(const char *key, const char *value);
/* The pause reason a program named last (tprof_set_metadata's "gpu_capture.pause_reason",
 * kept by tprof__pause_reason_named; "" when none), into out (n bytes, truncated): the
 * reason of its next GPU capture pause. Any thread. */
void tprof__pause_reason_named(const char *why);
void tprof__pause_reason(char *out, size_t n);
/* A count kept in the metadata as it grows (the last value of a key is the one a reader
 * keeps): tprof__set_meta_max writes key = n unless this counter already wrote a value at
 * least as large, so a thread that counted early but writes late cannot leave a smaller
 * total last. Any thread; a mutex, for counts written now and then (not per event). */
typedef struct tprof__meta_max {
    pthread_mutex_t lock;
    uint64_t written;
} tprof__meta_max;
#define TPROF__META_MAX_INIT {PTHREAD_MUTEX_INITIALIZER, 0}
void tprof__set_meta_max(tprof__meta_max *m, const char *key, uint64_t n);

/* Domains are process-wide small integers (0 = default); a domain with the same name
 * gets the same id, so NVTX copies in several libraries merge. */
uint32_t tprof__domain_id(const char *name);
void tprof__name_category(uint32_t domain, uint32_t category, const char *name);

/* Capabilities found or missing, for the report ("nvtx" -> "injected into 2 libraries").
 * Recorded in the process stream while the session is on; kept in any case, and written at
 * the start of every file (a new session, a forked child's). */
void tprof__capability(const char *name, const char *status);
/* The same from the flusher about the file it writes (the capability `compression`, decided
 * as it writes the first chunk): recorded whatever the state, since that chunk may be
 * written after shutdown, whose last pass still takes the process stream into the file. */
void tprof__capability_of_file(const char *name, const char *status);

/* NVTX emission to another attached tool while we do not record (core/nvtx_emit.c). */
extern int tprof__emit_on;
void tprof__nvtx_emit_setup(void);
void tprof__emit_push(uint32_t domain, const char *name, uint32_t category);
void tprof__emit_pop(uint32_t domain);
uint64_t tprof__emit_start(uint32_t domain, const char *name, uint32_t category);
void tprof__emit_end(uint32_t domain, uint64_t id);
void tprof__emit_mark(const char *name);
/* Names of process-wide domains and categories (NULL when unknown). */
const char *tprof__domain_name(uint32_t domain);
const char *tprof__category_name(uint32_t domain, uint32_t category);

/* The pid of the process whose session this is (exit_hooks.c: not a vfork child's). */
#include <sys/types.h>
pid_t tprof__session_pid(void);

/* The CUDA devices this process can use, as rank-file metadata cuda.<ordinal>.*
 * (capture/cuda_devices.c): tprof__cuda_describe writes one (uuid: the 16 bytes; clock in
 * kHz), from CUPTI's device records or the driver. The source's tick (its flusher pass)
 * asks the CUDA driver the process initialised itself (never loading or initialising it)
 * about once a second, unless CUPTI is active (then only on the `final` pass, if CUPTI
 * described nothing): the description, then cuda.<ordinal>.in_use for the devices whose
 * primary context is active. */
void tprof__cuda_describe(unsigned ordinal, const unsigned char uuid[16], const char *name,
                          unsigned sm_count, unsigned long long memory_bytes,
                          unsigned clock_khz, unsigned cc_major, unsigned cc_minor);
/* The device `ordinal` is a MIG device: its UUID is written as NVML spells a MIG device's
 * ("MIG-...", replacing the "GPU-..." of tprof__cuda_describe, the last value winning) and its
 * GPU's as cuda.<ordinal>.gpu_uuid (gpu_uuid NULL: not known). Call after the description. */
void tprof__cuda_describe_mig(unsigned ordinal, const unsigned char mig_uuid[16],
                              const unsigned char *gpu_uuid);

/* The GPU capture plan (core/kwindow.c; TRAINPROF_GPU_CAPTURE, TRAINPROF_KERNEL_STEPS).
 * tprof__kwin_watch is 1 while step boundaries must be reported: range pushes/starts pass
 * their names to tprof__kwin_name, tprof_step_begin its number to tprof__kwin_api_step. */
extern _Atomic int tprof__kwin_watch;
void tprof__kwin_init(void);
int tprof__kwin_capture_now(void); /* GPU activity wanted now: "all", or inside a window;
                                    * lock-free, any thread */
int tprof__kwin_active(void);      /* the plan is not "all" (or a detail request came) */
int tprof__kwin_plan_off(void);    /* TRAINPROF_GPU_CAPTURE=off: before a session too */
const char *tprof__kwin_spec(void); /* the plan in effect as given ("auto" by default) */
/* the plan's metadata as a file starts, through `put` (which must not call back here) */
void tprof__kwin_start_meta(void (*put)(const char *key, const char *value));
void tprof__kwin_name(const char *name);
void tprof__kwin_api_step(uint64_t step);
/* A window of `count` steps from step `first` (UINT64_MAX: the next step that begins) on top
 * of the plan, taken by the next step that begins (`id` names it in gpu_capture.requests; 0
 * from the API). Any thread, lock-free against steps. 0; TPROF_ERR_UNAVAILABLE (plan "off"),
 * TPROF_ERR_ALREADY (plan "all": every step is captured), TPROF_ERR_INVALID_ARG (count 0 or
 * past 64 bits). */
int tprof__kwin_demand(uint64_t first, uint64_t count, uint64_t id);
/* The step last begun and the mean time between step beginnings (ns, 0 unknown): 0, or -1
 * when no step began yet (while the plan counts steps: not with "all" or "off"). */
int tprof__kwin_progress(uint64_t *step, uint64_t *step_ns);

/* On-demand windows from outside the job (core/capture_ctl.c), on the flusher thread: each
 * pass (rate-limited inside), the end of the session (the progress file removed), and a
 * forked child (the parent's file and descriptor left alone). */
void tprof__capture_ctl_tick(int final);
void tprof__capture_ctl_end(void);
void tprof__capture_ctl_after_fork(void);

/* Live metrics (core/metrics_feed.c, docs/metrics.md): the endpoint's life with the session,
 * and what the flusher and the samplers feed while tprof__metrics_on (core/metrics.h) is set.
 * Nothing here runs on a training thread. */
void tprof__metrics_session_start(uint64_t start_realtime_ns);
void tprof__metrics_session_stop(void);
void tprof__metrics_after_fork(void);
void tprof__metrics_meta(const char *key, const char *value);
void tprof__metrics_scan(tprof__thread *t, const uint8_t *p, size_t n); /* drained span */
void tprof__metrics_thread_free(void *scan);
void tprof__metrics_pass(uint64_t dropped_total, uint64_t bytes_total);
/* The flusher after each pass, outside the session lock: starts an endpoint deferred to the
 * first step (a process without a local rank). */
void tprof__metrics_after_pass(void);
/* Timers gathered for a log: this rank's elapsed seconds per name (timers/timers.c). */
void tprof__metrics_timers(const char *const *names, const double *seconds, size_t n);
void tprof__metrics_detail(int on);
void tprof__metrics_process(double cpu_s, double rss_bytes, double threads, double ctx);
void tprof__metrics_gpu(unsigned idx, const char *uuid, const char *suffix, double v);
void tprof__metrics_gpu_total_memory(unsigned idx, const char *uuid, double bytes);
/* POST /capture?detail=on|off (core/kwindow.c): detailed capture on (1) or off (0) from the
 * next step that begins. 0 when accepted; TPROF_ERR_UNAVAILABLE under the plan "off". */
int tprof__kwin_request(int on);

void tprof__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remembers which file descriptor 2 is (called as a session starts): later messages are
 * dropped when the program has put another file on descriptor 2, or closed it. */
void tprof__log_bind_stderr(void);
extern int tprof__log_level;

uint64_t tprof__hash(const char *s, size_t *len);

#endif /* TPROF_INTERNAL_H */
