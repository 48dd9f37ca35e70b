/*
 * kwindow.c — the GPU capture plan: GPU activity (CUPTI) recorded only in windows of
 * training steps, as Megatron-LM's --profile-step-start/--profile-step-end do for one, so
 * that a long run pays for kernel capture only there. Everything else (ranges, timers, NCCL,
 * NVML, the process sampler) is recorded throughout.
 *
 * Set with TRAINPROF_GPU_CAPTURE (`trainprof run --gpu-capture`; syntax in kwindow.h): "auto"
 * (the default: from the start through step 4, then five steps every thousand), "all" (every
 * step), "off" (no GPU activity: capture/cupti.c does not even load CUPTI), windows
 * "A-B,C-D,..." or one window repeated, "A-B/N". TRAINPROF_KERNEL_STEPS (`--kernel-steps`)
 * is the older spelling of one window; when both are set the plan wins.
 * Steps are numbered as the report numbers them: by the application's own number when it
 * calls tprof_step_begin(n), else from 0 in the order the step ranges begin (the first range
 * whose name matches TRAINPROF_STEP_NAME, or PyTorch's ProfilerStep#*, or a common step
 * name: step_names.h; the first pattern seen is the one counted, so "iteration" ranges around
 * "step" ranges do not count twice).
 *
 * Each window opens when a step inside it begins and closes when the first step after it
 * begins (so the GPU work of its last step that runs after its range closed is kept), or at
 * the end of the run; one step after it closed the sources are told "off" a second time, when
 * its last kernels have long finished (CUPTI detaches then: capture/cupti.c). The CUPTI calls
 * happen on the thread that began the step: three per window. Windows are only ever passed
 * forwards: a step number past a window's end moves to the first window not yet over (in
 * constant time for "A-B/N"), one below the window ahead changes nothing.
 *
 * The metrics endpoint's POST /capture?detail=on|off (tprof__kwin_request) asks for capture
 * on or off from the next step that begins, whatever the plan said, and the plan no longer
 * applies from then on: it sets the flag the hot path already reads, so the request costs
 * the job nothing until it is applied, once.
 *
 * What was captured is written as metadata (docs/format.md): gpu_capture (the plan),
 * gpu_capture.windows ("on_ns-off_ns,...", CLOCK_MONOTONIC, rewritten at each change of
 * capture, an open one as "on_ns-", in pages of KW_LIST_BYTES: gpu_capture.windows.2, .3, ...
 * after the first; past KW_PAGES later windows are only counted,
 * gpu_capture.windows_left_out), and for readers of one window kernel_steps,
 * kernel_steps.on_ns and kernel_steps.off_ns: the plan's first window.
 *
 * Hot-path cost: while a window is ahead or open (or a request or the second "off" is
 * pending), each range push/start reads one atomic flag and tests the name's first byte
 * against those a step pattern may begin with (a few ns); only a name that passes is compared
 * with the step pattern(s) (tens of ns), and a step that begins takes a mutex no other hot
 * path takes, also after the plan's last window (an on-demand window may still come);
 * with "all" or "off", one relaxed load of a flag that is 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
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

enum { KW_ALL = 0,    /* no window: capture everything */
       KW_NONE = 1,   /* plan "off": capture nothing, ever */
       KW_BEFORE = 2, /* a window ahead (g_widx), capture off */
       KW_INSIDE = 3, /* in window g_widx */
       KW_AFTER = 4,  /* no window ahead */
       KW_MANUAL_ON = 5, KW_MANUAL_OFF = 6 /* set through the metrics endpoint */ };

/* Whole entries of a page of gpu_capture.windows fit in one metadata value
 * (TPROF_MAX_INLINE): at least 94 windows of 20-digit times a page. A window that does not
 * fit goes to the next page (gpu_capture.windows.2, .3, ...), up to KW_PAGES pages: at least
 * 6,016 windows, six million steps of the default plan (a window every 1,000 steps). Only
 * the page being filled is written again as capture changes, so a window costs the file one
 * page's value (4 kB at most) however many came before it, and a reader keeps the last value
 * of each page alone. */
#define KW_LIST_BYTES 3968
#define KW_PAGES TPROF_META_PAGES
_Static_assert(KW_LIST_BYTES < TPROF_MAX_INLINE, "the list is never cut by the writer");

static _Atomic int g_state;      /* KW_*: read without the lock (capture_now, CUPTI's start) */
static _Atomic int g_pat = -1;   /* index in patterns() of the pattern that counts */
static _Atomic uint64_t g_next;  /* number of the next range-marked step */
static _Atomic int g_api;        /* tprof_step_begin was called: names no longer count */
static const char *g_user_pat;   /* TRAINPROF_STEP_NAME, or NULL */
static _Atomic int g_req;        /* detail request pending: 0 none, 1 off, 2 on */
static _Atomic int g_cap;        /* GPU activity wanted now (the plan or an on-demand window) */
static _Atomic uint64_t g_cur;   /* the last step begun + 1; 0: none yet */
static _Atomic uint64_t g_step_ns; /* mean time between step beginnings (ns, moving average) */

/* An on-demand window (tprof__kwin_demand) waiting to be taken by the next step that begins:
 * g_dem_lock guards only these three numbers and is never held while anything else is
 * called, so that any thread (the flusher, the job's) may ask without ever waiting on a
 * step in progress. */
static pthread_mutex_t g_dem_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_pfirst, g_pcount, g_pid; /* g_pfirst UINT64_MAX: the next step */
static _Atomic int g_dem_new;

/* Changed under g_lock, by the thread that begins a step (the lock orders the transitions
 * and the metadata they write; it is taken before the sources' window and the session's
 * lock, never after them). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tprof__kplan g_plan;
static char g_spec[TPROF__KPLAN_SPEC_MAX + 1]; /* the plan as given ("auto" by default) */
static uint64_t g_widx, g_lo, g_hi;  /* the window ahead or open */
static int g_settle;             /* a window closed: one more "off" at the next step */
static int g_first_on, g_first_off; /* kernel_steps.on_ns / off_ns written */
static uint64_t g_on_since;      /* capture on since (ns), 0: off */
static int g_dem_ahead, g_dem_in;  /* an on-demand window g_dlo..g_dhi ahead; one open */
static uint64_t g_dlo, g_dhi;
static uint64_t g_ihi;           /* the last step of the open one (apart from the one ahead,
                                  * so that a window asked for while one is open does not
                                  * stretch the open one over the steps between them) */
static uint64_t g_now;           /* when the step being begun began: every switch of it */
static char g_dem_list[512];     /* gpu_capture.requests: "id:first-last,..." as taken */
static size_t g_dem_len;
static char g_list[KW_LIST_BYTES]; /* the page's closed windows, "on-off,..." */
static size_t g_list_len;
static unsigned g_page = 1;      /* the page g_list is (1: gpu_capture.windows) */
static int g_list_full;          /* a window did not fit in the last page: later ones are
                                  * only counted */
static uint64_t g_left_out;

static const char *const k_defaults[] = {TPROF_DEFAULT_STEP_NAMES};
#define N_DEFAULTS (sizeof k_defaults / sizeof *k_defaults)
#define N_PATTERNS (2 + N_DEFAULTS)

/* The first bytes a name matched by pattern i may begin with (bit c of g_first[i]; all of
 * them when the pattern begins with a glob character), and in g_first[N_PATTERNS] those of
 * any pattern that may count: most range names ("forward", "aten::mm", "nccl:all_reduce")
 * are told apart from every step pattern by one bit test, so that counting steps, which the
 * default plan does for the whole run, costs a range push a load and a test rather than a
 * string compare per pattern and a fnmatch. Set once by tprof__kwin_init. */
static uint64_t g_first[N_PATTERNS + 1][4];
static void first_bytes(void);

/* The window g_widx, moved on to the first one whose end is not below step k: 0, or -1 when
 * the plan has no window left. */
static int seek_window(uint64_t k) {
    if (g_plan.every && g_hi < k) { /* the first i with hi0 + i * every >= k, directly */
        uint64_t d = k - g_plan.hi[0]; /* > 0: g_hi >= hi0 */
        uint64_t i = d / g_plan.every + (d % g_plan.every != 0);
        if (i > g_widx) g_widx = i;
    }
    for (;;) {
        if (tprof__kplan_window(&g_plan, g_widx, &g_lo, &g_hi) != 0) return -1;
        if (g_hi >= k) return 0;
        g_widx++;
    }
}

/* Under g_lock: the page being filled, its closed windows and the open one ("on_ns-"). */
static void write_list(void) {
    char v[KW_LIST_BYTES + 32], key[40];
    memcpy(v, g_list, g_list_len + 1);
    if (g_on_since)
        snprintf(v + g_list_len, sizeof v - g_list_len, "%s%llu-", g_list_len ? "," : "",
                 (unsigned long long)g_on_since);
    tprof__meta_page_key(key, sizeof key, "gpu_capture.windows", g_page);
    tprof__set_meta(key, v);
}

/* Under g_lock: the next page, empty (its value is written with its first window); or, past
 * the last, the list full. */
static void next_page(void) {
    if (g_page >= KW_PAGES) {
        g_list_full = 1;
        return;
    }
    g_page++;
    g_list_len = 0;
    g_list[0] = 0;
}

/* Capture went on (1) or off (0) at `now` (under g_lock): the list of windows follows. Once a
 * window did not fit in the last page, later ones are only counted (the pages hold the first
 * ones). */
static void note_capture(int on, uint64_t now) {
    if (on == (g_on_since != 0)) return;
    if (on) {
        g_on_since = now ? now : 1;
        /* the closed form (43 bytes at most) is longer than the open one: a window opens on
         * the page that will hold it closed */
        if (!g_list_full && g_list_len + 43 >= KW_LIST_BYTES) next_page();
        if (!g_list_full) write_list();
        return;
    }
    char e[48];
    int w = snprintf(e, sizeof e, "%s%llu-%llu", g_list_len ? "," : "",
                     (unsigned long long)g_on_since, (unsigned long long)now);
    g_on_since = 0;
    if (!g_list_full && w > 0 && g_list_len + (size_t)w < KW_LIST_BYTES) {
        memcpy(g_list + g_list_len, e, (size_t)w + 1);
        g_list_len += (size_t)w;
        write_list();
        return;
    }
    g_list_full = 1;
    char c[24];
    snprintf(c, sizeof c, "%llu", (unsigned long long)++g_left_out);
    tprof__set_meta("gpu_capture.windows_left_out", c);
}

/* The plan from the environment into g_plan and g_spec; 0, or -1 (with the warning) when
 * it is malformed: then every step is captured. */
static int read_plan(void) {
    const char *gc = tprof__env(TPROF__OPT_GPU_CAPTURE);
    const char *ks = tprof__env(TPROF__OPT_KERNEL_STEPS);
    g_plan.mode = TPROF__KPLAN_ALL;
    g_plan.from_start = 0;
    snprintf(g_spec, sizeof g_spec, "all");
    if (gc && *gc) {
        if (ks && *ks)
            tprof__log(TPROF_LOG_WARN, "TRAINPROF_KERNEL_STEPS=\"%.40s\" ignored: "
                       "TRAINPROF_GPU_CAPTURE is set", ks);
        const char *why = tprof__kplan_parse(gc, &g_plan);
        if (why) {
            tprof__log(TPROF_LOG_WARN, "TRAINPROF_GPU_CAPTURE=\"%.60s\" ignored (%s): GPU "
                       "activity is captured in every step", gc, why);
            return -1;
        }
        snprintf(g_spec, sizeof g_spec, "%s", gc);
        return 0;
    }
    if (!ks || !*ks) { /* neither: the default plan */
        const char *def = tprof__option_row(TPROF__OPT_GPU_CAPTURE)->def;
        if (tprof__kplan_parse(def, &g_plan) == NULL) snprintf(g_spec, sizeof g_spec, "%s", def);
        return 0;
    }
    uint64_t lo, hi;
    if (tprof__kwin_parse(ks, &lo, &hi) != 0 || strlen(ks) > TPROF__KPLAN_SPEC_MAX) {
        tprof__log(TPROF_LOG_WARN,
                   "TRAINPROF_KERNEL_STEPS=\"%.60s\" is not A-B, A or A-: GPU activity is "
                   "captured in every step",
                   ks);
        return -1;
    }
    g_plan.mode = TPROF__KPLAN_WINDOWS;
    g_plan.n = 1;
    g_plan.every = 0;
    g_plan.lo[0] = lo;
    g_plan.hi[0] = hi;
    g_plan.from_start = 0;
    snprintf(g_spec, sizeof g_spec, "%s", ks);
    return 0;
}

int tprof__kwin_plan_off(void) {
    const char *gc = tprof__env(TPROF__OPT_GPU_CAPTURE);
    return gc && !strcmp(gc, "off");
}

void tprof__kwin_init(void) {
    /* a forked child's copy may be held by a thread that is not in the child */
    pthread_mutex_init(&g_lock, NULL);
    atomic_store(&g_state, KW_ALL);
    atomic_store(&tprof__kwin_watch, 0);
    atomic_store(&g_req, 0);
    pthread_mutex_init(&g_dem_lock, NULL);
    atomic_store(&g_dem_new, 0);
    atomic_store(&g_cur, 0);
    atomic_store(&g_step_ns, 0);
    g_dem_ahead = g_dem_in = 0;
    g_ihi = 0;
    g_dem_len = 0;
    g_dem_list[0] = 0;
    g_now = 0;
    const char *u = tprof__env(TPROF__OPT_STEP_NAME);
    g_user_pat = u && *u ? u : NULL; /* step names also count for detail requests */
    first_bytes();
    atomic_store(&g_pat, -1);
    atomic_store(&g_next, 0);
    atomic_store(&g_api, 0);
    g_settle = g_first_on = g_first_off = g_list_full = 0;
    g_list_len = 0;
    g_list[0] = 0;
    g_page = 1;
    g_left_out = 0;
    g_widx = 0;
    read_plan();
    g_on_since = g_plan.mode == TPROF__KPLAN_ALL ? tprof__now() : 0;
    atomic_store(&g_cap, g_plan.mode == TPROF__KPLAN_ALL);
    if (g_plan.mode == TPROF__KPLAN_OFF) {
        atomic_store(&g_state, KW_NONE);
    } else if (g_plan.mode == TPROF__KPLAN_WINDOWS) {
        g_hi = 0;
        seek_window(0);
        atomic_store(&g_state, KW_BEFORE);
        if (g_plan.from_start) { /* the first window is open from now on */
            atomic_store(&g_state, KW_INSIDE);
            atomic_store(&g_cap, 1);
            g_on_since = tprof__now();
            g_first_on = 1;
        }
        atomic_store(&tprof__kwin_watch, 1);
    }
}

/* As the file starts (the session's writer, `put`): the plan, and its first window as the one
 * window of older readers. */
void tprof__kwin_start_meta(void (*put)(const char *key, const char *value)) {
    put("gpu_capture", g_spec);
    if (g_plan.mode != TPROF__KPLAN_WINDOWS) return;
    uint64_t lo, hi;
    if (tprof__kplan_window(&g_plan, 0, &lo, &hi) != 0) return;
    char v[48];
    if (hi == UINT64_MAX) snprintf(v, sizeof v, "%llu-", (unsigned long long)lo);
    else if (hi == lo) snprintf(v, sizeof v, "%llu", (unsigned long long)lo);
    else snprintf(v, sizeof v, "%llu-%llu", (unsigned long long)lo, (unsigned long long)hi);
    put("kernel_steps", v);
    if (!g_plan.from_start) {
        put("gpu_capture.windows", ""); /* none opened yet */
        return;
    }
    /* open since the session started */
    char on[32];
    snprintf(on, sizeof on, "%llu", (unsigned long long)g_on_since);
    put("kernel_steps.on_ns", on);
    snprintf(on, sizeof on, "%llu-", (unsigned long long)g_on_since);
    put("gpu_capture.windows", on);
}

const char *tprof__kwin_spec(void) { return g_spec; }

int tprof__kwin_active(void) { return atomic_load(&g_state) != KW_ALL; }

int tprof__kwin_capture_now(void) { return atomic_load(&g_cap); }

static int plan_on(int s) { return s == KW_ALL || s == KW_INSIDE || s == KW_MANUAL_ON; }

int tprof__kwin_demand(uint64_t first, uint64_t count, uint64_t id) {
    int s = atomic_load(&g_state);
    if (s == KW_NONE) return TPROF_ERR_UNAVAILABLE; /* CUPTI never loaded */
    if (s == KW_ALL) return TPROF_ERR_ALREADY;      /* every step is captured */
    if (!count || (first != UINT64_MAX && count - 1 > UINT64_MAX - 1 - first))
        return TPROF_ERR_INVALID_ARG;
    pthread_mutex_lock(&g_dem_lock);
    g_pfirst = first;
    g_pcount = count;
    g_pid = id;
    pthread_mutex_unlock(&g_dem_lock);
    atomic_store(&g_dem_new, 1);
    atomic_store(&tprof__kwin_watch, 1); /* after the request, as tprof__kwin_request */
    return 0;
}

int tprof_gpu_capture_steps(uint64_t first, uint64_t count) {
    if (!tprof_enabled()) return TPROF_ERR_DISABLED;
    return tprof__kwin_demand(first, count, 0);
}

int tprof_gpu_capture_on(void) {
    return tprof_enabled() && atomic_load(&g_state) != KW_NONE && atomic_load(&g_cap);
}

int tprof__kwin_progress(uint64_t *step, uint64_t *step_ns) {
    uint64_t c = atomic_load(&g_cur);
    *step = c ? c - 1 : 0;
    *step_ns = atomic_load(&g_step_ns);
    return c ? 0 : -1;
}

int tprof__kwin_request(int on) {
    if (atomic_load(&g_state) == KW_NONE) return TPROF_ERR_UNAVAILABLE; /* CUPTI never loaded */
    atomic_store(&g_req, on ? 2 : 1);
    atomic_store(&tprof__kwin_watch, 1); /* after the request: see step_began */
    return 0;
}

/* key = ns, a time of the switch in the file's metadata */
static void meta_ns(const char *key, uint64_t ns) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)ns);
    tprof__set_meta(key, v);
}

/* Under g_lock, on the thread that begins a step: a pending detail request. 1 if one was
 * applied. */
static int apply_request(uint64_t k) {
    int r = atomic_exchange(&g_req, 0);
    if (!r) return 0;
    int on = r == 2;
    atomic_store(&g_state, on ? KW_MANUAL_ON : KW_MANUAL_OFF);
    meta_ns(on ? "capture.detail_on_ns" : "capture.detail_off_ns", g_now);
    tprof__metrics_detail(on);
    tprof__log(TPROF_LOG_INFO, "detailed capture %s at step %llu (metrics endpoint)",
               on ? "on" : "off", (unsigned long long)k);
    return 1;
}

/* Under g_lock: the plan's window g_widx opens at step k (capture follows in apply). */
static void open_window(uint64_t k) {
    atomic_store(&g_state, KW_INSIDE);
    if (!g_first_on) {
        g_first_on = 1;
        meta_ns("kernel_steps.on_ns", g_now);
    }
    tprof__log(TPROF_LOG_INFO, "kernel capture window of the plan opens at step %llu",
               (unsigned long long)k);
}

/* Under g_lock: the plan's open window closes at step k; `more`: a window is ahead. */
static void close_window(uint64_t k, int more) {
    atomic_store(&g_state, more ? KW_BEFORE : KW_AFTER);
    if (!g_first_off) {
        g_first_off = 1;
        meta_ns("kernel_steps.off_ns", g_now);
    }
    tprof__log(TPROF_LOG_INFO, "kernel capture window of the plan closes at step %llu",
               (unsigned long long)k);
}

/* Under g_lock, once per step after the plan's and the on-demand window's changes: capture
 * is on while the plan's state or an on-demand window says so, and the sources are told only
 * when the two together change it, so a window that ends where another begins leaves CUPTI
 * as it is. Going off asks for the second "off" one step later (g_settle: CUPTI detaches
 * then); going on calls off a pending one. */
static void apply(uint64_t k) {
    int on = plan_on(atomic_load(&g_state)) || g_dem_in;
    if (on == atomic_load(&g_cap)) return;
    atomic_store(&g_cap, on);
    g_settle = !on;
    tprof__sources_window(on);
    note_capture(on, g_now);
    tprof__log(TPROF_LOG_INFO, "GPU activity capture %s at step %llu", on ? "on" : "off",
               (unsigned long long)k);
}

/* Under g_lock: gpu_capture.requests gets "id:first-last" of an on-demand window taken (the
 * first ones that fit; later ones are in gpu_capture.windows all the same). */
static void note_demand(uint64_t id) {
    char e[72];
    int w = snprintf(e, sizeof e, "%s%llu:%llu-%llu", g_dem_len ? "," : "",
                     (unsigned long long)id, (unsigned long long)g_dlo,
                     (unsigned long long)g_dhi);
    if (w <= 0 || g_dem_len + (size_t)w >= sizeof g_dem_list) return;
    memcpy(g_dem_list + g_dem_len, e, (size_t)w + 1);
    g_dem_len += (size_t)w;
    tprof__set_meta("gpu_capture.requests", g_dem_list);
}

/* Under g_lock at step k: a pending on-demand request becomes the window ahead (the next
 * step: k itself), merged with one open now when they touch; then the window ahead opens
 * when its first step begins, and the open one closes at the first step past it. A request
 * whose steps are all past is only logged. */
static void demand_step(uint64_t k) {
    if (atomic_exchange(&g_dem_new, 0)) {
        pthread_mutex_lock(&g_dem_lock);
        uint64_t first = g_pfirst, count = g_pcount, id = g_pid;
        pthread_mutex_unlock(&g_dem_lock);
        if (first == UINT64_MAX) first = k;
        uint64_t last = count - 1 > UINT64_MAX - first ? UINT64_MAX : first + count - 1;
        if (last < k) {
            tprof__log(TPROF_LOG_WARN, "GPU capture request for steps %llu-%llu came at step "
                       "%llu, after them: nothing captured for it",
                       (unsigned long long)first, (unsigned long long)last,
                       (unsigned long long)k);
        } else if (g_dem_in && (g_ihi == UINT64_MAX || first <= g_ihi + 1)) {
            if (last > g_ihi) g_ihi = last;
        } else {
            g_dem_ahead = 1;
            g_dlo = first > k ? first : k;
            g_dhi = last;
            if (first < k)
                tprof__log(TPROF_LOG_WARN, "GPU capture request for steps %llu-%llu came at "
                           "step %llu: captured from there", (unsigned long long)first,
                           (unsigned long long)last, (unsigned long long)k);
            note_demand(id);
        }
    }
    if (g_dem_in && k > g_ihi) g_dem_in = 0;
    if (g_dem_ahead && k >= g_dlo) { /* begins: on its own, or extending the open one */
        g_dem_ahead = 0;
        if (k <= g_dhi) {
            if (!g_dem_in || g_dhi > g_ihi) g_ihi = g_dhi;
            g_dem_in = 1;
        }
    }
}

static void step_began(uint64_t k) {
    pthread_mutex_lock(&g_lock);
    uint64_t now = tprof__now(), last = g_now; /* the previous step's begin, 0: none */
    g_now = now;
    if (last && now > last) {
        uint64_t d = now - last, m = atomic_load(&g_step_ns);
        atomic_store(&g_step_ns, m ? m - m / 8 + d / 8 : d);
    }
    atomic_store(&g_cur, k + 1);
    int settle = g_settle; /* pending since an earlier step */
    if (!(atomic_load(&g_req) && apply_request(k))) {
        int s = atomic_load(&g_state);
        if (s == KW_INSIDE && k > g_hi) {
            int ahead = seek_window(k) == 0;
            /* with steps numbered past the gap the next window may already be here:
             * capture then stays on */
            if (!ahead || g_lo > k) close_window(k, ahead);
        } else if (s == KW_BEFORE && k >= g_lo) {
            if (seek_window(k) != 0) atomic_store(&g_state, KW_AFTER);
            else if (g_lo <= k) open_window(k);
        }
    }
    demand_step(k);
    apply(k);
    /* a step after capture went off (its last kernels have finished): the sources may now
     * let go of what they kept (CUPTI detaches: capture/cupti.c) */
    if (settle && g_settle) {
        g_settle = 0;
        tprof__sources_window(0);
    }
    /* The watch stays raised: steps are counted for as long as a window may still come,
     * from the plan or asked for, and on-demand windows are possible whenever the plan is
     * not "all" or "off", whose states never raise it (a request under "all" moves it to a
     * manual state first). */
    pthread_mutex_unlock(&g_lock);
}

/* Pattern i: 0 = the user's, 1 = ProfilerStep#*, 2.. = the defaults. */
static const char *pattern(int i) {
    return i == 0 ? g_user_pat : i == 1 ? TPROF_PROFILER_STEP_GLOB : k_defaults[i - 2];
}

static int matches(int i, const char *name) {
    const char *pat = pattern(i);
    return pat && tprof__step_name_matches(name, pat);
}

/* g_first from the patterns (the user's, when given, is the only one that counts). */
static void first_bytes(void) {
    memset(g_first, 0, sizeof g_first);
    for (int i = 0; i < (int)N_PATTERNS; i++) {
        const char *pat = pattern(i);
        if (!pat) continue;
        unsigned char c = (unsigned char)pat[0];
        if (strchr("*?[\\", c) && c) memset(g_first[i], 0xff, sizeof g_first[i]);
        else g_first[i][c >> 6] |= 1ull << (c & 63);
        if (g_user_pat ? i == 0 : i > 0)
            for (int w = 0; w < 4; w++) g_first[N_PATTERNS][w] |= g_first[i][w];
    }
}

void tprof__kwin_name(const char *name) {
    if (!name || atomic_load_explicit(&g_api, memory_order_relaxed)) return;
    int p = atomic_load_explicit(&g_pat, memory_order_relaxed);
    unsigned char c = (unsigned char)name[0];
    if (!(g_first[p < 0 ? (int)N_PATTERNS : p][c >> 6] >> (c & 63) & 1)) return; /* cannot match */
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
