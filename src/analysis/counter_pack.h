/*
 * counter_pack.h — the packed form in which a slim process (model.h) keeps its threads'
 * counters, so that the merge, which holds every process's slim process at once, does not
 * hold 24 bytes a sample of the node samplers' NVML series: 10 metrics x 8 GPUs x 10 Hz is
 * 1.66 GB a day of a node in tp_counter arrays, and every task of a distributed `summarize`
 * loads them too.
 *
 * A thread's packed counters name their counters by index in its own table
 * (tp_thread.counter_names, at most TP_CPACK_NAMES names), and each counter is written as
 * Protocol Buffers varints (common/varint.h), differences zigzag-mapped:
 *   - (name index - the index predicted) x 4 + value form: names are numbered in the order
 *     they are met, and the index predicted is the one after the previous counter's among
 *     the names met so far (a sampler writes its metrics in a fixed cycle);
 *   - ts - the previous counter's ts (a sampler's metrics of one sample share their time);
 *   - the value, in the first form that gives it back bit for bit: 0, an integer (|v| <=
 *     2^53), or 1, a whole number of thousandths (the NVML sampler's joules and watts are
 *     its millijoules and milliwatts / 1000), written as the difference from the name's
 *     previous value when that was in the same form, else whole; 2, the 8 bytes of the
 *     double as they are (a NaN, an infinity, a fraction finer than 1/1000).
 * A sample of the NVML sampler's metrics then takes 2-5 bytes where it took 24. Differences
 * are taken modulo 2^64 and undone the same way, so any value comes back exactly.
 *
 * Readers take the counters one at a time through tp_counter_it, which reads either form;
 * nothing outside this file and the loaders indexes tp_thread.counters.
 *
 * Packed, a node sampler's series still grow with the run's time: about 260 MB a day of an
 * 8-GPU node at 10 Hz, held by the merge for every node and by each task of `summarize`.
 * So a thread's packed bytes past the spill threshold (tp_cpack_set_spill, 1 MiB) are
 * written out, in the order they were packed, to one temporary file of the process
 * (tp_spill_tmpfile: unlinked, in $TMPDIR), and the thread keeps only where they lie
 * (tp_thread.counters_spilled) and the bytes packed since. tp_counter_it reads them back
 * through a window of TP_CPACK_WINDOW bytes, so a reader holds that much whatever the run's
 * length, and the merge holds a bounded part of each thread (a summary's packed bytes are
 * read in place instead, tp_cpack_refer). The file is closed when no thread has bytes in it
 * any more. When it cannot be made or written (no $TMPDIR, a full file system), or the
 * process may open 32 descriptors or fewer, the bytes stay in memory as before: never an
 * error, and the next write-out is tried at twice the length.
 */
#ifndef TPROF_COUNTER_PACK_H
#define TPROF_COUNTER_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/model.h"

/* The most names one thread's packed counters hold: a thread with more keeps its counters
 * unpacked (8 GPUs' NVML metrics are about 100). */
#define TP_CPACK_NAMES 1024

/* Each name's previous value while packing or reading: its form (0-2) and its scaled value. */
typedef struct tp_cpack_last {
    int64_t v;
    uint8_t form;
} tp_cpack_last;

/* The state of one thread's counters being packed as they come (a light load's, or
 * tp_thread_pack_counters'): the packed buffer's size, the previous counter's time and name
 * index, each name's previous value. Zeroed before the first; freed by tp_cpack_free. */
typedef struct tp_cpack {
    size_t cap;
    size_t spill_next; /* the length at which the next write-out is tried; 0: the threshold */
    uint64_t ts;
    size_t name;
    tp_cpack_last *last; /* one per name of the thread's table */
    size_t cap_last;
} tp_cpack;

void tp_cpack_free(tp_cpack *st);

/* The bytes a reader of spilled counters holds at a time (tp_counter_it's window). */
#define TP_CPACK_WINDOW (64u << 10)

/* Sets the spill threshold of the process: a thread's packed bytes in memory are written out
 * once they reach `bytes` (0: never; the default 1 MiB). Returns the one before. For tests
 * and benchmarks, which spill tiny series to check the file's path; set it before loading,
 * not while loads run. */
size_t tp_cpack_set_spill(size_t bytes);
/* The spill threshold now (0: never). */
size_t tp_cpack_spill_threshold(void);

/* Where a thread's spilled bytes lie (counter_pack.c). */
typedef struct tp_cpack_spilled tp_cpack_spilled;

/* The length of thread t's packed counters: the bytes spilled and those in memory. */
uint64_t tp_counters_packed_size(const tp_thread *t);

/* n bytes of thread t's packed counters from byte off (of tp_counters_packed_size) into b:
 * TPROF_OK; TPROF_ERR_INVALID_ARG past the end; TPROF_ERR_IO when the temporary file does not
 * give them back. Thread safe while nothing writes t. */
int tp_counters_packed_read(const tp_thread *t, uint64_t off, void *b, size_t n);

/* Room for n more packed bytes at t->counters_packed + t->counters_packed_len, for a reader
 * of packed bytes coded elsewhere (a summary's slim block); st holds the buffer's capacity
 * (zeroed for a thread without packed counters). NULL when out of memory. */
uint8_t *tp_cpack_reserve(tp_thread *t, tp_cpack *st, size_t n);

/* Counts the n bytes written at the room tp_cpack_reserve gave, and writes the bytes in
 * memory out when they reached the spill threshold (tp_counter_append does the same). */
void tp_cpack_commit(tp_thread *t, tp_cpack *st, size_t n);

/* Thread t's packed counters, len bytes at off of the regular file open as fd (a summary's
 * slim block, summary_slim.c), left there rather than copied: t keeps a descriptor of the
 * file (a duplicate, close-on-exec), so that the summary renamed over or removed later is
 * still what t reads, and reads it only while it is unchanged (device, inode, size and
 * modification time, checked after each read; else its readers get TPROF_ERR_IO: a write in
 * place whose time was put back is not seen). A process holds a quarter of its descriptors
 * past 32 (RLIMIT_NOFILE; 1024 at most) so, and none with 32 or fewer, when it does not
 * spill either. t must have no packed
 * bytes yet. TPROF_OK; TPROF_ERR_IO when fd is not a regular file or no descriptor is left
 * for it (the caller then copies the bytes); TPROF_ERR_NO_MEMORY (t may then hold an empty
 * list of segments, which reads as none). */
int tp_cpack_refer(tp_thread *t, int fd, uint64_t off, size_t len);

/* How many reads of spilled or in-place packed bytes failed in this process so far (an
 * iterator that stopped at TPROF_ERR_IO, a tp_counters_packed_read or tp_spill_block_in
 * that returned it: counters, step events, steps memos): a
 * reader that ignores the error leaves the samples out of what it computes, so a command
 * compares this before and after to say that its output lacks them. Thread safe. */
uint64_t tp_counters_read_failures(void);
/* The same count for the calling thread's reads alone: what a reader compares before and
 * after one read of its own while other threads read too. */
uint64_t tp_counters_read_failures_here(void);

/* A slim process's other packed arrays that grow with the run's steps (its step events and
 * steps memo, step_pack.h), written out whole to the same temporary file when long, so that
 * the merge, which holds every rank's slim process, holds a few bytes a rank in place of
 * about 17 a step. */
typedef struct tp_spill_block tp_spill_block;
/* Writes n bytes at b to the temporary file (tp_spill_tmpfile, made at the first write and
 * shared with the spilled counters): the block that says where, owned by the caller, or NULL
 * when they stay in memory (no usable $TMPDIR, a failed write, no memory, or 32 descriptors
 * or fewer). Thread safe. */
tp_spill_block *tp_spill_block_out(const void *b, size_t n);
/* n bytes from offset off of block x into b: TPROF_OK; TPROF_ERR_INVALID_ARG past its end;
 * TPROF_ERR_IO, counted in tp_counters_read_failures (the reader's output then lacks what
 * the bytes held, and the command says so). Thread safe. */
int tp_spill_block_in(const tp_spill_block *x, uint64_t off, void *b, size_t n);
/* Counts one failed read (tp_counters_read_failures) for bytes read back whole that do not
 * decode: what the file gave is not what was written. Thread safe. */
void tp_spill_read_damaged(void);
/* Frees x (NULL: nothing), and the file with the last thing written to it. */
void tp_spill_block_free(tp_spill_block *x);

/* Ends the packing of thread t's counters: when some were written out, the bytes in memory
 * are written out too (the thread then holds none of them); the buffer is shrunk to what it
 * holds. */
void tp_cpack_finish(tp_thread *t);

/* Frees thread t's counters in either form (the array, the packed bytes, the names, its part
 * of the temporary file) and zeroes their fields. */
void tp_thread_free_counters(tp_thread *t);

/* Appends counter c to thread t's packed counters (t->counters_packed, its name into
 * t->counter_names; t->ncounters counts it), packed against *st. The thread's counters must
 * be in packed form already or none (t->counters NULL). 0; 1 when c cannot be packed (a name
 * past TP_CPACK_NAMES: nothing appended, though the packed buffer may have grown);
 * TPROF_ERR_NO_MEMORY (nothing appended).
 * About 20 ns a counter. */
int tp_counter_append(tp_thread *t, tp_cpack *st, const tp_counter *c);

/* Thread t's packed counters unpacked into t->counters (the array form), for a load that
 * meets one it cannot pack. 0; TPROF_ERR_NO_MEMORY (t unchanged); TPROF_ERR_CORRUPT when the
 * packed bytes do not hold t->ncounters counters (never for what this file wrote). */
int tp_thread_unpack_counters(tp_thread *t);

/* Packs slim thread t's counters in place: t->counters is freed and NULL, t->ncounters still
 * counts them, t->counters_packed and t->counter_names hold them (shrunk to their size when
 * they were packed as loaded). Nothing changes for a thread without counters, or when they
 * cannot be packed (too many names, or no memory: the array is then kept as it is). */
void tp_thread_pack_counters(tp_thread *t);

/* Reads a thread's counters in order, from either form:
 *     tp_counter_it it;
 *     tp_counter c;
 *     if (tp_counter_it_init(&it, t)) ...out of memory;
 *     while (tp_counter_next(&it, &c)) ...;
 *     if (tp_counter_it_done(&it)) ...damage: fewer counters were read than t->ncounters;
 * The thread is only read (thread safe while nothing writes it); the names are t's. */
typedef struct tp_counter_it {
    const tp_thread *t;
    size_t i;
    const uint8_t *p, *end;
    uint64_t ts;
    size_t name, seen;
    tp_cpack_last *last;
    int bad;
    uint8_t *win;        /* a thread with spilled bytes: the window p reads in (owned) */
    uint64_t off, total; /* the packed bytes brought into the window so far, and all */
    int quiet;           /* set by a reader that falls back on a failure (a summary's check):
                          * its failure is not counted in tp_counters_read_failures */
} tp_counter_it;

/* 0, or TPROF_ERR_NO_MEMORY (the iterator then reads nothing; tp_counter_it_done may still
 * be called). A thread with spilled bytes is read through a window of TP_CPACK_WINDOW bytes
 * (pread(2), about 0.1 ms a window); one whose file no longer gives them back, or whose
 * summary changed, reads as damaged (tp_counter_it_done: TPROF_ERR_IO, counted by
 * tp_counters_read_failures). */
int tp_counter_it_init(tp_counter_it *it, const tp_thread *t);
/* 1 with the next counter in *c; 0 at the end, or at damage (then no more). */
int tp_counter_next(tp_counter_it *it, tp_counter *c);
/* Frees the iterator: 0, or TPROF_ERR_CORRUPT when it stopped at damage, TPROF_ERR_NO_MEMORY
 * when its init failed, TPROF_ERR_IO when the temporary file failed it. */
int tp_counter_it_done(tp_counter_it *it);

/* What a reader made of each counter name (a series index, -1 for a name it skips), kept
 * by the name's pointer: a run interns its strings, so a name has one pointer, and a
 * sampler's few names recur millions of times (parsing "gpu3.power_w" and finding its series
 * cost more than reading the packed sample). Direct-mapped, TP_NAME_CACHE entries; zeroed
 * before use. */
#define TP_NAME_CACHE 256
typedef struct tp_name_cache {
    const char *name[TP_NAME_CACHE];
    long val[TP_NAME_CACHE];
} tp_name_cache;

static inline size_t tp_name_cache_slot(const char *name) {
    uintptr_t h = (uintptr_t)name;
    return (size_t)((h >> 3) ^ (h >> 11)) % TP_NAME_CACHE;
}

/* 1 with name's value in *val, 0 when it is not cached. */
static inline int tp_name_cache_get(const tp_name_cache *c, const char *name, long *val) {
    size_t k = tp_name_cache_slot(name);
    if (c->name[k] != name || !name) return 0;
    *val = c->val[k];
    return 1;
}

static inline void tp_name_cache_put(tp_name_cache *c, const char *name, long val) {
    size_t k = tp_name_cache_slot(name);
    c->name[k] = name;
    c->val[k] = val;
}

#endif
