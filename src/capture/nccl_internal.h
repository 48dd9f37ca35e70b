/*
 * nccl_internal.h — the version-independent core of the NCCL profiler plugin
 * (capture/nccl_plugin.c), for the entry points of each ncclProfiler_vN struct: an older or
 * newer struct converts its arguments and calls these. All of them are safe to call from any
 * thread, concurrently, take no lock on the hot path and never fail (NCCL must never see an
 * error from us).
 */
#ifndef TPROF_NCCL_INTERNAL_H
#define TPROF_NCCL_INTERNAL_H

#include <stdint.h>

#include "nccl_abi.h"

/* init of any version: `hash` is the communicator id (0 when the version gives none: then
 * each event passes its own to tprof__nccl_start), `name` may be NULL, `version` is the
 * struct version NCCL chose (KernelCh is asked for from 4 on). Sets *mask (0 = ask for
 * nothing) and *context (NULL when out of memory or not recording). */
void tprof__nccl_init(void **context, uint64_t hash, int *mask, const char *name, int nnodes,
                      int nranks, int rank, int version);

/* startEvent of any version, with the descriptor already converted to the v4/v5 union:
 * `type` the event bit (TP_NCCL_*), `parentObj` the parent's handle (KernelCh), `rank` the
 * descriptor's rank (-1: the communicator's), `comm_hash` the event's communicator id for
 * versions that carry it per event (0: the context's). *eHandle is NULL when the event is not
 * recorded. */
void tprof__nccl_start(void *context, void **eHandle, uint64_t type, void *parentObj,
                       const tp_nccl_descr_u *u, int rank, uint64_t comm_hash);

tp_nccl_result tprof__nccl_stop(void *eHandle);
tp_nccl_result tprof__nccl_state(void *eHandle, tp_nccl_state st, tp_nccl_state_args *a);
tp_nccl_result tprof__nccl_finalize(void *context);

#endif /* TPROF_NCCL_INTERNAL_H */
