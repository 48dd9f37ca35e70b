/*
 * model_records.c — the loader's record handlers: each record of a rank file into the model of
 * model.h (one handler per kind of thread record, process records, thread names, kernel
 * names demangled and classified once), and the run's string pool every name is interned in.
 * model.c reads the files and assembles the run around them.
 */
#define _GNU_SOURCE
#include "analysis/model.h"
#include "analysis/alloc.h"
#include "analysis/gpu.h"
#include "analysis/hash.h"
#include "analysis/counter_pack.h"
#include "analysis/stats.h"
#include "analysis/text.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "analysis/model_load.h"
#include "analysis/step_pack.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ string pool */

/* Copies s into dst as valid UTF-8 (bad bytes become U+FFFD); dst has room for 3*n+1. */
size_t tp_load_utf8(const char *s, size_t n, char *dst) {
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
        char **b = tp_realloc(p->blocks, (p->nblocks + 1) * sizeof *b);
        if (!b) return NULL;
        p->blocks = b;
        char *blk = tp_malloc(sz);
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

const char tp_intern_no_memory[] = "(out of memory)";

static const char *intern_locked(tp_pool *p, const char *clean, size_t n);

/* tp_intern with the pool's lock held by the caller (locked: 1) or taken here (0). */
static const char *intern(tp_pool *p, const char *s, int locked) {
    if (!s) s = "(null)";
    size_t n = strlen(s);
    char stackbuf[512];
    char *clean = 3 * n + 1 <= sizeof stackbuf ? stackbuf : tp_malloc(3 * n + 1);
    if (!clean) return tp_intern_no_memory;
    n = tp_load_utf8(s, n, clean);
    if (!locked) pthread_mutex_lock(&p->lock);
    const char *r = intern_locked(p, clean, n);
    if (!locked) pthread_mutex_unlock(&p->lock);
    if (clean != stackbuf) free(clean);
    return r;
}

const char *tp_intern(tp_run *run, const char *s) { return intern(run->pool, s, 0); }

/* `clean` (valid UTF-8, n bytes) in the pool, under its lock. */
static const char *intern_locked(tp_pool *p, const char *clean, size_t n) {
    if ((p->count + 1) * 2 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        char **ns = tp_calloc(cap, sizeof *ns);
        if (!ns) return tp_intern_no_memory;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->slots[i]) continue;
            size_t j = tp_fnv1a(p->slots[i], strlen(p->slots[i]), TP_FNV_OFFSET) & (cap - 1);
            while (ns[j]) j = (j + 1) & (cap - 1);
            ns[j] = p->slots[i];
        }
        free(p->slots);
        p->slots = ns;
        p->cap = cap;
    }
    size_t j = tp_fnv1a(clean, n, TP_FNV_OFFSET) & (p->cap - 1);
    while (p->slots[j]) {
        if (!strcmp(p->slots[j], clean)) return p->slots[j];
        j = (j + 1) & (p->cap - 1);
    }
    char *copy = pool_alloc(p, n + 1);
    if (copy) {
        memcpy(copy, clean, n + 1);
        p->slots[j] = copy;
        p->count++;
    }
    return copy ? copy : tp_intern_no_memory;
}

tp_pool *tp_load_pool_new(void) {
    tp_pool *p = tp_calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void tp_load_pool_free(tp_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nblocks; i++) free(p->blocks[i]);
    free(p->blocks);
    free(p->slots);
    free(p->kn);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void tp_load_damage(tp_process *p, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **d = tp_realloc(p->damage, (p->ndamage + 1) * sizeof *d);
    if (!d) return;
    p->damage = d;
    p->damage[p->ndamage] = tp_strdup(line);
    if (p->damage[p->ndamage]) p->ndamage++;
}

int tp_load_thread_index(loader *L, uint32_t serial, uint32_t os_tid) {
    tp_process *p = L->p;
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].serial == serial) return (int)i;
    tp_thread *nt = tp_realloc(p->threads, (p->nthreads + 1) * sizeof *nt);
    if (!nt) return -1;
    p->threads = nt;
    tload *ntl = tp_realloc(L->tl, (p->nthreads + 1) * sizeof *ntl);
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

/* Called with the pool's lock held. */
static const char *demangled(tp_run *run, const char *name) {
    if (strncmp(name, "_Z", 2)) return name;
    int status = 0;
    char *d = __cxa_demangle(name, NULL, NULL, &status);
    if (status || !d) return name;
    const char *r = intern(run->pool, d, 1);
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
static void kernel_name_locked(tp_run *run, const char *raw, tp_gpu_op *op);

static void kernel_name(tp_run *run, const char *raw, tp_gpu_op *op) {
    tp_pool *p = run->pool;
    pthread_mutex_lock(&p->lock);
    kernel_name_locked(run, raw, op);
    pthread_mutex_unlock(&p->lock);
}

/* The memo's answer without the pool's lock when this loader has seen the name before. */
static void loader_kernel_name(loader *L, const char *raw, tp_gpu_op *op) {
    tp_kname *c = &L->kcache[((uintptr_t)raw >> 3) % (sizeof L->kcache / sizeof *L->kcache)];
    if (c->raw != raw) {
        kernel_name(L->run, raw, op);
        *c = (tp_kname){raw, op->name, op->cls};
        return;
    }
    op->name = c->shown;
    op->cls = c->cls;
}

/* kernel_name under the pool's lock (demangled() interns: the lock is taken once, here, so
 * the pool's own functions below run unlocked). */
static void kernel_name_locked(tp_run *run, const char *raw, tp_gpu_op *op) {
    tp_pool *p = run->pool;
    if ((p->kn_count + 1) * 2 > p->kn_cap) {
        size_t cap = p->kn_cap ? p->kn_cap * 2 : 1024;
        tp_kname *nt = tp_calloc(cap, sizeof *nt);
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

void tp_load_kernel_name(tp_run *run, const char *raw, tp_gpu_op *op) { kernel_name(run, raw, op); }

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
    stack *ns = tp_realloc(tl->stacks, (tl->nstacks + 1) * sizeof *ns);
    if (!ns) return NULL;
    tl->stacks = ns;
    memset(&ns[tl->nstacks], 0, sizeof *ns);
    ns[tl->nstacks].domain = domain;
    return &ns[tl->nstacks++];
}

void tp_load_seen(tp_thread *t, uint64_t ts) {
    if (!ts) return;
    if (!t->first_ts || ts < t->first_ts) t->first_ts = ts;
    if (ts > t->last_ts) t->last_ts = ts;
}


static int add_domain(tp_run *run, tp_process *p, uint32_t id, const char *name, uint64_t max_id) {
    if (id == 0 || id > 1u << 20 || id > max_id) return 0;
    if (id >= p->ndomains) {
        const char **nd = tp_realloc(p->domains, (id + 1) * sizeof *nd);
        if (!nd) return TPROF_ERR_NO_MEMORY;
        for (size_t i = p->ndomains; i <= id; i++) nd[i] = NULL;
        p->domains = nd;
        p->ndomains = id + 1;
    }
    p->domains[id] = tp_intern(run, name);
    return 0;
}

/* Keys whose every record is read, in time order (capture.c: the switches of capture, one
 * record each): all of them are kept, each value interned as read (a number). */
static int meta_history(const char *k) {
    return !strcmp(k, "capture.detail_on_ns") || !strcmp(k, "capture.detail_off_ns") ||
           !strcmp(k, "kernel_steps.on_ns") || !strcmp(k, "kernel_steps.off_ns");
}

/* The slot of interned key k in the table t (cap slots): its entry, or the empty one. */
static size_t *meta_slot(const tp_process *p, size_t *t, size_t cap, const char *k) {
    size_t at = (size_t)(tp_mix64((uint64_t)(uintptr_t)k) & (cap - 1));
    while (t[at] && p->meta[t[at] - 1].key != k) at = (at + 1) & (cap - 1);
    return &t[at];
}

/* Metadata key k = v (loader.meta_at says why a key written again replaces its value). */
static int add_meta(loader *L, const char *k, const char *v) {
    tp_process *p = L->p;
    const char *key = tp_intern(L->run, k);
    if (meta_history(key)) {
        tp_kv kv = {key, tp_intern(L->run, v)};
        PUSH(p->meta, p->nmeta, p->cap_meta, kv);
        return 0;
    }
    if (2 * (p->nmeta + 1) > L->meta_cap) { /* room in the table for one more key */
        size_t nc = L->meta_cap ? 2 * L->meta_cap : 64;
        size_t *nt = tp_calloc(nc, sizeof *nt);
        if (!nt) return TPROF_ERR_NO_MEMORY;
        for (size_t i = 0; i < p->nmeta; i++)
            if (!meta_history(p->meta[i].key)) *meta_slot(p, nt, nc, p->meta[i].key) = i + 1;
        free(L->meta_at);
        L->meta_at = nt;
        L->meta_cap = nc;
    }
    size_t *slot = meta_slot(p, L->meta_at, L->meta_cap, key);
    char *copy = tp_strdup(v);
    if (!copy) return TPROF_ERR_NO_MEMORY;
    if (*slot) {
        size_t i = *slot - 1;
        free(L->meta_val[i]);
        L->meta_val[i] = copy;
        p->meta[i].value = copy;
        return 0;
    }
    if (p->nmeta >= L->meta_vcap) {
        size_t nc = p->cap_meta > p->nmeta ? p->cap_meta : 2 * p->nmeta + 16;
        char **nv = tp_realloc(L->meta_val, nc * sizeof *nv);
        if (!nv) {
            free(copy);
            return TPROF_ERR_NO_MEMORY;
        }
        memset(nv + L->meta_vcap, 0, (nc - L->meta_vcap) * sizeof *nv);
        L->meta_val = nv;
        L->meta_vcap = nc;
    }
    tp_kv kv = {key, copy};
    if (p->nmeta == p->cap_meta) {
        size_t nc = p->cap_meta ? p->cap_meta * 2 : 16;
        tp_kv *nm = tp_realloc(p->meta, nc * sizeof *nm);
        if (!nm) {
            free(copy);
            return TPROF_ERR_NO_MEMORY;
        }
        p->meta = nm;
        p->cap_meta = nc;
    }
    L->meta_val[p->nmeta] = copy;
    p->meta[p->nmeta++] = kv;
    *slot = p->nmeta;
    return 0;
}

void tp_load_meta_settle(loader *L) {
    tp_process *p = L->p;
    for (size_t i = 0; i < p->nmeta && i < L->meta_vcap; i++) {
        if (!L->meta_val[i]) continue;
        p->meta[i].value = tp_intern(L->run, L->meta_val[i]);
        free(L->meta_val[i]);
    }
    free(L->meta_val);
    free(L->meta_at);
    L->meta_val = NULL;
    L->meta_at = NULL;
    L->meta_vcap = L->meta_cap = 0;
}

int tp_load_proc_record(loader *L, const tprof_rec *r) {
    tp_process *p = L->p;
    switch (r->kind) {
    case TPROF_REC_META: {
        const char *k = tprof__rec_inline(r, 0);
        if (!k) return 0;
        const char *v = k + strlen(k) + 1;
        if ((const uint8_t *)v >= (const uint8_t *)r + r->size) v = "";
        return add_meta(L, k, v);
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
            tp_realloc(p->categories, (p->ncategories + 1) * sizeof *nc);
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

/* What a handler returns for a record too short for its payload or with a value no writer
 * produces: the record is counted in bad_records and skipped, the file read on. */
#define REC_BAD 1

static int rec_string(loader *L, tload *tl, const tprof_rec *r) {
    const char *s = tprof__rec_inline(r, 0);
    if (!s || r->arg == 0 || r->arg > 1u << 26 || r->arg > L->max_id) return 0;
    while (tl->nstrs < r->arg) PUSH(tl->strs, tl->nstrs, tl->cap_strs, NULL);
    tl->strs[r->arg - 1] = tp_intern(L->run, s);
    return 0;
}

static int rec_push(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_push)) return REC_BAD;
    const tprof_pl_push *pl = (const void *)(r + 1);
    stack *st = stack_for(tl, pl->domain);
    if (!st) return TPROF_ERR_NO_MEMORY;
    size_t ti = (size_t)(t - L->p->threads);
    /* a streamed load compacts a full array first (model_stream.c), which renumbers */
    if (L->rs && tp_stream_room(L, ti) != 0) return TPROF_ERR_NO_MEMORY;
    tp_range rg = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, 0, 0,
                   st->n ? st->idx[st->n - 1] : -1, pl->domain, pl->category,
                   (uint16_t)(st->n > 65535 ? 65535 : st->n), TP_R_UNCLOSED, 0};
    PUSH(t->ranges, t->nranges, t->cap_ranges, rg);
    PUSH(st->idx, st->n, st->cap, (int32_t)(t->nranges - 1));
    tp_load_seen(t, r->ts_ns);
    t->events++;
    L->p->nrec_ranges++;
    return L->rs ? tp_stream_push(L, ti, t->nranges - 1) : 0;
}

static int rec_pop(loader *L, tp_thread *t, tload *tl, const tprof_rec *r) {
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
    tp_load_seen(t, r->ts_ns);
    if (!st->n) {
        if (!t->unmatched_pops++) t->first_unmatched_pop_ts = r->ts_ns;
        /* t->dropped already holds this chunk's count, read before its records: a drop
         * window of the thread opened at or before this chunk, starting before this pop */
        if (t->dropped) t->unmatched_pops_after_drops++;
        return 0;
    }
    size_t k = (size_t)st->idx[--st->n];
    tp_range *rg = &t->ranges[k];
    rg->end = r->ts_ns < rg->start ? rg->start : r->ts_ns;
    rg->flags &= (uint16_t)~TP_R_UNCLOSED;
    return L->rs ? tp_stream_pop(L, (size_t)(t - L->p->threads), k, r->ts_ns) : 0;
}

static int rec_start(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_start)) return REC_BAD;
    const tprof_pl_start *pl = (const void *)(r + 1);
    tp_range rg = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, 0, 0, -1, pl->domain,
                   pl->category, 0, TP_R_ASYNC | TP_R_UNCLOSED, 0};
    /* the id rides in child_ns until ends are matched */
    rg.child_ns = pl->id;
    PUSH(t->ranges, t->nranges, t->cap_ranges, rg);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    L->p->nrec_ranges++;
    return 0;
}

static int rec_end(loader *L, tp_thread *t, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_u64)) return REC_BAD;
    pending_end e = {((const tprof_pl_u64 *)(r + 1))->value, r->ts_ns, t->os_tid};
    PUSH(L->ends, L->nends, L->cap_ends, e);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

static int rec_mark(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_push)) return REC_BAD;
    const tprof_pl_push *pl = (const void *)(r + 1);
    tp_mark m = {rec_name(L, tl, r, sizeof *pl), r->ts_ns, pl->domain, pl->category};
    PUSH(t->marks, t->nmarks, t->cap_marks, m);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

static int rec_counter(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_counter)) return REC_BAD;
    tp_counter c = {rec_name(L, tl, r, sizeof(tprof_pl_counter)), r->ts_ns,
                    ((const tprof_pl_counter *)(r + 1))->value};
    /* a light load (a slim process's) keeps only what a slim process keeps, packed as they
     * come; one it cannot pack (a name past the table's bound) puts those so far into the
     * array, where the rest go */
    int keep = !L->light || tp_slim_keeps_counter(c.name);
    if (keep && L->light && (t->counters_packed || !t->ncounters)) {
        int rc = tp_counter_append(t, &tl->cpack, &c);
        if (rc < 0) return rc;
        if (rc == 0) keep = 0; /* held, packed */
        else if ((rc = tp_thread_unpack_counters(t)) != 0) return rc;
    }
    if (keep) PUSH(t->counters, t->ncounters, t->cap_counters, c);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

/* STEP_BEGIN and STEP_END */
static int rec_step(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_u64)) return REC_BAD;
    tp_stepev s = {((const tprof_pl_u64 *)(r + 1))->value, r->ts_ns,
                   r->kind == TPROF_REC_STEP_BEGIN};
    /* a light load (a slim process's) packs them as they come, never holding the array of
     * 24 bytes an event; one it cannot pack (a step number 2^62 from the last: damage) puts
     * those so far into the array, where the rest go */
    int packed = 1;
    if (L->light && (t->steps_packed || !t->nsteps)) {
        packed = tp_stepevs_append(&t->steps_packed, &t->steps_packed_len, &tl->step_cap,
                                   &tl->step_prev, &s);
        if (packed < 0 || (packed > 0 && tp_thread_unpack_steps(t) != 0))
            return TPROF_ERR_NO_MEMORY;
    }
    if (packed == 0) t->nsteps++;
    else PUSH(t->steps, t->nsteps, t->cap_steps, s);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

/* The slim process's sample of its GPU records' start times (model.h, gpu_starts): this
 * record, which began at ts, is the (nrec_gpu + nrec_api)-th. */
static void starts_add(tp_process *p, uint64_t ts) {
    uint64_t idx = (uint64_t)(p->nrec_gpu + p->nrec_api - 1);
    if (!p->gpu_stride) p->gpu_stride = 1;
    if (idx % p->gpu_stride) return;
    if (p->gpu_nstarts == TP_GPU_STARTS) { /* every other kept, at twice the stride */
        for (size_t i = 0; i < TP_GPU_STARTS / 2; i++) p->gpu_starts[i] = p->gpu_starts[2 * i];
        p->gpu_nstarts = TP_GPU_STARTS / 2;
        p->gpu_stride *= 2;
        if (idx % p->gpu_stride) return;
    }
    p->gpu_starts[p->gpu_nstarts++] = ts;
}

size_t tp_load_gpu_window(tp_process *p, const tp_process *sizes, const tp_gpu_bound *b) {
    size_t n = sizes->nrec_gpu + sizes->nrec_api, m = sizes->gpu_nstarts;
    if (!b || !b->max || n <= b->max || (!b->from && !m)) return 0;
    p->gpu_bound = b->max;
    if (b->from) { /* open: its end comes as the records held reach the bound (window_shrink) */
        p->gpu_window_from = b->from;
        p->gpu_window_to = UINT64_MAX;
        return b->max;
    }
    uint64_t v[TP_GPU_STARTS];
    memcpy(v, sizes->gpu_starts, m * sizeof *v);
    qsort(v, m, sizeof *v, tp_cmp_u64);
    /* each sample stands for n / m records: the middle samples that stand for 9/10 of the
     * bound (room for a sample's error), at least one gap between samples wide (a bound under
     * a sample's records would otherwise make a span of one nanosecond; what it holds past
     * the bound is trimmed as it comes) */
    double k = (double)m * 0.9 * (double)b->max / (double)n;
    size_t a = (size_t)(((double)m - k) / 2), z = (size_t)(((double)m + k) / 2);
    if (z <= a) z = a + 1;
    p->gpu_window_from = v[a];
    p->gpu_window_to = z < m ? v[z] : UINT64_MAX;
    if (p->gpu_window_to <= p->gpu_window_from) p->gpu_window_to = p->gpu_window_from + 1;
    return b->max;
}

void tp_load_gpu_window_close(tp_process *p) {
    if (p->gpu_window_to != UINT64_MAX) return;
    /* never cut: it held everything from its start to the process's end, past which no record
     * began (the load widens last_ts by each one, held or not) */
    uint64_t last = p->end_mono > p->last_ts ? p->end_mono : p->last_ts;
    p->gpu_window_to = (last > p->gpu_window_from ? last : p->gpu_window_from) + 1;
}

/* Whether a bounded load's window applies to record o: not to CUPTI's overhead records or
 * the kernels of the communication class (NCCL's), which are kept whole: a few per step, as
 * the communication ops the load holds whole anyway, so that each op is matched to its
 * kernel (comm.c) wherever it ran. */
static int windowed(const tp_gpu_op *o) {
    return o->type != TPROF_REC_GPU_OVERHEAD &&
           !(o->type == TPROF_REC_GPU_KERNEL && o->cls == TP_KC_COMM);
}

/* Record o, device work left out after a bounded load's span, as its stream's fence when it
 * began before the one it has (model.h, tp_gpu_fence). Out of memory, or past
 * TP_GPU_FENCES_MAX streams: none (the last record held there keeps its recorded end). */
static void fence_note(loader *L, const tp_gpu_op *o) {
    if (o->type != TPROF_REC_GPU_KERNEL && o->type != TPROF_REC_GPU_MEMCPY &&
        o->type != TPROF_REC_GPU_MEMSET)
        return;
    tp_process *p = L->p;
    uint32_t h = (o->device * 2654435761u ^ o->stream * 40503u) & 255u;
    tp_gpu_fence *f = NULL;
    if (L->fence_at[h]) f = &p->gpu_fences[L->fence_at[h] - 1];
    if (f && (f->device != o->device || f->stream != o->stream)) {
        f = NULL;
        for (size_t i = 0; i < p->ngpu_fences && !f; i++)
            if (p->gpu_fences[i].device == o->device && p->gpu_fences[i].stream == o->stream)
                f = &p->gpu_fences[i];
    }
    if (!f) {
        size_t n = p->ngpu_fences;
        if (n >= TP_GPU_FENCES_MAX) return;
        if (!(n & (n - 1))) { /* 0, 1, 2, 4, ...: grown to the next power of two */
            tp_gpu_fence *v = tp_realloc(p->gpu_fences, (n ? 2 * n : 1) * sizeof *v);
            if (!v) return;
            p->gpu_fences = v;
        }
        f = &p->gpu_fences[p->ngpu_fences++];
        *f = (tp_gpu_fence){UINT64_MAX, UINT64_MAX, o->device, o->stream, 0};
        if (!L->fence_at[h]) L->fence_at[h] = (uint32_t)p->ngpu_fences;
    }
    /* past_graph: the first start among those not of the first one's graph. Records come out
     * of order, so the first one may change: the one it replaces is then the first outside
     * the new one's graph, unless both are nodes of one graph (past_graph stands). */
    if (o->start < f->start) {
        if (!f->graph || f->graph != o->graph) f->past_graph = f->start;
        f->start = o->start;
        f->graph = o->graph;
    } else if ((!o->graph || o->graph != f->graph) && o->start < f->past_graph) {
        f->past_graph = o->start;
    }
}

/* Keeps of a's n records those kept whole and those that began before `to`; returns how many,
 * and adds the windowed ones kept to *held (those dropped: their streams' fences). */
static size_t keep_before(loader *L, tp_gpu_op *a, size_t n, uint64_t to, size_t *held) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int win = windowed(&a[i]);
        if (win && a[i].start >= to) {
            fence_note(L, &a[i]);
            continue;
        }
        *held += win;
        a[w++] = a[i];
    }
    return w;
}

/* The windowed records held reached the bound: the window's end moves back before the last
 * tenth of them by start (their starts sorted in a transient array), and those at or after it
 * are dropped. Records arrive near their start order (CUPTI fills its buffers as work ends),
 * so only the few that come out of order can fill what this frees. Without memory for the
 * sort, the span's last tenth goes instead. */
static void window_shrink(loader *L) {
    tp_process *p = L->p;
    size_t n = 0;
    uint64_t *v = tp_malloc((p->gpu_held ? p->gpu_held : 1) * sizeof *v), to;
    if (v) {
        for (size_t i = 0; i < p->ngpu && n < p->gpu_held; i++)
            if (windowed(&p->gpu[i])) v[n++] = p->gpu[i].start;
        for (size_t i = 0; i < p->napi && n < p->gpu_held; i++)
            if (windowed(&p->api[i])) v[n++] = p->api[i].start;
        qsort(v, n, sizeof *v, tp_cmp_u64);
        to = n ? v[n - 1 - n / 10] : p->gpu_window_from;
        free(v);
    } else {
        to = p->gpu_window_to - (p->gpu_window_to - p->gpu_window_from) / 10;
    }
    if (to < p->gpu_window_from) to = p->gpu_window_from;
    p->gpu_window_to = to;
    size_t was = p->ngpu + p->napi;
    p->gpu_held = 0;
    p->ngpu = keep_before(L, p->gpu, p->ngpu, to, &p->gpu_held);
    p->napi = keep_before(L, p->api, p->napi, to, &p->gpu_held);
    p->gpu_left_out += was - (p->ngpu + p->napi);
}

/* Whether a bounded load keeps record o (tp_process_load_bounded): 1, or 0 when it falls
 * outside the window (counted). */
static int gpu_kept(loader *L, const tp_gpu_op *o) {
    tp_process *p = L->p;
    if (!L->gpu_max || !windowed(o)) return 1;
    int in = o->start >= p->gpu_window_from && o->start < p->gpu_window_to;
    if (in && p->gpu_held >= L->gpu_max) {
        window_shrink(L);
        in = o->start < p->gpu_window_to;
    }
    if (!in && o->start >= p->gpu_window_to) fence_note(L, o);
    if (!in) p->gpu_left_out++;
    p->gpu_held += (size_t)in;
    return in;
}

/* GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_SYNC, GPU_OVERHEAD and GPU_API */
static int rec_gpu(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_gpu)) return REC_BAD;
    const tprof_pl_gpu *pl = (const void *)(r + 1);
    if (pl->end_ns >= TPROF_TIME_MAX) return REC_BAD;
    if (L->light) { /* counted and timed as when kept (tp_run_load_slim) */
        tp_process *p = L->p;
        *(r->kind == TPROF_REC_GPU_API        ? &p->nrec_api
          : r->kind == TPROF_REC_GPU_OVERHEAD ? &p->nrec_ovh
                                              : &p->nrec_gpu) += 1;
        if (r->kind != TPROF_REC_GPU_OVERHEAD) starts_add(p, r->ts_ns);
        tp_load_seen(t, r->ts_ns);
        t->events++;
        return 0;
    }
    tp_gpu_op op = {r->ts_ns, pl->end_ns < r->ts_ns ? r->ts_ns : pl->end_ns, pl->bytes, NULL,
                    pl->device, pl->stream, pl->correlation, pl->kind, pl->os_tid, pl->graph,
                    r->kind, TP_KC_OTHER};
    if (r->kind == TPROF_REC_GPU_KERNEL) loader_kernel_name(L, rec_name(L, tl, r, sizeof *pl), &op);
    else if (r->kind == TPROF_REC_GPU_API || r->kind == TPROF_REC_GPU_OVERHEAD)
        op.name = rec_name(L, tl, r, sizeof *pl);
    if (!gpu_kept(L, &op)) {
        tp_load_seen(t, r->ts_ns); /* the process's span and events whatever is kept */
        t->events++;
        return 0;
    }
    if (r->kind == TPROF_REC_GPU_API) PUSH(L->p->api, L->p->napi, L->p->cap_api, op);
    else if (r->kind == TPROF_REC_GPU_OVERHEAD) PUSH(L->p->ovh, L->p->novh, L->p->cap_ovh, op);
    else PUSH(L->p->gpu, L->p->ngpu, L->p->cap_gpu, op);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

static int rec_gpu_memory(loader *L, tp_thread *t, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_gpu_mem)) return REC_BAD;
    const tprof_pl_gpu_mem *pl = (const void *)(r + 1);
    if (L->light) {
        L->p->nrec_gmem++;
        t->events++;
        return 0;
    }
    tp_gpu_mem m = {r->ts_ns, pl->address, pl->bytes, pl->device, pl->op, pl->memory_kind};
    PUSH(L->p->gmem, L->p->ngmem, L->p->cap_gmem, m);
    t->events++;
    return 0;
}

static int keep_no_op(void *ctx, const tp_comm_op *op, size_t i) {
    (void)ctx, (void)op, (void)i;
    return 0;
}

const tp_comm_read tp_comm_read_none = {keep_no_op, NULL};

static int rec_comm(loader *L, tp_thread *t, tload *tl, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_comm)) return REC_BAD;
    const tprof_pl_comm *pl = (const void *)(r + 1);
    if (pl->end_ns >= TPROF_TIME_MAX ||
        ((pl->flags & TPROF_COMM_F_GPU_TIME) &&
         (pl->gpu_start_ns >= TPROF_TIME_MAX || pl->gpu_end_ns >= TPROF_TIME_MAX)))
        return REC_BAD;
    /* NCCL, MPI and torch.distributed number ranks with an int; the analyses do too */
    if (pl->nranks > INT32_MAX || pl->rank > INT32_MAX) return REC_BAD;
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
    if (!L->comm || L->comm->fn(L->comm->ctx, &op, L->comm_seen++))
        PUSH(L->p->comm, L->p->ncomm, L->p->cap_comm, op);
    tp_load_seen(t, r->ts_ns);
    t->events++;
    return 0;
}

static int rec_gpu_drops(loader *L, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_u64)) return REC_BAD;
    uint64_t v = ((const tprof_pl_u64 *)(r + 1))->value;
    if (v > L->p->cupti_dropped) L->p->cupti_dropped = v;
    return 0;
}

static int rec_thread_name(loader *L, const tprof_rec *r, size_t body) {
    if (body < sizeof(tprof_pl_u64)) return REC_BAD;
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

/* One record of thread ti, to its kind's handler. 0, or TPROF_ERR_NO_MEMORY. */
int tp_load_thread_record(loader *L, int ti, const tprof_rec *r) {
    tp_thread *t = &L->p->threads[ti];
    tload *tl = &L->tl[ti];
    size_t body = r->size - sizeof *r;
    if (timed_kind(r->kind) && r->ts_ns >= TPROF_TIME_MAX) {
        L->bad_records++; /* no clock's reading (format.h) */
        return 0;
    }
    if (L->comm_only && r->kind != TPROF_REC_STRING && r->kind != TPROF_REC_COMM_OP) return 0;
    int rc;
    switch (r->kind) {
    case TPROF_REC_STRING: rc = rec_string(L, tl, r); break;
    case TPROF_REC_PUSH: rc = rec_push(L, t, tl, r, body); break;
    case TPROF_REC_POP: rc = rec_pop(L, t, tl, r); break;
    case TPROF_REC_START: rc = rec_start(L, t, tl, r, body); break;
    case TPROF_REC_END: rc = rec_end(L, t, r, body); break;
    case TPROF_REC_MARK: rc = rec_mark(L, t, tl, r, body); break;
    case TPROF_REC_COUNTER: rc = rec_counter(L, t, tl, r, body); break;
    case TPROF_REC_STEP_BEGIN:
    case TPROF_REC_STEP_END: rc = rec_step(L, t, tl, r, body); break;
    case TPROF_REC_GPU_KERNEL:
    case TPROF_REC_GPU_MEMCPY:
    case TPROF_REC_GPU_MEMSET:
    case TPROF_REC_GPU_SYNC:
    case TPROF_REC_GPU_OVERHEAD:
    case TPROF_REC_GPU_API: rc = rec_gpu(L, t, tl, r, body); break;
    case TPROF_REC_GPU_MEMORY: rc = rec_gpu_memory(L, t, r, body); break;
    case TPROF_REC_COMM_OP: rc = rec_comm(L, t, tl, r, body); break;
    case TPROF_REC_GPU_DROPS: rc = rec_gpu_drops(L, r, body); break;
    case TPROF_REC_THREAD_NAME: rc = rec_thread_name(L, r, body); break;
    default: rc = 0; /* PAD and kinds this reader does not know */
    }
    if (rc == REC_BAD) {
        L->bad_records++;
        return 0;
    }
    return rc;
}
