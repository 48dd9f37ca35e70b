/*
 * counter_pack.c — packs and reads a slim process's counters (counter_pack.h).
 */
#include "analysis/counter_pack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/varint.h"
#include "trainprof.h"

/* the most bytes one counter takes: two varints of at most 10 bytes and 8 raw ones */
#define ELEM_MAX 28

enum { FORM_INT = 0, FORM_MILLI = 1, FORM_RAW = 2 };

static int same_bits(double a, double b) { return !memcmp(&a, &b, sizeof a); }

/* The first form (FORM_*) that gives v back bit for bit, with its scaled value in *s. */
static int form_of(double v, int64_t *s) {
    const double lim = 9007199254740992.0; /* 2^53: every integer up to it is a double */
    if (v >= -lim && v <= lim) {
        int64_t i = (int64_t)v;
        if (same_bits((double)i, v)) return *s = i, FORM_INT; /* -0.0 is not 0 */
        if (v >= -lim / 1000 && v <= lim / 1000) {
            int64_t m = llround(v * 1000.0);
            if (same_bits((double)m / 1000.0, v)) return *s = m, FORM_MILLI;
        }
    }
    return FORM_RAW;
}

static double value_of(int form, int64_t s) {
    return form == FORM_INT ? (double)s : (double)s / 1000.0;
}

void tp_cpack_free(tp_cpack *st) {
    free(st->last);
    memset(st, 0, sizeof *st);
}

/* The index of name in t's table, the one predicted first; t's table size when it is new. */
static size_t name_index(const tp_thread *t, size_t pred, const char *name) {
    if (pred < t->ncounter_names && t->counter_names[pred] == name) return pred;
    for (size_t i = 0; i < t->ncounter_names; i++)
        if (t->counter_names[i] == name) return i;
    /* the run interns its strings, but a table may have been given equal text elsewhere */
    for (size_t i = 0; i < t->ncounter_names; i++)
        if (!strcmp(t->counter_names[i], name)) return i;
    return t->ncounter_names;
}

static int add_name(tp_thread *t, tp_cpack *st, const char *name) {
    if (t->ncounter_names >= TP_CPACK_NAMES) return 1;
    const char **nn = realloc(t->counter_names, (t->ncounter_names + 1) * sizeof *nn);
    if (!nn) return TPROF_ERR_NO_MEMORY;
    t->counter_names = nn;
    if (st->cap_last <= t->ncounter_names) {
        size_t nc = st->cap_last ? st->cap_last * 2 : 16;
        tp_cpack_last *nl = realloc(st->last, nc * sizeof *nl);
        if (!nl) return TPROF_ERR_NO_MEMORY;
        st->last = nl;
        st->cap_last = nc;
    }
    st->last[t->ncounter_names] = (tp_cpack_last){0, FORM_RAW};
    nn[t->ncounter_names++] = name;
    return 0;
}

/* The name index predicted after index `prev` when `seen` names have been met so far: the
 * next in the cycle (a reader counts the names met as it goes, as they are numbered in the
 * order they are met). */
static size_t predict(size_t prev, size_t seen) { return seen ? (prev + 1) % seen : 0; }

int tp_counter_append(tp_thread *t, tp_cpack *st, const tp_counter *c) {
    if (st->cap - t->counters_packed_len < ELEM_MAX) {
        size_t nc = st->cap ? st->cap * 2 : 256;
        uint8_t *nb = realloc(t->counters_packed, nc);
        if (!nb) return TPROF_ERR_NO_MEMORY;
        t->counters_packed = nb;
        st->cap = nc;
    }
    size_t pred = predict(st->name, t->ncounter_names);
    size_t idx = name_index(t, pred, c->name);
    if (idx == t->ncounter_names) {
        int rc = add_name(t, st, c->name);
        if (rc) return rc;
    }
    int64_t s = 0;
    int form = form_of(c->value, &s);
    uint8_t *b = t->counters_packed + t->counters_packed_len;
    size_t n = tp_varint_put(b, tp_zigzag((uint64_t)idx - (uint64_t)pred) << 2 | (unsigned)form);
    n += tp_varint_put(b + n, tp_zigzag(c->ts - st->ts));
    tp_cpack_last *l = &st->last[idx];
    if (form == FORM_RAW) {
        memcpy(b + n, &c->value, 8);
        n += 8;
        s = 0;
    } else {
        uint64_t base = l->form == form ? (uint64_t)l->v : 0;
        n += tp_varint_put(b + n, tp_zigzag((uint64_t)s - base));
    }
    *l = (tp_cpack_last){s, (uint8_t)form};
    t->counters_packed_len += n;
    st->ts = c->ts;
    st->name = idx;
    t->ncounters++;
    return 0;
}

int tp_counter_it_init(tp_counter_it *it, const tp_thread *t) {
    memset(it, 0, sizeof *it);
    it->t = t;
    if (!t->counters_packed) return 0;
    it->p = t->counters_packed;
    it->end = it->p + t->counters_packed_len;
    it->last = calloc(t->ncounter_names ? t->ncounter_names : 1, sizeof *it->last);
    if (!it->last) {
        it->bad = TPROF_ERR_NO_MEMORY;
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < t->ncounter_names; i++) it->last[i].form = FORM_RAW;
    return 0;
}

int tp_counter_next(tp_counter_it *it, tp_counter *c) {
    const tp_thread *t = it->t;
    if (it->bad || it->i >= t->ncounters) return 0;
    if (!t->counters_packed) {
        if (!t->counters) return it->bad = TPROF_ERR_CORRUPT, 0;
        *c = t->counters[it->i++];
        return 1;
    }
    uint64_t h, d, z = 0;
    if (tp_varint_get(&it->p, it->end, &h) || tp_varint_get(&it->p, it->end, &d))
        return it->bad = TPROF_ERR_CORRUPT, 0;
    size_t pred = predict(it->name, it->seen);
    uint64_t idx = (uint64_t)pred + tp_unzigzag(h >> 2);
    int form = (int)(h & 3);
    /* a name is met first as the next index */
    if (idx > it->seen || idx >= t->ncounter_names || form > FORM_RAW)
        return it->bad = TPROF_ERR_CORRUPT, 0;
    if (idx == it->seen) it->seen++;
    tp_cpack_last *l = &it->last[idx];
    double v;
    if (form == FORM_RAW) {
        if (it->end - it->p < 8) return it->bad = TPROF_ERR_CORRUPT, 0;
        memcpy(&v, it->p, 8);
        it->p += 8;
        *l = (tp_cpack_last){0, FORM_RAW};
    } else {
        if (tp_varint_get(&it->p, it->end, &z)) return it->bad = TPROF_ERR_CORRUPT, 0;
        uint64_t base = l->form == form ? (uint64_t)l->v : 0;
        int64_t s = (int64_t)(base + tp_unzigzag(z));
        *l = (tp_cpack_last){s, (uint8_t)form};
        v = value_of(form, s);
    }
    it->ts += tp_unzigzag(d);
    it->name = (size_t)idx;
    *c = (tp_counter){t->counter_names[idx], it->ts, v};
    it->i++;
    return 1;
}

int tp_counter_it_done(tp_counter_it *it) {
    int rc = it->bad;
    if (!rc && it->t && it->t->counters_packed && (it->i != it->t->ncounters || it->p != it->end))
        rc = TPROF_ERR_CORRUPT;
    free(it->last);
    it->last = NULL;
    return rc;
}

int tp_thread_unpack_counters(tp_thread *t) {
    if (!t->counters_packed) return 0;
    tp_counter *a = malloc((t->ncounters ? t->ncounters : 1) * sizeof *a);
    if (!a) return TPROF_ERR_NO_MEMORY;
    tp_counter_it it;
    size_t n = 0;
    if (tp_counter_it_init(&it, t) == 0)
        while (n < t->ncounters && tp_counter_next(&it, &a[n])) n++;
    int rc = tp_counter_it_done(&it);
    if (rc) {
        free(a);
        return rc;
    }
    free(t->counters_packed);
    free(t->counter_names);
    t->counters_packed = NULL;
    t->counter_names = NULL;
    t->counters_packed_len = t->ncounter_names = 0;
    t->counters = a;
    t->cap_counters = t->ncounters;
    return 0;
}

/* Shrinks what was allocated as it grew to what it holds (a failed shrink keeps it). */
static void fit(void **a, size_t size) {
    void *f = realloc(*a, size ? size : 1);
    if (f) *a = f;
}

void tp_thread_pack_counters(tp_thread *t) {
    if (t->counters_packed) { /* packed as loaded */
        fit((void **)&t->counters_packed, t->counters_packed_len);
        return;
    }
    if (!t->ncounters || !t->counters) return;
    tp_thread q = {0}; /* packed beside t, then swapped in */
    tp_cpack st = {0};
    int rc = 0;
    for (size_t i = 0; i < t->ncounters && !rc; i++)
        rc = tp_counter_append(&q, &st, &t->counters[i]);
    tp_cpack_free(&st);
    if (rc) {
        free(q.counters_packed);
        free(q.counter_names);
        return;
    }
    fit((void **)&q.counters_packed, q.counters_packed_len);
    free(t->counters);
    t->counters = NULL;
    t->cap_counters = 0;
    t->counters_packed = q.counters_packed;
    t->counters_packed_len = q.counters_packed_len;
    t->counter_names = q.counter_names;
    t->ncounter_names = q.ncounter_names;
}
