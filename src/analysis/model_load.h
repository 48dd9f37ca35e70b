/*
 * model_load.h — what the two halves of the rank-file loader share: the per-file loading state
 * (model.c reads a file and assembles the run; model_records.c turns each record into the
 * model and keeps the run's string pool). Private to src/analysis/model*.c (and
 * summary_slim.c, which checks a decoded header as the loader leaves one). One loader reads
 * one file on one thread; several loaders may fill one run at once (the pool locks).
 */
#ifndef TP_MODEL_LOAD_H
#define TP_MODEL_LOAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "analysis/alloc.h"
#include "analysis/counter_pack.h"
#include "analysis/model.h"
#include "format/reader.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ string pool */

/* What the loader derives from a kernel name once: its demangled form and class. Keyed by
 * the interned name's address (one address per distinct name in a run). */
typedef struct tp_kname {
    const char *raw, *shown;
    uint8_t cls;
} tp_kname;

/* One lock over the whole pool (interning and the kernel-name memo): loaders of several
 * files fill one run at once (the report's rank sections, report.c). A string is interned once
 * per STRING record and a loader keeps its own memo of kernel names (loader.kcache), so the
 * lock is not taken per event. */
typedef struct tp_pool {
    pthread_mutex_t lock;
    char **slots; /* open addressing by FNV hash */
    size_t cap, count;
    tp_kname *kn; /* open addressing by address */
    size_t kn_cap, kn_count;
    char *arena;
    size_t arena_left;
    char **blocks;
    size_t nblocks;
} tp_pool;

/* the smallest STRING or DOMAIN record: header, one byte of name and its NUL, padded to 8 */
#define MIN_NAMED_REC 24u

/* ------------------------------------------------------------------ growth helpers */

/* Room for one more in the parallel arrays *a (elements of asz bytes) and *b (bsz bytes),
 * *cap of each, doubled from `first`: TPROF_OK, or TPROF_ERR_NO_MEMORY (both arrays valid,
 * *a perhaps grown, *cap as it was). */
static inline int tp_grow_pair(void **a, size_t asz, void **b, size_t bsz, size_t *cap,
                               size_t first) {
    size_t nc = *cap ? 2 * *cap : first;
    void *na = tp_realloc(*a, nc * asz);
    if (!na) return TPROF_ERR_NO_MEMORY;
    *a = na;
    void *nb = tp_realloc(*b, nc * bsz);
    if (!nb) return TPROF_ERR_NO_MEMORY;
    *b = nb;
    *cap = nc;
    return TPROF_OK;
}

#define PUSH(arr, n, cap, val)                                            \
    do {                                                                  \
        if ((n) == (cap)) {                                               \
            size_t nc_ = (cap) ? (cap) * 2 : 16;                          \
            void *np_ = tp_realloc((arr), nc_ * sizeof *(arr));           \
            if (!np_) return TPROF_ERR_NO_MEMORY;                         \
            (arr) = np_;                                                  \
            (cap) = nc_;                                                  \
        }                                                                 \
        (arr)[(n)++] = (val);                                             \
    } while (0)

/* ------------------------------------------------------------------ loading one file */

typedef struct stack {
    uint32_t domain;
    int32_t *idx;
    size_t n, cap;
} stack;

typedef struct tload { /* per-thread state while reading */
    const char **strs;
    size_t nstrs, cap_strs;
    stack *stacks;
    size_t nstacks;
    size_t drop_open; /* index + 1 in p->drops of the window waiting for its end, else 0 */
    int drop_wrap;    /* the open window's drain may still continue past the ring's end */
    /* a light load's step events, packed as they come (step_pack.h): the buffer's size and
     * the event packed last */
    size_t step_cap;
    tp_stepev step_prev;
    tp_cpack cpack; /* its counters, packed as they come (counter_pack.h) */
} tload;

typedef struct pending_end {
    uint64_t id, ts;
    uint32_t os_tid;
} pending_end;

typedef struct loader {
    tp_run *run;
    tp_process *p;
    tload *tl; /* indexed like p->threads */
    pending_end *ends;
    size_t nends, cap_ends;
    uint64_t bad_records;
    /* String and domain ids are handed out densely from 1, one per record of at least
     * MIN_NAMED_REC bytes, so none can exceed what the file could hold; a larger id is damage,
     * which must not make the tables grow (a 24-byte record would cost gigabytes). */
    uint64_t max_id;
    struct { uint64_t tid; const char *name; } pending[64]; /* names of unseen threads */
    size_t npending;
    int light; /* tp_run_load_slim: GPU records and allocations counted, not kept */
    tp_kname kcache[64]; /* this loader's kernel names, by the raw name's address */
    struct tp_rstream *rs; /* ranges compacted as they are read (model_stream.c), or NULL */
    size_t gpu_max;        /* tp_process_load_bounded: the window's bound; 0 when whole */
    uint32_t fence_at[256]; /* p->gpu_fences by a hash of (device, stream): its index + 1, 0
                             * none (a stream whose slot another took is looked for in all) */
    /* Metadata as read (tp_load_proc_record): the last value of a key wins, so a key written
     * again replaces its entry rather than adding one. meta_at: p->meta's index + 1 of each
     * key by its interned address (meta_cap slots, a power of two, at most half full);
     * meta_val: the value each entry holds while the file is read, a heap copy, interned
     * once read (tp_load_meta_settle): a list rewritten at every change (the runtime's
     * gpu_capture.windows, 4 kB, a few hundred times) leaves its last value alone in the
     * run's string pool, where every value was kept, half a megabyte a rank file. */
    size_t *meta_at, meta_cap;
    char **meta_val; /* meta_vcap entries, parallel to p->meta; NULL: interned already */
    size_t meta_vcap;
    /* What the load does with the communication ops (model.h, tp_comm_read): NULL keeps
     * them all; comm_seen counts them in the file's order; comm_only: the other thread
     * records are skipped (tp_process_read_comm) */
    const struct tp_comm_read *comm;
    size_t comm_seen;
    int comm_only;
} loader;

/* The metadata values held as read (loader.meta_val) interned into the run's pool, and the
 * loader's tables of them freed: called once the file is read, before anything keeps a
 * pointer to a value. */
void tp_load_meta_settle(loader *L);

/* The streams a bounded load keeps a fence for (tp_gpu_fence); past them, the last record
 * held on another stream is bounded by none (its end as recorded). */
#define TP_GPU_FENCES_MAX 4096

/* The window of a bounded load of slim process `sizes`'s file into p (model.h,
 * tp_process_load_bounded: p's gpu_window_from/to and gpu_bound set): b->max when its GPU
 * records are more than that, else 0 (no window: every record kept). */
size_t tp_load_gpu_window(tp_process *p, const tp_process *sizes, const tp_gpu_bound *b);
/* A bounded load's window still open at the end of the file (never cut: from tp_gpu_bound.from
 * on, or past the last sample) ends just past the process's end, so that it names the time it
 * holds. */
void tp_load_gpu_window_close(tp_process *p);

/* A line in the process's damage list (what the report shows of a damaged file). */
void tp_load_damage(tp_process *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The index in p->threads of the thread with this serial (added when new), or -1 on no memory. */
int tp_load_thread_index(loader *L, uint32_t serial, uint32_t os_tid);
/* A process-level record (metadata, domains, categories, drops, ...): 0 or a TPROF_ERR_*. */
int tp_load_proc_record(loader *L, const tprof_rec *r);
/* One record of thread ti, to its kind's handler: 0, or TPROF_ERR_NO_MEMORY. */
int tp_load_thread_record(loader *L, int ti, const tprof_rec *r);
/* Widens thread t's first/last timestamps to ts (0: no time). */
void tp_load_seen(tp_thread *t, uint64_t ts);
/* Copies s into dst as valid UTF-8 (bad bytes become U+FFFD); dst has room for 3*n+1. */
size_t tp_load_utf8(const char *s, size_t n, char *dst);
/* A kernel's shown name (demangled) and class into op, derived once per distinct name; `raw`
 * must be interned in the run (tp_intern): the memo is keyed by its address. */
void tp_load_kernel_name(tp_run *run, const char *raw, tp_gpu_op *op);
/* The files of a run, each with its kind: a rank file or a torch.profiler trace (model_files.c). */
typedef struct tp_flist {
    char **v;               /* owned paths */
    unsigned char *kineto;  /* 1: a trace */
    size_t n;
} tp_flist;
/* Appends the files one operand names: a directory's rank files (sorted by name), else its
 * torch.profiler traces (*.json, *.json.gz whose content is one); a file (a rank file by its
 * magic or name, anything else read as a trace, so that a damaged one is named); or the
 * matches of a glob pattern. 0, or TPROF_ERR_IO / TPROF_ERR_NOT_FOUND with err filled,
 * TPROF_ERR_NO_MEMORY. */
int tp_load_operand_files(const char *op, tp_flist *fl, char *err, size_t errlen);
void tp_flist_free(tp_flist *fl);
/* A new, empty pool (tp_load_pool_free), or NULL. */
struct tp_pool *tp_load_pool_new(void);
/* What the rank-file loader does last, for a process another loader filled (kineto_load.c):
 * each thread's nesting (child_ns, TP_R_NESTED_SAME; parents and start order already set),
 * rank identity from the metadata, GPU records in start order and clipped to their streams.
 * 0 or TPROF_ERR_NO_MEMORY. */
int tp_load_finish_foreign(tp_process *p);
/* ------------------------------------------------------------------ streamed ranges */

/* The ranges of a file in bounded memory (model.h, tp_range_stream; model_stream.c); pub NULL:
 * a slim load's, which keeps of each thread's ranges what tp_process_slim would (the last one
 * and those around it) plus the open ones. NULL on no memory. */
struct tp_rstream *tp_stream_new(tp_range_stream *pub);
/* Hooks of the record handlers: thread ti's range k was pushed / popped at ts (0 or
 * TPROF_ERR_NO_MEMORY); tp_stream_room before a push makes room in a full array. */
int tp_stream_room(loader *L, size_t ti);
int tp_stream_push(loader *L, size_t ti, size_t k);
int tp_stream_pop(loader *L, size_t ti, size_t k, uint64_t ts);
/* After the ends are matched and the open ranges' ends set (finish_process): the last ranges
 * handed over (take mode) and the stream's marks cleared. */
int tp_stream_finish(loader *L);
void tp_stream_free(struct tp_rstream *s);

/* A header text field of n bytes (host, run_id, build) as the loader keeps it: raw bytes
 * made valid UTF-8 (bad bytes become U+FFFD) without control bytes, cut to the field on a
 * character boundary and NUL-terminated there; the bytes past the NUL are left as they are.
 * In place. */
void tp_load_clean_field(char *f, size_t n);

/* p's rank identity from its metadata (the last values; tp_meta_int): rank, world_size and
 * local_rank, -1 where absent, as every load sets them (a rank file, a trace, a summary). */
void tp_load_identity(tp_process *p);

/* Frees the run's string pool (tp_run_free). */
void tp_load_pool_free(struct tp_pool *p);

#endif /* TP_MODEL_LOAD_H */
