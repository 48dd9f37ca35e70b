/*
 * hash.h — the hashes the analysis's tables use: FNV-1a over bytes (Fowler, Noll, Vo; the
 * 64-bit offset basis and prime of the published FNV parameters) and MurmurHash3's 64-bit
 * finaliser (fmix64, Appleby), whose every output bit every input bit moves, so that a table
 * indexed by the low bits of tp_mix64(x ^ key) spreads any set of x; and a key for a table
 * that ids read from files (communicators) must not be able to choose slots in. Header only;
 * no allocation; thread safe.
 */
#ifndef TPROF_ANALYSIS_HASH_H
#define TPROF_ANALYSIS_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define TP_FNV_OFFSET 0xcbf29ce484222325ull

/* FNV-1a of n bytes at s, continuing from h (TP_FNV_OFFSET to start). */
static inline uint64_t tp_fnv1a(const void *s, size_t n, uint64_t h) {
    const unsigned char *c = s;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* fmix64 of h. */
static inline uint64_t tp_mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* A key for one table (mixed into what it hashes): not known ahead, being made of where the
 * table lies (addr) and when (CLOCK_MONOTONIC). */
static inline uint64_t tp_table_key(const void *addr) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return tp_mix64((uint64_t)(uintptr_t)addr) ^
           ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
}

#endif
