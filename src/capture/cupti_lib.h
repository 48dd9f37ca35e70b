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

/* CUPTI's own clock, as records carry it where no client registered one (cupti_activity.h,
 * cuptiActivityRegisterTimestampCallback): CLOCK_REALTIME on Linux, CLOCK_MONOTONIC_RAW under
 * WSL; ns. tprof__cupti_default_clock_init (at start) tells WSL apart. */
uint64_t CUPTIAPI tprof__cupti_default_clock(void);
void tprof__cupti_default_clock_init(void);

/* ---- cupti.c */
/* Records are being delivered to this session (it started CUPTI and was not forked away). */
int tprof__cupti_delivering(void);

/* What cupti_client.c asks of our capture when the program's own CUPTI client calls CUPTI
 * (any thread: the client's). A claim: the client's window begins or goes on. */
enum { TPROF__CLAIM_NONE = 0, TPROF__CLAIM_EARLY = 1, TPROF__CLAIM_PAUSED = 2,
       TPROF__CLAIM_NOTED = 3 };
/* Our capture paused for the client (the pause named "another CUPTI client"): CLAIM_EARLY
 * before our CUPTI started (it will start paused), CLAIM_PAUSED paused now, CLAIM_NOTED paused
 * already. Waits for our lock (the calls that claim do not come from CUPTI's callbacks). */
int tprof__cupti_claim(void);
/* A claim undone, or the client's window over: capture resumed where a claim paused it (after
 * CLAIM_EARLY: our CUPTI starts normally, when it has not started yet). 1 if it resumed. */
int tprof__cupti_unclaim(int claim);
/* The client turned `kind` off: one of ours comes back on while we hold CUPTI. Never waits:
 * when our lock is held (a CUPTI call of ours, maybe the one this call comes from), it is
 * noted and settled by the next window or flusher pass. */
void tprof__cupti_client_disabled(CUpti_ActivityKind kind);
/* The client subscribes with fn: our subscriber released where we hold it, so that its
 * subscription succeeds, and with `claim`, our capture claimed for it as tprof__cupti_claim
 * does (returned; CLAIM_NONE when not). Never waits for a CUPTI call of ours on this thread
 * (no claim then); for one on another thread, at most 100 ms (the client's subscription is
 * refused after that, and nothing claimed). */
int tprof__cupti_client_subscribes(CUpti_CallbackFunc fn, int claim);
/* Around the client's cuptiFinalize, with libcupti's answer r after it: our records flushed
 * first and our state made that of a detach, when our lock is free (else settled later). */
int tprof__cupti_client_finalizing(void);
void tprof__cupti_client_finalized(int how, CUptiResult r);

/* ---- cupti_client.c */
/* A client's CUPTI call: its time kept for the hand-back's quiet time, and at debug level
 * (TRAINPROF_LOG=debug) the call with the time and the step it came in: what a user reads to
 * follow a hand-over. */
void tprof__cupti_handover_trace(const char *what, unsigned long long arg);
/* Our own pause or resume, at debug level, in the same trace (no client's call). */
void tprof__cupti_own_trace(const char *what);
/* The client's window over now (its cuptiFinalize detached our capture). */
void tprof__cupti_client_ended(void);
/* Our buffer callbacks are CUPTI's registered ones again. */
void tprof__cupti_ours_registered(void);
/* The clock the client gave CUPTI last (NULL: none), given back to it at each hand-over. */
CUpti_TimestampCallbackFunc tprof__cupti_client_clock(void);
/* Flusher: the client's window and claims followed; the next pass wanted (as tick), or 0. */
uint64_t tprof__cupti_client_tick(void);
void tprof__cupti_client_after_fork(void);

#endif /* TPROF_CUPTI_LIB_H */
