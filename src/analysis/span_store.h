/*
 * span_store.h — a set of spans too many to hold, walked in start order: spans pushed in any
 * order are held up to a bound, then sorted and written as a run to a temporary file
 * (report_spill.h, tp_spill_tmpfile); a walk merges the runs (an external merge sort).
 *
 * For the spans of the host-timed communication ops of a section that reads its ops apart
 * (comm_stream.c): a CPU job's MPI calls, millions a minute, each a span of the exposure and
 * of the step breakdown. Memory: the bound's spans (16 bytes each) while pushing, and per
 * walk a block of at most 512 spans for each run written (8 kB). Every 64 runs of one level
 * are merged into one run of the next as they come (each span is written again once a level),
 * so a walk merges at most 63 runs a level: a billion spans held 1 M at a time walk in at most
 * 15 + 63 runs (a level-1 run is 64 M spans), 624 kB; held one at a time, in 5 levels, at
 * most 315 runs, 2.5 MB. The file takes 16 bytes a span (the runs merged away given back
 * where the file system can punch holes; else up to a span's 16 bytes a level); it goes with
 * the store.
 */
#ifndef TPROF_SPAN_STORE_H
#define TPROF_SPAN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/steps.h"

typedef struct tp_span_store tp_span_store;

/* An empty store that holds up to `hold` spans (at least 1) before it writes them out. NULL
 * when out of memory (counted, alloc.h). */
tp_span_store *tp_span_store_new(size_t hold);

/* Adds span [s, e) (ns); an empty one (e <= s) is not kept. TPROF_OK, or TPROF_ERR_NO_MEMORY
 * (the span not kept). Where no file can be made or written (no $TMPDIR, a full file
 * system), or runs cannot be merged, the spans stay in memory from then on: the walk is the
 * same. Not after
 * tp_span_store_seal. */
int tp_span_store_push(tp_span_store *st, uint64_t s, uint64_t e);

/* Ends the pushes: the spans held are sorted, their room fitted to them. Walks may then be
 * opened, on several threads at once. */
void tp_span_store_seal(tp_span_store *st);

/* Spans kept (pushed and not empty); NULL-safe (0). */
size_t tp_span_store_count(const tp_span_store *st);

/* 1 once a walk could not read back what was written (the file went short, an I/O error, or
 * it gave spans that were not written: empty ones, or a run out of order): that walk ended
 * early, its figures wrong. NULL-safe (0). Thread safe. */
int tp_span_store_failed(const tp_span_store *st);

/* Runs in the file, which a walk merges (for tests). NULL-safe (0). */
size_t tp_span_store_runs(const tp_span_store *st);

/* Stores that failed (tp_span_store_failed) in this process, for a command's exit status.
 * Thread safe. */
unsigned long tp_span_store_read_failures(void);

/* Frees the store and closes its file. NULL-safe. Its walks must be closed first. */
void tp_span_store_free(tp_span_store *st);

/* A walk of a sealed store's spans in start order (equal starts in no given order). */
typedef struct tp_span_walk tp_span_walk;
/* NULL when out of memory (counted); st NULL gives a walk of nothing. */
tp_span_walk *tp_span_walk_open(const tp_span_store *st);
/* A spans.h source (tp_span_next_fn): the next span into *out and 1, or 0 at the end (or at
 * a read that failed: tp_span_store_failed). */
int tp_span_walk_next(void *walk, tp_span *out);
void tp_span_walk_close(tp_span_walk *w); /* NULL-safe */

#endif /* TPROF_SPAN_STORE_H */
