/*
 * perfetto.c — writes a loaded run as a Perfetto protobuf trace (perfetto.h), packet after
 * packet, with its own encoder (pb.h).
 *
 * The events are those of the Chrome export, chosen by the same code (chrome_cw.h: the
 * processes, pids, aligned clock, window, thread sweeps, GPU stream order, communicator
 * tracks). What differs is the shape: a TrackEvent slice is a BEGIN and an END on a track,
 * and a track's slices must nest, so each nested track is written in start order with a
 * stack of the open slices' ends, every END written before the next BEGIN that starts at or
 * after it; slices that do not nest (async ranges) get a track each, as Perfetto's own SDK
 * and its JSON importer give each async id one.
 */
#define _GNU_SOURCE
#include "export/perfetto.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/counter_pack.h"
#include "analysis/gpu.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "export/chrome_cw.h"
#include "export/pb.h"
#include "format/format.h"
#include "trainprof.h"

/* Field numbers and enum values of Perfetto's trace protos (google/perfetto,
 * protos/perfetto/trace/): trace.proto (Trace), trace_packet.proto (TracePacket and its
 * SequenceFlags), interned_data/interned_data.proto (InternedData), track_event/
 * track_event.proto (TrackEvent, its Type, EventCategory, EventName),
 * track_event/track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto and
 * counter_descriptor.proto. tests/data/perfetto/trace_subset.proto holds the same subset. */
enum {
    TRACE_PACKET = 1,
    PKT_TIMESTAMP = 8,
    PKT_SEQ_ID = 10,
    PKT_TRACK_EVENT = 11,
    PKT_INTERNED_DATA = 12,
    PKT_SEQ_FLAGS = 13,
    PKT_TRACK_DESCRIPTOR = 60,
    SEQ_INCREMENTAL_STATE_CLEARED = 1,
    SEQ_NEEDS_INCREMENTAL_STATE = 2,
    ID_EVENT_CATEGORIES = 1,
    ID_EVENT_NAMES = 2,
    INTERNED_IID = 1, /* EventCategory.iid, EventName.iid */
    INTERNED_NAME = 2,
    TD_UUID = 1,
    TD_NAME = 2,
    TD_PROCESS = 3,
    TD_THREAD = 4,
    TD_PARENT_UUID = 5,
    TD_COUNTER = 8,
    PD_PID = 1,
    PD_PROCESS_NAME = 6,
    THD_PID = 1,
    THD_TID = 2,
    THD_THREAD_NAME = 5,
    CD_UNIT = 3,
    CD_UNIT_SIZE_BYTES = 3,
    TE_CATEGORY_IIDS = 3,
    TE_TYPE = 9,
    TE_NAME_IID = 10,
    TE_TRACK_UUID = 11,
    TE_COUNTER_VALUE = 30,
    TE_DOUBLE_COUNTER_VALUE = 44,
    TE_FLOW_IDS = 47,
    TE_TERMINATING_FLOW_IDS = 48,
    TYPE_SLICE_BEGIN = 1,
    TYPE_SLICE_END = 2,
    TYPE_INSTANT = 3,
    TYPE_COUNTER = 4,
};

/* Every packet is on one sequence: one writer, in order. */
#define SEQ_ID 1

/* Categories, interned once in the first packet (iid = index + 1): the Chrome trace's. */
enum { CAT_USER = 1, CAT_ASYNC, CAT_MARK, CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET, CAT_RUNTIME,
       CAT_COMM, CAT_GLOBAL };
static const char *const cat_names[] = {"user_annotation", "async_range", "mark", "kernel",
                                        "gpu_memcpy", "gpu_memset", "cuda_runtime", "comm",
                                        "global"};

/* ------------------------------------------------------------------ a string table */

/* Open addressing, keys copied: event names of the sequence (value: iid) and counter names
 * of a process (value: track uuid). Grows at half full. */
typedef struct strmap {
    char **keys;
    uint64_t *vals;
    size_t cap, n;
} strmap;

static uint64_t hash_str(const char *s) { /* FNV-1a, 64 bit */
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void strmap_free(strmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* The value slot of s, added (value 0, *added = 1) when absent; NULL when out of memory. */
static uint64_t *strmap_get(strmap *m, const char *s, int *added) {
    *added = 0;
    if (2 * (m->n + 1) > m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 64;
        char **nk = calloc(nc, sizeof *nk);
        uint64_t *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = hash_str(m->keys[i]) & (nc - 1);
            while (nk[j]) j = (j + 1) & (nc - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = nc;
    }
    size_t j = hash_str(s) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strcmp(m->keys[j], s)) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!(m->keys[j] = strdup(s))) return NULL;
    m->vals[j] = 0;
    m->n++;
    *added = 1;
    return &m->vals[j];
}

/* ------------------------------------------------------------------ the writer */

typedef struct pw {
    cw w; /* the aligned clock, base, window and latest time, shared with the Chrome export */
    FILE *f;
    tp_pb pkt;
    strmap names;      /* event name -> iid */
    size_t names_bytes; /* what names holds, about (keys and slots) */
    strmap counters;   /* counter name -> track uuid, for the current process */
    uint64_t next_iid; /* of event names */
    uint64_t next_uuid;
    uint64_t proc_uuid; /* the current process's track */
    /* the nested track being written: its uuid and the ends (ns after the base) of its
     * open slices, innermost last */
    uint64_t nest_track;
    int64_t *stack;
    size_t sp, cap;
    tp_perfetto_counts n;
    int rc; /* sticky: the first error */
} pw;

/* Absolute ns on the aligned clock: the Chrome trace's baseTimeNanoseconds + ts. */
static uint64_t abs_ns(const pw *x, int64_t rel) { return x->w.base_rt + (uint64_t)rel; }

static void emit(pw *x) {
    if (x->rc != TPROF_OK) return;
    if (x->pkt.err) {
        x->rc = TPROF_ERR_NO_MEMORY;
        return;
    }
    int rc = tp_pb_write_field(x->f, TRACE_PACKET, &x->pkt);
    if (rc != TPROF_OK) {
        x->rc = rc;
        return;
    }
    uint8_t v[10];
    x->n.bytes += 1 + tp_pb_varint(v, x->pkt.len) + x->pkt.len;
    x->n.packets++;
    tp_pb_reset(&x->pkt);
}

static void packet_open(pw *x) {
    tp_pb_reset(&x->pkt);
    tp_pb_uint(&x->pkt, PKT_SEQ_ID, SEQ_ID);
}

/* The first packet: it clears the sequence's incremental state and interns the
 * categories. */
static void write_first(pw *x) {
    packet_open(x);
    tp_pb_uint(&x->pkt, PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    tp_pb_begin(&x->pkt, PKT_INTERNED_DATA);
    for (size_t i = 0; i < sizeof cat_names / sizeof *cat_names; i++) {
        tp_pb_begin(&x->pkt, ID_EVENT_CATEGORIES);
        tp_pb_uint(&x->pkt, INTERNED_IID, i + 1);
        tp_pb_string(&x->pkt, INTERNED_NAME, cat_names[i]);
        tp_pb_end(&x->pkt);
    }
    tp_pb_end(&x->pkt);
    emit(x);
}

/* ---- tracks: each a TrackDescriptor packet, uuids 1, 2, ... in the order written */

static uint64_t track_open(pw *x, uint64_t parent) {
    uint64_t uuid = ++x->next_uuid;
    packet_open(x);
    tp_pb_begin(&x->pkt, PKT_TRACK_DESCRIPTOR);
    tp_pb_uint(&x->pkt, TD_UUID, uuid);
    if (parent) tp_pb_uint(&x->pkt, TD_PARENT_UUID, parent);
    x->n.tracks++;
    return uuid;
}

static void track_close(pw *x) {
    tp_pb_end(&x->pkt);
    emit(x);
}

static uint64_t process_track(pw *x, int64_t pid, const char *name) {
    uint64_t u = track_open(x, 0);
    tp_pb_begin(&x->pkt, TD_PROCESS);
    tp_pb_int(&x->pkt, PD_PID, pid);
    tp_pb_string(&x->pkt, PD_PROCESS_NAME, name);
    tp_pb_end(&x->pkt);
    track_close(x);
    return u;
}

static uint64_t thread_track(pw *x, int64_t pid, uint32_t tid, const char *name) {
    uint64_t u = track_open(x, x->proc_uuid);
    tp_pb_begin(&x->pkt, TD_THREAD);
    tp_pb_int(&x->pkt, THD_PID, pid);
    tp_pb_int(&x->pkt, THD_TID, (int32_t)tid);
    tp_pb_string(&x->pkt, THD_THREAD_NAME, name);
    tp_pb_end(&x->pkt);
    track_close(x);
    return u;
}

static uint64_t named_track(pw *x, uint64_t parent, const char *name) {
    uint64_t u = track_open(x, parent);
    tp_pb_string(&x->pkt, TD_NAME, name);
    track_close(x);
    return u;
}

/* The counter track of `name` in the current process, written at its first value. */
static uint64_t counter_track(pw *x, const char *name, int bytes) {
    int added;
    uint64_t *v = strmap_get(&x->counters, name, &added);
    if (!v) {
        x->rc = TPROF_ERR_NO_MEMORY;
        return 0;
    }
    if (!added) return *v;
    *v = track_open(x, x->proc_uuid);
    tp_pb_string(&x->pkt, TD_NAME, name);
    tp_pb_begin(&x->pkt, TD_COUNTER);
    if (bytes) tp_pb_uint(&x->pkt, CD_UNIT, CD_UNIT_SIZE_BYTES);
    tp_pb_end(&x->pkt);
    track_close(x);
    return *v;
}

/* ---- events */

typedef struct ev {
    int type, cat;
    uint64_t track;
    const char *name;      /* NULL: none (END, COUNTER) */
    uint64_t flow, tflow;  /* flow_ids, terminating_flow_ids; 0 = none */
    int is_double;         /* COUNTER: double_counter_value, else counter_value */
    double dv;
    int64_t iv;
} ev;

/* The table of interned names is kept under this many bytes: past it, the sequence's
 * incremental state is cleared (a packet like the first, which interns the categories again)
 * and names are interned anew from iid 1, so that what the writer holds across processes is
 * bounded whatever the number of distinct names in the run (a run of fewer names never gets
 * there, and its trace does not change). */
#ifndef TP_PERFETTO_NAMES_MAX_BYTES
#define TP_PERFETTO_NAMES_MAX_BYTES (64u << 20)
#endif

static void write_event(pw *x, int64_t rel, const ev *e) {
    if (x->rc != TPROF_OK) return;
    uint64_t iid = 0;
    int added = 0;
    if (e->name) {
        if (x->names_bytes > TP_PERFETTO_NAMES_MAX_BYTES) {
            strmap_free(&x->names);
            x->names_bytes = 0;
            x->next_iid = 0;
            write_first(x);
            if (x->rc != TPROF_OK) return;
        }
        uint64_t *v = strmap_get(&x->names, e->name, &added);
        if (!v) {
            x->rc = TPROF_ERR_NO_MEMORY;
            return;
        }
        if (added) {
            *v = ++x->next_iid;
            x->names_bytes += strlen(e->name) + 1 + 2 * (sizeof(char *) + sizeof(uint64_t));
        }
        iid = *v;
    }
    tp_pb *b = &x->pkt;
    packet_open(x);
    tp_pb_uint(b, PKT_TIMESTAMP, abs_ns(x, rel));
    tp_pb_uint(b, PKT_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
    if (added) { /* a name is interned in the packet that first uses it */
        tp_pb_begin(b, PKT_INTERNED_DATA);
        tp_pb_begin(b, ID_EVENT_NAMES);
        tp_pb_uint(b, INTERNED_IID, iid);
        tp_pb_string(b, INTERNED_NAME, e->name);
        tp_pb_end(b);
        tp_pb_end(b);
    }
    tp_pb_begin(b, PKT_TRACK_EVENT);
    if (e->cat) tp_pb_uint(b, TE_CATEGORY_IIDS, (uint64_t)e->cat);
    if (iid) tp_pb_uint(b, TE_NAME_IID, iid);
    tp_pb_uint(b, TE_TYPE, (uint64_t)e->type);
    tp_pb_uint(b, TE_TRACK_UUID, e->track);
    if (e->type == TYPE_COUNTER) {
        if (e->is_double) tp_pb_double(b, TE_DOUBLE_COUNTER_VALUE, e->dv);
        else tp_pb_int(b, TE_COUNTER_VALUE, e->iv);
    }
    if (e->flow) tp_pb_fixed64(b, TE_FLOW_IDS, e->flow);
    if (e->tflow) tp_pb_fixed64(b, TE_TERMINATING_FLOW_IDS, e->tflow);
    tp_pb_end(b);
    emit(x);
    if (e->type == TYPE_SLICE_BEGIN) x->n.slices++;
    else if (e->type == TYPE_INSTANT) x->n.instants++;
    else if (e->type == TYPE_COUNTER) x->n.counters++;
}

/* Ends the open slices of the nested track that end at or before t (all: t = INT64_MAX). */
static void nest_close(pw *x, int64_t t) {
    while (x->sp && x->stack[x->sp - 1] <= t) {
        ev e = {.type = TYPE_SLICE_END, .track = x->nest_track};
        write_event(x, x->stack[--x->sp], &e);
    }
}

/* Starts writing the nested track `track` (its slices come in start order). */
static void nest_track(pw *x, uint64_t track) {
    nest_close(x, INT64_MAX);
    x->nest_track = track;
}

/* A slice [ts, te] of the nested track. One that would end after the slice that encloses
 * it is cut at that slice's end (a viewer would otherwise end the wrong slice); the sweep
 * and the communicator tracks never hand over one, the CUDA API track may. */
static void nest_slice(pw *x, int64_t ts, int64_t te, const char *name, int cat, uint64_t flow,
                       uint64_t tflow) {
    nest_close(x, ts);
    if (x->sp && te > x->stack[x->sp - 1]) te = x->stack[x->sp - 1];
    if (x->sp == x->cap) {
        size_t nc = x->cap ? 2 * x->cap : 64;
        int64_t *ns = realloc(x->stack, nc * sizeof *ns);
        if (!ns) {
            x->rc = TPROF_ERR_NO_MEMORY;
            return;
        }
        x->stack = ns;
        x->cap = nc;
    }
    ev e = {.type = TYPE_SLICE_BEGIN, .cat = cat, .track = x->nest_track, .name = name,
            .flow = flow, .tflow = tflow};
    write_event(x, ts, &e);
    x->stack[x->sp++] = te;
}

/* A slice that does not nest: a track of its own, child of the process. */
static void async_slice(pw *x, int64_t ts, int64_t te, const char *name) {
    uint64_t t = named_track(x, x->proc_uuid, name);
    ev b = {.type = TYPE_SLICE_BEGIN, .cat = CAT_ASYNC, .track = t, .name = name};
    ev e = {.type = TYPE_SLICE_END, .track = t};
    write_event(x, ts, &b);
    write_event(x, te, &e);
}

static void counter_value(pw *x, uint64_t track, int64_t ts, int is_double, double dv,
                          int64_t iv) {
    ev e = {.type = TYPE_COUNTER, .track = track, .is_double = is_double, .dv = dv, .iv = iv};
    write_event(x, ts, &e);
}

/* ------------------------------------------------------------------ thread tracks */

typedef struct proc_ctx {
    pw *x;
    const tp_process *p;
    int64_t pid;
    uint64_t *tuuid; /* thread track per thread index (those sharing an os tid share one) */
} proc_ctx;

static int sweep_slice(void *ctx, const tp_cw_slice *sl) {
    proc_ctx *c = ctx;
    pw *x = c->x;
    int64_t ts = tp_cw_rel_ns(&x->w, c->p, sl->start), te = tp_cw_rel_ns(&x->w, c->p, sl->end);
    if (!tp_cw_in_win(&x->w, ts, te)) return x->rc;
    if (sl->nested) nest_slice(x, ts, te, sl->name, CAT_USER, 0, 0);
    else async_slice(x, ts, te, sl->name);
    tp_cw_note_time(&x->w, te);
    return x->rc;
}

/* The events of the threads of p whose os tid is `tid`, on thread track `track`: the swept
 * ranges and steps, then start/end ranges, marks and counters (as the Chrome track). */
static void write_thread(proc_ctx *c, uint32_t tid, uint64_t track, const tp_steps *steps,
                         tp_cw_scratch *sc) {
    pw *x = c->x;
    const tp_process *p = c->p;
    nest_track(x, track);
    int rc = tp_cw_sweep(p, tid, steps, sc, sweep_slice, c);
    if (rc != TPROF_OK && x->rc == TPROF_OK) x->rc = rc;
    nest_close(x, INT64_MAX);
    for (size_t t = 0; t < p->nthreads && x->rc == TPROF_OK; t++) {
        const tp_thread *th = &p->threads[t];
        if (th->os_tid != tid) continue;
        for (size_t k = 0; k < th->nranges; k++) {
            const tp_range *r = &th->ranges[k];
            if (!(r->flags & TP_R_ASYNC)) continue;
            int64_t ts = tp_cw_rel_ns(&x->w, p, r->start), te = tp_cw_rel_ns(&x->w, p, r->end);
            if (!tp_cw_in_win(&x->w, ts, te)) continue;
            async_slice(x, ts, te, r->name);
            tp_cw_note_time(&x->w, te);
        }
        for (size_t k = 0; k < th->nmarks; k++) {
            const tp_mark *m = &th->marks[k];
            int64_t ts = tp_cw_rel_ns(&x->w, p, m->ts);
            if (!tp_cw_in_win(&x->w, ts, ts)) continue;
            ev e = {.type = TYPE_INSTANT, .cat = CAT_MARK, .track = track, .name = m->name};
            write_event(x, ts, &e);
            tp_cw_note_time(&x->w, ts);
        }
        tp_counter_it it;
        tp_counter cv;
        tp_counter_it_init(&it, th); /* an export's process is whole: its array is read */
        while (tp_counter_next(&it, &cv)) {
            const tp_counter *ct = &cv;
            if (!isfinite(ct->value)) continue; /* as the JSON, which cannot hold them */
            int64_t ts = tp_cw_rel_ns(&x->w, p, ct->ts);
            if (!tp_cw_counter_wanted(&x->w, ct->name, ts) || !tp_cw_in_win(&x->w, ts, ts))
                continue;
            uint64_t u = counter_track(x, ct->name, 0);
            if (u) counter_value(x, u, ts, 1, ct->value, 0);
            tp_cw_note_time(&x->w, ts);
        }
        tp_counter_it_done(&it);
    }
}

static uint64_t thread_uuid_of(const proc_ctx *c, uint32_t tid) {
    for (size_t t = 0; t < c->p->nthreads; t++)
        if (c->p->threads[t].os_tid == tid) return c->tuuid[t];
    return 0;
}

/* ------------------------------------------------------------------ GPU, runtime, comm */

static int op_cat(const tp_gpu_op *o) {
    return o->type == TPROF_REC_GPU_KERNEL ? CAT_KERNEL
           : o->type == TPROF_REC_GPU_MEMCPY ? CAT_MEMCPY : CAT_MEMSET;
}

/* Kernels, copies and memsets per device and stream, with the flow from the launch that
 * put each there (CUPTI's correlation id, flow ids as the Chrome trace's). */
static void write_gpu_ops(proc_ctx *c, const tp_gpu_op **ops, size_t n,
                          const tp_gpu_op **by_corr) {
    pw *x = c->x;
    const tp_process *p = c->p;
    uint64_t flow_base = (uint64_t)c->pid << 32, dev_track = 0;
    uint32_t last_tid = 0, last_dev = 0;
    int have_dev = 0;
    char nb[64], tn[64];
    for (size_t i = 0; i < n && x->rc == TPROF_OK; i++) {
        const tp_gpu_op *o = ops[i];
        uint32_t tid = tp_cw_gpu_tid(o->device, o->stream);
        if (tid != last_tid) {
            if (!have_dev || o->device != last_dev) {
                snprintf(tn, sizeof tn, "GPU %" PRIu32, o->device);
                nest_track(x, 0);
                dev_track = named_track(x, x->proc_uuid, tn);
                last_dev = o->device;
                have_dev = 1;
            }
            snprintf(tn, sizeof tn, "GPU %" PRIu32 " stream %" PRIu32, o->device, o->stream);
            nest_track(x, named_track(x, dev_track, tn));
            last_tid = tid;
        }
        int64_t ts = tp_cw_rel_ns(&x->w, p, o->start);
        int64_t te = tp_cw_rel_ns(&x->w, p, tp_cw_gpu_end(ops, n, i));
        if (!tp_cw_in_win(&x->w, ts, te)) continue;
        const tp_gpu_op *hit = tp_cw_launch_of(by_corr, p->napi, o);
        uint64_t tflow = hit && tp_cw_in_win(&x->w, tp_cw_rel_ns(&x->w, p, hit->start),
                                             tp_cw_rel_ns(&x->w, p, hit->end))
                             ? flow_base | o->correlation
                             : 0;
        nest_slice(x, ts, te, tp_cw_gpu_name(o, nb, sizeof nb), op_cat(o), 0, tflow);
        tp_cw_note_time(&x->w, te);
    }
    nest_track(x, 0);
}

/* Runtime calls, on a "CUDA API" child track of the thread that made them. */
static void write_api(proc_ctx *c, const tp_gpu_op **apis) {
    pw *x = c->x;
    const tp_process *p = c->p;
    uint64_t flow_base = (uint64_t)c->pid << 32;
    char tn[64];
    for (size_t i = 0; i < p->napi && x->rc == TPROF_OK; i++) {
        const tp_gpu_op *a = apis[i];
        if (!i || a->os_tid != apis[i - 1]->os_tid) {
            uint64_t parent = thread_uuid_of(c, a->os_tid);
            snprintf(tn, sizeof tn, "CUDA API (thread %" PRIu32 ")", a->os_tid);
            nest_track(x, 0);
            nest_track(x, named_track(x, parent ? parent : x->proc_uuid, tn));
        }
        int64_t ts = tp_cw_rel_ns(&x->w, p, a->start), te = tp_cw_rel_ns(&x->w, p, a->end);
        if (!tp_cw_in_win(&x->w, ts, te)) continue;
        nest_slice(x, ts, te, a->name ? a->name : "cuda runtime call", CAT_RUNTIME,
                   a->correlation ? flow_base | a->correlation : 0, 0);
        tp_cw_note_time(&x->w, te);
    }
    nest_track(x, 0);
}

/* Device memory allocated, per device (as the Chrome trace's counter). */
static int gmem_value(void *ctx, uint32_t device, int64_t rel_ns, int64_t bytes) {
    pw *x = ctx;
    char name[64];
    snprintf(name, sizeof name, "GPU %" PRIu32 " memory allocated (bytes)", device);
    uint64_t u = counter_track(x, name, 1);
    if (u) counter_value(x, u, rel_ns, 0, 0, bytes);
    return x->rc != TPROF_OK;
}

static void write_gmem(proc_ctx *c) {
    tp_cw_gpu_mem_walk(&c->x->w, c->p, gmem_value, c->x);
}

static void write_gpu(proc_ctx *c) {
    pw *x = c->x;
    const tp_process *p = c->p;
    if (!p->ngpu && !p->napi && !p->ngmem) return;
    size_t n = 0;
    const tp_gpu_op **ops = tp_cw_gpu_ops(p, &n);
    const tp_gpu_op **by_corr = malloc((p->napi ? p->napi : 1) * sizeof *by_corr);
    const tp_gpu_op **by_thread = malloc((p->napi ? p->napi : 1) * sizeof *by_thread);
    if (!ops || !by_corr || !by_thread) {
        x->rc = TPROF_ERR_NO_MEMORY;
    } else {
        for (size_t i = 0; i < p->napi; i++) by_corr[i] = by_thread[i] = &p->api[i];
        if (p->napi > 1) {
            qsort(by_corr, p->napi, sizeof *by_corr, tp_cw_cmp_api_corr);
            qsort(by_thread, p->napi, sizeof *by_thread, tp_cw_cmp_api_thread);
        }
        write_gpu_ops(c, ops, n, by_corr);
        write_api(c, by_thread);
        write_gmem(c);
    }
    free(ops);
    free(by_corr);
    free(by_thread);
}

static int comm_op(void *ctx, const tp_cw_comm_ev *e) {
    proc_ctx *c = ctx;
    pw *x = c->x;
    if (e->first) {
        char tn[96];
        snprintf(tn, sizeof tn, "comm 0x%016" PRIx64 " (%" PRIu32 " ranks, rank %" PRIu32 ")",
                 e->op->comm_hash, e->op->nranks, e->op->rank);
        nest_track(x, 0);
        nest_track(x, named_track(x, x->proc_uuid, tn));
    }
    int64_t ts = tp_cw_rel_ns(&x->w, c->p, e->start), te = tp_cw_rel_ns(&x->w, c->p, e->end);
    if (tp_cw_in_win(&x->w, ts, te)) {
        nest_slice(x, ts, te, e->name, CAT_COMM, 0, 0);
        tp_cw_note_time(&x->w, te);
    }
    return x->rc;
}

/* ------------------------------------------------------------------ processes */

static void write_process(pw *x, const tp_process *p, int64_t pid, const tp_export_opts *opts,
                          tp_cw_scratch *sc) {
    char *pname = tp_cw_process_name(p);
    uint64_t *tuuid = malloc((p->nthreads ? p->nthreads : 1) * sizeof *tuuid);
    if (!pname || !tuuid) {
        free(pname);
        free(tuuid);
        x->rc = TPROF_ERR_NO_MEMORY;
        return;
    }
    x->proc_uuid = process_track(x, pid, pname);
    free(pname);
    strmap_free(&x->counters);
    proc_ctx c = {x, p, pid, tuuid};
    char tn[32];
    for (size_t t = 0; t < p->nthreads; t++) {
        if (!tp_cw_first_of_tid(p, t)) {
            tuuid[t] = thread_uuid_of(&c, p->threads[t].os_tid);
            continue;
        }
        const char *name = tp_cw_thread_name(p, t);
        if (!name) {
            snprintf(tn, sizeof tn, "thread %" PRIu32, p->threads[t].os_tid);
            name = tn;
        }
        tuuid[t] = thread_track(x, pid, p->threads[t].os_tid, name);
    }

    tp_steps st;
    int rc = tp_find_steps(p, opts->step_name, opts->warmup, &st);
    if (rc != TPROF_OK) {
        x->rc = rc;
        free(tuuid);
        return;
    }
    /* only API steps are events of their own (the Chrome export says why) */
    int api = (st.source == TP_STEPS_API || st.source == TP_STEPS_ITERATION) &&
              st.thread < p->nthreads;
    uint32_t step_tid = api ? p->threads[st.thread].os_tid : 0;
    for (size_t t = 0; t < p->nthreads && x->rc == TPROF_OK; t++) {
        if (!tp_cw_first_of_tid(p, t)) continue;
        uint32_t tid = p->threads[t].os_tid;
        write_thread(&c, tid, tuuid[t], api && tid == step_tid ? &st : NULL, sc);
    }
    tp_steps_free(&st);
    if (x->rc == TPROF_OK) write_gpu(&c);
    if (x->rc == TPROF_OK) {
        rc = tp_cw_comm_walk(p, comm_op, &c);
        if (rc != TPROF_OK && x->rc == TPROF_OK) x->rc = rc;
        nest_track(x, 0);
    }
    free(tuuid);
}

int tp_export_perfetto(const tp_run *run, FILE *out, const tp_export_opts *opts,
                       tp_perfetto_counts *counts) {
    static const tp_export_opts no_opts = {NULL, 1};
    if (counts) memset(counts, 0, sizeof *counts);
    if (!run || !out) return TPROF_ERR_INVALID_ARG;
    if (!opts) opts = &no_opts;
    size_t *sel, nsel;
    int rc = tp_cw_select_merged(run, opts, &sel, &nsel);
    if (rc != TPROF_OK) return rc;
    int64_t *pids = malloc((nsel ? nsel : 1) * sizeof *pids);
    pw x = {.f = out};
    tp_clocks_result own;
    memset(&own, 0, sizeof own);
    rc = pids ? tp_cw_assign_pids(run, sel, nsel, 1, pids) : TPROF_ERR_NO_MEMORY;
    if (rc == TPROF_OK) rc = tp_cw_setup(&x.w, run, sel, nsel, 1, opts, &own);
    if (rc == TPROF_OK) {
        x.w.f = NULL; /* no JSON: the shared state only */
        write_first(&x);
        tp_cw_scratch sc = {0};
        uint64_t first_proc = 0;
        /* one process in memory at a time: a slim one's file is read again whole just
         * before its events are written and freed after them */
        for (size_t i = 0; i < nsel && x.rc == TPROF_OK; i++) {
            tp_process whole;
            const tp_process *q = tp_cw_acquire(&x.w, sel[i], &whole, &x.rc);
            if (!q) break;
            write_process(&x, q, pids[i], opts, &sc);
            tp_cw_release(&x.w, q, &whole);
            if (!i) first_proc = x.proc_uuid;
            if (x.rc == TPROF_OK && ferror(out)) x.rc = TPROF_ERR_IO; /* a full disk */
        }
        tp_cw_scratch_free(&sc);
        /* the end of the recorded window, as the Chrome trace's global instant */
        ev e = {.type = TYPE_INSTANT, .cat = CAT_GLOBAL, .track = first_proc,
                .name = "Record Window End"};
        write_event(&x, tp_cw_end_time(&x.w, sel, nsel), &e);
        rc = x.rc;
    }
    if (rc == TPROF_OK && (fflush(out) != 0 || ferror(out))) rc = TPROF_ERR_IO;
    if (counts) *counts = x.n;
    tp_pb_free(&x.pkt);
    strmap_free(&x.names);
    strmap_free(&x.counters);
    free(x.stack);
    free(pids);
    free(sel);
    tp_clocks_result_free(&own);
    return rc;
}
