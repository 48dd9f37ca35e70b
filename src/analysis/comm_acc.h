/*
 * comm_acc.h — a rank's communication ops summed one at a time in the file's order, so that
 * its section need not hold them together (comm_acc.c): the counts and torch.distributed's
 * backends into the section's result, the rows per (communicator, op, name), each row's
 * first op, the count and range of the placement shifts checked, and the ops the exposure's
 * basis counts. comm_rank.c feeds it from a whole load's ops; comm_stream.c from passes over
 * a file whose ops are read apart. Private to the analysis; not thread-safe (one section's).
 */
#ifndef TPROF_ANALYSIS_COMM_ACC_H
#define TPROF_ANALYSIS_COMM_ACC_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/comm.h"

/* The first op of a row (the one that made it), by its index in the file's order: what
 * names the communicator's source and backend. Rows are made in the file's order, so these
 * are in op0 order. */
typedef struct tp_comm_row_first { size_t op0; tp_comm_key key; } tp_comm_row_first;

/* The sums. Rows in a table of the groups alone (a row and two slots a group, where a row
 * per op sorted held 168 bytes an op: 336 MB for a rank file of 2 M collectives). */
typedef struct comm_acc {
    tp_comm_result *c;
    const tp_process *p; /* its metadata: torch's backends */
    const tp_step *st;   /* the measured steps (count_per_step), nst of them */
    size_t nst;
    tp_comm_row_result *v; /* the rows, n of cap; NULL when out of memory (no rows) */
    size_t n, cap;
    size_t *slot; /* nslot, a power of two: index in v, SIZE_MAX empty */
    size_t nslot;
    tp_comm_row_first *first;     /* per row, in the order made */
    size_t nshift;                /* ops whose placement was checked (tp_comm_time.checked) */
    int64_t shift_min, shift_max; /* ns, their least and most shift */
    size_t host_timed, gpu_timed; /* MPI-like ops; NCCL ops with a time of the GPU's */
} comm_acc;

/* Empty sums into result c (zeroed by the caller) of process p's ops over the nst measured
 * steps st. Without memory, no rows (the counts still come). */
void tp_comm_acc_init(comm_acc *a, tp_comm_result *c, const tp_process *p, const tp_step *st,
                      size_t nst);
/* Op o, index i in the file's order (ops must come in that order), resolved as *t (NULL:
 * not resolved, for want of memory: its counts alone). O(1) amortised. */
void tp_comm_acc_op(comm_acc *a, const tp_comm_op *o, size_t i, const tp_comm_time *t);
/* The key of the first op of the row whose first op is op0 (nrows rows made). */
const tp_comm_key *tp_comm_acc_first(const comm_acc *a, size_t nrows, size_t op0);
/* The rows, sorted (communicator, op, name), into the result (its rows and nrows; the
 * table's memory given over). */
void tp_comm_acc_rows(comm_acc *a);
void tp_comm_acc_free(comm_acc *a);

/* A shift (ns) as an unsigned key of the same order, for tp_kth (spans.h); its own inverse
 * through int64_t. */
static inline uint64_t tp_comm_shift_key(int64_t ns) { return (uint64_t)ns ^ (1ull << 63); }

#endif
