/*
 * idmap.h — 64-bit ids read from files (communicator hashes) numbered densely in the order
 * they first came, so that a caller keeps what it knows of each in plain arrays indexed by
 * that number. Open addressing, at most half full, each id mixed with a key of the table's
 * own through hash.h's tp_mix64 (MurmurHash3's fmix64): no set of ids written into a file
 * can pile into one run of slots, so n ids take O(n) expected time whatever they are.
 * Memory: 8 bytes an id and 8 to 16 bytes a slot (2 to 4 slots an id). Not thread safe.
 */
#ifndef TPROF_ANALYSIS_IDMAP_H
#define TPROF_ANALYSIS_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tp_idmap {
    uint64_t *ids; /* the ids in the order they came: n of them (room for cap_ids) */
    size_t *slot;  /* an id's number + 1, 0 = empty: cap slots (a power of two, or 0) */
    size_t n, cap_ids, cap;
    uint64_t key;
} tp_idmap;

/* An empty map (allocates nothing). */
void tp_idmap_init(tp_idmap *m);
/* The number of id: a new one takes m->n (then *made = 1, else 0). SIZE_MAX without memory,
 * m then as it was. */
size_t tp_idmap_add(tp_idmap *m, uint64_t id, int *made);
/* The number of id, SIZE_MAX when it is not in m. */
size_t tp_idmap_find(const tp_idmap *m, uint64_t id);
/* Frees what m holds; m is then empty. */
void tp_idmap_free(tp_idmap *m);

#endif
