/*
 * nvtx_strings.h — the table behind NVTX's registered strings (nvtxDomainRegisterStringA/W,
 * capture/nvtx_inject.c): one holder per distinct content, found again in amortised constant
 * time, within a memory limit.
 *
 * Handles: the application keeps what registration returns for the life of the process and
 * passes it back with every event (NVTX_MESSAGE_TYPE_REGISTERED), so a handle is a pointer to
 * its holder and `holder->str` is the name: reading it takes no lock and no lookup. Holders
 * live in blocks that are never moved or freed; the content-keyed index over them (open
 * addressing, grown by doubling) may move, the holders do not.
 *
 * Memory: blocks and the index together never exceed `limit` bytes (the index's old and new
 * arrays both count while it grows). A registration that would exceed it gets the shared
 * holder tprof__strtab_past_limit, named TPROF_STRTAB_PAST_LIMIT_NAME, never NULL, and is
 * counted in `refused`.
 *
 * Thread safety: registration may come from any thread (one mutex, held for a hash probe and
 * a copy, or a doubling of the index now and then); reading a holder's name needs nothing,
 * since the registering call returned the handle only after the holder was complete.
 */
#ifndef TPROF_NVTX_STRINGS_H
#define TPROF_NVTX_STRINGS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TPROF_STRTAB_PAST_LIMIT_NAME "(registered string past the limit)"

typedef struct tprof_regstr {
    const char *str; /* NUL-terminated, lives as long as the holder: the process */
    uint64_t hash;
    size_t len;
} tprof_regstr;

typedef struct tprof_strtab_block tprof_strtab_block;

typedef struct tprof_strtab {
    pthread_mutex_t lock;
    size_t limit;               /* bytes: blocks + index */
    size_t used;                /* bytes held now, under lock */
    tprof_regstr **index;       /* cap slots, NULL = empty; under lock */
    size_t cap, count;          /* under lock */
    tprof_strtab_block *block;  /* the block being filled (older ones are linked behind) */
    _Atomic uint64_t refused;   /* registrations answered with the past-limit holder */
} tprof_strtab;

#define TPROF_STRTAB_INIT(limit_bytes) \
    {PTHREAD_MUTEX_INITIALIZER, (limit_bytes), 0, NULL, 0, 0, NULL, 0}

/* The holder every registration past the limit gets (static storage). */
extern const tprof_regstr tprof__strtab_past_limit;

/* Sets the memory limit in bytes. Before the first registration only (not thread-safe with
 * it); a table needs no other set-up than TPROF_STRTAB_INIT. */
void tprof__strtab_set_limit(tprof_strtab *t, size_t limit_bytes);

/* The holder of `s`'s content (s non-NULL), made on first sight: the same pointer for equal
 * content, for the life of the table. Past the limit (or when memory is exhausted),
 * &tprof__strtab_past_limit, counted in t->refused. Any thread; amortised O(length). */
const tprof_regstr *tprof__strtab_register(tprof_strtab *t, const char *s);

/* Registrations refused so far (relaxed read; any thread). */
uint64_t tprof__strtab_refused(const tprof_strtab *t);

/* Every block and the index freed; the table empty, its limit kept. For tests and a
 * process's end only: handles given out before become invalid. */
void tprof__strtab_free(tprof_strtab *t);

#endif /* TPROF_NVTX_STRINGS_H */
