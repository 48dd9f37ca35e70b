/*
 * step_pack.c — packs and unpacks a slim process's step events and steps (step_pack.h).
 */
#include "analysis/step_pack.h"
#include "analysis/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/counter_pack.h"
#include "common/varint.h"
#include "trainprof.h"

static _Atomic size_t spill_at = TP_STEPS_SPILL;

size_t tp_steps_set_spill(size_t bytes) { return atomic_exchange(&spill_at, bytes); }

/* Packed bytes *b of len, written out when past the threshold: the block (and *b freed and
 * NULL), or NULL (left in memory). */
static tp_spill_block *spill_out(uint8_t **b, size_t len) {
    size_t at = atomic_load_explicit(&spill_at, memory_order_relaxed);
    if (!at || len < at || !*b) return NULL;
    tp_spill_block *x = tp_spill_block_out(*b, len);
    if (x) {
        free(*b);
        *b = NULL;
    }
    return x;
}

void tp_steps_spill(tp_steps *s) {
    if (!s->spilled) s->spilled = spill_out(&s->packed, s->packed_len);
}

/* The packed bytes of len held in memory (mem) or written out (x): mem, or a copy read back
 * (*owned: the same, which the caller frees); NULL without memory or when the read fails
 * (counted: tp_spill_block_in). */
static const uint8_t *packed_bytes(const uint8_t *mem, const tp_spill_block *x, size_t len,
                                   uint8_t **owned) {
    *owned = NULL;
    if (!x) return mem;
    uint8_t *b = tp_malloc(len ? len : 1);
    if (b && tp_spill_block_in(x, 0, b, len) != TPROF_OK) {
        free(b);
        b = NULL;
    }
    return *owned = b;
}

int tp_steps_packed(const tp_steps *s, tp_step *out) {
    uint8_t *owned;
    const uint8_t *b = packed_bytes(s->packed, s->spilled, s->packed_len, &owned);
    int rc = b ? tp_steps_unpack(b, s->packed_len, out, s->nsteps) : -1;
    if (rc && owned) tp_spill_read_damaged(); /* packed whole, read back otherwise */
    free(owned);
    return rc;
}

/* the most bytes one element takes: three varints of at most 10 bytes */
#define ELEM_MAX 30

/* The packed bytes: a buffer grown as written, shrunk to its size at the end. */
typedef struct wbuf { uint8_t *b; size_t len, cap; } wbuf;

static int room(wbuf *w) {
    if (w->cap - w->len >= ELEM_MAX) return 0;
    size_t nc = w->cap * 2 + 4 * ELEM_MAX;
    uint8_t *nb = tp_realloc(w->b, nc);
    if (!nb) return -1;
    w->b = nb;
    w->cap = nc;
    return 0;
}

static int done(wbuf *w, uint8_t **out, size_t *len) {
    uint8_t *fit = tp_realloc(w->b, w->len ? w->len : 1); /* a failed shrink leaves w->b */
    *out = fit ? fit : w->b;
    *len = w->len;
    return 0;
}

static int fail(wbuf *w, uint8_t **out) {
    free(w->b);
    *out = NULL;
    return -1;
}

/* A buffer sized for n elements of about `each` bytes (what a training loop's take), so that
 * it seldom grows; shrunk to its size at the end. */
static wbuf sized(size_t n, size_t each) {
    wbuf w = {NULL, 0, 0};
    size_t cap = n < (SIZE_MAX - ELEM_MAX) / each ? n * each + ELEM_MAX : 0;
    if (cap && (w.b = tp_malloc(cap))) w.cap = cap;
    return w;
}

int tp_stepevs_pack(const tp_stepev *e, size_t n, uint8_t **out, size_t *len) {
    wbuf w = sized(n, 5);
    tp_stepev prev = {0, 0, 0}; /* as a load appends them one by one (tp_stepevs_append) */
    for (size_t i = 0; i < n; i++)
        if (tp_stepevs_append(&w.b, &w.len, &w.cap, &prev, &e[i]) != 0) return fail(&w, out);
    return done(&w, out, len);
}

int tp_stepevs_unpack(const uint8_t *b, size_t len, tp_stepev *out, size_t n) {
    const uint8_t *p = b, *end = b + len;
    uint64_t ts = 0, step = 0, d, f;
    for (size_t i = 0; i < n; i++) {
        if (tp_varint_get(&p, end, &d) || tp_varint_get(&p, end, &f)) return -1;
        ts += tp_unzigzag(d);
        step += tp_unzigzag(f >> 1);
        out[i] = (tp_stepev){step, ts, (int)(f & 1)};
    }
    return p == end ? 0 : -1;
}

int tp_steps_pack(const tp_step *s, size_t n, uint8_t **out, size_t *len) {
    wbuf w = sized(n, 8);
    uint64_t end = 0, app = UINT64_MAX; /* the first step's number predicted 0 */
    for (size_t i = 0; i < n; i++) {
        uint64_t f = tp_zigzag(s[i].app_step - app - 1);
        if ((s[i].warmup != 0 && s[i].warmup != 1) || f >> 63 || room(&w)) return fail(&w, out);
        w.len += tp_varint_put(w.b + w.len, tp_zigzag(s[i].start - end));
        w.len += tp_varint_put(w.b + w.len, tp_zigzag(s[i].end - s[i].start));
        w.len += tp_varint_put(w.b + w.len, f << 1 | (uint64_t)s[i].warmup);
        end = s[i].end;
        app = s[i].app_step;
    }
    return done(&w, out, len);
}

int tp_steps_unpack(const uint8_t *b, size_t len, tp_step *out, size_t n) {
    const uint8_t *p = b, *lim = b + len;
    uint64_t end = 0, app = UINT64_MAX, a, d, f;
    for (size_t i = 0; i < n; i++) {
        if (tp_varint_get(&p, lim, &a) || tp_varint_get(&p, lim, &d) ||
            tp_varint_get(&p, lim, &f))
            return -1;
        uint64_t start = end + tp_unzigzag(a);
        end = start + tp_unzigzag(d);
        app = app + 1 + tp_unzigzag(f >> 1);
        out[i] = (tp_step){start, end, app, (int)(f & 1)};
    }
    return p == lim ? 0 : -1;
}

int tp_stepevs_append(uint8_t **b, size_t *len, size_t *cap, tp_stepev *prev, const tp_stepev *e) {
    uint64_t f = tp_zigzag(e->step - prev->step);
    if ((e->begin != 0 && e->begin != 1) || f >> 63) return 1;
    if (*cap - *len < ELEM_MAX) {
        size_t nc = *cap ? *cap * 2 : 256;
        uint8_t *nb = tp_realloc(*b, nc);
        if (!nb) return TPROF_ERR_NO_MEMORY;
        *b = nb;
        *cap = nc;
    }
    *len += tp_varint_put(*b + *len, tp_zigzag(e->ts - prev->ts));
    *len += tp_varint_put(*b + *len, f << 1 | (uint64_t)e->begin);
    *prev = *e;
    return 0;
}

int tp_thread_unpack_steps(tp_thread *t) {
    if (!t->steps_packed && !t->steps_spilled) return 0;
    int owned;
    tp_stepev *e = tp_thread_stepevs(t, &owned);
    if (!e) return TPROF_ERR_NO_MEMORY;
    free(t->steps_packed);
    tp_spill_block_free(t->steps_spilled);
    t->steps_packed = NULL;
    t->steps_spilled = NULL;
    t->steps_packed_len = 0;
    t->steps = e;
    t->cap_steps = t->nsteps;
    return 0;
}

void tp_thread_pack_steps(tp_thread *t) {
    if (t->steps_packed && !t->steps) { /* packed as loaded: shrunk to their size */
        uint8_t *fit = tp_realloc(t->steps_packed, t->steps_packed_len ? t->steps_packed_len : 1);
        if (fit) t->steps_packed = fit;
        t->steps_spilled = spill_out(&t->steps_packed, t->steps_packed_len);
        return;
    }
    if (!t->nsteps || !t->steps) return;
    uint8_t *b;
    size_t len;
    if (tp_stepevs_pack(t->steps, t->nsteps, &b, &len) != 0) {
        if (t->nsteps < t->cap_steps) { /* as tp_process_slim shrank them before packing */
            tp_stepev *fit = tp_realloc(t->steps, t->nsteps * sizeof *fit);
            if (fit) t->steps = fit, t->cap_steps = t->nsteps;
        }
        return;
    }
    free(t->steps);
    t->steps = NULL;
    t->cap_steps = 0;
    t->steps_packed = b;
    t->steps_packed_len = len;
    t->steps_spilled = spill_out(&t->steps_packed, len);
}

tp_stepev *tp_thread_stepevs(const tp_thread *t, int *owned) {
    *owned = 0;
    if ((!t->steps_packed && !t->steps_spilled) || !t->nsteps) return t->steps;
    uint8_t *held;
    const uint8_t *b = packed_bytes(t->steps_packed, t->steps_spilled, t->steps_packed_len, &held);
    tp_stepev *e = b ? tp_malloc(t->nsteps * sizeof *e) : NULL;
    if (e && tp_stepevs_unpack(b, t->steps_packed_len, e, t->nsteps) != 0) {
        if (held) tp_spill_read_damaged(); /* packed whole, read back otherwise */
        free(e);
        e = NULL;
    }
    free(held);
    *owned = e != NULL;
    return e;
}

uint64_t tp_thread_first_step_ts(const tp_thread *t) {
    if (!t->steps_packed && !t->steps_spilled) return t->nsteps ? t->steps[0].ts : 0;
    uint8_t head[10]; /* the first varint: at most 10 bytes */
    size_t n = t->steps_packed_len < sizeof head ? t->steps_packed_len : sizeof head;
    const uint8_t *p = t->steps_packed;
    if (!p) {
        if (tp_spill_block_in(t->steps_spilled, 0, head, n) != TPROF_OK) return 0;
        p = head;
    }
    uint64_t d;
    /* the first ts, packed as its difference from 0 */
    return tp_varint_get(&p, p + n, &d) ? 0 : tp_unzigzag(d);
}
