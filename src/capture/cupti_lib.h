/*
 * cupti_lib.h — what capture/cupti.c and cupti_records.c share: libcupti's functions as bound
 * at start (dlsym on the libcupti the process uses; never linked), and the records side, which
 * hands CUPTI its buffers and turns the records it returns into the thread rings' records.
 * Internal to the CUPTI source; compiled only with CUPTI's headers.
 */
#ifndef TPROF_CUPTI_LIB_H
#define TPROF_CUPTI_LIB_H

#include <cupti.h>
#include <stdint.h>

#include "../core/internal.h"

#define CUPTI_FNS(X)                                                                     \
    X(cuptiGetVersion)                                                                   \
    X(cuptiGetResultString)                                                              \
    X(cuptiActivityRegisterCallbacks)                                                    \
    X(cuptiActivityRegisterTimestampCallback)                                            \
    X(cuptiActivityEnable)                                                               \
    X(cuptiActivityDisable)                                                              \
    X(cuptiActivityGetNextRecord)                                                        \
    X(cuptiActivityGetNumDroppedRecords)                                                 \
    X(cuptiActivityFlushAll)                                                             \
    X(cuptiActivityFlushPeriod)                                                          \
    X(cuptiSetThreadIdType)                                                              \
    X(cuptiActivityEnableRuntimeApi)                                                     \
    X(cuptiActivityEnableDriverApi)                                                      \
    X(cuptiGetCallbackName)                                                              \
    X(cuptiSubscribe)                                                                    \
    X(cuptiUnsubscribe)                                                                  \
    X(cuptiEnableDomain)                                                                 \
    X(cuptiEnableCallback)                                                               \
    X(cuptiFinalize)                                                                     \
    X(cuptiActivitySetAttribute)

typedef struct tprof__cupti_fns {
#define CUPTI_FN_PTR(name) __typeof__(&name) name;
    CUPTI_FNS(CUPTI_FN_PTR)
#undef CUPTI_FN_PTR
} tprof__cupti_fns;

/* Bound by InitializeInjection (cupti.c) before any other use; NULL members: absent. */
extern tprof__cupti_fns tprof__cupti_fn;

/* ---- cupti_lib.c */
#define TPROF__CUPTI_MAPPED 4 /* mapped libcupti copies looked at */
/* The libcupti to use (its handle, or NULL), named in `which`. */
void *tprof__cupti_open(char *which, size_t n);
/* libcupti's function `name` for a call the program made to ours (cupti.c defines a few
 * CUPTI functions to see another client's calls): the next definition in the lookup order,
 * else `bound`, else one of the mapped copies; kept in *cache; NULL: no libcupti. */
void *tprof__cupti_next(_Atomic(void *) *cache, const char *name, void *bound);
/* Whether the comma-separated `list` (TRAINPROF_CUPTI_KINDS; NULL or empty: all) names `name`. */
int tprof__cupti_kind_wanted(const char *list, const char *name);
/* The activity kinds `want` asks for, into out (at most max; "memcpy" is two kinds), their
 * names appended once each, comma-separated, to the string names (n bytes). Returns how many. */
size_t tprof__cupti_kinds(const char *want, CUpti_ActivityKind *out, size_t max, char *names,
                          size_t n);
/* CUPTI's name of a result, never NULL. */
const char *tprof__cupti_result(CUptiResult r);
/* The runtime calls recorded, after CUPTI's RUNTIME kind is enabled: `calls` "all" (every call
 * but a few queries), else the calls that launch, copy, set, wait or allocate. */
void tprof__cupti_runtime_filter(const char *calls);

/* ---- cupti_records.c */
/* The buffer pool (bufpool.h) of at most 64 buffers of 4 MiB; reuse 0: a fresh buffer per
 * request (TRAINPROF_CUPTI_POOL=0). Before CUPTI's callbacks are registered. */
void tprof__cupti_pool_init(int reuse);
int tprof__cupti_pool_reuse(void);
/* Buffers of ours that CUPTI holds now (handed out, not yet completed). */
size_t tprof__cupti_buffers_out(void);
/* CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks): any thread CUPTI chooses. */
void CUPTIAPI tprof__cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI tprof__cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                            size_t size, size_t valid);
/* One GPU record into t's ring, its correlation id made unique in the file (below). */
void tprof__cupti_emit_gpu(tprof__thread *t, uint16_t kind, const char *name, uint64_t start,
                           const tprof_pl_gpu *pl);
/* Correlation ids are written as CUPTI's plus a base that becomes the largest id written so
 * far each time CUPTI is attached again (whose ids may start over): called then. */
void tprof__cupti_corr_rebase(void);
/* A runtime or driver call's name without its "_vNNNN" suffix; per-thread storage. */
const char *tprof__cupti_api_name(CUpti_CallbackDomain domain, uint32_t cbid);

/* ---- cupti.c */
/* Records are being delivered to this session (it started CUPTI and was not forked away). */
int tprof__cupti_delivering(void);

#endif /* TPROF_CUPTI_LIB_H */
