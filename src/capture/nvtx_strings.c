/*
 * nvtx_strings.c — NVTX's registered strings: a content-keyed index over holders that never
 * move, within a memory limit (nvtx_strings.h says what each part guarantees).
 *
 * The index is open addressing with linear probing over a power-of-two array of holder
 * pointers, kept at most half full and doubled when a new name would fill it further, so a
 * registration costs one hash of the name and a short probe (amortised constant in the number
 * of names). When doubling would pass the limit the index fills up to three quarters instead,
 * which keeps probes short and leaves the rest of the limit to the names.
 */
#define _GNU_SOURCE
#include "nvtx_strings.h"

#include <stdlib.h>
#include <string.h>

const tprof_regstr tprof__strtab_past_limit = {TPROF_STRTAB_PAST_LIMIT_NAME, 0,
                                               sizeof TPROF_STRTAB_PAST_LIMIT_NAME - 1};

/* Holders and their names, packed; a block is freed only with the whole table. */
struct tprof_strtab_block {
    tprof_strtab_block *next;
    size_t size, fill; /* bytes of data[] and bytes used */
    _Alignas(8) unsigned char data[];
};

#define BLOCK_FIRST ((size_t)64 << 10)
#define BLOCK_MAX ((size_t)4 << 20)
#define INDEX_FIRST 1024

void tprof__strtab_set_limit(tprof_strtab *t, size_t limit_bytes) { t->limit = limit_bytes; }

/* FNV-1a, 64-bit (the FNV reference, http://www.isthe.com/chongo/tech/comp/fnv/); also the
 * length, so that the name is read once. */
static uint64_t hash_len(const char *s, size_t *len) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        h ^= *p++;
        h *= 1099511628211ull;
    }
    *len = (size_t)(p - (const unsigned char *)s);
    return h;
}

static size_t slot_of(tprof_regstr *const *index, size_t cap, uint64_t h, const char *s,
                      size_t len) {
    size_t mask = cap - 1, i = (size_t)h & mask;
    for (; index[i]; i = (i + 1) & mask)
        if (index[i]->hash == h && index[i]->len == len && !memcmp(index[i]->str, s, len))
            break;
    return i;
}

static size_t empty_slot(tprof_regstr *const *index, size_t cap, uint64_t h) {
    size_t mask = cap - 1, i = (size_t)h & mask;
    while (index[i]) i = (i + 1) & mask;
    return i;
}

/* Room in the index for one more name: doubled at half full when the limit allows, else
 * used up to three quarters. 0 when there is none. Under lock. */
static int index_room(tprof_strtab *t) {
    if (t->cap && (t->count + 1) * 2 <= t->cap) return 1;
    size_t ncap = t->cap ? t->cap * 2 : INDEX_FIRST;
    size_t bytes = ncap * sizeof *t->index;
    tprof_regstr **n = NULL;
    if (t->used + bytes <= t->limit && bytes / sizeof *t->index == ncap)
        n = calloc(ncap, sizeof *n);
    if (!n) return t->cap && (t->count + 1) * 4 <= t->cap * 3;
    for (size_t i = 0; i < t->cap; i++)
        if (t->index[i]) n[empty_slot(n, ncap, t->index[i]->hash)] = t->index[i];
    free(t->index);
    t->used += bytes - t->cap * sizeof *t->index;
    t->index = n;
    t->cap = ncap;
    return 1;
}

/* `need` bytes, 8-aligned, from the current block or a new one within the limit; NULL when
 * the limit (or memory) has no room. Under lock. */
static void *block_take(tprof_strtab *t, size_t need) {
    tprof_strtab_block *b = t->block;
    if (!b || b->size - b->fill < need) {
        size_t size = b ? (b->size < BLOCK_MAX ? b->size * 2 : BLOCK_MAX) : BLOCK_FIRST;
        if (size < need) size = need;
        size_t left = t->limit > t->used ? t->limit - t->used : 0;
        if (left < sizeof *b + need) return NULL;
        /* near the limit, half of what is left: the rest stays for the index to double */
        size_t half = left / 2;
        if (sizeof *b + size > half) size = half > sizeof *b + need ? half - sizeof *b : need;
        tprof_strtab_block *nb = malloc(sizeof *nb + size);
        if (!nb) return NULL;
        nb->next = b;
        nb->size = size;
        nb->fill = 0;
        t->block = b = nb;
        t->used += sizeof *nb + size;
    }
    void *p = b->data + b->fill;
    b->fill += need;
    return p;
}

const tprof_regstr *tprof__strtab_register(tprof_strtab *t, const char *s) {
    size_t len;
    uint64_t h = hash_len(s, &len);
    const tprof_regstr *r = NULL;
    pthread_mutex_lock(&t->lock);
    size_t i = t->cap ? slot_of(t->index, t->cap, h, s, len) : 0;
    if (t->cap && t->index[i]) {
        r = t->index[i];
    } else if (index_room(t)) {
        size_t need = (sizeof(tprof_regstr) + len + 1 + 7) & ~(size_t)7;
        tprof_regstr *n = len < SIZE_MAX - sizeof *n - 8 ? block_take(t, need) : NULL;
        if (n) {
            char *copy = (char *)(n + 1);
            memcpy(copy, s, len + 1);
            *n = (tprof_regstr){copy, h, len};
            t->index[empty_slot(t->index, t->cap, h)] = n;
            t->count++;
            r = n;
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (!r) {
        atomic_fetch_add_explicit(&t->refused, 1, memory_order_relaxed);
        r = &tprof__strtab_past_limit;
    }
    return r;
}

uint64_t tprof__strtab_refused(const tprof_strtab *t) {
    return atomic_load_explicit(&t->refused, memory_order_relaxed);
}

void tprof__strtab_free(tprof_strtab *t) {
    pthread_mutex_lock(&t->lock);
    for (tprof_strtab_block *b = t->block, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(t->index);
    t->block = NULL;
    t->index = NULL;
    t->cap = t->count = t->used = 0;
    atomic_store_explicit(&t->refused, 0, memory_order_relaxed);
    pthread_mutex_unlock(&t->lock);
}
