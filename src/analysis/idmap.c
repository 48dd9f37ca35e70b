/*
 * idmap.c — ids numbered in the order they came (idmap.h).
 */
#define _GNU_SOURCE
#include "analysis/idmap.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/hash.h"

void tp_idmap_init(tp_idmap *m) {
    memset(m, 0, sizeof *m);
    m->key = tp_table_key(m);
}

void tp_idmap_free(tp_idmap *m) {
    free(m->ids);
    free(m->slot);
    tp_idmap_init(m);
}

/* Where id is, or the empty slot it would take, in slots s (cap a power of two, not full). */
static size_t probe(const tp_idmap *m, const size_t *s, size_t cap, uint64_t id) {
    size_t at = (size_t)(tp_mix64(id ^ m->key) & (cap - 1));
    while (s[at] && m->ids[s[at] - 1] != id) at = (at + 1) & (cap - 1);
    return at;
}

size_t tp_idmap_find(const tp_idmap *m, uint64_t id) {
    if (!m->cap) return SIZE_MAX;
    size_t at = probe(m, m->slot, m->cap, id);
    return m->slot[at] ? m->slot[at] - 1 : SIZE_MAX;
}

size_t tp_idmap_add(tp_idmap *m, uint64_t id, int *made) {
    *made = 0;
    if (m->cap) {
        size_t at = probe(m, m->slot, m->cap, id);
        if (m->slot[at]) return m->slot[at] - 1;
    }
    if (m->n == m->cap_ids) {
        size_t nc = m->cap_ids ? 2 * m->cap_ids : 16;
        uint64_t *g = tp_realloc(m->ids, nc * sizeof *g);
        if (!g) return SIZE_MAX;
        m->ids = g;
        m->cap_ids = nc;
    }
    if (2 * (m->n + 1) > m->cap) { /* at most half full: twice the slots, placed again */
        size_t nc = m->cap ? 2 * m->cap : 64;
        size_t *s = tp_calloc(nc, sizeof *s);
        if (!s) return SIZE_MAX;
        for (size_t k = 0; k < m->n; k++) s[probe(m, s, nc, m->ids[k])] = k + 1;
        free(m->slot);
        m->slot = s;
        m->cap = nc;
    }
    m->ids[m->n] = id;
    m->slot[probe(m, m->slot, m->cap, id)] = ++m->n;
    *made = 1;
    return m->n - 1;
}
