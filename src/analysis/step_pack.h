/*
 * step_pack.h — the packed form in which a slim process (model.h) keeps its threads' step
 * events and its steps memo, so that the merge, which holds every rank's slim process at
 * once, does not grow by 80 bytes a step a rank (two 24-byte step events and the 32-byte
 * steps memo): a run of 1024 ranks x 100,000 steps would hold 8 GB of them.
 *
 * Each element is written as variable-length integers (7 bits a byte, the low bits first,
 * as Protocol Buffers' varints: protobuf.dev/programming-guides/encoding), each field as its
 * difference from what the element before predicts, zigzag-mapped so that a small negative
 * difference is small too (same document, "Signed Integers"):
 *   a step event (tp_stepev): ts - previous ts; (step - previous step) x 2 + begin;
 *   a step (tp_step): start - previous end; end - start; (app_step - previous app_step - 1)
 *   x 2 + warmup.
 * Differences are taken modulo 2^64 and undone the same way, so that any values, damaged or
 * forged ones included, come back exactly. A step of a training loop is then 8-12 bytes of
 * events and 4-8 of memo. Only 0 and 1 fit in the flag bits, and a step number's difference
 * must be under 2^62 either way: an array holding anything else (which only a forged summary
 * can give) is not packed.
 *
 * The packed arrays are read whole again where they are needed (steps.c: tp_find_steps),
 * into a temporary array: about 5 ns an element.
 */
#ifndef TPROF_STEP_PACK_H
#define TPROF_STEP_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/model.h"
#include "analysis/steps.h"

/* Packs n step events (n > 0) into *out (malloc'd, *len bytes). Returns 0, or -1 when they
 * cannot be (a begin other than 0 or 1) or without memory (*out is then NULL). */
int tp_stepevs_pack(const tp_stepev *e, size_t n, uint8_t **out, size_t *len);
/* Unpacks exactly n step events from b[0..len) into out. Returns 0, or -1 when b does not
 * hold exactly n (damage: it never happens to what tp_stepevs_pack wrote). */
int tp_stepevs_unpack(const uint8_t *b, size_t len, tp_stepev *out, size_t n);

/* The same for n steps (tp_step): 0, or -1 (a warmup other than 0 or 1, or no memory). */
int tp_steps_pack(const tp_step *s, size_t n, uint8_t **out, size_t *len);
int tp_steps_unpack(const uint8_t *b, size_t len, tp_step *out, size_t n);

/* Appends step event e to the packed bytes *b (*len used, *cap allocated; grown by doubling),
 * packed against *prev, the event appended before it ({0, 0, 0} before the first), which
 * then becomes e: the bytes are tp_stepevs_pack's of the events appended. 0; 1 when e cannot
 * be packed (nothing appended); TPROF_ERR_NO_MEMORY (nothing appended). */
int tp_stepevs_append(uint8_t **b, size_t *len, size_t *cap, tp_stepev *prev, const tp_stepev *e);

/* Thread t's packed step events unpacked into t->steps (the array form), for a load that
 * meets one it cannot pack. 0, or TPROF_ERR_NO_MEMORY (t unchanged). */
int tp_thread_unpack_steps(tp_thread *t);

/* Packs slim thread t's step events in place: t->steps is freed and NULL, t->nsteps still
 * counts them, t->steps_packed holds them (shrunk to their size when they were packed as
 * loaded). Nothing changes for a thread without step events, or when they cannot be packed
 * (t->steps is then shrunk to its count, as before). */
void tp_thread_pack_steps(tp_thread *t);

/* Thread t's step events: t->steps itself (*owned = 0), or an array unpacked from its packed
 * form (*owned = 1: the caller frees it). NULL when it has none, or without memory or on
 * damage (then *owned = 0 and t->nsteps > 0). Thread safe: t is only read. */
tp_stepev *tp_thread_stepevs(const tp_thread *t, int *owned);

/* The start time of thread t's first step event (t->nsteps > 0), from either form; 0 when
 * the packed form cannot be read. */
uint64_t tp_thread_first_step_ts(const tp_thread *t);

/* Packed step events and steps memos of at least this many bytes (about 1,800 steps) are
 * written out to the temporary file the spilled counters share (counter_pack.h,
 * tp_spill_block_out) as they are packed, and read back whole where they are read: the merge
 * holds less than this of each packed array (a thread's events, a rank's memo) whatever the
 * run's length, 32 kB a rank whose steps one thread marks: 256 MB at 8192 ranks, the most
 * ranks whose collectives its budget bounds (comm.h). Where the file cannot be written
 * they stay in memory, and so do arrays that cannot be packed (step_pack.c: a step number
 * that jumps by 2^62 or more, which only damage writes). */
#define TP_STEPS_SPILL (16u << 10)
/* Sets the threshold for the process (0: never write out); returns the one before. For
 * tests, which write out a few steps to check the file's path; set it before loading. */
size_t tp_steps_set_spill(size_t bytes);
/* Steps memo s's packed steps written out when past the threshold (s->packed then NULL,
 * s->spilled set); left as they are otherwise. */
void tp_steps_spill(tp_steps *s);
/* Unpacks s's nsteps packed steps, from memory or written out, into out: 0, or -1 (no
 * memory, a failed read, counted, or damage). */
int tp_steps_packed(const tp_steps *s, tp_step *out);

#endif
