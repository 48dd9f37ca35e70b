/*
 * comm_ext.h — the entry points libtrainprof.so exports for capture that lives outside it:
 * libtrainprof_mpi.so, the PMPI wrappers (capture/mpi_pmpi.c over mpi_track.c), and the Python
 * module's comm bridge for trainprof.torch (python/src/session.c).
 *
 * Those libraries cannot reach the internal recording API (it is hidden, and inline over
 * the session's private state), yet they must write into the same per-thread rings as
 * everything else in the process, so that one process keeps one session and one file.
 * These functions are that bridge. They are internal (prefix tprof__, not in trainprof.h):
 * their signatures may change with libtrainprof.so, and the library that calls them is built
 * and shipped together with it.
 */
#ifndef TPROF_COMM_EXT_H
#define TPROF_COMM_EXT_H

#include <stdint.h>

#include "trainprof.h"
#include "../format/format.h"

/* Appends one TPROF_REC_COMM_OP record to the calling thread's ring: `name` (the op name,
 * docs/design.md §5.2 vocabulary, or the source's own name when pl->op is TPROF_COMM_UNKNOWN;
 * interned per thread, so pass names from a small fixed set), `start_ns` (CLOCK_MONOTONIC, the
 * record's ts) and the payload `pl` (copied; pl->end_ns is raised to start_ns if earlier). Returns
 * 1 when the record was written, 0 when nothing was (not recording, a thread over the limit, or a
 * full ring: the last two are counted as drops by the session). Starts the session lazily, like
 * every recording call. Thread safe (per-thread ring, no lock); cost: one TLS load, an interning
 * lookup and a ~100-byte copy. Never fails loudly. */
TPROF_API int tprof__comm_record(const char *name, uint64_t start_ns, const tprof_pl_comm *pl);

/* 1 once NCCL's profiler plugin (capture/nccl_plugin.c) records this process's NCCL
 * operations (a communicator was initialised with events asked for), else 0: trainprof.torch
 * then leaves NCCL collectives to it. Thread safe; one atomic load. */
TPROF_API int tprof__nccl_recording(void);

/* Reports a capture capability for the report's "capabilities" section ("mpi" -> "PMPI
 * wrappers, Open MPI 4.1"); the last status wins and is written again into a forked child's
 * file. Not hot path (takes the session lock); safe before the session starts. */
TPROF_API void tprof__capability_ext(const char *name, const char *status);

/* Out-of-memory bookkeeping shared by the two sources of the OOM post-mortem (docs/format.md,
 * "Memory"): trainprof.torch's allocator observer (source torch) and the CUPTI callback on
 * failed device allocations (capture/cupti.c, source cuda).
 * tprof__oom_begin: counts one more OOM of this process and returns the count so far (1 for
 * the first, whose details the memory.oom.* keys describe). tprof__oom_torch_observes: PyTorch's
 * caching allocator reports this process's OOMs through trainprof.torch's observer from now on;
 * a failed cudaMalloc is then no OOM of the job (the allocator frees its cache and retries;
 * only the failure it gives up on is one), so the CUPTI callback leaves them to the observer
 * (tprof__oom_torch answers 1). Thread safe, one atomic operation each; never fail. */
TPROF_API unsigned tprof__oom_begin(void);
TPROF_API void tprof__oom_torch_observes(void);
TPROF_API int tprof__oom_torch(void);

/* The memory options of core/config.h's table, parsed by its reader (a bad value is ignored
 * with one warning): *on = TRAINPROF_MEMORY (default 1), *history = TRAINPROF_MEMORY_HISTORY
 * (default 0, clamped to the row's maximum). Reads the environment: not for signal handlers. */
TPROF_API void tprof__memory_options(int *on, uint64_t *history);

#endif /* TPROF_COMM_EXT_H */
