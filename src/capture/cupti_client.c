/*
 * cupti_client.c — another CUPTI client of the program's own (torch.profiler's Kineto, any
 * CUPTI tool): libtrainprof's definitions of the CUPTI calls it makes, and its window as they
 * show it. cupti.c pauses our capture for the window and takes CUPTI back after it.
 *
 * CUPTI serves one client per process: a second cuptiActivityRegisterCallbacks takes every
 * buffer over, and a second subscriber is refused (cupti_activity.h, cupti_callbacks.h). A
 * program that runs torch.profiler itself (Kineto) would otherwise leave both tools empty.
 * trainprof.torch hands over from Python; for any other program, `trainprof run` preloads
 * this library, so its definitions of these CUPTI functions come before libcupti's in the
 * process's symbol lookup: each notes what the other client does and passes the call on to
 * libcupti unchanged (RTLD_NEXT). The client's first buffer sizing, clock, registration or
 * kind turned on pauses our capture (our buffers flushed, our subscriber released, CUPTI's
 * clock handed back, the pause named in gpu_capture.pauses and reported in steps); turning
 * its kernel kind off, then flushing or finalizing, ends its window, and the flusher resumes
 * ours once the program begins its next step (tprof__cupti_client_tick). Our own CUPTI calls
 * go through the functions bound in cupti_lib.h, to libcupti itself, and never reach these.
 * A client that never turns its kernels off keeps us paused, which the report says.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdatomic.h>

#include "../core/internal.h"
#include "../core/session_state.h"
#include "cupti_lib.h"

#define F tprof__cupti_fn

enum { FOREIGN_NONE = 0, FOREIGN_HOLDS = 1, FOREIGN_ENDING = 2, FOREIGN_DONE = 3 };
static _Atomic int g_foreign;
static _Atomic uint64_t g_foreign_end_ns;
/* the time of the client's latest CUPTI call of any kind (tprof__cupti_handover_trace) */
static _Atomic uint64_t g_client_last_ns;
static _Atomic uint64_t g_foreign_end_step; /* steps begun (kwindow's count) when it ended */
/* A claim made at a client's buffer sizing or clock waits for its registration or a kind it
 * turns on: without either within 2 s (a program that only sets an attribute), it is undone
 * (tprof__cupti_client_tick). */
static _Atomic int g_sizing_claim, g_sizing_was;
static _Atomic uint64_t g_sizing_ns;

/* What the client last gave CUPTI: its buffer callbacks and its clock (NULL: none yet), so
 * that a later window of its own gets them back. A client may register once and turn its kinds
 * on for each window (libkineto did: a static "registered" guard in the CuptiActivityInterface
 * of its early versions; today's CuptiActivityApi::enableCuptiActivities registers before it
 * enables the kinds, each window). Once we took CUPTI back, our callbacks are the registered
 * ones; g_client_cbs_on says the client's are. */
static _Atomic(CUpti_BuffersCallbackRequestFunc) g_client_req;
static _Atomic(CUpti_BuffersCallbackCompleteFunc) g_client_done;
static _Atomic(CUpti_TimestampCallbackFunc) g_client_clock;
static _Atomic int g_client_cbs_on;

/* Steps begun so far by the capture plan's count (0 before the first). */
static uint64_t steps_begun(void) {
    uint64_t step, ns;
    return tprof__kwin_progress(&step, &ns) == 0 ? step + 1 : 0;
}

/* The time is the run's (from the session's start, as the report gives the pause's times).
 * Steps are counted from the start under a plan of windows, else only from the client's first
 * call (a range's step name is matched only while steps are watched), so the count is no step
 * number. */
static void trace(const char *who, const char *what, unsigned long long arg, uint64_t now) {
    if (tprof__log_level < TPROF_LOG_DEBUG) return;
    const uint64_t t0 = tprof__S.start_mono;
    tprof__log(TPROF_LOG_DEBUG, "%s: %s(%llu) at %.6f s of the run, %llu steps begun since steps "
               "were counted", who, what, arg, (double)(now > t0 ? now - t0 : 0) / 1e9,
               (unsigned long long)steps_begun());
}

void tprof__cupti_handover_trace(const char *what, unsigned long long arg) {
    const uint64_t now = tprof__now();
    atomic_store(&g_client_last_ns, now);
    trace("CUPTI client", what, arg, now);
}

void tprof__cupti_own_trace(const char *what) { trace("trainprof", what, 0, tprof__now()); }

/* The forwarded call: libcupti's answer, or CUPTI_ERROR_NOT_INITIALIZED where the process has
 * no libcupti (what the program's call could not have reached either). */
#define FORWARD(name, args)                                                                \
    do {                                                                                   \
        static _Atomic(void *) cache_;                                                     \
        __typeof__(&name) real_;                                                           \
        *(void **)&real_ = tprof__cupti_next(&cache_, #name, *(void **)&F.name);           \
        r = real_ ? real_ args : CUPTI_ERROR_NOT_INITIALIZED;                              \
    } while (0)

/* The client's window begins (or goes on): our capture paused for it. *was: the window's
 * state before, for foreign_refused. */
static int foreign_claims(int *was) {
    *was = FOREIGN_NONE;
    if (!tprof_enabled()) return TPROF__CLAIM_NONE;
    *was = atomic_exchange(&g_foreign, FOREIGN_HOLDS);
    return tprof__cupti_claim();
}

/* CUPTI refused the call foreign_claims prepared for (cupti_activity.h: a NULL callback, or
 * another error): the client holds nothing, and our callbacks are still the registered ones,
 * so what the claim did is undone: the client's earlier state back, and our capture resumed at
 * once (started normally, when our CUPTI has not started yet). */
static void foreign_refused(int claim, int was) {
    if (claim == TPROF__CLAIM_NONE) return;
    atomic_store(&g_foreign, was);
    if (was != FOREIGN_NONE) return; /* an earlier window of the client's goes on */
    if (tprof__cupti_unclaim(claim))
        tprof__log(TPROF_LOG_INFO, "the other CUPTI client's call failed: GPU activity "
                   "capture taken back");
}

static void foreign_ends(int finalized) {
    int st = atomic_load(&g_foreign);
    if (st == FOREIGN_HOLDS || (finalized && st == FOREIGN_ENDING)) {
        atomic_store(&g_foreign_end_ns, tprof__now());
        atomic_store(&g_foreign_end_step, steps_begun());
        atomic_store(&g_foreign, finalized ? FOREIGN_DONE : FOREIGN_ENDING);
        /* the flusher looks at the hand-back from now, not after the rest of its sleep (up
         * to the flush interval: on an H200 20 ms, four short steps, were lost to it) */
        tprof__flusher_wake();
    }
}

void tprof__cupti_client_ended(void) {
    atomic_store(&g_foreign_end_ns, tprof__now());
    atomic_store(&g_foreign_end_step, steps_begun());
    atomic_store(&g_foreign, FOREIGN_DONE);
}

void tprof__cupti_ours_registered(void) { atomic_store(&g_client_cbs_on, 0); }

CUpti_TimestampCallbackFunc tprof__cupti_client_clock(void) { return atomic_load(&g_client_clock); }

TPROF_API CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                               CUpti_BuffersCallbackCompleteFunc done);
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
    CUptiResult r;
    int was = FOREIGN_NONE, claim = TPROF__CLAIM_NONE, ahead = TPROF__CLAIM_NONE;
    /* a NULL callback is refused (cupti_activity.h) and takes nothing over */
    const int theirs = req != tprof__cupti_buffer_requested && req && done;
    if (req != tprof__cupti_buffer_requested)
        tprof__cupti_handover_trace("cuptiActivityRegisterCallbacks", 0);
    if (theirs) {
        /* the claim of the client's subscription, sizing or clock is this registration's */
        ahead = atomic_exchange(&g_sizing_claim, TPROF__CLAIM_NONE);
        claim = foreign_claims(&was);
    }
    FORWARD(cuptiActivityRegisterCallbacks, (req, done));
    if (r != CUPTI_SUCCESS) {
        foreign_refused(claim, was);
        /* and so is its undoing: this claim found the client holding already, so only the
         * earlier one gives capture back (else it would stay paused to the end of the run) */
        if (ahead != TPROF__CLAIM_NONE) foreign_refused(ahead, atomic_load(&g_sizing_was));
    } else if (theirs) {
        atomic_store(&g_client_req, req);
        atomic_store(&g_client_done, done);
        atomic_store(&g_client_cbs_on, 1);
    }
    return r;
}

/* A call that announces the client's registration (a buffer sizing, its clock) claims CUPTI
 * before it reaches CUPTI; the claim waits for the registration or a kind turned on (above).
 * After the call: its answer r. */
static int announce(int *was) {
    *was = FOREIGN_NONE;
    /* the test and the taking in one step: of two threads announcing at once, one claims */
    int none = FOREIGN_NONE;
    if (!tprof_enabled() || !atomic_compare_exchange_strong(&g_foreign, &none, FOREIGN_HOLDS))
        return TPROF__CLAIM_NONE;
    return tprof__cupti_claim();
}
static void announced(int claim, int was, CUptiResult r) {
    if (r != CUPTI_SUCCESS) {
        foreign_refused(claim, was);
    } else if (claim != TPROF__CLAIM_NONE) {
        atomic_store(&g_sizing_was, was);
        atomic_store(&g_sizing_ns, tprof__now());
        atomic_store(&g_sizing_claim, claim);
    }
}

/* A client sizing CUPTI's buffers is about to register (Kineto sets the device buffer size and
 * pool limit, then registers: libkineto's CuptiActivityApi); CUPTI applies that to the records
 * still pending in the device buffers, and on an H200 trainprof's records of the steps before
 * the hand-over then came back without their times when only the registration paused it. So
 * the claim (our records flushed first) comes at the first of these calls. */
TPROF_API CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr,
                                                         size_t *size, void *value);
CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size,
                                               void *value) {
    CUptiResult r;
    tprof__cupti_handover_trace("cuptiActivitySetAttribute", attr);
    int was = FOREIGN_NONE, claim = announce(&was);
    FORWARD(cuptiActivitySetAttribute, (attr, size, value));
    announced(claim, was, r);
    return r;
}

/* A client's clock: CUPTI converts every record it completes after the change with it
 * (cupti_activity.h), ours still in flight included, so it claims CUPTI as a sizing does
 * (Kineto registers its TSC clock before its buffers where configured to). Kept, so that the
 * client's next window gets it back (cupti.c restores it at the hand-over). */
TPROF_API CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn);
CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
    CUptiResult r;
    int was = FOREIGN_NONE, claim = fn ? announce(&was) : TPROF__CLAIM_NONE;
    FORWARD(cuptiActivityRegisterTimestampCallback, (fn));
    announced(claim, was, r);
    if (r == CUPTI_SUCCESS && fn) atomic_store(&g_client_clock, fn);
    return r;
}

/* A kind the client turns on outside a window of its own begins one, as a registration does:
 * a client that registered once, in an earlier window, would otherwise have its records
 * delivered to our callbacks, registered again when we took CUPTI back. So ours are paused
 * and the client's callbacks registered again before the kind goes on (unless they are the
 * registered ones, or the client never gave any: its registration is still to come). */
TPROF_API CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind);
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    CUptiResult r;
    int was = FOREIGN_NONE, claim = TPROF__CLAIM_NONE;
    tprof__cupti_handover_trace("cuptiActivityEnable", kind);
    if (tprof_enabled()) {
        atomic_store(&g_sizing_claim, TPROF__CLAIM_NONE); /* the sizing's claim is confirmed */
        if (atomic_load(&g_foreign) != FOREIGN_HOLDS) claim = foreign_claims(&was);
        CUpti_BuffersCallbackRequestFunc req = atomic_load(&g_client_req);
        CUpti_BuffersCallbackCompleteFunc done = atomic_load(&g_client_done);
        if (req && done && !atomic_load(&g_client_cbs_on)) {
            FORWARD(cuptiActivityRegisterCallbacks, (req, done));
            if (r == CUPTI_SUCCESS) atomic_store(&g_client_cbs_on, 1);
        }
    }
    FORWARD(cuptiActivityEnable, (kind));
    if (r != CUPTI_SUCCESS) foreign_refused(claim, was);
    return r;
}

/* Turning its kernels off ends the client's window (then a flush or finalize: below); any of
 * our kinds it turns off while we hold CUPTI comes back on (cupti.c). */
TPROF_API CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind);
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
    CUptiResult r;
    tprof__cupti_handover_trace("cuptiActivityDisable", kind);
    FORWARD(cuptiActivityDisable, (kind));
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL)
        foreign_ends(0);
    tprof__cupti_client_disabled(kind);
    return r;
}

TPROF_API CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag);
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    CUptiResult r;
    tprof__cupti_handover_trace("cuptiActivityFlushAll", flag);
    FORWARD(cuptiActivityFlushAll, (flag));
    /* the client's last records are its own now: ours may come back */
    int st = atomic_load(&g_foreign);
    if (st == FOREIGN_ENDING) foreign_ends(1);
    else if (st == FOREIGN_DONE) atomic_store(&g_foreign_end_ns, tprof__now());
    return r;
}

/* A client finalizing while CUPTI records for us (Kineto's teardown, from its callback after
 * we took capture back) detaches ours too (cupti.c settles it, never waiting for our lock). */
TPROF_API CUptiResult CUPTIAPI cuptiFinalize(void);
CUptiResult CUPTIAPI cuptiFinalize(void) {
    CUptiResult r;
    tprof__cupti_handover_trace("cuptiFinalize", 0);
    const int how = tprof__cupti_client_finalizing();
    FORWARD(cuptiFinalize, ());
    if (r == CUPTI_SUCCESS) atomic_store(&g_client_cbs_on, 0); /* gone with CUPTI's state */
    tprof__cupti_client_finalized(how, r);
    foreign_ends(1);
    return r;
}

/* A client subscribing takes CUPTI's one subscriber from us where we hold it (cupti.c), and its
 * subscription succeeds; Kineto subscribes before it registers, so the subscription claims
 * CUPTI (undone without a registration or a kind turned on within 2 s). */
TPROF_API CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn,
                                              void *ud);
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *ud) {
    CUptiResult r;
    tprof__cupti_handover_trace("cuptiSubscribe", 0);
    /* a subscription announces the client's registration, as a sizing does (announce): the
     * window taken in one step with its test, and given up when nothing was claimed */
    int none = FOREIGN_NONE, was = FOREIGN_NONE;
    const int want =
        tprof_enabled() && atomic_compare_exchange_strong(&g_foreign, &none, FOREIGN_HOLDS);
    int claim = tprof__cupti_client_subscribes(fn, want);
    if (want && claim == TPROF__CLAIM_NONE) atomic_store(&g_foreign, FOREIGN_NONE);
    FORWARD(cuptiSubscribe, (sub, fn, ud));
    announced(claim, was, r);
    return r;
}

/* Flusher: our capture back once the other client's window has ended (it turned its kernels
 * off, and flushed or finalized) and the program began a step since. A client stops from the
 * program's own thread (torch.profiler's stop, Kineto's trace processing and its forced
 * flushes included), so a step that begins after that is past all of it; taken back earlier,
 * each later forced flush of the client's would cut our in-flight records short. A program
 * whose steps are not seen gets capture back once the client has made no CUPTI call for
 * QUIET_NS after its flush (QUIET_UNFLUSHED_NS when it turned its kinds off without flushing
 * or finalizing): Kineto makes its last (a flush, an attribute) as torch.profiler stops and none
 * while it writes its trace (Megatron-LM on an H200: none in the 2 s of writing), and the
 * steps run after the trace is written are the program's again. */
#define QUIET_NS 1000000000ull
#define QUIET_UNFLUSHED_NS 5000000000ull

uint64_t tprof__cupti_client_tick(void) {
    int sizing = atomic_load(&g_sizing_claim);
    if (sizing != TPROF__CLAIM_NONE) {
        if (tprof__now() - atomic_load(&g_sizing_ns) < 2000000000ull)
            return tprof__now() + 100000000; /* look again in 100 ms */
        if (atomic_exchange(&g_sizing_claim, TPROF__CLAIM_NONE) == sizing)
            foreign_refused(sizing, atomic_load(&g_sizing_was));
    }
    int st = atomic_load(&g_foreign);
    if (st != FOREIGN_DONE && st != FOREIGN_ENDING) return 0;
    int stepped = steps_begun() > atomic_load(&g_foreign_end_step);
    /* the client's times before the clock: a call timed after this thread read the clock
     * (the client goes on calling meanwhile) would make the difference wrap, a quiet of
     * centuries */
    uint64_t last = atomic_load(&g_foreign_end_ns), call = atomic_load(&g_client_last_ns);
    uint64_t now = tprof__now(), seen = call > last ? call : last;
    /* a client that turned its kinds off but has not flushed may still flush the records it
     * holds: its buffers go to whoever's callbacks are registered, so ours are not until it
     * has been quiet for longer */
    int quiet = now > seen && now - seen > (st == FOREIGN_DONE ? QUIET_NS : QUIET_UNFLUSHED_NS);
    /* waiting for the step: passes every 2 ms until then, so that short steps lose few */
    if (!(stepped && st == FOREIGN_DONE) && !quiet) return now + 2000000;
    atomic_store(&g_foreign, FOREIGN_NONE);
    if (tprof__cupti_unclaim(TPROF__CLAIM_PAUSED))
        tprof__log(TPROF_LOG_INFO, "the other CUPTI client's window ended: GPU activity "
                   "capture taken back");
    return 0;
}

void tprof__cupti_client_after_fork(void) {
    atomic_store(&g_foreign, FOREIGN_NONE);
    atomic_store(&g_sizing_claim, TPROF__CLAIM_NONE);
}
