/*
 * cupti.c — GPU activity capture by CUDA injection (CUPTI Activity API; cupti_activity.h).
 *
 * `trainprof run` sets CUDA_INJECTION64_PATH to libtrainprof.so; during cuInit the driver
 * calls InitializeInjection here. We then load CUPTI (the copy the process already mapped,
 * as torch does from its wheel, else libcupti.so.13 from the usual places), check that its
 * version is the one whose record layouts we were built against, give CUPTI our clock
 * (CLOCK_MONOTONIC, so GPU and CPU events share one timeline), and enable activity records
 * for kernels, copies, memsets, device memory, synchronisations, the runtime API and CUPTI's
 * own overhead.
 * CUPTI fills buffers we hand out (a bounded number); its worker thread returns them to
 * bufferCompleted, which turns each record into one of our records in that thread's ring.
 *
 * One process has one CUPTI activity client: if another one (Nsight) holds CUPTI when we
 * start, registration fails and we back off with one line; a client of the program's own
 * (torch.profiler's Kineto) is followed through our definitions of its CUPTI calls
 * (cupti_client.c) and gets CUPTI for its window ("another CUPTI client" below: what those
 * calls need of our capture). cupti_lib.c finds and binds libcupti, cupti_records.c owns the
 * buffers and translates the records. CUPTI's vendor
 * library is never linked: dlopen + dlsym, with the prototypes from the CUDA headers we
 * were built with (this file is compiled only when they exist).
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/config.h"
#include "../core/internal.h"
#include "../core/source.h"
#include "bufpool.h"
#include "comm_ext.h"
#include "cupti_lib.h"
#include "cupti_oom.h"
#include "mapped.h"

/* ------------------------------------------------------------------ CUPTI entry points */

#define F tprof__cupti_fn

/* Our buffer callbacks registered with CUPTI (the first CUPTI call attaches it). */
static CUptiResult register_ours(void) {
    return F.cuptiActivityRegisterCallbacks(tprof__cupti_buffer_requested,
                                            tprof__cupti_buffer_completed);
}

static _Atomic int g_active;       /* records are being delivered to us */
static _Atomic int g_starting;     /* InitializeInjection runs: CUPTI is coming (nvml.c) */

/* The activity kinds chosen at start (TRAINPROF_CUPTI_KINDS), enabled at once or when a
 * window of the capture plan opens (core/kwindow.c). */
static CUpti_ActivityKind g_chosen[16];
static size_t g_nchosen;
static _Atomic int g_ready;   /* callbacks registered, g_chosen final */
static _Atomic int g_enabled; /* the chosen kinds are on */
static void enable_chosen(int on);
/* tprof_gpu_capture_pause/resume (for torch.profiler, which needs CUPTI to itself): while
 * paused the chosen kinds stay off whatever the kernel-capture window asks; g_want is what
 * the window asks, applied at resume. g_pause_lock orders pause, resume and the window. */
static pthread_mutex_t g_pause_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_paused;
static int g_want = 1;
static uint64_t g_pause_ns;
static char g_pauses[1024]; /* "start-end,..." ns, the metadata gpu_capture.pauses */
/* Their reasons, one item per entry of g_pauses (g_nlisted), in its order: the metadata
 * gpu_capture.pause_reasons, which also names the pause under way last (g_pause_why). */
static char g_reasons[2048];
static size_t g_nlisted;
static char g_pause_why[64];
/* The page both lists are (docs/format.md, TPROF_META_PAGES: page k > 1 is KEY.k). A pause
 * that does not fit goes to the next page with its reason, so that a job pausing for
 * torch.profiler every few hundred steps keeps 1,472 pauses apart at least, not 24. */
static unsigned g_pause_page = 1;

/* Under g_pause_lock: list `key`'s metadata key on the current page, into k (n bytes). */
static const char *page_key(char *k, size_t n, const char *key) {
    tprof__meta_page_key(k, n, key, g_pause_page);
    return k;
}

/* Under g_pause_lock: 1 when the current page has room for one more pause and its reason. */
static int pause_room(void) {
    return strlen(g_pauses) + 48 < sizeof g_pauses &&
           strlen(g_reasons) + sizeof g_pause_why + 1 < sizeof g_reasons;
}

#define CLIENT_WHY "another CUPTI client"

/* g_pause_lock's holder, so that a call of another client's made from inside a CUPTI call of
 * ours on the same thread (CUPTI runs callbacks inside its calls) never waits for it. Set after
 * locking, cleared before unlocking: only the holder writes them. */
static _Atomic(pthread_t) g_lock_owner;
static _Atomic int g_lock_held;

static void pause_lock(void) {
    pthread_mutex_lock(&g_pause_lock);
    atomic_store(&g_lock_owner, pthread_self());
    atomic_store(&g_lock_held, 1);
}
static int pause_trylock(void) {
    if (pthread_mutex_trylock(&g_pause_lock) != 0) return 0;
    atomic_store(&g_lock_owner, pthread_self());
    atomic_store(&g_lock_held, 1);
    return 1;
}
static void pause_unlock(void) {
    atomic_store(&g_lock_held, 0);
    pthread_mutex_unlock(&g_pause_lock);
}

/* Detaching between windows. Turning the activity kinds off does not give the job its speed
 * back: CUPTI keeps its hooks in the driver once a kind has been on. cuptiFinalize detaches
 * CUPTI from the process, and any later CUPTI call attaches it again (CUPTI's lazy
 * initialisation; cupti_activity.h, cuptiFinalize). CUPTI asks that it be called at the exit
 * of a CUDA API call, or after the records are complete and flushed: the detach is asked for
 * one step after each window closed (kwindow.c calls the window off twice), when the window's
 * last kernels have long finished, and done by a callback at the exit of the next runtime or
 * driver call (subscribed for that only). While detached no CUPTI function is called, as
 * any would attach CUPTI again. TRAINPROF_CUPTI_DETACH=0 keeps CUPTI attached. */
enum { DETACH_NO = 0, DETACH_ASKED = 1, DETACH_DONE = 2 };
static _Atomic int g_detach; /* DETACH_*, changed under g_pause_lock */
/* Our one CUPTI subscriber (CUPTI allows one per process), under g_pause_lock: held for the
 * failed-allocation callbacks while CUPTI is attached (oom_subscribe), for the driver-launch
 * callbacks inside windows, and for the detach callback while DETACH_ASKED; api_callback
 * serves all three. */
static CUpti_SubscriberHandle g_sub;
static int g_sub_held;
static _Atomic int g_oom_cbs; /* the allocation callbacks are enabled on g_sub */
/* Driver-API launches (the kind "driver": cuBLASLt, Triton and CUTLASS launch through the
 * driver API). CUPTI's DRIVER activity kind traces every driver call, and the per-call filter
 * only drops the records: on Megatron-LM's launch-bound configuration a window with it cost
 * x1.34 per step against x1.23 with callbacks (bench/results/megatron_window_kinds_h200.txt,
 * in-run medians). So by default the launches are taken from callbacks on the launch calls
 * alone, on our one subscriber, and written as the same API records: the callback's
 * correlation id is the one CUPTI gives the launched kernel's record (cupti_callbacks.h,
 * CUpti_CallbackData::correlationId). Where the subscriber is another client's, or
 * TRAINPROF_CUPTI_DRIVER=activity, the activity kind is used as before. */
enum { DRV_NONE = 0, DRV_CALLBACK = 1, DRV_ACTIVITY = 2 };
static int g_drv_mode;          /* DRV_*, chosen at start */
static int g_drv_act_on;        /* the DRIVER kind is enabled (under g_pause_lock) */
static _Atomic int g_drv_cbs;   /* the launch callbacks are enabled on g_sub and recording */
static const CUpti_CallbackId drv_launches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunch, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
};
#define NDRV (sizeof drv_launches / sizeof *drv_launches)
static char g_drv_names[NDRV][48]; /* their names as API records carry them, set at start */
static int reattach(void);
static void oom_subscribe(void);
static void release_subscriber(void);
/* Another client registered with CUPTI before the driver started ours (see "another CUPTI
 * client" below): ours starts paused, without touching CUPTI, until that client's window
 * ends; the device records are asked for then. */
static _Atomic int g_foreign_early;
static int g_device_pending;
static _Atomic int g_foreign_paused; /* we paused for another client (not for trainprof.torch) */
/* Another client finalized CUPTI since ours was last attached: CUPTI attached again may
 * number its records from 1 again (tprof__cupti_corr_rebase). */
static _Atomic int g_foreign_finalized;

static uint64_t CUPTIAPI timestamp_ns(void) { return tprof__now(); }

/* Under g_pause_lock: capture paused now for `why` ("" when none was named: the reason a
 * program gives tprof_set_metadata("gpu_capture.pause_reason") before it pauses), written with
 * the pause as the last item of gpu_capture.pause_reasons (commas in it written as ';'). */
static void paused_now(const char *why) {
    g_paused = 1;
    g_pause_ns = tprof__now();
    if (!pause_room() && g_pause_page < TPROF_META_PAGES) /* the next page takes it */
        g_pause_page++, g_pauses[0] = g_reasons[0] = 0, g_nlisted = 0;
    size_t i = 0;
    for (; why && why[i] && i + 1 < sizeof g_pause_why; i++)
        g_pause_why[i] = why[i] == ',' ? ';' : why[i];
    g_pause_why[i] = 0;
    char v[32], r[sizeof g_reasons + sizeof g_pause_why + 1], k[48];
    snprintf(v, sizeof v, "%llu", (unsigned long long)g_pause_ns);
    snprintf(r, sizeof r, "%s%s%s", g_reasons, g_nlisted ? "," : "", g_pause_why);
    tprof__set_meta("gpu_capture.paused_since_ns", v);
    tprof__set_meta(page_key(k, sizeof k, "gpu_capture.pause_reasons"), r);
}

/* Under g_pause_lock: paused for another client; gpu_capture.pause_reason too, which readers
 * of files before gpu_capture.pause_reasons take for every pause. */
static void paused_for_client(void) {
    tprof__set_meta("gpu_capture.pause_reason", CLIENT_WHY);
    paused_now(CLIENT_WHY);
}

/* Under g_pause_lock: the pause under way ended now; listed with its reason on its page.
 * Past the last page, the last listed pause is stretched to end now, so that every paused
 * time is in the list (the time between, captured or not, reads as paused: a step in it is
 * "not captured", never idle), and gpu_capture.pauses_merged counts the pauses so joined. */
static void resumed_now(void) {
    static unsigned long long merged;
    g_paused = 0;
    size_t len = strlen(g_pauses), rl = strlen(g_reasons);
    if (pause_room()) {
        snprintf(g_pauses + len, sizeof g_pauses - len, "%s%llu-%llu", len ? "," : "",
                 (unsigned long long)g_pause_ns, (unsigned long long)tprof__now());
        snprintf(g_reasons + rl, sizeof g_reasons - rl, "%s%s", g_nlisted ? "," : "",
                 g_pause_why);
        g_nlisted++;
    } else if (len) {
        char *dash = strrchr(g_pauses, '-');
        if (dash) { /* the end written over: 20 digits at most, where 48 bytes were free */
            size_t at = (size_t)(dash + 1 - g_pauses);
            snprintf(dash + 1, sizeof g_pauses - at, "%llu", (unsigned long long)tprof__now());
            char n[24];
            snprintf(n, sizeof n, "%llu", ++merged);
            tprof__set_meta("gpu_capture.pauses_merged", n);
        }
    }
    char k[48];
    tprof__set_meta(page_key(k, sizeof k, "gpu_capture.pauses"), g_pauses);
    tprof__set_meta(page_key(k, sizeof k, "gpu_capture.pause_reasons"), g_reasons);
    tprof__set_meta("gpu_capture.paused_since_ns", "");
}

/* Under g_pause_lock, CUPTI attached, our records flushed: CUPTI's clock handed to the client
 * that takes CUPTI over. A registered clock cannot be unregistered (a NULL callback is refused,
 * CUPTI_ERROR_INVALID_PARAMETER; only cuptiFinalize drops it), only replaced: by the one the
 * client gave CUPTI last, else by CUPTI's own default clock read the same way. CUPTI converts
 * each record it completes after the change with the new clock (records completed before keep
 * the previous one), and asks that the clock be registered before the kinds are enabled: the
 * client's come on after this, and ours after attach_ours registers our clock again. */
static void clock_handed_over(void) {
    CUpti_TimestampCallbackFunc c = tprof__cupti_client_clock();
    if (F.cuptiActivityRegisterTimestampCallback)
        F.cuptiActivityRegisterTimestampCallback(c ? c : tprof__cupti_default_clock);
}

/* ------------------------------------------------------------------ set-up */

/* Capability statuses that start with "unavailable" or "off" mean "not captured" to the
 * report (tprof__capability). */
static void unavailable(const char *why) {
    atomic_store(&g_starting, 0);
    char status[400];
    snprintf(status, sizeof status, "unavailable: %s", why);
    tprof__log(TPROF_LOG_WARN, "GPU activity capture off: %s", why);
    tprof__capability("cupti", status);
}

/* Called by the CUDA driver (cuInit) in every process that has CUDA_INJECTION64_PATH. */
TPROF_API int InitializeInjection(void);

int InitializeInjection(void) {
    static _Atomic int once;
    if (atomic_exchange(&once, 1)) return 1;
    /* before tprof_enabled(): the flusher it may start must already see that CUPTI is coming
     * (the NVML sampler keeps off then; see nvml.c) */
    const char *off = tprof__env(TPROF__OPT_CUPTI);
    int disabled = off && !strcmp(off, "0");
    /* the capture plan "off": no GPU activity, so CUPTI is not even loaded (nothing of it
     * attaches to the driver) */
    int planned_off = !disabled && tprof__kwin_plan_off();
    if (!disabled && !planned_off) atomic_store(&g_starting, 1);
    if (!tprof_enabled()) { /* no session: nothing to record into */
        atomic_store(&g_starting, 0);
        return 1;
    }
    if (disabled) {
        tprof__capability("cupti", "off (TRAINPROF_CUPTI=0)");
        return 1;
    }
    if (planned_off) {
        tprof__capability("cupti", "off (TRAINPROF_GPU_CAPTURE=off)");
        return 1;
    }
    char which[256] = "";
    void *h = tprof__cupti_open(which, sizeof which);
    if (!h) {
        unavailable("no libcupti found (set TRAINPROF_CUPTI_LIB)");
        return 1;
    }
#define CUPTI_FN_LOAD(name) *(void **)&F.name = dlsym(h, #name);
    CUPTI_FNS(CUPTI_FN_LOAD)
#undef CUPTI_FN_LOAD
    if (!F.cuptiGetVersion || !F.cuptiActivityRegisterCallbacks || !F.cuptiActivityEnable ||
        !F.cuptiActivityGetNextRecord || !F.cuptiActivityGetNumDroppedRecords) {
        unavailable("libcupti lacks the activity API");
        return 1;
    }
    uint32_t version = 0;
    F.cuptiGetVersion(&version);
    /* record layouts are those of the headers we were built with: same major version */
    if (version / 10000 != CUPTI_API_VERSION / 10000 || version < CUPTI_API_VERSION) {
        char why[320];
        snprintf(why, sizeof why, "libcupti API version %u, built for %u (%s)", version,
                 (unsigned)CUPTI_API_VERSION, which);
        unavailable(why);
        return 1;
    }
    if (F.cuptiSetThreadIdType) F.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    tprof__cupti_default_clock_init();
    const char *pool = tprof__env(TPROF__OPT_CUPTI_POOL);
    tprof__cupti_pool_init(!(pool && !strcmp(pool, "0")));
    /* a client that came first keeps CUPTI (its clock, its buffers, its subscriber) */
    const int early = atomic_load(&g_foreign_early);
    if (!early && F.cuptiActivityRegisterTimestampCallback)
        F.cuptiActivityRegisterTimestampCallback(timestamp_ns);
    CUptiResult r = early ? CUPTI_SUCCESS : register_ours();
    if (r != CUPTI_SUCCESS) {
        char why[200];
        snprintf(why, sizeof why, "another CUPTI client holds the activity API (%s)",
                 tprof__cupti_result(r));
        unavailable(why);
        return 1;
    }
    atomic_store(&g_active, 1);
    /* readers trust a synchronisation record's device only in files that say this */
    tprof__set_meta("cupti.sync_device", "context");
    const char *want = tprof__env(TPROF__OPT_CUPTI_KINDS);
    char names[128] = ""; /* the metadata cupti.kinds: readers tell "none ran" from "off" */
    g_nchosen = tprof__cupti_kinds(want, g_chosen, sizeof g_chosen / sizeof *g_chosen, names,
                                   sizeof names);
    int enabled = (int)g_nchosen;
    /* Driver-API launches only (the kind "driver", in the default list). cuBLASLt, Triton and
     * CUTLASS launch through the driver API; these records tie their kernels to the launching
     * step and thread exactly, and trace readers that link each kernel to its launch (HTA)
     * drop the kernels without one: Kineto records them too (torch.profiler's traces hold
     * cuda_driver events). They cost while captured (~13 % of an H200 GPT-2 step, 40.2 ->
     * 45.6 ms), which the default plan's windows bound; a list without "driver" leaves them
     * out. */
    if (tprof__cupti_kind_wanted(want, "driver") && F.cuptiActivityEnableDriverApi) {
        const char *how = tprof__env(TPROF__OPT_CUPTI_DRIVER);
        g_drv_mode = how && !strcmp(how, "activity") ? DRV_ACTIVITY : DRV_CALLBACK;
        for (size_t i = 0; i < NDRV; i++)
            snprintf(g_drv_names[i], sizeof g_drv_names[i], "%s",
                     tprof__cupti_api_name(CUPTI_CB_DOMAIN_DRIVER_API, drv_launches[i]));
        enabled++;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%sdriver", l ? "," : "");
    }
    tprof__set_meta("cupti.kinds", names);
    if (!early && F.cuptiActivityFlushPeriod) F.cuptiActivityFlushPeriod(100); /* ms */
    /* the devices' descriptions (one record each), whatever the kinds and the window */
    if (!early) F.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
    /* with a capture plan of windows (core/kwindow.c) the kinds go on when a window's first
     * step begins; if that already happened (CUDA initialised late), now */
    pause_lock();
    atomic_store(&g_ready, 1);
    /* a client that registered on another thread after `early` was read registered after us
     * (its claim comes before its registration): it holds CUPTI as surely as one that came
     * first, with the device records we asked for, and gets CUPTI's clock back from ours */
    const int late = !early && atomic_load(&g_foreign_early);
    if (late) clock_handed_over();
    if (early || late) {
        paused_for_client();
        g_device_pending = 1;
        atomic_store(&g_foreign_paused, 1);
        tprof__log(TPROF_LOG_INFO, "another CUPTI client registered %s: GPU activity capture "
                   "waits for its window to end", late ? "as CUDA started" : "before CUDA started");
    } else {
        oom_subscribe();
    }
    int on_now = tprof__kwin_capture_now();
    g_want = on_now;
    if (on_now && !g_paused) enable_chosen(1);
    pause_unlock();
    const char *bufs = tprof__cupti_pool_reuse() ? "buffers reused" : "a fresh buffer per request";
    char status[640];
    if (tprof__kwin_active())
        snprintf(status, sizeof status,
                 "activity capture in the steps of the capture plan %.60s: %d kinds, "
                 "%.256s, API %u, %s",
                 tprof__kwin_spec(), enabled, which, version, bufs);
    else
        snprintf(status, sizeof status, "activity capture on: %d kinds, %.256s, API %u, %s",
                 enabled, which, version, bufs);
    tprof__capability("cupti", status);
    tprof__log(TPROF_LOG_INFO, "CUPTI %s", status);
    return 1;
}

/* Per-call filters, applied after the kinds are enabled: the runtime calls that only add
 * noise stay out, and driver records (when chosen) are kept for launches only. */
static void apply_api_filters(void) {
    tprof__cupti_runtime_filter(tprof__env(TPROF__OPT_CUPTI_CALLS));
    if (!g_drv_act_on || !F.cuptiActivityEnableDriverApi) return;
    for (CUpti_CallbackId cb = 1; cb < CUPTI_DRIVER_TRACE_CBID_SIZE; cb++) {
        int on = 0;
        for (size_t i = 0; i < NDRV; i++) on |= drv_launches[i] == cb;
        F.cuptiActivityEnableDriverApi(cb, (uint8_t)on);
    }
}

static CUptiResult hold_subscriber(void);

/* Under g_pause_lock: the driver launches on or off with the chosen kinds, by callbacks on
 * our subscriber where we hold it or can take it, else by the DRIVER activity kind. */
static void driver_launches(int on) {
    if (g_drv_mode == DRV_NONE) return;
    if (!on) {
        if (atomic_exchange(&g_drv_cbs, 0) && g_sub_held) {
            for (size_t i = 0; i < NDRV; i++)
                F.cuptiEnableCallback(0, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_launches[i]);
            /* CUPTI's one subscriber is free for another client unless ours still needs it */
            if (!atomic_load(&g_oom_cbs) && atomic_load(&g_detach) != DETACH_ASKED)
                release_subscriber();
        }
        if (g_drv_act_on && F.cuptiActivityDisable)
            F.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
        g_drv_act_on = 0;
        return;
    }
    if (g_drv_mode == DRV_CALLBACK && F.cuptiSubscribe && F.cuptiEnableCallback &&
        hold_subscriber() == CUPTI_SUCCESS) {
        for (size_t i = 0; i < NDRV; i++)
            F.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_launches[i]);
        atomic_store(&g_drv_cbs, 1);
        return;
    }
    F.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    g_drv_act_on = 1;
}

/* A driver launch's callback, on the launching thread: its times and correlation id as an API
 * record, as CUPTI's DRIVER record of it would carry them. The entry's time waits in the
 * thread's state with the call's correlation id, not in the call's correlationData: CUPTI does
 * not promise that slot zeroed (cupti_callbacks.h, CUpti_CallbackData::correlationData), so an
 * exit whose entry was not seen (the callbacks went on during the call) would read whatever it
 * held as a start, and a NULL slot would lose the launch. Launch calls do not nest on a
 * thread, so one entry per thread is enough. */
static void driver_launch_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
    size_t i = 0;
    while (i < NDRV && drv_launches[i] != cbid) i++;
    if (i == NDRV || !tprof_enabled()) return;
    tprof__thread *t = tprof__thread_get();
    if (!t) return;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        t->launch_start = tprof__now();
        t->launch_corr = cb->correlationId;
        t->launch_cbid = (uint32_t)cbid;
        return;
    }
    const uint64_t start = t->launch_start, end = tprof__now();
    const int same = t->launch_corr == cb->correlationId && t->launch_cbid == (uint32_t)cbid;
    t->launch_start = 0;
    /* an entry not seen, or another call's: no record */
    if (!start || !same || start > end) return;
    tprof_pl_gpu pl;
    memset(&pl, 0, sizeof pl);
    pl.end_ns = end;
    pl.correlation = cb->correlationId;
    pl.kind = (uint32_t)cbid;
    pl.os_tid = t->os_tid;
    tprof__cupti_emit_gpu(t, TPROF_REC_GPU_API, g_drv_names[i], start, &pl);
}

/* Turns the chosen kinds on or off; off flushes what CUPTI holds (the window's last
 * records), so they arrive while the session still records. */
static void enable_chosen(int on) {
    if (atomic_exchange(&g_enabled, on) == on) return;
    for (size_t i = 0; i < g_nchosen; i++) {
        if (on)
            F.cuptiActivityEnable(g_chosen[i]);
        else if (F.cuptiActivityDisable)
            F.cuptiActivityDisable(g_chosen[i]);
    }
    driver_launches(on);
    if (on) apply_api_filters();
    if (!on && F.cuptiActivityFlushAll) F.cuptiActivityFlushAll(0);
}

/* Under g_pause_lock: our clock and buffer callbacks back in CUPTI, after a detach or another
 * client's window (the first call attaches CUPTI again where it was detached), with the
 * process-wide settings ours need: the system's thread ids, as our CPU records carry them
 * (another client may have changed them, a finalize resets them), and the flush period.
 * CUPTI's answer to the registration. */
static CUptiResult attach_ours(void) {
    if (F.cuptiActivityRegisterTimestampCallback)
        F.cuptiActivityRegisterTimestampCallback(timestamp_ns);
    CUptiResult r = register_ours();
    if (r != CUPTI_SUCCESS) return r;
    tprof__cupti_ours_registered();
    if (F.cuptiSetThreadIdType) F.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (F.cuptiActivityFlushPeriod) F.cuptiActivityFlushPeriod(100);
    return r;
}

/* Under g_pause_lock, once detached: attached again; the caller then turns the kinds on. */
static int reattach(void) {
    CUptiResult r = attach_ours();
    if (r != CUPTI_SUCCESS) {
        tprof__log(TPROF_LOG_WARN, "GPU activity capture stays off: CUPTI could not be attached "
                   "again (%s)", tprof__cupti_result(r));
        return -1;
    }
    atomic_store(&g_enabled, 0);
    atomic_store(&g_detach, DETACH_NO);
    tprof__cupti_corr_rebase();
    atomic_store(&g_foreign_finalized, 0);
    oom_subscribe(); /* the subscriber went with the detach */
    tprof__log(TPROF_LOG_INFO, "CUPTI attached again");
    return 0;
}

/* ------------------------------------------------------------------ failed allocations */

/* The allocation callbacks on g_sub, on or off (under g_pause_lock, g_sub held). */
static void oom_callbacks(uint32_t on) {
    static const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                 CUPTI_CB_DOMAIN_DRIVER_API};
    for (int d = 0; d < 2; d++) {
        size_t n;
        const CUpti_CallbackId *ids = tprof__cupti_oom_ids(doms[d], &n);
        for (size_t i = 0; i < n; i++) F.cuptiEnableCallback(on, g_sub, doms[d], ids[i]);
    }
    atomic_store(&g_oom_cbs, (int)on);
}

static void detach_now(void);

static void CUPTIAPI api_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                  const void *data) {
    (void)ud;
    const CUpti_CallbackData *cb = data;
    if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) || !cb) return;
    if (atomic_load(&g_oom_cbs)) tprof__cupti_oom_callback(dom, cbid, cb);
    if (dom == CUPTI_CB_DOMAIN_DRIVER_API && atomic_load(&g_drv_cbs))
        driver_launch_callback(cbid, cb);
    if (cb->callbackSite == CUPTI_API_EXIT && atomic_load(&g_detach) == DETACH_ASKED)
        detach_now();
}

/* Under g_pause_lock: our one subscriber held, subscribing api_callback when it is not yet;
 * CUPTI's answer (not CUPTI_SUCCESS: another client holds the process's one subscriber). */
static CUptiResult hold_subscriber(void) {
    if (g_sub_held) return CUPTI_SUCCESS;
    CUpti_SubscriberHandle sub;
    CUptiResult r = F.cuptiSubscribe(&sub, (CUpti_CallbackFunc)api_callback, NULL);
    if (r == CUPTI_SUCCESS) {
        g_sub = sub;
        g_sub_held = 1;
    }
    return r;
}

/* Under g_pause_lock, CUPTI attached and the subscriber free: subscribe for failed device
 * allocations (TRAINPROF_MEMORY, default on). Only the allocation calls reach the callback,
 * and those are rare (caching allocators allocate once and reuse); when another tool holds
 * CUPTI's one subscriber, failed allocations go unseen, said once. */
static void oom_subscribe(void) {
    static int said;
    int on = 1;
    tprof__memory_options(&on, NULL);
    if (!on || g_sub_held || !F.cuptiSubscribe || !F.cuptiEnableCallback) return;
    CUptiResult r = hold_subscriber();
    if (r != CUPTI_SUCCESS) {
        if (!said++)
            tprof__log(TPROF_LOG_INFO, "failed device allocations not seen: %s",
                       tprof__cupti_result(r));
        return;
    }
    oom_callbacks(1);
}

/* Under g_pause_lock: our subscriber goes (another client may want it, or CUPTI detached). */
static void release_subscriber(void) {
    atomic_store(&g_oom_cbs, 0);
    atomic_store(&g_drv_cbs, 0);
    if (g_sub_held && F.cuptiUnsubscribe) F.cuptiUnsubscribe(g_sub);
    g_sub_held = 0;
}

/* At the exit of a CUDA call, with a detach asked for: flush and detach (see g_detach). */
static void detach_now(void) {
    /* a window opening (or a pause) on another thread holds the lock: try again at the
     * next call rather than wait inside the job's CUDA call */
    if (!pause_trylock()) return;
    if (atomic_load(&g_detach) == DETACH_ASKED && !atomic_load(&g_enabled))
        F.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    /* looked at again: another client subscribing from a callback inside the flush took the
     * subscriber and called the detach off (tprof__cupti_client_subscribes) */
    if (atomic_load(&g_detach) == DETACH_ASKED && !atomic_load(&g_enabled)) {
        CUptiResult r = F.cuptiFinalize();
        atomic_store(&g_detach, r == CUPTI_SUCCESS ? DETACH_DONE : DETACH_NO);
        if (r != CUPTI_SUCCESS) {
            tprof__log(TPROF_LOG_WARN, "CUPTI stays attached between windows: %s",
                       tprof__cupti_result(r));
        } else {
            /* detached: the subscriber went with CUPTI */
            atomic_store(&g_oom_cbs, 0);
            g_sub_held = 0;
            tprof__log(TPROF_LOG_INFO, "CUPTI detached until the next window");
        }
    }
    pause_unlock();
}

/* Under g_pause_lock, with the kinds off: the detach callback at the exit of every runtime and
 * driver call, on our subscriber (one per process: when another tool holds it, CUPTI stays
 * attached, said once). */
static void ask_detach(void) {
    static int said;
    const char *v = tprof__env(TPROF__OPT_CUPTI_DETACH);
    if ((v && !strcmp(v, "0")) || !F.cuptiFinalize || !F.cuptiSubscribe || !F.cuptiEnableDomain ||
        atomic_load(&g_detach) != DETACH_NO)
        return;
    CUptiResult r = hold_subscriber();
    if (r != CUPTI_SUCCESS) {
        if (!said++)
            tprof__log(TPROF_LOG_WARN, "CUPTI stays attached between windows: %s",
                       tprof__cupti_result(r));
        return;
    }
    atomic_store(&g_detach, DETACH_ASKED);
    F.cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    F.cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
}

/* Under g_pause_lock: a detach asked for and not done yet is called off (a window opens
 * again): the domains go off, and the subscriber keeps the allocation callbacks (or goes, when
 * it held none). */
static void cancel_detach(void) {
    if (atomic_load(&g_detach) != DETACH_ASKED) return;
    atomic_store(&g_detach, DETACH_NO);
    if (!g_sub_held) return;
    if (atomic_load(&g_oom_cbs)) {
        F.cuptiEnableDomain(0, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
        F.cuptiEnableDomain(0, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
        oom_callbacks(1);
    } else {
        release_subscriber();
    }
}

static void settle_client(void);

static void cupti_window(int on) {
    pause_lock();
    settle_client();
    g_want = on;
    if (atomic_load(&g_ready) && !g_paused) {
        if (on && atomic_load(&g_detach) == DETACH_DONE && reattach() != 0) {
            pause_unlock();
            return;
        }
        if (on) cancel_detach(); /* not done yet: no need now */
        if (!on && !atomic_load(&g_enabled)) ask_detach(); /* the second "off": settled */
        enable_chosen(on);
    }
    pause_unlock();
}

/* Under g_pause_lock, our kinds off: our records in CUPTI's buffers delivered complete where
 * they can be. CUPTI puts a kernel's times into its record some time after the kernel ends
 * (a flush delivers "only the buffers whose records are all complete", a forced one the rest
 * without times; cupti_activity.h, cuptiActivityFlushAll), and on an H200 a client's
 * registration right after its subscription found about 280 of our records, a dozen short
 * steps' kernels, still without times: lost to the report. So buffers are flushed unforced
 * until CUPTI holds none of ours, for at most SETTLE_MS; the caller forces out what is left
 * (counted untimed). Once per hand-over, inside the client's start (torch.profiler's). */
#define SETTLE_MS 100
static void settle_records(void) {
    if (!F.cuptiActivityFlushAll) return;
    const uint64_t until = tprof__now() + SETTLE_MS * 1000000ull;
    for (;;) {
        F.cuptiActivityFlushAll(0);
        if (!tprof__cupti_buffers_out() || tprof__now() >= until) return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* Under g_pause_lock: capture paused for `why` (tprof_gpu_capture_pause says how). */
static int pause_locked(const char *why) {
    if (g_paused) return TPROF_ERR_ALREADY;
    g_paused = 1;
    /* detached, CUPTI holds nothing of ours, and any call would attach it again */
    if (atomic_load(&g_detach) != DETACH_DONE) {
        cancel_detach(); /* the other client's: no detach under it */
        release_subscriber(); /* and CUPTI's one subscriber is its to take */
        enable_chosen(0); /* flushes: what ran before the pause arrives now */
        settle_records();
        /* and every buffer we gave CUPTI, even one whose records are not complete (a kernel
         * still running: counted as untimed), also when the kinds were already off, so that
         * none is handed to the next client's callback instead, and lost to us */
        if (F.cuptiActivityFlushAll) F.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        clock_handed_over();
    }
    paused_now(why);
    return TPROF_OK;
}

int tprof_gpu_capture_pause(void) {
    if (!tprof_enabled()) return TPROF_ERR_DISABLED;
    if (!atomic_load(&g_ready)) return TPROF_ERR_UNAVAILABLE;
    char why[sizeof g_pause_why];
    tprof__pause_reason(why, sizeof why);
    pause_lock();
    int rc = pause_locked(why);
    pause_unlock();
    if (rc == TPROF_OK) tprof__log(TPROF_LOG_INFO, "GPU activity capture paused");
    if (rc == TPROF_OK) tprof__cupti_own_trace("pause");
    return rc;
}

int tprof_gpu_capture_resume(void) {
    if (!tprof_enabled()) return TPROF_ERR_DISABLED;
    if (!atomic_load(&g_ready)) return TPROF_ERR_UNAVAILABLE;
    pause_lock();
    if (!g_paused) {
        pause_unlock();
        return TPROF_ERR_INVALID_ARG;
    }
    CUptiResult r = CUPTI_SUCCESS;
    if (atomic_load(&g_detach) == DETACH_DONE) {
        /* detached: CUPTI stays apart until a window wants it (one opened during the pause) */
        if (g_want && reattach() != 0) r = CUPTI_ERROR_UNKNOWN;
    } else {
        /* the other client (Kineto) registered its own buffer callbacks, and may have torn
         * CUPTI down at its end: ours go back in, with our clock */
        r = attach_ours();
        /* the other client finalized CUPTI during the pause: this attachment's ids may start
         * over, and every record of ours of the last one was delivered at the pause */
        if (r == CUPTI_SUCCESS && atomic_exchange(&g_foreign_finalized, 0))
            tprof__cupti_corr_rebase();
        if (r == CUPTI_SUCCESS && g_device_pending) { /* started under another client */
            g_device_pending = 0;
            F.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
        }
        if (r == CUPTI_SUCCESS) oom_subscribe(); /* unless the other client kept it */
    }
    if (r == CUPTI_SUCCESS) {
        resumed_now();
        if (g_want) {
            atomic_store(&g_enabled, 0); /* the other client may have turned the kinds off */
            enable_chosen(1);
        }
    }
    pause_unlock();
    if (r != CUPTI_SUCCESS) { /* stays paused: another client kept the activity API */
        tprof__log(TPROF_LOG_WARN, "GPU activity capture stays paused: %s", tprof__cupti_result(r));
        return TPROF_ERR_UNAVAILABLE;
    }
    tprof__log(TPROF_LOG_INFO, "GPU activity capture resumed");
    tprof__cupti_own_trace("resume");
    return TPROF_OK;
}

/* ------------------------------------------------------------------ another CUPTI client */

/* The program's own CUPTI client (cupti_client.c) calls CUPTI on its threads, at times from
 * inside CUPTI's callbacks (a buffer completed, an API callback), which CUPTI may run while a
 * CUPTI call of ours holds g_pause_lock: a flush on this thread, or one that waits for
 * CUPTI's worker thread. Waiting for the lock there would deadlock the program, so those
 * calls never wait (a subscription briefly, for another thread): what they need of it is
 * noted and settled under it by the next window or flusher pass (settle_client). */
static _Atomic int g_client_finalize; /* a client's cuptiFinalize, to settle */
static _Atomic uint64_t g_kinds_off;  /* kinds it turned off (bit 1 << kind), to settle */

enum { LOCK_BUSY = 0, LOCK_TAKEN = 1, LOCK_MINE = 2 };
/* g_pause_lock for a call of the client's: LOCK_TAKEN (the caller unlocks), LOCK_MINE when this
 * thread holds it (inside a CUPTI call of ours), else LOCK_BUSY after trying for wait_ms. */
static int lock_for_client(int wait_ms) {
    for (int i = 0;; i++) {
        if (pause_trylock()) return LOCK_TAKEN;
        if (atomic_load(&g_lock_held) && pthread_equal(atomic_load(&g_lock_owner), pthread_self()))
            return LOCK_MINE;
        if (i >= wait_ms) return LOCK_BUSY;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* Under g_pause_lock: tprof__cupti_claim's work. */
static int claim_locked(void) {
    if (!atomic_load(&g_ready)) { /* before our CUPTI started: it will start paused */
        atomic_store(&g_foreign_early, 1);
        atomic_store(&tprof__kwin_watch, 1);
        return TPROF__CLAIM_EARLY;
    }
    /* steps are counted from now whatever the plan, so that capture comes back at a step
     * boundary after the client's window (tprof__cupti_client_tick) */
    atomic_store(&tprof__kwin_watch, 1);
    /* paused already (trainprof.torch, or this client's earlier window): noted */
    if (g_paused) return TPROF__CLAIM_NOTED;
    tprof__set_meta("gpu_capture.pause_reason", CLIENT_WHY);
    pause_locked(CLIENT_WHY);
    atomic_store(&g_foreign_paused, 1);
    return TPROF__CLAIM_PAUSED;
}

static void claimed(int claim) {
    if (claim == TPROF__CLAIM_PAUSED)
        tprof__log(TPROF_LOG_INFO, "another CUPTI client took CUPTI: GPU activity capture "
                   "handed over to it");
}

int tprof__cupti_claim(void) {
    pause_lock();
    int claim = claim_locked();
    pause_unlock();
    claimed(claim);
    return claim;
}

int tprof__cupti_unclaim(int claim) {
    if (claim == TPROF__CLAIM_EARLY) {
        pause_lock();
        int started = atomic_load(&g_ready);
        if (!started) atomic_store(&g_foreign_early, 0);
        pause_unlock();
        if (!started) return 0;
    }
    return atomic_exchange(&g_foreign_paused, 0) && tprof_gpu_capture_resume() == TPROF_OK;
}

/* Under g_pause_lock: the kinds of `off` that are ours back on, while we hold CUPTI. Kinds
 * are the process's, not a client's: a client tidying up after its window (Kineto disables
 * its kinds again as it writes its trace) must not turn ours off once we took capture back. */
static void kinds_back(uint64_t off) {
    if (!off || g_paused || !atomic_load(&g_enabled)) return;
    for (size_t i = 0; i < g_nchosen; i++)
        if ((off >> g_chosen[i]) & 1) F.cuptiActivityEnable(g_chosen[i]);
    /* the driver launches' kind, where they are taken by it */
    if (((off >> CUPTI_ACTIVITY_KIND_DRIVER) & 1) && g_drv_act_on)
        F.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
}

void tprof__cupti_client_disabled(CUpti_ActivityKind kind) {
    if (!atomic_load(&g_ready) || !atomic_load(&g_enabled) || (unsigned)kind >= 64) return;
    if (lock_for_client(0) != LOCK_TAKEN) { /* settled by settle_client */
        atomic_fetch_or(&g_kinds_off, 1ull << kind);
        return;
    }
    kinds_back(1ull << kind);
    pause_unlock();
}

/* Under g_pause_lock: another client's cuptiFinalize detached CUPTI while it recorded for us.
 * The subscriber, callbacks and kinds went with it (cupti_activity.h, cuptiFinalize); no
 * CUPTI call is made here, as any would attach CUPTI again inside the client's call. */
static void detached_by_client(void) {
    atomic_store(&g_detach, DETACH_DONE);
    atomic_store(&g_oom_cbs, 0);
    atomic_store(&g_drv_cbs, 0);
    g_sub_held = 0;
    g_drv_act_on = 0;
    atomic_store(&g_enabled, 0);
    if (!g_want) { /* between windows: as our own detach; the next window attaches again */
        tprof__log(TPROF_LOG_INFO, "another CUPTI client finalized CUPTI: detached until the "
                   "next window");
        return;
    }
    paused_for_client();
    atomic_store(&g_foreign_paused, 1);
    atomic_store(&tprof__kwin_watch, 1);
    tprof__cupti_client_ended();
    tprof__log(TPROF_LOG_INFO, "another CUPTI client finalized CUPTI: GPU activity capture "
               "comes back at the program's next step");
}

/* Under g_pause_lock: what the client's calls noted while the lock was held, settled as they
 * would have done: its finalize (whatever of ours CUPTI held then went with it), then the
 * kinds of ours it turned off. */
static void settle_client(void) {
    if (atomic_exchange(&g_client_finalize, 0) && !g_paused &&
        atomic_load(&g_detach) != DETACH_DONE)
        detached_by_client();
    kinds_back(atomic_exchange(&g_kinds_off, 0));
}

/* A client finalizing while CUPTI records for us detaches ours too: our records so far
 * delivered first, as before our own detach, and our state made that of a detach (a window
 * open: capture back at the program's next step, as after a client's window). The call comes
 * from the client's callback inside a CUDA call of the program's, so it never waits for our
 * lock: another thread may hold it across a CUPTI call of ours; then the state is settled by
 * the next window or flusher pass. */
enum { FIN_READY = 1, FIN_LOCKED = 2, FIN_OURS = 4 };
int tprof__cupti_client_finalizing(void) {
    if (!atomic_load(&g_ready)) return 0;
    if (lock_for_client(0) != LOCK_TAKEN) return FIN_READY;
    int how = FIN_READY | FIN_LOCKED;
    if (!g_paused && atomic_load(&g_detach) != DETACH_DONE) {
        how |= FIN_OURS;
        if (F.cuptiActivityFlushAll) F.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    return how;
}

void tprof__cupti_client_finalized(int how, CUptiResult r) {
    if (r == CUPTI_SUCCESS) atomic_store(&g_foreign_finalized, 1);
    if (how & FIN_LOCKED) {
        if ((how & FIN_OURS) && r == CUPTI_SUCCESS) detached_by_client();
        pause_unlock();
    } else if ((how & FIN_READY) && r == CUPTI_SUCCESS) {
        atomic_store(&g_client_finalize, 1);
    }
}

/* Our subscriber, where we hold it, goes: our failed-allocation and launch callbacks go
 * (driver launches fall back to their activity kind at the next window), and a detach waiting
 * for it is called off. From a callback inside a CUPTI call of ours (LOCK_MINE), this thread
 * is the lock's holder: it acts as such, and the call it interrupted looks again after it
 * (detach_now). Another thread's CUPTI call is waited for 100 ms at most: past that our
 * subscriber stays, and CUPTI refuses the client's. */
int tprof__cupti_client_subscribes(CUpti_CallbackFunc fn, int claim) {
    static _Atomic int said;
    if (fn == (CUpti_CallbackFunc)api_callback || !atomic_load(&g_ready))
        return TPROF__CLAIM_NONE;
    const int how = lock_for_client(100);
    if (how == LOCK_BUSY) {
        if (!atomic_exchange(&said, 1))
            tprof__log(TPROF_LOG_WARN, "another CUPTI client subscribed while trainprof was "
                       "inside a CUPTI call: trainprof's subscriber kept");
        return TPROF__CLAIM_NONE;
    }
    /* Kineto subscribes before it registers (torch 2.11 on an H200): the claim comes here,
     * our records settled before the client's calls reach CUPTI; not from inside a CUPTI
     * call of ours (LOCK_MINE), whose records are not settled yet */
    int claimed_now = claim && how == LOCK_TAKEN ? claim_locked() : TPROF__CLAIM_NONE;
    if (g_sub_held) {
        /* a detach waiting for the next CUDA call needs the subscriber, but the program's
         * call must not fail for it: CUPTI stays attached, the client's anyway */
        if (atomic_exchange(&g_detach, DETACH_NO) == DETACH_ASKED)
            tprof__log(TPROF_LOG_INFO, "CUPTI stays attached between windows: another "
                       "CUPTI client subscribed");
        release_subscriber();
        tprof__log(TPROF_LOG_INFO, "another CUPTI client subscribed: failed device "
                   "allocations and driver launches by callback are its now");
    }
    if (how == LOCK_TAKEN) pause_unlock();
    claimed(claimed_now);
    return claimed_now;
}

/* Flusher: what the client's calls noted settled, and its window followed (cupti_client.c). */
static uint64_t cupti_tick(int final) {
    (void)final;
    if (atomic_load(&g_client_finalize) || atomic_load(&g_kinds_off)) {
        pause_lock();
        settle_client();
        pause_unlock();
    }
    return tprof__cupti_client_tick();
}
/* Recording, or about to: from the moment the driver called InitializeInjection. */
int tprof__cupti_delivering(void) { return atomic_load(&g_active); }

static int cupti_active(void) { return atomic_load(&g_active) || atomic_load(&g_starting); }

/* At shutdown: ask CUPTI to hand back what it holds (called before the final flush). */
static void cupti_flush(void) {
    if (atomic_load(&g_active) && atomic_load(&g_detach) != DETACH_DONE && F.cuptiActivityFlushAll)
        F.cuptiActivityFlushAll(1);
}

/* When `trainprof run` left CUDA_INJECTION64_PATH to another CUDA tool attached first
 * (Nsight Systems), TRAINPROF_CUPTI_YIELDED names it: CUDA will never call our
 * InitializeInjection, so the session says so as it starts. */
static int cupti_capability(char *line, size_t n) {
    const char *other = tprof__env(TPROF__OPT_CUPTI_YIELDED);
    if (!other || !*other) return 0;
    snprintf(line, n, "off: another CUDA tool holds CUDA_INJECTION64_PATH (%.300s)", other);
    return 1;
}

/* In a forked child: CUDA cannot be used in a child forked after CUDA started (NVIDIA's CUDA
 * C++ Programming Guide), and the parent's CUPTI state is not the child's, so
 * nothing may call CUPTI for us: capture is left unready (a pause answers ERR_UNAVAILABLE, a
 * window does nothing), as detached (no flush at the child's end), with no other client's
 * window to wait for. The lock may have been held by a thread that is not in the child. The
 * source stays "active" as in the parent, so that the other sources keep off the GPU as
 * there. The program's own CUPTI calls are passed on unchanged. */
static void cupti_after_fork(void) {
    pthread_mutex_init(&g_pause_lock, NULL);
    atomic_store(&g_lock_held, 0);
    atomic_store(&g_ready, 0);
    atomic_store(&g_detach, DETACH_DONE);
    atomic_store(&g_enabled, 0);
    atomic_store(&g_drv_cbs, 0);
    atomic_store(&g_oom_cbs, 0);
    g_sub_held = 0;
    g_paused = 0;
    tprof__cupti_client_after_fork();
    atomic_store(&g_foreign_paused, 0);
    atomic_store(&g_foreign_early, 0);
    atomic_store(&g_client_finalize, 0);
    atomic_store(&g_kinds_off, 0);
}

const tprof__source tprof__source_cupti = {
    .name = "cupti",
    .tick = cupti_tick,
    .flush = cupti_flush,
    .after_fork = cupti_after_fork,
    .active = cupti_active,
    .window = cupti_window,
    .capability = cupti_capability,
};
