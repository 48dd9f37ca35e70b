/*
 * record.c — the hot path: the public recording calls and per-thread string interning.
 *
 * Each call reads the clock once and appends one record to the calling thread's ring
 * (internal.h). Names are interned per thread: the first use of a name on a thread writes a
 * STRING record into that thread's own ring, so the definition always precedes its uses in
 * the stream and no lock is shared between threads. Past max_strings names per thread
 * (PyTorch's emit_nvtx makes every operator name unique) names go inline in each record.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* FNV-1a, 64-bit; also returns the length so the caller needs no strlen. */
uint64_t tprof__hash(const char *s, size_t *len) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        h ^= *p++;
        h *= 1099511628211ull;
    }
    *len = (size_t)(p - (const unsigned char *)s);
    return h | 1; /* never 0 */
}

static int grow_table(tprof__thread *t) {
    uint32_t cap = t->str_cap * 2;
    tprof__istr *n = calloc(cap, sizeof *n);
    if (!n) return -1;
    for (uint32_t i = 0; i < t->str_cap; i++) {
        tprof__istr *e = &t->strs[i];
        if (!e->id) continue;
        uint32_t j = (uint32_t)e->hash & (cap - 1);
        while (n[j].id) j = (j + 1) & (cap - 1);
        n[j] = *e;
    }
    free(t->strs);
    t->strs = n;
    t->str_cap = cap;
    memset(t->pcache, 0, sizeof t->pcache); /* entries moved */
    return 0;
}

/* Content lookup; on a miss defines the name (STRING record) if the table has room.
 * *entry gets the table entry, or NULL when the name must go inline. */
static uint32_t intern_table(tprof__thread *t, const char *name, size_t *len,
                             const tprof__istr **entry) {
    *entry = NULL;
    uint64_t h = tprof__hash(name, len);
    uint32_t mask = t->str_cap - 1;
    uint32_t i = (uint32_t)h & mask;
    for (;;) {
        tprof__istr *e = &t->strs[i];
        if (!e->id) break;
        if (e->hash == h && e->len == *len && memcmp(e->str, name, *len) == 0) {
            *entry = e;
            return e->id;
        }
        i = (i + 1) & mask;
    }
    /* miss: define it, if the table has room */
    if (t->str_count >= t->str_max || *len > TPROF_MAX_INLINE) return TPROF_INLINE_NAME;
    if ((t->str_count + 1) * 2 > t->str_cap) {
        if (grow_table(t) != 0) return TPROF_INLINE_NAME;
        mask = t->str_cap - 1;
        i = (uint32_t)h & mask;
        while (t->strs[i].id) i = (i + 1) & mask;
    }
    uint32_t size = (uint32_t)tprof__align8(sizeof(tprof_rec) + *len + 1);
    tprof_rec *r = tprof__reserve_ex(t, size, 0);
    if (!r) return TPROF_INLINE_NAME; /* ring full: do not define what was not written */
    char *copy = malloc(*len + 1);
    if (!copy) {
        /* keep the stream consistent: the record becomes padding */
        r->kind = TPROF_REC_PAD;
        r->size = (uint16_t)size;
        tprof__commit(t, size);
        return TPROF_INLINE_NAME;
    }
    memcpy(copy, name, *len + 1);
    uint32_t id = ++t->str_count;
    r->kind = TPROF_REC_STRING;
    r->size = (uint16_t)size;
    r->arg = id;
    r->ts_ns = 0;
    char *dst = (char *)(r + 1);
    memcpy(dst, name, *len);
    memset(dst + *len, 0, size - sizeof *r - *len);
    tprof__commit(t, size);
    t->strs[i] = (tprof__istr){h, id, (uint32_t)*len, copy};
    *entry = &t->strs[i];
    return id;
}

uint32_t tprof__intern(tprof__thread *t, const char *name, size_t *len) {
    /* Most names are literals passed again and again: a pointer hit confirmed by strcmp
     * (the caller may have reused its buffer for another name) skips the hash. */
    size_t slot = ((uintptr_t)name >> 3) & 63;
    const tprof__istr *c = t->pcache[slot].e;
    if (TPROF_LIKELY(t->pcache[slot].ptr == name && c != NULL)) {
        /* inline compare: names are short, and a call to strcmp costs as much */
        const char *a = c->str, *b = name;
        while (*a && *a == *b) a++, b++;
        if (*a == *b) {
            *len = c->len;
            return c->id;
        }
    }
    const tprof__istr *e;
    uint32_t id = intern_table(t, name, len, &e);
    if (e) {
        t->pcache[slot].ptr = name;
        t->pcache[slot].e = e;
    }
    return id;
}

void *tprof__begin_named(tprof__thread *t, uint16_t kind, const char *name, uint32_t pl_bytes,
                         uint64_t ts, uint32_t *out_size) {
    if (!name) name = "(null)";
    size_t len;
    uint32_t id = tprof__intern(t, name, &len);
    uint32_t size = (uint32_t)sizeof(tprof_rec) + pl_bytes;
    if (id == TPROF_INLINE_NAME) {
        if (len > TPROF_MAX_INLINE) len = TPROF_MAX_INLINE;
        size = (uint32_t)tprof__align8(size + len + 1);
    }
    tprof_rec *r = tprof__reserve(t, size);
    if (!r) return NULL;
    r->kind = kind;
    r->size = (uint16_t)size;
    r->arg = id;
    r->ts_ns = ts;
    if (id == TPROF_INLINE_NAME) {
        char *dst = (char *)(r + 1) + pl_bytes;
        memcpy(dst, name, len);
        memset(dst + len, 0, size - sizeof *r - pl_bytes - len);
    }
    *out_size = size;
    return r + 1;
}

/* ------------------------------------------------------------------ public recording */

#undef tprof_range_push
#undef tprof_range_push_ex
#undef tprof_range_pop
#undef tprof_range_start
#undef tprof_range_end
#undef tprof_mark
#undef tprof_counter
#undef tprof_step_begin
#undef tprof_step_end

void tprof__push(tprof__thread *t, uint32_t domain, const char *name, uint32_t category) {
    if (TPROF_UNLIKELY(atomic_load_explicit(&tprof__kwin_watch, memory_order_relaxed)))
        tprof__kwin_name(name);
    uint32_t size;
    tprof_pl_push *pl = tprof__begin_named(t, TPROF_REC_PUSH, name, sizeof *pl, tprof__now(),
                                           &size);
    if (!pl) return;
    pl->domain = domain;
    pl->category = category;
    tprof__commit(t, size);
}

void tprof_range_push(const char *name) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) tprof__push(t, 0, name, 0);
    else if (tprof__emit_on) tprof__emit_push(0, name, 0);
}

void tprof_range_push_ex(const char *domain, const char *name, uint32_t category) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) tprof__push(t, tprof__domain_id(domain), name, category);
    else if (tprof__emit_on) tprof__emit_push(tprof__domain_id(domain), name, category);
}

static void u64_record_ts(tprof__thread *t, uint16_t kind, uint32_t arg, uint64_t value,
                          uint64_t ts) {
    const uint32_t size = sizeof(tprof_rec) + sizeof(tprof_pl_u64);
    tprof_rec *r = tprof__reserve(t, size);
    if (!r) return;
    r->kind = kind;
    r->size = size;
    r->arg = arg;
    r->ts_ns = ts;
    ((tprof_pl_u64 *)(r + 1))->value = value;
    tprof__commit(t, size);
}

void tprof_range_pop(void) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) tprof__pop(t, TPROF_POP_ANY);
    else if (tprof__emit_on) tprof__emit_pop(TPROF_POP_ANY);
}

void tprof__pop(tprof__thread *t, uint32_t domain) {
    const uint32_t size = sizeof(tprof_rec);
    tprof_rec *r = tprof__reserve(t, size);
    if (!r) return;
    r->kind = TPROF_REC_POP;
    r->size = size;
    r->arg = domain;
    r->ts_ns = tprof__now();
    tprof__commit(t, size);
}

/* Range ids: unique per process without a shared atomic on the hot path: the thread's
 * serial in the high bits, a per-thread counter in the low 40. */
static __thread uint64_t tls_range_counter;

uint64_t tprof__range_start(tprof__thread *t, uint32_t domain, const char *name,
                            uint32_t category) {
    return tprof__range_start_ts(t, domain, name, category, tprof__now());
}

uint64_t tprof__range_start_ts(tprof__thread *t, uint32_t domain, const char *name,
                               uint32_t category, uint64_t ts) {
    uint64_t id = ((uint64_t)t->serial << 40) | (++tls_range_counter & ((1ull << 40) - 1));
    if (TPROF_UNLIKELY(atomic_load_explicit(&tprof__kwin_watch, memory_order_relaxed)))
        tprof__kwin_name(name);
    uint32_t size;
    tprof_pl_start *pl = tprof__begin_named(t, TPROF_REC_START, name, sizeof *pl, ts, &size);
    if (!pl) return id;
    pl->id = id;
    pl->domain = domain;
    pl->category = category;
    tprof__commit(t, size);
    return id;
}

uint64_t tprof_range_start(const char *name) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_UNLIKELY(t == NULL)) return tprof__emit_on ? tprof__emit_start(0, name, 0) : 0;
    return tprof__range_start(t, 0, name, 0);
}

void tprof_range_end(uint64_t id) {
    if (!id) return;
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) tprof__range_end(t, id);
    else if (tprof__emit_on) tprof__emit_end(0, id);
}

void tprof__range_end(tprof__thread *t, uint64_t id) {
    u64_record_ts(t, TPROF_REC_END, 0, id, tprof__now());
}

void tprof__range_end_ts(tprof__thread *t, uint64_t id, uint64_t ts) {
    u64_record_ts(t, TPROF_REC_END, 0, id, ts);
}

void tprof__mark(tprof__thread *t, uint32_t domain, const char *name, uint32_t category) {
    uint32_t size;
    tprof_pl_push *pl =
        tprof__begin_named(t, TPROF_REC_MARK, name, sizeof *pl, tprof__now(), &size);
    if (!pl) return;
    pl->domain = domain;
    pl->category = category;
    tprof__commit(t, size);
}

void tprof_mark(const char *name) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) tprof__mark(t, 0, name, 0);
    else if (tprof__emit_on) tprof__emit_mark(name);
}

void tprof_counter(const char *name, double value) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_UNLIKELY(t == NULL)) return;
    uint32_t size;
    tprof_pl_counter *pl =
        tprof__begin_named(t, TPROF_REC_COUNTER, name, sizeof *pl, tprof__now(), &size);
    if (!pl) return;
    pl->value = value;
    tprof__commit(t, size);
}

void tprof_step_begin(uint64_t step) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) {
        if (TPROF_UNLIKELY(atomic_load_explicit(&tprof__kwin_watch, memory_order_relaxed)))
            tprof__kwin_api_step(step);
        u64_record_ts(t, TPROF_REC_STEP_BEGIN, 0, step, tprof__now());
    }
}

void tprof_step_end(uint64_t step) {
    tprof__thread *t = tprof__thread_get();
    if (TPROF_LIKELY(t != NULL)) u64_record_ts(t, TPROF_REC_STEP_END, 0, step, tprof__now());
}

/* Thread names go to the thread's own ring so they sit beside its events. os_tid lets NVTX
 * name another thread. */
void tprof__thread_name(tprof__thread *t, uint64_t os_tid, const char *name) {
    uint32_t size;
    /* THREAD_NAME always carries its name inline: it is rare */
    size_t len = strlen(name);
    if (len > 255) len = 255;
    size = (uint32_t)tprof__align8(sizeof(tprof_rec) + sizeof(tprof_pl_u64) + len + 1);
    tprof_rec *r = tprof__reserve_ex(t, size, 0);
    if (!r) return;
    r->kind = TPROF_REC_THREAD_NAME;
    r->size = (uint16_t)size;
    r->arg = TPROF_INLINE_NAME;
    r->ts_ns = tprof__now();
    ((tprof_pl_u64 *)(r + 1))->value = os_tid;
    char *dst = (char *)(r + 1) + sizeof(tprof_pl_u64);
    memcpy(dst, name, len);
    memset(dst + len, 0, size - sizeof *r - sizeof(tprof_pl_u64) - len);
    tprof__commit(t, size);
}

int tprof_name_thread(const char *name) {
    if (!name) return TPROF_ERR_INVALID_ARG;
    tprof__thread *t = tprof__thread_get();
    if (!t) return TPROF_ERR_DISABLED;
    tprof__thread_name(t, t->os_tid, name);
    return TPROF_OK;
}

int tprof_set_rank(int rank, int world_size) {
    if (rank < 0 || world_size <= rank) return TPROF_ERR_INVALID_ARG;
    if (!tprof_enabled()) return TPROF_ERR_DISABLED;
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world_size);
    int rc = tprof__set_meta("rank", r);
    if (rc == TPROF_OK) rc = tprof__set_meta("world_size", w);
    if (rc == TPROF_OK) rc = tprof__set_meta("rank_source", "api");
    return rc;
}

int tprof_set_metadata(const char *key, const char *value) {
    if (!key || !value || !*key || strlen(key) > 255 || strlen(value) > TPROF_MAX_INLINE)
        return TPROF_ERR_INVALID_ARG;
    if (!tprof_enabled()) return TPROF_ERR_DISABLED;
    if (!strcmp(key, "gpu_capture.pause_reason")) tprof__pause_reason_named(value);
    return tprof__set_meta(key, value);
}
