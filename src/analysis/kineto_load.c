/*
 * kineto_load.c — torch.profiler / Kineto traces into the run model (kineto.h).
 *
 * The text is read once through zlib's gzread (which passes an uncompressed file through
 * unchanged) in 64 KiB blocks. A small scanner finds the extent of each JSON value at the
 * top level and of each element of "traceEvents"; only that one value is handed to cJSON,
 * so memory is the model plus the largest single event, whatever the file's size. Any
 * syntax error, a value of the wrong type, a gzip stream that ends early or a document
 * without "traceEvents" fails the whole file with one line naming it: a half-read trace
 * would give figures that look right and are not.
 *
 * Times are kept while reading as signed nanoseconds plus KIN_BIAS (so that a trace whose
 * "ts" are relative to baseTimeNanoseconds, and may precede it, fits unsigned fields), and
 * shifted at the end so that the earliest event is at KIN_ORIGIN on the process's clock.
 */
#define _GNU_SOURCE
#include "analysis/kineto.h"
#include "analysis/alloc.h"
#include "analysis/hash.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "analysis/kineto_json.h"
#include "analysis/model_load.h"
#include "format/format.h"
#include "trainprof.h"

#define KIN_ORIGIN 1000000000ull /* the earliest event, after the shift (1 s) */
#define KIN_SNIFF_BYTES (1u << 20)

/* ------------------------------------------------------------------ the state of one file */

typedef struct kthread {
    int64_t pid, tid;
    size_t *open; /* B events waiting for their E: indices in the thread's ranges */
    size_t nopen, cap_open;
} kthread;

typedef struct kend {
    uint64_t key, ts;
    uint32_t tid;
} kend;

typedef struct kst {
    kin in;
    tp_run *run;
    tp_process *p;
    kthread *kt; /* parallel to p->threads */
    size_t last_thread;
    int64_t main_pid;
    int have_main_pid;
    size_t event_no;
    kend *ends;
    size_t nends, cap_ends;
    uint32_t *comm_corr; /* parallel to p->comm: the NCCL kernel's correlation id */
    size_t cap_corr;
    int comm_events; /* the trace holds trainprof's own "comm" events */
    size_t nccl_kernels;
    int64_t base_ns;
    int have_base;
    int rank, world_size;
    const char *backend;
    char host[64];
} kst;

static int bad_type(kst *s, const char *member, const char *want) {
    return tp_kin_fail(&s->in, "traceEvents[%zu].%s is not %s", s->event_no, member, want);
}

/* A thread id or process id: a number, or a string (hashed: some traces name GPU rows). */
static int id_of(kst *s, const cJSON *j, const char *member, int64_t *out) {
    *out = 0;
    if (!j) return 0;
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        *out = isfinite(d) && fabs(d) < 9e18 ? (int64_t)d : 0;
        return 0;
    }
    if (cJSON_IsString(j)) {
        uint64_t h = 1469598103934665603ull;
        for (const char *c = j->valuestring; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
        *out = (int64_t)(h >> 33);
        return 0;
    }
    return bad_type(s, member, "a number or a string");
}

static int thread_of(kst *s, int64_t pid, int64_t tid, size_t *out) {
    tp_process *p = s->p;
    if (s->last_thread < p->nthreads && s->kt[s->last_thread].pid == pid &&
        s->kt[s->last_thread].tid == tid) {
        *out = s->last_thread;
        return 0;
    }
    for (size_t i = 0; i < p->nthreads; i++)
        if (s->kt[i].pid == pid && s->kt[i].tid == tid) {
            *out = s->last_thread = i;
            return 0;
        }
    tp_thread *nt = tp_realloc(p->threads, (p->nthreads + 1) * sizeof *nt);
    if (!nt) return TPROF_ERR_NO_MEMORY;
    p->threads = nt;
    kthread *nk = tp_realloc(s->kt, (p->nthreads + 1) * sizeof *nk);
    if (!nk) return TPROF_ERR_NO_MEMORY;
    s->kt = nk;
    memset(&p->threads[p->nthreads], 0, sizeof *nt);
    memset(&s->kt[p->nthreads], 0, sizeof *nk);
    p->threads[p->nthreads].serial = (uint32_t)p->nthreads + 1;
    p->threads[p->nthreads].os_tid = (uint32_t)tid;
    s->kt[p->nthreads].pid = pid;
    s->kt[p->nthreads].tid = tid;
    *out = s->last_thread = p->nthreads++;
    return 0;
}

/* The category's id in the process's default domain (one per distinct "cat"). */
static uint32_t category_of(kst *s, const char *cat) {
    tp_process *p = s->p;
    if (!cat || !*cat) return 0;
    for (size_t i = 0; i < p->ncategories; i++)
        if (!strcmp(p->categories[i].name, cat)) return p->categories[i].id;
    struct tp_category *nc = tp_realloc(p->categories, (p->ncategories + 1) * sizeof *nc);
    if (!nc) return 0;
    p->categories = nc;
    uint32_t id = (uint32_t)p->ncategories + 1;
    nc[p->ncategories++] = (struct tp_category){0, id, tp_intern(s->run, cat)};
    return id;
}

static int add_meta(kst *s, const char *k, const char *v) {
    tp_kv kv = {tp_intern(s->run, k), tp_intern(s->run, v)};
    PUSH(s->p->meta, s->p->nmeta, s->p->cap_meta, kv);
    return 0;
}

static double num_arg(const cJSON *args, const char *key, double dflt) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsNumber(j) && isfinite(j->valuedouble) ? j->valuedouble : dflt;
}

static uint32_t u32_arg(const cJSON *args, const char *key, uint32_t dflt) {
    double d = num_arg(args, key, -1);
    return d >= 0 && d <= 4294967295.0 ? (uint32_t)d : dflt;
}

/* A byte or element count: a value a uint64_t cannot hold (negative, 2^64 or more) is
 * unknown, 0, as converting it would be undefined behaviour (C11 6.3.1.4). */
static uint64_t u64_arg(const cJSON *args, const char *key) {
    double d = num_arg(args, key, -1);
    return d >= 0 && d < 0x1p64 ? (uint64_t)d : 0;
}

static const char *str_arg(const cJSON *args, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static uint64_t fnv64(const char *a, const char *b) {
    uint64_t h = tp_fnv1a(a, a ? strlen(a) : 0, TP_FNV_OFFSET);
    return tp_fnv1a(b, b ? strlen(b) : 0, h);
}

/* ------------------------------------------------------------------ communication */

static int push_comm(kst *s, const tp_comm_op *op, uint32_t corr) {
    tp_process *p = s->p;
    if (p->ncomm == s->cap_corr) {
        size_t nc = s->cap_corr ? s->cap_corr * 2 : 16;
        uint32_t *v = tp_realloc(s->comm_corr, nc * sizeof *v);
        if (!v) return TPROF_ERR_NO_MEMORY;
        s->comm_corr = v;
        s->cap_corr = nc;
    }
    s->comm_corr[p->ncomm] = corr;
    PUSH(p->comm, p->ncomm, p->cap_comm, *op);
    return 0;
}

/* An NCCL kernel as a communication op: the GPU interval is the kernel's; the host interval
 * (its launch) is filled in at the end from the runtime call with its correlation id. */
static int nccl_comm(kst *s, const tp_gpu_op *k, const cJSON *args) {
    const char *coll = str_arg(args, "Collective name");
    unsigned esize = 0;
    uint32_t dtype = tp_kin_dtype(str_arg(args, "dtype"), &esize);
    uint32_t op = tp_kin_comm_op(k->name, coll);
    /* the caller's count: NCCL's recvcount for ReduceScatter, sendcount otherwise */
    double n =
        num_arg(args, op == TPROF_COMM_REDUCESCATTER ? "Out msg nelems" : "In msg nelems", 0);
    uint64_t count = n > 0 && n < 1e18 ? (uint64_t)n : 0;
    const char *pg = str_arg(args, "Process Group Name");
    char sk[48];
    snprintf(sk, sizeof sk, "stream %u:%u", k->device, k->stream);
    tp_comm_op c = {0};
    c.start = c.end = c.gpu_start = k->start; /* gpu_start orders the ops until comm_finish */
    c.gpu_end = k->end;
    c.bytes = count * esize;
    c.count = count;
    c.comm_hash = fnv64(pg ? "pg " : NULL, pg ? pg : sk);
    c.name = op ? tp_intern(s->run, tprof__comm_op_name(op)) : k->name;
    c.nranks = u32_arg(args, "Group size", 0);
    c.op = op;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_NCCL;
    c.dtype = dtype;
    s->nccl_kernels++;
    return push_comm(s, &c, k->correlation);
}

/* trainprof's own export writes each communication op as a "comm" event (export/chrome.c):
 * read back as the op it was. */
static int comm_event(kst *s, const char *name, uint64_t t0, uint64_t t1, const cJSON *args) {
    const char *opn = str_arg(args, "op");
    if (!opn) opn = name;
    uint32_t op = TPROF_COMM_UNKNOWN;
    for (uint32_t i = 1; i < TPROF_COMM_OP_COUNT; i++)
        if (!strcmp(opn, tprof__comm_op_name(i))) op = i;
    const char *id = str_arg(args, "comm"), *src = str_arg(args, "source");
    const char *ts = str_arg(args, "time_source");
    tp_comm_op c = {0};
    c.start = t0;
    c.end = t1;
    c.bytes = u64_arg(args, "bytes");
    c.count = u64_arg(args, "count");
    c.comm_hash = id ? strtoull(id, NULL, 16) : 0;
    c.name = tp_intern(s->run, opn);
    c.seq = u32_arg(args, "seq", 0);
    c.nranks = u32_arg(args, "nranks", 0);
    c.rank = u32_arg(args, "rank", 0);
    if (c.nranks > INT32_MAX || c.rank > INT32_MAX) c.nranks = c.rank = 0;
    c.op = op;
    c.peer = u32_arg(args, op == TPROF_COMM_SEND || op == TPROF_COMM_RECV ? "peer" : "root",
                     TPROF_COMM_NO_PEER);
    c.source = src && !strcmp(src, "mpi")     ? TPROF_COMM_SRC_MPI
               : src && !strcmp(src, "torch") ? TPROF_COMM_SRC_TORCH
                                              : TPROF_COMM_SRC_NCCL;
    if (ts && strcmp(ts, "host")) {
        c.flags |= TPROF_COMM_F_GPU_TIME;
        c.gpu_start = t0;
        c.gpu_end = t1;
    }
    s->comm_events = 1;
    return push_comm(s, &c, 0);
}

/* ------------------------------------------------------------------ events */

enum { K_RANGE, K_KERNEL, K_MEMCPY, K_MEMSET, K_API, K_COMM, K_SKIP };

static int kind_of(const char *cat) {
    static const struct {
        const char *cat;
        int kind;
    } m[] = {{"kernel", K_KERNEL},
             {"gpu_memcpy", K_MEMCPY},
             {"memcpy", K_MEMCPY},
             {"gpu_memset", K_MEMSET},
             {"memset", K_MEMSET},
             {"cuda_runtime", K_API},
             {"cuda_driver", K_API},
             {"runtime", K_API},
             {"driver", K_API},
             {"comm", K_COMM},
             /* GPU-side copies of CPU annotations, flows, the profiler's own spans and syncs */
             {"gpu_user_annotation", K_SKIP},
             {"ac2g", K_SKIP},
             {"trace", K_SKIP},
             {"cuda_sync", K_SKIP},
             {"cpu_instant_event", K_SKIP},
             {"overhead", K_SKIP},
             {"global", K_SKIP}};
    for (size_t i = 0; cat && i < sizeof m / sizeof *m; i++)
        if (!strcasecmp(cat, m[i].cat)) return m[i].kind;
    return K_RANGE;
}

/* CUPTI's memcpy kinds (CUpti_ActivityMemcpyKind) from Kineto's "Memcpy HtoD (...)" names. */
static uint32_t copy_kind(const char *name) {
    static const char *const k[] = {"HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                    "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    for (uint32_t i = 0; i < sizeof k / sizeof *k; i++)
        if (strstr(name, k[i])) return i + 1;
    return 0;
}

/* "ts" (and "dur") of event e, exactly: its text when it is a plain decimal, else cJSON's
 * double. 0, or an error for a value that is not a number or is out of range. */
static int time_member(kst *s, const cJSON *e, const char *member, int64_t *out, int *has) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(e, member);
    *has = j != NULL;
    *out = 0;
    if (!j) return 0;
    if (!cJSON_IsNumber(j)) return bad_type(s, member, "a number");
    size_t len = 0;
    const char *raw = tp_kin_raw_member(s->in.v, s->in.nv, member, &len);
    if (raw && tp_kin_us_ns(raw, len, out) == 0) return 0;
    double ns = j->valuedouble * 1000.0;
    if (!isfinite(ns) || fabs(ns) >= (double)KIN_BIAS)
        return tp_kin_fail(&s->in, "traceEvents[%zu].%s is out of range", s->event_no, member);
    *out = (int64_t)llround(ns);
    return 0;
}

static int gpu_event(kst *s, int kind, const char *name, uint64_t t0, uint64_t t1, int64_t pid,
                     int64_t tid, const cJSON *args) {
    tp_process *p = s->p;
    tp_gpu_op op = {0};
    op.start = t0;
    op.end = t1;
    op.device = u32_arg(args, "device", pid >= 0 && pid < 1 << 16 ? (uint32_t)pid : 0);
    op.stream = u32_arg(args, "stream", (uint32_t)tid);
    op.correlation = u32_arg(args, "correlation", 0);
    op.cls = TP_KC_OTHER;
    if (kind == K_API) {
        op.type = TPROF_REC_GPU_API;
        op.name = tp_intern(s->run, name);
        op.os_tid = (uint32_t)tid;
        op.kind = u32_arg(args, "cbid", 0);
        op.device = op.stream = 0;
        PUSH(p->api, p->napi, p->cap_api, op);
        return 0;
    }
    op.bytes = u64_arg(args, "bytes");
    op.graph = u32_arg(args, "graph", 0);
    if (kind == K_KERNEL) {
        op.type = TPROF_REC_GPU_KERNEL;
        op.bytes = 0;
        tp_load_kernel_name(s->run, tp_intern(s->run, name), &op);
    } else {
        op.type = kind == K_MEMCPY ? TPROF_REC_GPU_MEMCPY : TPROF_REC_GPU_MEMSET;
        if (kind == K_MEMCPY) op.kind = copy_kind(name);
    }
    PUSH(p->gpu, p->ngpu, p->cap_gpu, op);
    if (kind == K_KERNEL && tp_kin_is_nccl(op.name)) return nccl_comm(s, &op, args);
    return 0;
}

static int range_event(kst *s, const char *ph, const char *name, const char *cat, uint64_t t0,
                       uint64_t t1, int64_t pid, int64_t tid, const cJSON *e) {
    size_t ti;
    int rc = thread_of(s, pid, tid, &ti);
    if (rc) return rc;
    tp_thread *t = &s->p->threads[ti];
    kthread *kt = &s->kt[ti];
    t->events++;
    if (*ph == 'E') { /* the innermost open B of the thread */
        if (!kt->nopen) {
            if (!t->unmatched_pops++) t->first_unmatched_pop_ts = t0;
            return 0;
        }
        tp_range *r = &t->ranges[kt->open[--kt->nopen]];
        r->end = t0 < r->start ? r->start : t0;
        r->flags &= (uint16_t)~TP_R_UNCLOSED;
        return 0;
    }
    if (*ph == 'e') {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        char *ids = id ? cJSON_PrintUnformatted(id) : NULL;
        kend ke = {fnv64(cat, ids), t0, (uint32_t)tid};
        free(ids);
        PUSH(s->ends, s->nends, s->cap_ends, ke);
        return 0;
    }
    tp_range r = {tp_intern(s->run, name), t0, t1, 0, -1, 0, category_of(s, cat), 0, 0, 0};
    if (*ph == 'B') r.flags = TP_R_UNCLOSED;
    if (*ph == 'b') { /* the id rides in child_ns until the ends are matched (model.c) */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        char *ids = id ? cJSON_PrintUnformatted(id) : NULL;
        r.child_ns = fnv64(cat, ids);
        free(ids);
        r.flags = TP_R_ASYNC | TP_R_UNCLOSED;
    }
    PUSH(t->ranges, t->nranges, t->cap_ranges, r);
    if (*ph == 'B') PUSH(kt->open, kt->nopen, kt->cap_open, t->nranges - 1);
    return 0;
}

static int meta_event(kst *s, const char *name, int64_t pid, int64_t tid, const cJSON *args) {
    const char *v = str_arg(args, "name");
    if (!v) return 0;
    if (!strcmp(name, "thread_name")) {
        size_t ti;
        int rc = thread_of(s, pid, tid, &ti);
        if (!rc) s->p->threads[ti].name = tp_intern(s->run, v);
        return rc;
    }
    return 0;
}

static int counter_event(kst *s, const char *name, uint64_t t0, int64_t pid, int64_t tid,
                         const cJSON *args) {
    size_t ti;
    int rc = thread_of(s, pid, tid, &ti);
    if (rc) return rc;
    tp_thread *t = &s->p->threads[ti];
    const cJSON *a;
    int n = cJSON_GetArraySize(args);
    cJSON_ArrayForEach(a, args) {
        if (!cJSON_IsNumber(a) || !isfinite(a->valuedouble)) continue;
        char full[256];
        if (n == 1 || !strcmp(a->string, "value")) snprintf(full, sizeof full, "%s", name);
        else snprintf(full, sizeof full, "%s.%s", name, a->string);
        tp_counter c = {tp_intern(s->run, full), t0, a->valuedouble};
        PUSH(t->counters, t->ncounters, t->cap_counters, c);
        t->events++;
    }
    return 0;
}

static uint64_t biased(int64_t ns) { return (uint64_t)ns + KIN_BIAS; }

/* One element of "traceEvents", its text in s->in.v. */
static int one_event(kst *s) {
    cJSON *e = cJSON_ParseWithLength(s->in.v, s->in.nv);
    if (!e)
        return tp_kin_fail(&s->in, "traceEvents[%zu] is not valid JSON (near byte %llu)",
                           s->event_no, (unsigned long long)s->in.off);
    int rc = 0;
    const cJSON *jph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    const cJSON *jname = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *jcat = cJSON_GetObjectItemCaseSensitive(e, "cat");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    int64_t pid, tid, ts, dur;
    int has_ts, has_dur;
    if (!cJSON_IsObject(e))
        rc = tp_kin_fail(&s->in, "traceEvents[%zu] is not an object", s->event_no);
    else if (jph && !cJSON_IsString(jph)) rc = bad_type(s, "ph", "a string");
    else if (jname && !cJSON_IsString(jname)) rc = bad_type(s, "name", "a string");
    else if (jcat && !cJSON_IsString(jcat)) rc = bad_type(s, "cat", "a string");
    else if (args && !cJSON_IsObject(args)) rc = bad_type(s, "args", "an object");
    if (!rc) rc = id_of(s, cJSON_GetObjectItemCaseSensitive(e, "pid"), "pid", &pid);
    if (!rc) rc = id_of(s, cJSON_GetObjectItemCaseSensitive(e, "tid"), "tid", &tid);
    if (!rc) rc = time_member(s, e, "ts", &ts, &has_ts);
    if (!rc) rc = time_member(s, e, "dur", &dur, &has_dur);
    if (rc || !jph) {
        cJSON_Delete(e);
        return rc;
    }
    const char *ph = jph->valuestring, *name = jname ? jname->valuestring : "";
    const char *cat = jcat ? jcat->valuestring : NULL;
    if (*ph == 'M') {
        rc = meta_event(s, name, pid, tid, args);
        cJSON_Delete(e);
        return rc;
    }
    if (!has_ts && *ph && strchr("XBEbeiIC", *ph)) {
        /* the line is written before the event (which holds ph) is freed */
        rc = tp_kin_fail(&s->in, "traceEvents[%zu] (ph \"%.8s\") has no \"ts\"", s->event_no,
                         ph);
        cJSON_Delete(e);
        return rc;
    }
    uint64_t t0 = biased(ts), t1 = biased(ts + (has_dur && dur > 0 ? dur : 0));
    int kind = kind_of(cat);
    if (*ph == 'X' && kind >= K_KERNEL && kind <= K_API) {
        rc = gpu_event(s, kind, name, t0, t1, pid, tid, args);
    } else if (*ph == 'X' && kind == K_COMM) {
        rc = comm_event(s, name, t0, t1, args);
    } else if (kind == K_RANGE && *ph && strchr("XBEbe", *ph)) {
        if (!s->have_main_pid) s->main_pid = pid, s->have_main_pid = 1;
        rc = range_event(s, ph, name, cat, t0, t1, pid, tid, e);
    } else if ((*ph == 'i' || *ph == 'I') && kind == K_RANGE) {
        const char *scope = str_arg(e, "s");
        if (!scope || strcmp(scope, "g")) {
            size_t ti;
            rc = thread_of(s, pid, tid, &ti);
            tp_mark m = {tp_intern(s->run, name), t0, 0, category_of(s, cat)};
            if (!rc) {
                tp_thread *t = &s->p->threads[ti];
                PUSH(t->marks, t->nmarks, t->cap_marks, m);
                t->events++;
            }
        }
    } else if (*ph == 'C' && args) {
        rc = counter_event(s, name, t0, pid, tid, args);
    }
    cJSON_Delete(e);
    return rc;
}

static int read_events(kst *s) {
    kin *k = &s->in;
    int c = tp_kin_ws(k);
    if (c == -2) return TPROF_ERR_FORMAT;
    if (c != '[') return tp_kin_fail(k, "\"traceEvents\" is not an array");
    tp_kin_take(k);
    c = tp_kin_ws(k);
    if (c == ']') {
        tp_kin_take(k);
        return 0;
    }
    for (s->event_no = 0;; s->event_no++) {
        c = tp_kin_ws(k);
        if (c == -2) return TPROF_ERR_FORMAT;
        if (c < 0) return tp_kin_fail(k, "the text ends inside \"traceEvents\": truncated?");
        if (c != '{') return tp_kin_fail(k, "traceEvents[%zu] is not an object", s->event_no);
        int rc = tp_kin_scan(k);
        if (!rc) rc = one_event(s);
        if (rc) return rc;
        c = tp_kin_ws(k);
        if (c == -2) return TPROF_ERR_FORMAT;
        if (c < 0) return tp_kin_fail(k, "the text ends inside \"traceEvents\": truncated?");
        tp_kin_take(k);
        if (c == ']') return 0;
        if (c != ',')
            return tp_kin_fail(k, "expected ',' or ']' after traceEvents[%zu] at byte %llu",
                               s->event_no, (unsigned long long)k->off);
    }
}

/* A top-level member other than traceEvents (its text in s->in.v). */
static int top_member(kst *s, const char *key) {
    int is_base = !strcmp(key, "baseTimeNanoseconds"), is_dist = !strcmp(key, "distributedInfo");
    if (!is_base && !is_dist) return 0;
    cJSON *j = cJSON_ParseWithLength(s->in.v, s->in.nv);
    if (!j) return tp_kin_fail(&s->in, "\"%s\" is not valid JSON", key);
    int rc = 0;
    if (is_base) {
        int64_t v;
        if (!cJSON_IsNumber(j)) rc = tp_kin_fail(&s->in, "\"baseTimeNanoseconds\" is not a number");
        else if (s->in.v[0] != '-' && tp_kin_us_ns(s->in.v, s->in.nv, &v) == 0 &&
                 !strchr(s->in.v, '.'))
            s->base_ns = v / 1000, s->have_base = 1; /* integer text: exact */
        else if (j->valuedouble >= 0 && j->valuedouble < 9e18)
            s->base_ns = (int64_t)j->valuedouble, s->have_base = 1;
        if (s->have_base && s->in.v[0] != '-') { /* exact for integers past 2^53 */
            uint64_t u = strtoull(s->in.v, NULL, 10);
            if (u < (uint64_t)INT64_MAX) s->base_ns = (int64_t)u;
        }
    } else if (!cJSON_IsObject(j)) {
        rc = tp_kin_fail(&s->in, "\"distributedInfo\" is not an object");
    } else {
        double r = num_arg(j, "rank", -1), w = num_arg(j, "world_size", -1);
        if (r >= 0 && r < 1 << 24) s->rank = (int)r;
        if (w >= 1 && w < 1 << 24) s->world_size = (int)w;
        const char *b = str_arg(j, "backend");
        if (b) s->backend = tp_intern(s->run, b);
    }
    cJSON_Delete(j);
    return rc;
}

static int read_document(kst *s) {
    kin *k = &s->in;
    int c = tp_kin_ws(k), seen = 0, rc;
    if (c == -2) return TPROF_ERR_FORMAT;
    if (c < 0) return tp_kin_fail(k, "empty file");
    if (c != '{')
        return tp_kin_fail(k, "not a JSON object (a torch.profiler trace starts with '{')");
    tp_kin_take(k);
    if (tp_kin_ws(k) == '}') {
        tp_kin_take(k);
    } else {
        for (;;) {
            if ((rc = tp_kin_scan(k))) return rc;
            if (k->v[0] != '"')
                return tp_kin_fail(k, "expected a member name at byte %llu",
                                   (unsigned long long)k->off);
            cJSON *jk = cJSON_ParseWithLength(k->v, k->nv);
            if (!cJSON_IsString(jk)) {
                cJSON_Delete(jk);
                return tp_kin_fail(k, "malformed member name at byte %llu",
                                   (unsigned long long)k->off);
            }
            char key[64];
            snprintf(key, sizeof key, "%s", jk->valuestring);
            cJSON_Delete(jk);
            c = tp_kin_ws(k);
            if (c == -2) return TPROF_ERR_FORMAT;
            if (c != ':') return tp_kin_fail(k, "expected ':' after \"%s\"", key);
            tp_kin_take(k);
            if (!strcmp(key, "traceEvents")) {
                if ((rc = read_events(s))) return rc;
                seen = 1;
            } else {
                if ((rc = tp_kin_scan(k)) || (rc = top_member(s, key))) return rc;
            }
            c = tp_kin_ws(k);
            if (c == -2) return TPROF_ERR_FORMAT;
            if (c < 0) return tp_kin_fail(k, "the text ends before the closing '}': truncated?");
            tp_kin_take(k);
            if (c == '}') break;
            if (c != ',')
                return tp_kin_fail(k, "expected ',' or '}' at byte %llu",
                                   (unsigned long long)k->off);
        }
    }
    c = tp_kin_ws(k);
    if (c == -2) return TPROF_ERR_FORMAT;
    if (c >= 0)
        return tp_kin_fail(k, "text after the end of the JSON object (byte %llu)",
                           (unsigned long long)k->off);
    if (!seen) return tp_kin_fail(k, "no \"traceEvents\" array: not a torch.profiler trace");
    return 0;
}

/* ------------------------------------------------------------------ the end of a file */

static int cmp_end(const void *a, const void *b) {
    const kend *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int cmp_range(const void *a, const void *b) {
    const tp_range *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end; /* the enclosing one first */
}

static int cmp_api_corr(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

/* Every time the model holds, shifted by `d` (the earliest at KIN_ORIGIN). */
static void shift_all(tp_process *p, uint64_t d, kend *ends, size_t nends) {
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) t->ranges[k].start -= d, t->ranges[k].end -= d;
        for (size_t k = 0; k < t->nmarks; k++) t->marks[k].ts -= d;
        for (size_t k = 0; k < t->ncounters; k++) t->counters[k].ts -= d;
    }
    for (size_t i = 0; i < p->ngpu; i++) p->gpu[i].start -= d, p->gpu[i].end -= d;
    for (size_t i = 0; i < p->napi; i++) p->api[i].start -= d, p->api[i].end -= d;
    for (size_t i = 0; i < p->ncomm; i++) {
        tp_comm_op *c = &p->comm[i];
        c->start -= d, c->end -= d;
        if (c->flags & TPROF_COMM_F_GPU_TIME) c->gpu_start -= d, c->gpu_end -= d;
    }
    for (size_t i = 0; i < nends; i++) ends[i].ts -= d;
}

typedef struct tspan {
    uint64_t lo, hi;
    int any;
} tspan;

static void widen(tspan *w, uint64_t a, uint64_t b) {
    if (!w->any || a < w->lo) w->lo = a;
    if (!w->any || b > w->hi) w->hi = b;
    w->any = 1;
}

/* The earliest and latest time held; 0 when nothing is timed. */
static int time_span(const tp_process *p, uint64_t *plo, uint64_t *phi) {
    tspan w = {0, 0, 0};
    for (size_t i = 0; i < p->nthreads; i++) {
        const tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) widen(&w, t->ranges[k].start, t->ranges[k].end);
        for (size_t k = 0; k < t->nmarks; k++) widen(&w, t->marks[k].ts, t->marks[k].ts);
        for (size_t k = 0; k < t->ncounters; k++) widen(&w, t->counters[k].ts, t->counters[k].ts);
    }
    for (size_t i = 0; i < p->ngpu; i++) widen(&w, p->gpu[i].start, p->gpu[i].end);
    for (size_t i = 0; i < p->napi; i++) widen(&w, p->api[i].start, p->api[i].end);
    for (size_t i = 0; i < p->ncomm; i++) widen(&w, p->comm[i].start, p->comm[i].end);
    *plo = w.lo;
    *phi = w.hi;
    return w.any;
}

/* Async ends to their starts (by category and id), as model.c does for rank files. */
static void match_async(kst *s) {
    tp_process *p = s->p;
    if (s->nends > 1) qsort(s->ends, s->nends, sizeof *s->ends, cmp_end);
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *r = &t->ranges[k];
            if (!(r->flags & TP_R_ASYNC)) continue;
            uint64_t key = r->child_ns;
            r->child_ns = 0;
            size_t lo = 0, hi = s->nends;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (s->ends[mid].key < key) lo = mid + 1;
                else hi = mid;
            }
            if (lo < s->nends && s->ends[lo].key == key && s->ends[lo].tid != UINT32_MAX) {
                r->end = s->ends[lo].ts < r->start ? r->start : s->ends[lo].ts;
                r->end_tid = s->ends[lo].tid;
                r->flags &= (uint16_t)~TP_R_UNCLOSED;
                s->ends[lo].tid = UINT32_MAX; /* consumed */
            }
        }
    }
}

/* Each thread's ranges in start order with their parents and depths (B/E and X events
 * alike: the enclosing range is the latest-starting open one that contains it). */
static int thread_order(tp_process *p) {
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *r = &t->ranges[k];
            tp_load_seen(t, r->start);
            tp_load_seen(t, r->end);
        }
        for (size_t k = 0; k < t->nmarks; k++) tp_load_seen(t, t->marks[k].ts);
        for (size_t k = 0; k < t->ncounters; k++) tp_load_seen(t, t->counters[k].ts);
        for (size_t k = 0; k < t->nranges; k++) /* B never ended: open to the thread's end */
            if ((t->ranges[k].flags & (TP_R_UNCLOSED | TP_R_ASYNC)) == TP_R_UNCLOSED)
                t->ranges[k].end = t->last_ts;
        if (t->nranges > 1) qsort(t->ranges, t->nranges, sizeof *t->ranges, cmp_range);
        int32_t *stk = tp_malloc((t->nranges ? t->nranges : 1) * sizeof *stk);
        if (!stk) return TPROF_ERR_NO_MEMORY;
        size_t sp = 0;
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *r = &t->ranges[k];
            if (r->flags & TP_R_ASYNC) continue;
            while (sp && t->ranges[stk[sp - 1]].end < r->end) sp--;
            while (sp && t->ranges[stk[sp - 1]].end <= r->start && r->end > r->start) sp--;
            r->parent = sp ? stk[sp - 1] : -1;
            r->depth = (uint16_t)(sp > 65535 ? 65535 : sp);
            stk[sp++] = (int32_t)k;
        }
        free(stk);
    }
    return 0;
}

/* The launch of each NCCL kernel (the runtime call with its correlation id) as its op's host
 * interval, each communicator's ops numbered in issue order, and the rank and size. */
static int comm_finish(kst *s) {
    tp_process *p = s->p;
    if (!p->ncomm) return 0;
    const tp_gpu_op **apis = tp_malloc((p->napi ? p->napi : 1) * sizeof *apis);
    if (!apis) return TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < p->napi; i++) apis[i] = &p->api[i];
    if (p->napi > 1) qsort(apis, p->napi, sizeof *apis, cmp_api_corr);
    typedef struct {
        uint64_t hash;
        uint32_t n;
    } comm_seq;
    comm_seq seen[64];
    size_t nseen = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        tp_comm_op *c = &p->comm[i];
        if (s->comm_corr[i]) {
            tp_gpu_op key = {0};
            key.correlation = s->comm_corr[i];
            const tp_gpu_op *kp = &key;
            const tp_gpu_op **hit =
                p->napi ? bsearch(&kp, apis, p->napi, sizeof *apis, cmp_api_corr) : NULL;
            if (hit && (*hit)->start <= c->gpu_start) {
                c->start = (*hit)->start;
                c->end = (*hit)->end;
                c->os_tid = (*hit)->os_tid;
            }
        }
        if (s->comm_events) continue;
        c->gpu_start = c->gpu_end = 0; /* timed by its kernel (comm.c's matching), not twice */
        if (!c->nranks && s->world_size > 0) c->nranks = (uint32_t)s->world_size;
        if (s->rank >= 0 && (uint32_t)s->rank < c->nranks) c->rank = (uint32_t)s->rank;
        size_t k = 0;
        while (k < nseen && seen[k].hash != c->comm_hash) k++;
        if (k == nseen && nseen < 64) seen[nseen++] = (comm_seq){c->comm_hash, 0};
        if (k < nseen) c->seq = seen[k].n++;
    }
    free(apis);
    return 0;
}

static int cmp_comm_start(const void *a, const void *b) {
    const tp_comm_op *x = a, *y = b;
    return x->gpu_start < y->gpu_start ? -1 : x->gpu_start > y->gpu_start;
}

static int finish(kst *s) {
    tp_process *p = s->p;
    uint64_t lo, hi;
    int any = time_span(p, &lo, &hi);
    for (size_t i = 0; i < s->nends; i++) {
        if (!any || s->ends[i].ts < lo) lo = s->ends[i].ts;
        if (!any || s->ends[i].ts > hi) hi = s->ends[i].ts;
        any = 1;
    }
    if (any && hi - lo >= TPROF_TIME_MAX - 2 * KIN_ORIGIN)
        return tp_kin_fail(&s->in, "event times span more than 146 years: malformed \"ts\" values");
    uint64_t d = any ? lo - KIN_ORIGIN : 0;
    shift_all(p, d, s->ends, s->nends);
    match_async(s);
    int rc = thread_order(p);
    if (rc) return rc;
    if (p->ncomm > 1 && !s->comm_events) {
        /* kernels arrive per stream; the ops go in issue order (their correlation ids
         * move with them) */
        typedef struct {
            tp_comm_op op;
            uint32_t corr;
        } pair;
        pair *v = tp_malloc(p->ncomm * sizeof *v);
        if (!v) return TPROF_ERR_NO_MEMORY;
        for (size_t i = 0; i < p->ncomm; i++) v[i] = (pair){p->comm[i], s->comm_corr[i]};
        qsort(v, p->ncomm, sizeof *v, cmp_comm_start); /* op is the first member */
        for (size_t i = 0; i < p->ncomm; i++) p->comm[i] = v[i].op, s->comm_corr[i] = v[i].corr;
        free(v);
    }
    if ((rc = comm_finish(s))) return rc;
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        if (t->first_ts && (!p->first_ts || t->first_ts < p->first_ts)) p->first_ts = t->first_ts;
        if (t->last_ts > p->last_ts) p->last_ts = t->last_ts;
        p->events += t->events;
    }
    p->events += p->ngpu + p->napi + (s->comm_events ? p->ncomm : 0);
    p->end_mono = any ? hi - d : KIN_ORIGIN;
    if (!p->first_ts) p->first_ts = any ? KIN_ORIGIN : 0;
    if (!p->last_ts) p->last_ts = p->end_mono;
    p->complete = 1;
    /* the clock: the earliest event's wall time is the base plus its offset */
    int64_t first_rel = any ? (int64_t)(lo - KIN_BIAS) : 0;
    int64_t rt = (s->have_base ? s->base_ns : 0) + first_rel;
    p->hdr.start_mono_ns = KIN_ORIGIN;
    p->hdr.start_realtime_ns = rt > 0 ? (uint64_t)rt : 0;
    p->hdr.pid =
        s->have_main_pid && s->main_pid > 0 && s->main_pid < INT32_MAX ? (int32_t)s->main_pid : 0;
    snprintf(p->hdr.host, sizeof p->hdr.host, "%s", s->host);
    snprintf(p->hdr.build, sizeof p->hdr.build, "torch.profiler trace");
    return 0;
}

static int write_meta(kst *s) {
    char v[32];
    int rc = 0;
    int rank = s->rank >= 0 ? s->rank : tp_kin_rank_from_name(s->p->path);
    if (rank >= 0) {
        snprintf(v, sizeof v, "%d", rank);
        rc |= add_meta(s, "rank", v);
        rc |= add_meta(s, "rank_source", s->rank >= 0 ? "distributedInfo" : "file name");
    }
    if (s->world_size > 0) {
        snprintf(v, sizeof v, "%d", s->world_size);
        rc |= add_meta(s, "world_size", v);
    }
    if (s->backend) rc |= add_meta(s, "backend", s->backend);
    rc |= add_meta(s, "trainprof.source", "torch.profiler");
    /* what a rank file's capabilities say, for what the trace holds or lacks */
    rc |= add_meta(s, "capability.nvtx",
                   "from the trace: cpu_op and user_annotation events as ranges");
    rc |= add_meta(s, "capability.cupti",
                   s->p->ngpu || s->p->napi
                       ? "from the trace: kernels, copies, memsets and runtime calls"
                       : "unavailable: no GPU activity in the trace");
    rc |= add_meta(s, "capability.nccl",
                   s->comm_events    ? "from the trace: communication ops"
                   : s->nccl_kernels ? "from the trace: NCCL kernels (no NCCL profiler records)"
                                     : "unavailable: no NCCL kernel in the trace");
    rc |= add_meta(s, "capability.nvml",
                   "unavailable: not in the trace (torch.profiler has no "
                   "GPU power, clocks or energy)");
    rc |= add_meta(s, "capability.mpi", "unavailable: not in the trace");
    return rc ? TPROF_ERR_NO_MEMORY : 0;
}

/* ------------------------------------------------------------------ entry points */

int tp_kineto_sniff(const char *path) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) return 0;
    int direct = gzdirect(gz);
    char *buf = tp_malloc(KIN_SNIFF_BYTES + 1);
    int n = buf ? gzread(gz, buf, KIN_SNIFF_BYTES) : -1;
    /* gzdirect is known only after the first read */
    if (n >= 0 && !direct) direct = gzdirect(gz);
    gzclose(gz);
    int yes = 0;
    if (n > 0) {
        buf[n] = 0;
        size_t i = 0;
        while (i < (size_t)n && isspace((unsigned char)buf[i])) i++;
        yes = !direct || (buf[i] == '{' && strstr(buf + i, "\"traceEvents\"") != NULL);
    } else if (n < 0) {
        yes = 1; /* a damaged gzip file: the loader says what is wrong */
    }
    free(buf);
    return yes;
}

int tp_kineto_load(tp_run *run, const char *path, tp_process *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->path = tp_intern(run, path);
    p->helper_of = -1;
    p->rank = p->world_size = p->local_rank = -1;
    kst *s = tp_calloc(1, sizeof *s);
    if (!s) return TPROF_ERR_NO_MEMORY;
    s->run = run;
    s->p = p;
    s->rank = s->world_size = -1;
    s->in.path = path;
    s->in.err = err;
    s->in.errlen = errlen;
    int rc = TPROF_OK;
    p->domains = tp_calloc(1, sizeof *p->domains);
    if (!p->domains) rc = TPROF_ERR_NO_MEMORY;
    else {
        p->domains[0] = tp_intern(run, "");
        p->ndomains = 1;
    }
    if (!rc) {
        s->in.gz = gzopen(path, "rb");
        if (!s->in.gz) {
            snprintf(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open");
            rc = TPROF_ERR_IO;
        }
    }
    if (!rc) {
        gzbuffer(s->in.gz, 1 << 17);
        tp_kin_host_from_name(path, s->host, sizeof s->host);
        rc = read_document(s);
        if (!rc) rc = finish(s);
        if (!rc) rc = write_meta(s);
        if (!rc) rc = tp_load_finish_foreign(p);
    }
    if (rc == TPROF_ERR_NO_MEMORY && !s->in.failed)
        snprintf(err, errlen, "%s: out of memory", path);
    if (s->in.gz) gzclose(s->in.gz);
    for (size_t i = 0; i < p->nthreads && s->kt; i++) free(s->kt[i].open);
    free(s->kt);
    free(s->ends);
    free(s->comm_corr);
    free(s->in.v);
    free(s);
    if (rc) tp_process_free(p);
    return rc;
}
