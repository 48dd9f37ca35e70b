/*
 * kwindow.c — the kernel-capture window: GPU activity (CUPTI) recorded only for a range of
 * training steps, as Megatron-LM's --profile-step-start/--profile-step-end do, so that a
 * long run pays for kernel capture only there. Everything else (ranges, timers, NCCL, NVML)
 * is recorded throughout.
 *
 * Set with TRAINPROF_KERNEL_STEPS (`trainprof run --kernel-steps`): "A-B" (steps A to B
 * inclusive), "A" (step A only) or "A-" (from step A to the end). Steps are numbered as the
 * report numbers them: by the application's own number when it calls tprof_step_begin(n),
 * else from 0 in the order the step ranges begin (the first range whose name matches
 * TRAINPROF_STEP_NAME, or PyTorch's ProfilerStep#*, or a common step name: step_names.h;
 * the first pattern seen is the one counted, so "iteration" ranges around "step" ranges do
 * not count twice).
 *
 * Capture turns on when step A begins and off when the first step after B begins (so the
 * GPU work of step B that runs after its range closed is kept), or at the end of the run.
 * The CUPTI calls happen then, on the thread that began the step: twice per run.
 *
 * The metrics endpoint's POST /capture?detail=on|off (tprof__kwin_request) asks for capture
 * on or off from the next step that begins, whatever the window said: it sets the flag the
 * hot path already reads, so the request costs the job nothing until it is applied, once.
 *
 * Hot-path cost: while the window has not closed, each range push/start reads one atomic
 * flag and compares the name with the step pattern(s) (tens of ns); after it closed, or
 * without a window, one relaxed load of a flag that is 0.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"
#include "source.h"
#include "kwindow.h"
#include "step_names.h"

_Atomic int tprof__kwin_watch; /* 1 while steps must be counted */

enum { KW_OFF = 0, KW_BEFORE = 1, KW_INSIDE = 2, KW_AFTER = 3,
       KW_MANUAL_ON = 4, KW_MANUAL_OFF = 5 /* set through the metrics endpoint */ };

static _Atomic int g_state;      /* KW_*; KW_OFF = no window: capture everything */
static uint64_t g_lo, g_hi;      /* inclusive; g_hi = UINT64_MAX for "A-" */
static _Atomic int g_pat = -1;   /* index in patterns() of the pattern that counts */
static _Atomic uint64_t g_next;  /* number of the next range-marked step */
static _Atomic int g_api;        /* tprof_step_begin was called: names no longer count */
static const char *g_user_pat;   /* TRAINPROF_STEP_NAME, or NULL */
static _Atomic int g_settle;     /* the window closed: one more "off" at the next step */
static _Atomic int g_req;        /* detail request pending: 0 none, 1 off, 2 on */

static const char *const k_defaults[] = {TPROF_DEFAULT_STEP_NAMES};
#define N_DEFAULTS (sizeof k_defaults / sizeof *k_defaults)

void tprof__kwin_init(void) {
    const char *spec = tprof__env(TPROF__OPT_KERNEL_STEPS);
    atomic_store(&g_state, KW_OFF);
    atomic_store(&tprof__kwin_watch, 0);
    atomic_store(&g_req, 0);
    atomic_store(&g_settle, 0);
    const char *u0 = tprof__env(TPROF__OPT_STEP_NAME);
    g_user_pat = u0 && *u0 ? u0 : NULL; /* step names also count for detail requests */
    atomic_store(&g_pat, -1);
    atomic_store(&g_next, 0);
    atomic_store(&g_api, 0);
    if (!spec || !*spec) return;
    if (tprof__kwin_parse(spec, &g_lo, &g_hi) != 0) {
        tprof__log(TPROF_LOG_WARN,
                   "TRAINPROF_KERNEL_STEPS=\"%s\" is not A-B, A or A-: GPU activity is "
                   "captured in every step",
                   spec);
        return;
    }
    const char *u = tprof__env(TPROF__OPT_STEP_NAME);
    g_user_pat = u && *u ? u : NULL;
    atomic_store(&g_pat, -1);
    atomic_store(&g_next, 0);
    atomic_store(&g_api, 0);
    atomic_store(&g_state, KW_BEFORE);
    atomic_store(&tprof__kwin_watch, 1);
}

int tprof__kwin_capture_now(void) {
    int s = atomic_load(&g_state);
    return s == KW_OFF || s == KW_INSIDE || s == KW_MANUAL_ON;
}

int tprof__kwin_request(int on) {
    atomic_store(&g_req, on ? 2 : 1);
    atomic_store(&tprof__kwin_watch, 1); /* after the request: see apply_request */
    return 0;
}

/* On the thread that begins a step. The watch flag is cleared before the request is taken
 * and raised again if one came in since, so a request is never left unseen. */
static int apply_request(uint64_t k) {
    int s = atomic_load(&g_state);
    if (s != KW_BEFORE && s != KW_INSIDE) atomic_store(&tprof__kwin_watch, 0);
    int r = atomic_exchange(&g_req, 0);
    if (!r) return 0;
    int on = r == 2;
    atomic_store(&g_state, on ? KW_MANUAL_ON : KW_MANUAL_OFF);
    atomic_store(&g_settle, !on);
    atomic_store(&tprof__kwin_watch, !on);
    if (atomic_load(&g_req)) atomic_store(&tprof__kwin_watch, 1);
    tprof__sources_window(on);
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)tprof__now());
    tprof__set_meta(on ? "capture.detail_on_ns" : "capture.detail_off_ns", v);
    tprof__metrics_detail(on);
    tprof__log(TPROF_LOG_INFO, "detailed capture %s at step %llu (metrics endpoint)",
               on ? "on" : "off", (unsigned long long)k);
    return 1;
}

int tprof__kwin_active(void) { return atomic_load(&g_state) != KW_OFF; }

static void step_began(uint64_t k) {
    if (atomic_load(&g_req) && apply_request(k)) return;
    int s = atomic_load(&g_state);
    /* a step after the window closed, its last kernels have finished: the sources may now
     * let go of what they kept (CUPTI detaches: capture/cupti.c) */
    if ((s == KW_AFTER || s == KW_MANUAL_OFF) && atomic_exchange(&g_settle, 0)) {
        atomic_store(&tprof__kwin_watch, 0);
        tprof__sources_window(0);
        return;
    }
    if (s == KW_BEFORE && k >= g_lo && k <= g_hi) {
        if (atomic_compare_exchange_strong(&g_state, &s, KW_INSIDE)) {
            char v[32];
            snprintf(v, sizeof v, "%llu", (unsigned long long)tprof__now());
            tprof__set_meta("kernel_steps.on_ns", v);
            tprof__sources_window(1);
            tprof__log(TPROF_LOG_INFO, "kernel capture on at step %llu", (unsigned long long)k);
        }
    } else if ((s == KW_BEFORE || s == KW_INSIDE) && k > g_hi) {
        if (atomic_compare_exchange_strong(&g_state, &s, KW_AFTER)) {
            atomic_store(&g_settle, 1); /* the watch stays on for one more step */
            tprof__sources_window(0);
            char v[32];
            snprintf(v, sizeof v, "%llu", (unsigned long long)tprof__now());
            tprof__set_meta("kernel_steps.off_ns", v);
            tprof__log(TPROF_LOG_INFO, "kernel capture off at step %llu", (unsigned long long)k);
        }
    }
}

/* Pattern i: 0 = the user's, 1 = ProfilerStep#*, 2.. = the defaults. */
static int matches(int i, const char *name) {
    const char *pat = i == 0 ? g_user_pat : i == 1 ? TPROF_PROFILER_STEP_GLOB
                                                   : k_defaults[i - 2];
    return pat && tprof__step_name_matches(name, pat);
}

void tprof__kwin_name(const char *name) {
    if (!name || atomic_load_explicit(&g_api, memory_order_relaxed)) return;
    int p = atomic_load_explicit(&g_pat, memory_order_relaxed);
    if (p < 0) {
        /* the user's pattern, when given, is the only one (as in the report) */
        int n = g_user_pat ? 1 : (int)(2 + N_DEFAULTS);
        for (int i = g_user_pat ? 0 : 1; i < n && p < 0; i++)
            if (matches(i, name)) p = i;
        if (p < 0) return;
        int expect = -1;
        if (!atomic_compare_exchange_strong(&g_pat, &expect, p) && expect != p) return;
    } else if (!matches(p, name)) {
        return;
    }
    step_began(atomic_fetch_add(&g_next, 1));
}

void tprof__kwin_api_step(uint64_t step) {
    atomic_store_explicit(&g_api, 1, memory_order_relaxed);
    step_began(step);
}

#ifndef TPROF_HAVE_CUPTI
/* Built without CUPTI's headers (capture/cupti.c left out): no GPU capture to pause. */
int tprof_gpu_capture_pause(void) {
    return tprof_enabled() ? TPROF_ERR_UNAVAILABLE : TPROF_ERR_DISABLED;
}
int tprof_gpu_capture_resume(void) {
    return tprof_enabled() ? TPROF_ERR_UNAVAILABLE : TPROF_ERR_DISABLED;
}
#endif
