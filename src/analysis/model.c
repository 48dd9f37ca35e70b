/*
 * model.c — loads rank files into the in-memory model of model.h.
 *
 * Records of one thread arrive in order across that thread's chunks, so push/pop nesting is
 * rebuilt per (thread, domain) stack while reading. Async range ends may precede their
 * starts in the file (threads are flushed in any order), so they are matched after the
 * whole file is read. Strings are interned once per run, as valid UTF-8.
 */
#define _GNU_SOURCE
#include "analysis/model.h"
#include "analysis/gpu.h"
#include "analysis/text.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "format/reader.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ string pool */

/* What the loader derives from a kernel name once: its demangled form and class. Keyed by
 * the interned name's address (one address per distinct name in a run). */
typedef struct tp_kname {
    const char *raw, *shown;
    uint8_t cls;
} tp_kname;

typedef struct tp_pool {
    char **slots; /* open addressing by FNV hash */
    size_t cap, count;
    tp_kname *kn; /* open addressing by address */
    size_t kn_cap, kn_count;
    char *arena;
    size_t arena_left;
    char **blocks;
    size_t nblocks;
} tp_pool;

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Copies s into dst as valid UTF-8 (bad bytes become U+FFFD); dst has room for 3*n+1. */
static size_t to_utf8(const char *s, size_t n, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad;
        size_t k = tp_utf8_next(s + i, n - i, &cp, &bad);
        memcpy(dst + o, bad ? "\xEF\xBF\xBD" : s + i, bad ? 3 : k);
        o += bad ? 3 : k;
        i += k;
    }
    dst[o] = 0;
    return o;
}

static char *pool_alloc(tp_pool *p, size_t n) {
    if (n > p->arena_left) {
        size_t sz = n > 65536 ? n : 65536;
        char **b = realloc(p->blocks, (p->nblocks + 1) * sizeof *b);
        if (!b) return NULL;
        p->blocks = b;
        char *blk = malloc(sz);
        if (!blk) return NULL;
        p->blocks[p->nblocks++] = blk;
        p->arena = blk;
        p->arena_left = sz;
    }
    char *r = p->arena;
    p->arena += n;
    p->arena_left -= n;
    return r;
}

const char *tp_intern(tp_run *run, const char *s) {
    tp_pool *p = run->pool;
    if (!s) s = "(null)";
    size_t n = strlen(s);
    char stackbuf[512];
    char *clean = 3 * n + 1 <= sizeof stackbuf ? stackbuf : malloc(3 * n + 1);
    if (!clean) return "(out of memory)";
    n = to_utf8(s, n, clean);
    if ((p->count + 1) * 2 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        char **ns = calloc(cap, sizeof *ns);
        if (!ns) {
            if (clean != stackbuf) free(clean);
            return "(out of memory)";
        }
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->slots[i]) continue;
            size_t j = fnv(p->slots[i], strlen(p->slots[i])) & (cap - 1);
            while (ns[j]) j = (j + 1) & (cap - 1);
            ns[j] = p->slots[i];
        }
        free(p->slots);
        p->slots = ns;
        p->cap = cap;
    }
    size_t j = fnv(clean, n) & (p->cap - 1);
    while (p->slots[j]) {
        if (!strcmp(p->slots[j], clean)) {
            if (clean != stackbuf) free(clean);
            return p->slots[j];
        }
        j = (j + 1) & (p->cap - 1);
    }
    char *copy = pool_alloc(p, n + 1);
    if (copy) {
        memcpy(copy, clean, n + 1);
        p->slots[j] = copy;
        p->count++;
    }
    if (clean != stackbuf) free(clean);
    return copy ? copy : "(out of memory)";
}

static void pool_free(tp_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nblocks; i++) free(p->blocks[i]);
    free(p->blocks);
    free(p->slots);
    free(p->kn);
    free(p);
}

/* ------------------------------------------------------------------ growth helpers */

#define PUSH(arr, n, cap, val)                                            \
    do {                                                                  \
        if ((n) == (cap)) {                                               \
            size_t nc_ = (cap) ? (cap) * 2 : 16;                          \
            void *np_ = realloc((arr), nc_ * sizeof *(arr));              \
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
} loader;

static void add_damage(tp_process *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_damage(tp_process *p, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **d = realloc(p->damage, (p->ndamage + 1) * sizeof *d);
    if (!d) return;
    p->damage = d;
    p->damage[p->ndamage] = strdup(line);
    if (p->damage[p->ndamage]) p->ndamage++;
}

static int thread_index(loader *L, uint32_t serial, uint32_t os_tid) {
    tp_process *p = L->p;
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].serial == serial) return (int)i;
    tp_thread *nt = realloc(p->threads, (p->nthreads + 1) * sizeof *nt);
    if (!nt) return -1;
    p->threads = nt;
    tload *ntl = realloc(L->tl, (p->nthreads + 1) * sizeof *ntl);
    if (!ntl) return -1;
    L->tl = ntl;
    memset(&p->threads[p->nthreads], 0, sizeof *nt);
    memset(&L->tl[p->nthreads], 0, sizeof *ntl);
    p->threads[p->nthreads].serial = serial;
    p->threads[p->nthreads].os_tid = os_tid;
    return (int)p->nthreads++;
}

/* C++ kernel names as people read them (Kineto shows them demangled too). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static const char *demangled(tp_run *run, const char *name) {
    if (strncmp(name, "_Z", 2)) return name;
    int status = 0;
    char *d = __cxa_demangle(name, NULL, NULL, &status);
    if (status || !d) return name;
    const char *r = tp_intern(run, d);
    free(d);
    return r;
}

static size_t kn_slot(const tp_kname *t, size_t cap, const char *raw) {
    size_t j = (size_t)(((uintptr_t)raw >> 3) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (t[j].raw && t[j].raw != raw) j = (j + 1) & (cap - 1);
    return j;
}

/* A kernel's shown name and class, derived once per distinct (interned) name: a run holds
 * millions of kernel records but a few thousand names, and demangling and the class match
 * cost microseconds each. */
static void kernel_name(tp_run *run, const char *raw, tp_gpu_op *op) {
    tp_pool *p = run->pool;
    if ((p->kn_count + 1) * 2 > p->kn_cap) {
        size_t cap = p->kn_cap ? p->kn_cap * 2 : 1024;
        tp_kname *nt = calloc(cap, sizeof *nt);
        if (!nt) { /* no memo: derive it every time */
            op->name = demangled(run, raw);
            op->cls = (uint8_t)tp_kernel_class_id(op->name);
            return;
        }
        for (size_t i = 0; i < p->kn_cap; i++)
            if (p->kn[i].raw) nt[kn_slot(nt, cap, p->kn[i].raw)] = p->kn[i];
        free(p->kn);
        p->kn = nt;
        p->kn_cap = cap;
    }
    size_t j = kn_slot(p->kn, p->kn_cap, raw);
    if (!p->kn[j].raw) {
        const char *shown = demangled(run, raw);
        p->kn[j] = (tp_kname){raw, shown, (uint8_t)tp_kernel_class_id(shown)};
        p->kn_count++;
    }
    op->name = p->kn[j].shown;
    op->cls = p->kn[j].cls;
}

static const char *rec_name(loader *L, tload *tl, const tprof_rec *r, size_t pl) {
    if (r->arg == TPROF_INLINE_NAME) {
        const char *s = tprof__rec_inline(r, pl);
        return tp_intern(L->run, s ? s : "(bad name)");
    }
    if (r->arg >= 1 && r->arg <= tl->nstrs && tl->strs[r->arg - 1]) return tl->strs[r->arg - 1];
    return tp_intern(L->run, "(unknown name)");
}

static stack *stack_for(tload *tl, uint32_t domain) {
    for (size_t i = 0; i < tl->nstacks; i++)
        if (tl->stacks[i].domain == domain) return &tl->stacks[i];
    stack *ns = realloc(tl->stacks, (tl->nstacks + 1) * sizeof *ns);
    if (!ns) return NULL;
    tl->stacks = ns;
    memset(&ns[tl->nstacks], 0, sizeof *ns);
    ns[tl->nstacks].domain = domain;
    return &ns[tl->nstacks++];
}

static void seen(tp_thread *t, uint64_t ts) {
    if (!ts) return;
    if (!t->first_ts || ts < t->first_ts) t->first_ts = ts;
    if (ts > t->last_ts) t->last_ts = ts;
}

/* the smallest STRING or DOMAIN record: header, one byte of name and its NUL, padded to 8 */
#define MIN_NAMED_REC 24u

static int add_domain(tp_run *run, tp_process *p, uint32_t id, const char *name, uint64_t max_id) {
    if (id == 0 || id > 1u << 20 || id > max_id) return 0;
    if (id >= p->ndomains) {
        const char **nd = realloc(p->domains, (id + 1) * sizeof *nd);
        if (!nd) return TPROF_ERR_NO_MEMORY;
        for (size_t i = p->ndomains; i <= id; i++) nd[i] = NULL;
        p->domains = nd;
        p->ndomains = id + 1;
    }
    p->domains[id] = tp_intern(run, name);
    return 0;
}

static int add_meta(tp_run *run, tp_process *p, const char *k, const char *v) {
    tp_kv kv = {tp_intern(run, k), tp_intern(run, v)};
    PUSH(p->meta, p->nmeta, p->cap_meta, kv);
    return 0;
}

static int proc_record(loader *L, const tprof_rec *r) {
    tp_process *p = L->p;
    switch (r->kind) {
    case TPROF_REC_META: {
        const char *k = tprof__rec_inline(r, 0);
        if (!k) return 0;
        const char *v = k + strlen(k) + 1;
        if ((const uint8_t *)v >= (const uint8_t *)r + r->size) v = "";
        return add_meta(L->run, p, k, v);
    }
    case TPROF_REC_DOMAIN: {
        const char *n = tprof__rec_inline(r, 0);
        return add_domain(L->run, p, r->arg, n ? n : "(bad domain)", L->max_id);
    }
    case TPROF_REC_CATEGORY: {
        if (r->size < sizeof *r + sizeof(tprof_pl_category)) return 0;
        const tprof_pl_category *pl = (const void *)(r + 1);
        const char *n = tprof__rec_inline(r, sizeof *pl);
        struct tp_category *nc =
            realloc(p->categories, (p->ncategories + 1) * sizeof *nc);
        if (!nc) return TPROF_ERR_NO_MEMORY;
        p->categories = nc;
        nc[p->ncategories++] =
            (struct tp_category){pl->domain, r->arg, tp_intern(L->run, n ? n : "")};
        return 0;
    }
    case TPROF_REC_END_OF_FILE: {
        if (r->size < sizeof *r + sizeof(tprof_pl_clock)) return 0;
        const tprof_pl_clock *pl = (const void *)(r + 1);
        p->complete = 1;
        p->end_signal = r->arg > 255 ? 255 : (int)r->arg; /* any nonzero value: a signal */
        if (pl->mono_ns < TPROF_TIME_MAX) p->end_mono = pl->mono_ns;
        p->end_dropped = pl->dropped_total;
        return 0;
    }
    default:
        return 0;
    }
}

/* Kinds whose ts_ns is a time the model keeps. */
static int timed_kind(uint16_t kind) {
    return (kind >= TPROF_REC_PUSH && kind <= TPROF_REC_STEP_END) ||
           (kind >= TPROF_REC_GPU_KERNEL && kind <= TPROF_REC_GPU_API) ||
           kind == TPROF_REC_COMM_OP || kind == TPROF_REC_GPU_OVERHEAD;
}

static int thread_record(loader *L, int ti, const tprof_rec *r) {
    tp_thread *t = &L->p->threads[ti];
    tload *tl = &L->tl[ti];
    size_t body = r->size - sizeof *r;
    if (timed_kind(r->kind) && r->ts_ns >= TPROF_TIME_MAX) {
        L->bad_records++; /* no clock's reading (format.h) */
        return 0;
    }
    switch (r->kind) {
    case TPROF_REC_STRING: {
        const char *s = tprof__rec_inline(r, 0);
        if (!s || r->arg == 0 || r->arg > 1u << 26 || r->arg > L->max_id) return 0;
        while (tl->nstrs < r->arg) PUSH(tl->strs, tl->nstrs, tl->cap_strs, NULL);
        tl->strs[r->arg - 1] = tp_intern(L->run, s);
        return 0;
    }
    case TPROF_REC_PUSH: {
        if (body < sizeof(tprof_pl_push)) break;
        const tprof_pl_push *pl = (const void *)(r + 1);
        stack *st = stack_for(tl, pl->domain);
        if (!st) return TPROF_ERR_NO_MEMORY;
        tp_range rg = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, 0, 0,
                       st->n ? st->idx[st->n - 1] : -1, pl->domain, pl->category,
                       (uint16_t)(st->n > 65535 ? 65535 : st->n), TP_R_UNCLOSED, 0};
        PUSH(t->ranges, t->nranges, t->cap_ranges, rg);
        PUSH(st->idx, st->n, st->cap, (int32_t)(t->nranges - 1));
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_POP: {
        stack *st = NULL;
        if (r->arg == TPROF_POP_ANY) {
            /* the innermost open range of any domain: the latest pushed */
            for (size_t i = 0; i < tl->nstacks; i++)
                if (tl->stacks[i].n &&
                    (!st || tl->stacks[i].idx[tl->stacks[i].n - 1] > st->idx[st->n - 1]))
                    st = &tl->stacks[i];
            if (!st) st = stack_for(tl, 0);
        } else {
            st = stack_for(tl, r->arg);
        }
        if (!st) return TPROF_ERR_NO_MEMORY;
        t->events++;
        seen(t, r->ts_ns);
        if (!st->n) {
            if (!t->unmatched_pops++) t->first_unmatched_pop_ts = r->ts_ns;
            /* t->dropped already holds this chunk's count, read before its records: a drop
             * window of the thread opened at or before this chunk, starting before this pop */
            if (t->dropped) t->unmatched_pops_after_drops++;
            return 0;
        }
        tp_range *rg = &t->ranges[st->idx[--st->n]];
        rg->end = r->ts_ns < rg->start ? rg->start : r->ts_ns;
        rg->flags &= (uint16_t)~TP_R_UNCLOSED;
        return 0;
    }
    case TPROF_REC_START: {
        if (body < sizeof(tprof_pl_start)) break;
        const tprof_pl_start *pl = (const void *)(r + 1);
        tp_range rg = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, 0, 0, -1, pl->domain,
                       pl->category, 0, TP_R_ASYNC | TP_R_UNCLOSED, 0};
        /* the id rides in child_ns until ends are matched */
        rg.child_ns = pl->id;
        PUSH(t->ranges, t->nranges, t->cap_ranges, rg);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_END: {
        if (body < sizeof(tprof_pl_u64)) break;
        pending_end e = {((const tprof_pl_u64 *)(r + 1))->value, r->ts_ns, t->os_tid};
        PUSH(L->ends, L->nends, L->cap_ends, e);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_MARK: {
        if (body < sizeof(tprof_pl_push)) break;
        const tprof_pl_push *pl = (const void *)(r + 1);
        tp_mark m = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, pl->domain, pl->category};
        PUSH(t->marks, t->nmarks, t->cap_marks, m);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_COUNTER: {
        if (body < sizeof(tprof_pl_counter)) break;
        tp_counter c = {rec_name(L, tl, r, sizeof(tprof_pl_counter)), r->ts_ns,
                        ((const tprof_pl_counter *)(r + 1))->value};
        PUSH(t->counters, t->ncounters, t->cap_counters, c);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_STEP_BEGIN:
    case TPROF_REC_STEP_END: {
        if (body < sizeof(tprof_pl_u64)) break;
        tp_stepev s = {((const tprof_pl_u64 *)(r + 1))->value, r->ts_ns,
                       r->kind == TPROF_REC_STEP_BEGIN};
        PUSH(t->steps, t->nsteps, t->cap_steps, s);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_GPU_KERNEL:
    case TPROF_REC_GPU_MEMCPY:
    case TPROF_REC_GPU_MEMSET:
    case TPROF_REC_GPU_SYNC:
    case TPROF_REC_GPU_OVERHEAD:
    case TPROF_REC_GPU_API: {
        if (body < sizeof(tprof_pl_gpu)) break;
        const tprof_pl_gpu *pl = (const void *)(r + 1);
        if (pl->end_ns >= TPROF_TIME_MAX) break;
        tp_gpu_op op = {r->ts_ns, pl->end_ns < r->ts_ns ? r->ts_ns : pl->end_ns, pl->bytes, NULL,
                        pl->device, pl->stream, pl->correlation, pl->kind, pl->os_tid, pl->graph,
                        r->kind, TP_KC_OTHER};
        if (r->kind == TPROF_REC_GPU_KERNEL) kernel_name(L->run, rec_name(L, tl, r, sizeof *pl), &op);
        else if (r->kind == TPROF_REC_GPU_API || r->kind == TPROF_REC_GPU_OVERHEAD)
            op.name = rec_name(L, tl, r, sizeof *pl);
        if (r->kind == TPROF_REC_GPU_API) PUSH(L->p->api, L->p->napi, L->p->cap_api, op);
        else if (r->kind == TPROF_REC_GPU_OVERHEAD) PUSH(L->p->ovh, L->p->novh, L->p->cap_ovh, op);
        else PUSH(L->p->gpu, L->p->ngpu, L->p->cap_gpu, op);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_GPU_MEMORY: {
        if (body < sizeof(tprof_pl_gpu_mem)) break;
        const tprof_pl_gpu_mem *pl = (const void *)(r + 1);
        tp_gpu_mem m = {r->ts_ns, pl->address, pl->bytes, pl->device, pl->op, pl->memory_kind};
        PUSH(L->p->gmem, L->p->ngmem, L->p->cap_gmem, m);
        t->events++;
        return 0;
    }
    case TPROF_REC_COMM_OP: {
        if (body < sizeof(tprof_pl_comm)) break;
        const tprof_pl_comm *pl = (const void *)(r + 1);
        if (pl->end_ns >= TPROF_TIME_MAX ||
            ((pl->flags & TPROF_COMM_F_GPU_TIME) &&
             (pl->gpu_start_ns >= TPROF_TIME_MAX || pl->gpu_end_ns >= TPROF_TIME_MAX)))
            break;
        /* NCCL, MPI and torch.distributed number ranks with an int; the analyses do too */
        if (pl->nranks > INT32_MAX || pl->rank > INT32_MAX) break;
        tp_comm_op op = {r->ts_ns, pl->end_ns < r->ts_ns ? r->ts_ns : pl->end_ns,
                         pl->flags & TPROF_COMM_F_GPU_TIME ? pl->gpu_start_ns : 0,
                         pl->flags & TPROF_COMM_F_GPU_TIME
                             ? (pl->gpu_end_ns < pl->gpu_start_ns ? pl->gpu_start_ns
                                                                  : pl->gpu_end_ns)
                             : 0,
                         pl->bytes,
                         pl->count, pl->comm_hash, rec_name(L, tl, r, sizeof *pl), pl->seq,
                         pl->nranks, pl->rank, pl->op, pl->algo, pl->proto, pl->peer,
                         pl->flags, pl->nchannels, pl->source, t->os_tid, pl->dtype};
        PUSH(L->p->comm, L->p->ncomm, L->p->cap_comm, op);
        seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    case TPROF_REC_GPU_DROPS: {
        if (body < sizeof(tprof_pl_u64)) break;
        uint64_t v = ((const tprof_pl_u64 *)(r + 1))->value;
        if (v > L->p->cupti_dropped) L->p->cupti_dropped = v;
        return 0;
    }
    case TPROF_REC_THREAD_NAME: {
        if (body < sizeof(tprof_pl_u64)) break;
        uint64_t tid = ((const tprof_pl_u64 *)(r + 1))->value;
        const char *n = tprof__rec_inline(r, sizeof(tprof_pl_u64));
        if (!n) return 0;
        /* NVTX may name another thread: apply to the thread with that os tid if known,
         * else remember it on this thread when it is its own id */
        int target = -1;
        for (size_t i = 0; i < L->p->nthreads; i++)
            if (L->p->threads[i].os_tid == tid) target = (int)i;
        if (target >= 0) L->p->threads[target].name = tp_intern(L->run, n);
        else if (L->npending < sizeof L->pending / sizeof L->pending[0]) {
            L->pending[L->npending].tid = tid;
            L->pending[L->npending++].name = tp_intern(L->run, n);
        }
        return 0;
    }
    default:
        return 0; /* PAD and kinds this reader does not know */
    }
    L->bad_records++;
    return 0;
}

static int cmp_end(const void *a, const void *b) {
    const pending_end *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Containment on one thread, across domains: each synchronous range's direct children
 * (child_ns, for exclusive time) and whether a range of the same name and domain encloses
 * it (recursion, TP_R_NESTED_SAME). One sweep in start order with a stack of enclosing
 * ranges and a count per name on that stack; a range that only overlaps the top (ranges of
 * two domains that do not nest) closes it. */
typedef struct nest_key {
    const char *name;
    uint32_t domain;
    uint32_t count;
} nest_key;

static int cmp_by_start(const void *a, const void *b, void *ctx) {
    const tp_range *r = ctx;
    const tp_range *x = &r[*(const uint32_t *)a], *y = &r[*(const uint32_t *)b];
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* the enclosing one first */
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static nest_key *nest_slot(nest_key *tab, size_t mask, const char *name, uint32_t domain) {
    size_t h = (((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull + domain) & mask;
    while (tab[h].name && (tab[h].name != name || tab[h].domain != domain)) h = (h + 1) & mask;
    return &tab[h];
}

static int nesting(tp_thread *t) {
    size_t n = 0;
    for (size_t k = 0; k < t->nranges; k++) {
        t->ranges[k].child_ns = 0;
        n += !(t->ranges[k].flags & TP_R_ASYNC);
    }
    if (!n) return 0;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *idx = malloc(n * sizeof *idx), *stk = malloc(n * sizeof *stk);
    nest_key *tab = calloc(cap, sizeof *tab);
    if (!idx || !stk || !tab) {
        free(idx);
        free(stk);
        free(tab);
        return TPROF_ERR_NO_MEMORY;
    }
    size_t m = 0, sp = 0;
    for (size_t k = 0; k < t->nranges; k++)
        if (!(t->ranges[k].flags & TP_R_ASYNC)) idx[m++] = (uint32_t)k;
    qsort_r(idx, n, sizeof *idx, cmp_by_start, t->ranges);
    for (size_t i = 0; i < n; i++) {
        tp_range *r = &t->ranges[idx[i]];
        while (sp && t->ranges[stk[sp - 1]].end < r->end) {
            const tp_range *top = &t->ranges[stk[--sp]];
            nest_slot(tab, cap - 1, top->name, top->domain)->count--;
        }
        if (sp) t->ranges[stk[sp - 1]].child_ns += r->end - r->start;
        nest_key *k = nest_slot(tab, cap - 1, r->name, r->domain);
        if (k->count) r->flags |= TP_R_NESTED_SAME;
        k->name = r->name;
        k->domain = r->domain;
        k->count++;
        stk[sp++] = idx[i];
    }
    free(idx);
    free(stk);
    free(tab);
    return 0;
}

/* CUPTI's synchronization records name a context and a stream but no device: the capture
 * writes the device its kernels and copies showed for that context, or TPROF_DEVICE_UNKNOWN
 * when none had been seen yet (files before 2026-11 always wrote 0, which put a phantom GPU 0
 * in the report of every rank on another GPU). Each gets the device of the kernels, copies
 * and memsets on the same stream (CUPTI's stream ids are unique in a process), else the
 * device the capture wrote when the process has other work on it and the file says its
 * capture wrote the context's device (metadata cupti.sync_device=context), else the
 * process's only device when it used one; otherwise it stays unknown and counts for no
 * device (the host-synchronisation figures do not need one). */
static void sync_devices(tp_process *p) {
    struct smap { uint32_t stream, device; } map[256];
    size_t nmap = 0;
    uint32_t devs[64]; /* the devices with work */
    size_t ndev = 0;
    uint32_t last_stream = 0, have_last = 0;
    /* files whose capture wrote the context's device say so; older ones wrote 0 */
    const char *how = tp_meta(p, "cupti.sync_device");
    const int trusted = how && !strcmp(how, "context");
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type == TPROF_REC_GPU_SYNC || o->device == TPROF_DEVICE_UNKNOWN) continue;
        size_t d = 0;
        while (d < ndev && devs[d] != o->device) d++;
        if (d == ndev && ndev < 64) devs[ndev++] = o->device;
        if (have_last && o->stream == last_stream) continue;
        last_stream = o->stream;
        have_last = 1;
        size_t k = 0;
        while (k < nmap && map[k].stream != o->stream) k++;
        if (k == nmap && nmap < 256) map[nmap++] = (struct smap){o->stream, o->device};
    }
    for (size_t i = 0; i < p->ngpu; i++) {
        tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_SYNC) continue;
        uint32_t dev = ndev == 1 ? devs[0] : TPROF_DEVICE_UNKNOWN;
        for (size_t d = 0; trusted && ndev > 1 && d < ndev; d++)
            if (devs[d] == o->device) dev = o->device; /* the capture's, a device with work */
        for (size_t k = 0; k < nmap; k++)
            if (map[k].stream == o->stream) {
                dev = map[k].device;
                break;
            }
        o->device = dev;
    }
}

static void finish_process(loader *L) {
    tp_process *p = L->p;
    sync_devices(p);
    /* match async ends */
    if (L->nends) qsort(L->ends, L->nends, sizeof *L->ends, cmp_end);
    size_t matched = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *rg = &t->ranges[k];
            if (!(rg->flags & TP_R_ASYNC)) continue;
            uint64_t id = rg->child_ns;
            rg->child_ns = 0;
            size_t lo = 0, hi = L->nends;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (L->ends[mid].id < id) lo = mid + 1;
                else hi = mid;
            }
            if (lo < L->nends && L->ends[lo].id == id) {
                rg->end = L->ends[lo].ts < rg->start ? rg->start : L->ends[lo].ts;
                rg->end_tid = L->ends[lo].os_tid;
                rg->flags &= (uint16_t)~TP_R_UNCLOSED;
                L->ends[lo].id = 0; /* consumed; ids are never 0 */
                matched++;
            }
        }
    }
    p->unknown_ends = L->nends - matched;
    for (size_t k = 0; k < L->npending; k++)
        for (size_t i = 0; i < p->nthreads; i++)
            if (p->threads[i].os_tid == L->pending[k].tid) p->threads[i].name = L->pending[k].name;
    /* times */
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        if (t->first_ts && (!p->first_ts || t->first_ts < p->first_ts)) p->first_ts = t->first_ts;
        if (t->last_ts > p->last_ts) p->last_ts = t->last_ts;
        p->events += t->events;
        p->dropped += t->dropped;
    }
    if (!p->end_mono || p->end_mono < p->last_ts) p->end_mono = p->last_ts;
    if (!p->end_mono) p->end_mono = p->hdr.start_mono_ns;
    /* Ranges never ended end where they were last known open (model.h, TP_R_UNCLOSED): a
     * thread range at its thread's last event, since only that thread could have popped it
     * and a thread that exited records nothing more; a process range at the process's end,
     * since any thread could still have ended it until then. */
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *rg = &t->ranges[k];
            if (!(rg->flags & TP_R_UNCLOSED)) continue;
            uint64_t last = rg->flags & TP_R_ASYNC ? p->end_mono : t->last_ts;
            rg->end = last > rg->start ? last : rg->start;
        }
    }
    for (size_t i = 0; i < p->nthreads; i++) nesting(&p->threads[i]);
    /* rank identity from metadata (last value wins) */
    const char *v;
    p->rank = (v = tp_meta(p, "rank")) ? atoi(v) : -1;
    p->world_size = (v = tp_meta(p, "world_size")) ? atoi(v) : -1;
    p->local_rank = (v = tp_meta(p, "local_rank")) ? atoi(v) : -1;
    if (L->bad_records)
        add_damage(p, "%llu record(s) with a malformed payload skipped",
                   (unsigned long long)L->bad_records);
}

/* Header strings are raw bytes: keep them valid UTF-8 (bad bytes become U+FFFD) without
 * control bytes, cut to the field's size on a character boundary. */
static void clean_field(char *f, size_t n) {
    f[n - 1] = 0;
    size_t len = strlen(f);
    char tmp[3 * 64 + 1];
    if (len > 64) len = 64;
    size_t tl = to_utf8(f, len, tmp);
    size_t o = 0;
    for (size_t i = 0; i < tl;) {
        unsigned char c = (unsigned char)tmp[i];
        size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (o + k + 1 > n) break;
        if (k == 1) f[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        else { memcpy(f + o, tmp + i, k); o += k; }
        i += k;
    }
    f[o] = 0;
}

static int cmp_gpu_start(const void *a, const void *b) {
    const tp_gpu_op *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

/* GPU work in start order (CUPTI hands buffers back per stream and context, so the file
 * interleaves them): every analysis walks or unites them by time, and sorted input lets
 * tp_spans_sort skip its sort. Ties keep a fixed order (end, correlation id). */
static void gpu_in_start_order(tp_process *p) {
    for (size_t i = 1; i < p->ngpu; i++)
        if (p->gpu[i].start < p->gpu[i - 1].start) {
            qsort(p->gpu, p->ngpu, sizeof *p->gpu, cmp_gpu_start);
            return;
        }
}

/* The writer's largest chunk (session.c, TPROF__CHUNK_MAX: it cuts a drain there at a record
 * boundary), and the most a record can take (its size field is 16 bits). */
#define WRITER_CHUNK_MAX (4u << 20)
#define MAX_RECORD_BYTES 65536u

/* trainprof.torch records every torch.distributed collective, but one that NCCL's profiler
 * plugin or the MPI wrappers also recorded must count once: the lower level's record has the
 * real timing. So a process with NCCL plugin records keeps none of torch's NCCL ones (flagged
 * enqueue: torch writes them only while the plugin is not recording, which it cannot know
 * for the call that creates a communicator), and one with MPI records none of torch's over
 * its "mpi" backend (ProcessGroupMPI calls MPI, which the wrappers record). */
static void drop_torch_twins(tp_process *p) {
    int nccl = 0, mpi = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        nccl |= p->comm[i].source == TPROF_COMM_SRC_NCCL;
        mpi |= p->comm[i].source == TPROF_COMM_SRC_MPI;
    }
    if (!nccl && !mpi) return;
    size_t k = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        int twin = 0;
        if (o->source == TPROF_COMM_SRC_TORCH) {
            if (o->flags & TPROF_COMM_F_ENQUEUE) {
                twin = nccl;
            } else if (mpi) {
                char key[40];
                snprintf(key, sizeof key, "torch.pg.%016llx", (unsigned long long)o->comm_hash);
                const char *d = tp_meta(p, key);
                twin = d && !strncmp(d, "backend=mpi ", 12);
            }
        }
        if (!twin) p->comm[k++] = *o;
    }
    p->ncomm = k;
}

static int load_file(tp_run *run, const char *path, tp_process *p) {
    memset(p, 0, sizeof *p);
    p->path = tp_intern(run, path);
    p->helper_of = -1;
    p->rank = p->world_size = p->local_rank = -1;
    tprof_reader *rd;
    char err[200];
    int rc = tprof__reader_open(path, &rd, err, sizeof err);
    if (rc != TPROF_OK) {
        char line[512];
        snprintf(line, sizeof line, "%s: %s", path, err);
        char **e = realloc(run->errors, (run->nerrors + 1) * sizeof *e);
        if (e) {
            run->errors = e;
            e[run->nerrors] = strdup(line);
            if (e[run->nerrors]) run->nerrors++;
        }
        return rc;
    }
    p->hdr = *tprof__reader_header(rd);
    clean_field(p->hdr.host, sizeof p->hdr.host);
    clean_field(p->hdr.run_id, sizeof p->hdr.run_id);
    clean_field(p->hdr.build, sizeof p->hdr.build);
    p->domains = calloc(1, sizeof *p->domains);
    if (!p->domains) { tprof__reader_close(rd); return TPROF_ERR_NO_MEMORY; }
    p->domains[0] = tp_intern(run, "");
    p->ndomains = 1;
    loader L;
    memset(&L, 0, sizeof L);
    L.run = run;
    L.p = p;
    L.max_id = tprof__reader_size(rd) / MIN_NAMED_REC;
    tprof_chunk c;
    uint64_t proc_dropped = 0;
    uint32_t prev_serial = 0;
    uint64_t prev_dropped = 0;
    size_t prev_len = 0;
    rc = TPROF_OK;
    while (rc == TPROF_OK && tprof__reader_next(rd, &c)) {
        int ti = -1;
        uint64_t new_drops = 0, last_before = 0;
        if (c.thread_serial == 0) proc_dropped = c.dropped;
        else {
            ti = thread_index(&L, c.thread_serial, c.os_tid);
            if (ti < 0) { rc = TPROF_ERR_NO_MEMORY; break; }
            if (c.dropped > p->threads[ti].dropped) {
                new_drops = c.dropped - p->threads[ti].dropped;
                p->threads[ti].dropped = c.dropped;
            }
            last_before = p->threads[ti].last_ts;
        }
        size_t pos = 0;
        int bad = 0;
        uint64_t first_ts = 0;
        const tprof_rec *r;
        while (rc == TPROF_OK && (r = tprof__chunk_next_rec(&c, &pos, &bad)) != NULL) {
            if (!first_ts && ti >= 0 && r->kind != TPROF_REC_PAD && r->kind != TPROF_REC_STRING)
                first_ts = r->ts_ns;
            rc = ti < 0 ? proc_record(&L, r) : thread_record(&L, ti, r);
        }
        if (bad)
            add_damage(p, "malformed record in the chunk at byte %llu; rest of chunk skipped",
                       (unsigned long long)c.file_offset);
        if (ti >= 0 && rc == TPROF_OK) {
            /* Ring drops, placed in time. The counter in a chunk's header is read when the
             * flusher drains the ring, and a ring drops only while full, between two drains:
             * so the events counted anew were recorded after the thread's last event of the
             * drains before and before its first event of a later drain. One drain writes its
             * chunks in a row with the same counter: the part up to the ring's end, then the
             * part from its start (a full ring, the case with drops, nearly always wraps),
             * each cut further at the writer's chunk limit. A chunk that follows one of the
             * same thread and counter is taken as part of the same drain when the drain may
             * still wrap, or when the chunk before it was cut at the limit: the window then
             * ends later, never earlier, than the drops. */
            tload *tl = &L.tl[ti];
            int same_drain = tl->drop_open && prev_serial == c.thread_serial &&
                             prev_dropped == c.dropped &&
                             (tl->drop_wrap || prev_len + MAX_RECORD_BYTES >= WRITER_CHUNK_MAX);
            if (same_drain && prev_len + MAX_RECORD_BYTES < WRITER_CHUNK_MAX) tl->drop_wrap = 0;
            if (tl->drop_open && !same_drain && first_ts) {
                p->drops[tl->drop_open - 1].to = first_ts;
                tl->drop_open = 0;
            }
            if (new_drops) {
                tp_drop_window dw = {last_before ? last_before : first_ts, 0, new_drops, c.os_tid};
                if (p->ndrops == p->cap_drops) {
                    size_t nc = p->cap_drops ? p->cap_drops * 2 : 16;
                    tp_drop_window *nd = realloc(p->drops, nc * sizeof *nd);
                    if (!nd) { rc = TPROF_ERR_NO_MEMORY; break; }
                    p->drops = nd;
                    p->cap_drops = nc;
                }
                p->drops[p->ndrops++] = dw;
                tl->drop_open = p->ndrops;
                tl->drop_wrap = 1;
            }
        }
        prev_serial = c.thread_serial;
        prev_dropped = c.dropped;
        prev_len = c.len;
    }
    for (size_t i = 0; i < tprof__reader_damage_count(rd); i++) {
        const tprof_damage *d = tprof__reader_damage(rd, i);
        add_damage(p, "%s at byte %llu", d->what, (unsigned long long)d->offset);
    }
    tprof__reader_close(rd);
    finish_process(&L);
    gpu_in_start_order(p);
    if (tp_gpu_clip_to_streams(p) != 0)
        add_damage(p, "out of memory while checking GPU records against their streams' order");
    p->dropped += proc_dropped;
    if (p->end_dropped > p->dropped) p->dropped = p->end_dropped; /* the writer's own total */
    drop_torch_twins(p);
    /* drop windows still open, or opened before any event, span to the record's ends */
    uint64_t placed = 0;
    for (size_t i = 0; i < p->ndrops; i++) {
        tp_drop_window *d = &p->drops[i];
        if (!d->from) d->from = p->first_ts ? p->first_ts : p->hdr.start_mono_ns;
        if (!d->to || d->to < d->from) d->to = p->end_mono > d->from ? p->end_mono : d->from;
        placed += d->count;
    }
    p->drops_unplaced = p->dropped > placed ? p->dropped - placed : 0;
    const char *werr = tp_meta(p, "write_errors.first_errno");
    if (!p->complete && werr) {
        /* the writer counted write errors: the end may have been one more chunk it could
         * not write, so a kill is not the only explanation */
        const char *wtext = tp_meta(p, "write_errors.first_error");
        add_damage(p, "no end record: the rank file had write errors (%s: %s), so its end "
                      "may not have been writable, else the process did not exit normally; "
                      "events after its last chunk written are lost",
                   werr, wtext ? wtext : "");
    } else if (!p->complete)
        add_damage(p, "no end record: the process did not exit normally (killed?); "
                      "events after its last flush are lost");
    for (size_t i = 0; i < p->nthreads; i++) {
        for (size_t k = 0; k < L.tl[i].nstacks; k++) free(L.tl[i].stacks[k].idx);
        free(L.tl[i].stacks);
        free(L.tl[i].strs);
    }
    free(L.tl);
    free(L.ends);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void assign_roles(tp_run *run);

int tp_run_load(const char *dir, tp_run *run, char *err, size_t errlen) {
    memset(run, 0, sizeof *run);
    run->pool = calloc(1, sizeof *run->pool);
    if (!run->pool) return TPROF_ERR_NO_MEMORY;
    {
        /* the directory name goes into reports: valid UTF-8, no control bytes */
        const char *d = dir ? dir : "";
        size_t n = strlen(d);
        run->dir = malloc(3 * n + 1);
        if (!run->dir) return TPROF_ERR_NO_MEMORY;
        to_utf8(d, n, run->dir);
        for (char *c = run->dir; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return TPROF_ERR_IO;
    }
    char **files = NULL;
    size_t nfiles = 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errlen, "%s: %s", dir, strerror(errno));
            return TPROF_ERR_IO;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!ends_with(e->d_name, ".tprof")) continue;
            if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) continue;
            char **nf = realloc(files, (nfiles + 1) * sizeof *nf);
            if (!nf) break;
            files = nf;
            size_t n = strlen(dir) + strlen(e->d_name) + 2;
            files[nfiles] = malloc(n);
            if (!files[nfiles]) break;
            snprintf(files[nfiles++], n, "%s/%s", dir, e->d_name);
        }
        closedir(d);
    } else {
        files = malloc(sizeof *files);
        if (files && (files[0] = strdup(dir))) nfiles = 1;
    }
    if (!nfiles) {
        free(files);
        snprintf(err, errlen, "%s: no .tprof rank files found", dir);
        return TPROF_ERR_NOT_FOUND;
    }
    qsort(files, nfiles, sizeof *files, cmp_str);
    run->procs = calloc(nfiles, sizeof *run->procs);
    int rc = run->procs ? TPROF_OK : TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < nfiles; i++) {
        if (rc == TPROF_OK) {
            int r = load_file(run, files[i], &run->procs[run->nprocs]);
            if (r == TPROF_OK) run->nprocs++;
            else if (r == TPROF_ERR_NO_MEMORY) rc = r;
            else {
                /* keep what a damaged-but-opened file had; drop files that never opened */
                tp_process *p = &run->procs[run->nprocs];
                if (p->nthreads || p->nmeta) run->nprocs++;
            }
        }
        free(files[i]);
    }
    free(files);
    if (rc == TPROF_OK && run->nprocs == 0) {
        snprintf(err, errlen, "%s: no readable rank file (%zu unreadable)", dir, run->nerrors);
        rc = TPROF_ERR_FORMAT;
    }
    if (rc == TPROF_OK) assign_roles(run);
    return rc;
}

/* Which processes are ranks (docs/design.md §4). A process whose metadata names a rank is that
 * rank, unless another process of the same rank did more (a launcher agent, or a DataLoader
 * worker that inherited RANK): the busiest is the rank, the others its helpers. Without any
 * rank metadata the busiest process is rank 0 (implied) and the others helpers. */
static void assign_roles(tp_run *run) {
    int any_rank = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        tp_process *p = &run->procs[i];
        const char *role = tp_meta(p, "trainprof.role");
        if (role && !strcmp(role, "node-sampler")) {
            p->role = TP_ROLE_SAMPLER;
            p->rank = -1; /* whatever a launcher's variables said */
        }
    }
    for (size_t i = 0; i < run->nprocs; i++) any_rank |= run->procs[i].rank >= 0;
    if (!any_rank) {
        size_t best = run->nprocs;
        for (size_t i = 0; i < run->nprocs; i++)
            if (run->procs[i].role != TP_ROLE_SAMPLER &&
                (best == run->nprocs || run->procs[i].events > run->procs[best].events))
                best = i;
        if (best < run->nprocs) {
            run->procs[best].rank = 0;
            run->procs[best].world_size = 1;
            run->procs[best].rank_implied = 1;
        }
    }
    for (size_t i = 0; i < run->nprocs; i++) {
        tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_SAMPLER) continue;
        if (p->rank < 0) {
            p->role = TP_ROLE_HELPER;
            /* attach to the rank whose pid is its parent, if any */
            for (size_t k = 0; k < run->nprocs; k++)
                if (run->procs[k].rank >= 0 && run->procs[k].hdr.pid == p->hdr.ppid)
                    p->helper_of = run->procs[k].rank;
            continue;
        }
        p->role = TP_ROLE_RANK;
        for (size_t k = 0; k < run->nprocs; k++) {
            tp_process *q = &run->procs[k];
            if (k == i || q->rank != p->rank) continue;
            if (q->events > p->events || (q->events == p->events && k < i)) {
                p->role = TP_ROLE_HELPER;
                p->helper_of = p->rank;
                break;
            }
        }
    }
}

void tp_run_free(tp_run *run) {
    if (!run) return;
    for (size_t i = 0; i < run->nprocs; i++) {
        tp_process *p = &run->procs[i];
        for (size_t k = 0; k < p->nthreads; k++) {
            tp_thread *t = &p->threads[k];
            free(t->ranges);
            free(t->marks);
            free(t->counters);
            free(t->steps);
        }
        free(p->threads);
        free(p->gpu);
        free(p->clips);
        free(p->api);
        free(p->ovh);
        free(p->gmem);
        free(p->comm);
        free(p->drops);
        free(p->meta);
        free(p->domains);
        free(p->categories);
        for (size_t k = 0; k < p->ndamage; k++) free(p->damage[k]);
        free(p->damage);
    }
    free(run->procs);
    for (size_t i = 0; i < run->nerrors; i++) free(run->errors[i]);
    free(run->errors);
    free(run->dir);
    pool_free(run->pool);
    memset(run, 0, sizeof *run);
}

const char *tp_meta(const tp_process *p, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; i < p->nmeta; i++)
        if (!strcmp(p->meta[i].key, key)) v = p->meta[i].value;
    return v;
}

const tp_process *tp_rank_process(const tp_run *run, const char *host, double pid) {
    for (size_t i = 0; run && host && i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_RANK && (double)p->hdr.pid == pid && !strcmp(p->hdr.host, host))
            return p;
    }
    return NULL;
}

/* NVML indices in CUDA order, from a sampler's nvml.devices; returns how many (at most max) */
static size_t nvml_order(const tp_process *sampler, unsigned *order, size_t max) {
    size_t no = 0;
    for (const char *c = tp_meta(sampler, "nvml.devices"); c && *c && no < max;) {
        char *end;
        unsigned long v = strtoul(c, &end, 10);
        if (end == c) break;
        order[no++] = (unsigned)v;
        c = *end == ',' ? end + 1 : end;
    }
    return no;
}

/* Whether p named any CUDA device by UUID. */
static int names_devices(const tp_process *p) {
    for (size_t i = 0; i < p->nmeta; i++) {
        const char *k = p->meta[i].key;
        size_t n = strlen(k);
        if (!strncmp(k, "cuda.", 5) && n > 10 && !strcmp(k + n - 5, ".uuid")) return 1;
    }
    return 0;
}

/* Whether `uuid` is one of the comma-separated UUIDs of `list`. */
static int in_list(const char *list, const char *uuid) {
    size_t ul = strlen(uuid);
    for (const char *c = list; c && *c;) {
        const char *e = strchr(c, ',');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == ul && !strncasecmp(c, uuid, n)) return 1;
        c = e ? e + 1 : c + n;
    }
    return 0;
}

/* The sampler's NVML index of the GPU `uuid` names: a GPU UUID, or a MIG device of a GPU
 * (gpu.<i>.mig_uuids), or through `parent` (the rank's cuda.<o>.gpu_uuid); -1 if none. */
static long sampler_gpu(const tp_process *sampler, const char *uuid, const char *parent,
                        tp_gpu_match *by) {
    int mig = !strncasecmp(uuid, "MIG-", 4);
    for (size_t i = 0; i < sampler->nmeta; i++) {
        const tp_kv *kv = &sampler->meta[i];
        char *end;
        if (strncmp(kv->key, "gpu.", 4)) continue;
        unsigned long idx = strtoul(kv->key + 4, &end, 10);
        if (end == kv->key + 4) continue;
        if (!strcmp(end, ".uuid") && !strcasecmp(kv->value, mig ? (parent ? parent : "") : uuid)) {
            *by = mig ? TP_GPU_BY_MIG_PARENT : TP_GPU_BY_UUID;
            return (long)idx;
        }
        if (mig && !strcmp(end, ".mig_uuids") && in_list(kv->value, uuid)) {
            *by = TP_GPU_BY_MIG_PARENT;
            return (long)idx;
        }
    }
    return -1;
}

size_t tp_rank_gpu_links(const tp_process *p, const tp_process *sampler, tp_gpu_link *out,
                         size_t max, size_t *unmatched) {
    unsigned order[64];
    const size_t no = nvml_order(sampler, order, 64);
    const int named = names_devices(p);
    uint64_t used = 0; /* CUDA ordinals below 64 */
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].device < 64) used |= 1ull << p->gpu[i].device;
    if (!used) { /* no GPU records: the devices whose primary context was active */
        for (unsigned o = 0; o < 64; o++) {
            char key[32];
            snprintf(key, sizeof key, "cuda.%u.in_use", o);
            if (tp_meta(p, key)) used |= 1ull << o;
        }
        /* several, the launcher's local rank among them: a rank of a one-GPU-per-rank job
         * that also touched another device (commonly cuda:0 before set_device) */
        if ((used & (used - 1)) && p->local_rank >= 0 && p->local_rank < 64 &&
            (used >> p->local_rank & 1))
            used = 1ull << p->local_rank;
    }
    if (!used && p->local_rank >= 0 && p->local_rank < 64) used = 1ull << p->local_rank;
    size_t n = 0, nmiss = 0;
    tp_gpu_link miss[64];
    for (unsigned o = 0; o < 64 && n < max; o++) {
        if (!(used & (1ull << o))) continue;
        char key[40];
        snprintf(key, sizeof key, "cuda.%u.uuid", o);
        const char *uuid = tp_meta(p, key);
        snprintf(key, sizeof key, "cuda.%u.gpu_uuid", o);
        const char *parent = tp_meta(p, key);
        tp_gpu_link l = {0, (int)o, TP_GPU_BY_UUID, uuid};
        long idx = -1;
        if (uuid) {
            idx = sampler_gpu(sampler, uuid, parent, &l.by);
            if (idx < 0) { /* known, not sampled: never by position */
                l.by = TP_GPU_NOT_SAMPLED;
                miss[nmiss++] = l;
            }
        } else if (!named && o < no) {
            idx = order[o];
            l.by = TP_GPU_BY_POSITION;
        }
        if (idx < 0) continue;
        l.index = (unsigned)idx;
        int dup = 0;
        for (size_t k = 0; k < n; k++) dup |= out[k].index == l.index; /* MIG siblings: once */
        if (!dup) out[n++] = l;
    }
    if (unmatched) *unmatched = nmiss;
    for (size_t k = 0; k < nmiss && n + k < max; k++) out[n + k] = miss[k];
    return n;
}

size_t tp_rank_gpus(const tp_process *p, const tp_process *sampler, unsigned *out, size_t max) {
    tp_gpu_link l[64];
    size_t n = tp_rank_gpu_links(p, sampler, l, max < 64 ? max : 64, NULL);
    for (size_t i = 0; i < n; i++) out[i] = l[i].index;
    return n;
}

int tp_cuda_ordinal_of(const tp_process *rank, const tp_process *sampler, unsigned idx) {
    char key[40];
    if (names_devices(rank)) {
        for (unsigned o = 0; o < 64; o++) {
            snprintf(key, sizeof key, "cuda.%u.uuid", o);
            const char *u = tp_meta(rank, key);
            if (!u) continue;
            snprintf(key, sizeof key, "cuda.%u.gpu_uuid", o);
            tp_gpu_match by;
            if (sampler_gpu(sampler, u, tp_meta(rank, key), &by) == (long)idx) return (int)o;
        }
        return -1; /* the rank named its devices, and none is this GPU */
    }
    unsigned order[64];
    const size_t no = nvml_order(sampler, order, 64);
    for (size_t pos = 0; pos < no; pos++)
        if (order[pos] == idx) return (int)pos;
    return -1;
}

const tp_process *tp_gpu_samples_for(const tp_run *run, const tp_process *p) {
    if (tp_has_gpu_counters(p)) return p;
    const tp_process *other = NULL;
    for (size_t i = 0; run && i < run->nprocs; i++) {
        const tp_process *q = &run->procs[i];
        if (q == p || strcmp(q->hdr.host, p->hdr.host)) continue;
        if (q->role == TP_ROLE_SAMPLER) return q;
        if (!other && tp_has_gpu_counters(q)) other = q;
    }
    return other;
}

const char *tp_gpu_counter(const char *name, unsigned long *idx) {
    if (strncmp(name, "gpu", 3) || !isdigit((unsigned char)name[3])) return NULL;
    char *end;
    *idx = strtoul(name + 3, &end, 10);
    return *end == '.' ? end + 1 : NULL;
}

void tp_fput_printable(FILE *f, const char *s) { tp_text_put(f, s, -1, 0); }

int tp_has_gpu_counters(const tp_process *p) {
    for (size_t ti = 0; ti < p->nthreads; ti++)
        for (size_t k = 0; k < p->threads[ti].ncounters; k++) {
            const char *name = p->threads[ti].counters[k].name;
            if (!strncmp(name, "gpu", 3) && isdigit((unsigned char)name[3])) return 1;
        }
    return 0;
}

const char *tp_domain_name(const tp_process *p, uint32_t domain) {
    if (domain < p->ndomains && p->domains[domain]) return p->domains[domain];
    return domain ? "(unknown domain)" : "";
}

const char *tp_category_name(const tp_process *p, uint32_t domain, uint32_t category) {
    const char *n = NULL;
    for (size_t i = 0; i < p->ncategories; i++)
        if (p->categories[i].domain == domain && p->categories[i].id == category)
            n = p->categories[i].name;
    return n;
}

void tp_process_label(const tp_process *p, char *buf, size_t n) {
    if (p->role == TP_ROLE_RANK) snprintf(buf, n, "rank %d", p->rank);
    else if (p->role == TP_ROLE_SAMPLER) snprintf(buf, n, "node GPU sampler");
    else if (p->helper_of >= 0) snprintf(buf, n, "helper of rank %d", p->helper_of);
    else snprintf(buf, n, "process %d", (int)p->hdr.pid);
}

void tp_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}
