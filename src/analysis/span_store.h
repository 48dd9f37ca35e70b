/*
 * span_store.h — a set of spans too many to hold, walked in start order: spans pushed in any
 * order are held up to a bound, then sorted and written as a run to a temporary file
 * (report_spill.h, tp_spill_tmpfile); a walk merges the runs (an external merge sort).
 *
 * For the spans of the host-timed communication ops of a section that reads its ops apart
 * (comm_stream.c): a CPU job's MPI calls, millions a minute, each a span of the exposure and
 * of the step breakdown. Memory: the bound's spans (16 bytes each) while pushing, and per
 * walk a block of at most 512 spans for each run written (8 kB): a billion spans held 1 M at
 * a time walk in 1,000 runs, 8 MB (a bound below 512 makes each run's block the run: a walk
 * then holds about what its spans take, as holding them would). The file takes 16 bytes a
 * span; it goes with the store.
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
 * system), the spans stay in memory from then on: the walk is the same. Not after
 * tp_span_store_seal. */
int tp_span_store_push(tp_span_store *st, uint64_t s, uint64_t e);

/* Ends the pushes: the spans held are sorted, their room fitted to them. Walks may then be
 * opened, on several threads at once. */
void tp_span_store_seal(tp_span_store *st);

/* Spans kept (pushed and not empty); NULL-safe (0). */
size_t tp_span_store_count(const tp_span_store *st);

/* 1 once a walk could not read back what was written (the file went short: an I/O error):
 * that walk ended early, its figures wrong. NULL-safe (0). Thread safe. */
int tp_span_store_failed(const tp_span_store *st);

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
