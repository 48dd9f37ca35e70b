/*
 * test_cupti_share.c — CUPTI shared with another client of the program's (Kineto, any CUPTI
 * tool) through libtrainprof's definitions of its calls (capture/cupti_client.c), against the
 * scripted libcupti (fake_cupti.c), each scenario in a child process of its own
 * (cupti_test.h):
 *
 *   calls from our call  the client turns a kind off and subscribes from inside a CUPTI call
 *              of trainprof's (CUPTI runs callbacks inside its calls), on the same thread and
 *              on another one that the call waits for: neither deadlocks (an alarm ends a
 *              child that hangs); on the same thread the subscription succeeds and gets the
 *              calls, and trainprof's kernel kind comes back on; on another thread the client's
 *              call returns within 0.1 s
 *   clock      while the client holds CUPTI, CUPTI's clock is its own default (real time), not
 *              trainprof's (monotonic); trainprof's comes back with capture, and a clock the
 *              client registered is given back to it at its next window
 *   enable only  the client turns its kinds on for a second window without registering again:
 *              its records reach its own callbacks, not trainprof's file, and capture comes back
 *              after the window
 *   reasons    a pause named "torch.profiler" (trainprof.torch's), then one for another CUPTI
 *              client: each pause keeps its reason (gpu_capture.pause_reasons)
 *   many pauses  3,000 pauses, more than gpu_capture.pauses' 64 pages have room for: each
 *              listed one keeps its reason; the last listed one reaches the end of the last
 *              pause, and the rest are counted as merged
 *   no steps   a program whose steps trainprof does not see: capture comes back once the
 *              client has made no CUPTI call for 1 s (a later call of the client's, a flush,
 *              puts it off), never sooner (waited for up to 30 s: a loaded sanitizer run's
 *              flusher can be slow)
 *   busy       a client that calls CUPTI without pause keeps it: capture never comes back
 *   (the "not yet" checks hold only where this thread really ran within the quiet second: a
 *   loaded machine that held it longer lets capture rightly come back, which proves nothing)
 */
#define CHILD_PREFIX "cupti-share"
#include "cupti_test.h"

#include <pthread.h>
#include <signal.h>

static _Atomic int g_other_buffers; /* buffers CUPTI asked of the other client */
static void CUPTIAPI other_req(uint8_t **buf, size_t *size, size_t *max) {
    static uint8_t mem[1 << 16] __attribute__((aligned(8)));
    g_other_buffers++;
    *buf = mem;
    *size = sizeof mem;
    *max = 0;
}
static void CUPTIAPI other_done(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid) {
    (void)c, (void)s, (void)buf, (void)size, (void)valid;
}
static _Atomic int g_other_calls;
static void CUPTIAPI other_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                              const void *data) {
    (void)ud, (void)d, (void)id, (void)data;
    g_other_calls++;
}

typedef uintptr_t (*deliver_fn)(int, int, uint64_t);
static void *g_h; /* the fake libcupti */
static deliver_fn g_deliver;

/* A session on the fake with capture plan `plan`, CUPTI started; the fake found. */
static void share_start(const char *plan) {
    alarm(20); /* a deadlock ends the child, and the test fails */
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", plan, 1);
    start_session();
    CHECK(InitializeInjection() == 1, 10);
    g_h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(g_h != NULL, 11);
    *(void **)&g_deliver = dlsym(g_h, "fake_cupti_deliver");
    CHECK(g_deliver != NULL, 12);
}

/* The program's call of a CUPTI function: the first definition in the lookup order
 * (libtrainprof's, as preloaded), else its libcupti's. */
static void *program_fn(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    return f ? f : dlsym(g_h, name);
}
static CUptiResult client_enable(CUpti_ActivityKind kind) {
    CUptiResult (*f)(CUpti_ActivityKind);
    *(void **)&f = program_fn("cuptiActivityEnable");
    return f(kind);
}
static CUptiResult client_clock_set(CUpti_TimestampCallbackFunc fn) {
    CUptiResult (*f)(CUpti_TimestampCallbackFunc);
    *(void **)&f = program_fn("cuptiActivityRegisterTimestampCallback");
    return f(fn);
}

static int kind_on(int k) {
    int (*f)(int);
    *(void **)&f = dlsym(g_h, "fake_cupti_kind_on");
    return f && f(k);
}

/* Waits (5 s at most) for the flusher to take CUPTI back: registrations up to `regs`, then
 * trainprof's kernel kind on. */
static void taken_back(int n) {
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers");
    for (int i = 0; i < 500 && (regs() < n || !kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
         i++)
        usleep(10000);
}

/* ---------------------------------------------------------------- calls from our call */

static CUpti_SubscriberHandle g_other_sub;
static CUptiResult g_sub_result;
static uint64_t g_call_ns;

/* the client, inside trainprof's CUPTI call: a kind off (tidying up) and a subscription */
static void client_calls(void) {
    uint64_t t = mono_ns();
    if (cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) _exit(40);
    g_sub_result = cuptiSubscribe(&g_other_sub, other_cb, NULL);
    g_call_ns = mono_ns() - t;
}
static void *client_thread(void *arg) {
    (void)arg;
    client_calls();
    return NULL;
}
/* the same on another thread, which trainprof's call waits for (as CUPTI's flush waits for
 * its worker thread delivering buffers) */
static void client_calls_elsewhere(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, client_thread, NULL) != 0) _exit(41);
    pthread_join(t, NULL);
}

static int g_elsewhere;
static void calls_body(void) {
    share_start("1-2");
    void (*in_enable)(int, void (*)(void));
    *(void **)&in_enable = dlsym(g_h, "fake_cupti_in_enable");
    fake_int_fn api_exit = fake_fn(g_h, "fake_cupti_api_exit"),
                subs = fake_fn(g_h, "fake_cupti_subscribers");
    CHECK(in_enable && api_exit && subs, 20);
    CHECK(subs() == 1, 21); /* trainprof's, for failed allocations */
    tprof_step_begin(0);
    tprof_step_end(0);
    /* the window opens at step 1: trainprof turns its kinds on, holding its lock; the client's
     * calls come from inside its last one */
    in_enable(CUPTI_ACTIVITY_KIND_OVERHEAD, g_elsewhere ? client_calls_elsewhere : client_calls);
    tprof_step_begin(1);
    CHECK(g_call_ns > 0, 22); /* the calls ran */
    if (g_elsewhere) {
        /* trainprof's subscriber could not be given up in time: CUPTI refused the client's */
        CHECK(g_sub_result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 23);
        CHECK(g_call_ns < 1000000000ull, 24);
    } else {
        CHECK(g_sub_result == CUPTI_SUCCESS, 25);
        CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
        *(void **)&enable_domain = dlsym(g_h, "cuptiEnableDomain");
        CHECK(enable_domain &&
                  enable_domain(1, g_other_sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS,
              26);
        CHECK(api_exit() == 1 && g_other_calls == 1, 27); /* the client's subscriber */
    }
    /* the kernel kind the client turned off is trainprof's: back on by the next flusher pass */
    for (int i = 0; i < 500 && !kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); i++)
        usleep(10000);
    CHECK(kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 28);
    CHECK(g_deliver(1, 0, g_t0) != 0, 29);
    tprof_step_end(1);
    tprof_step_begin(2);
    tprof_step_end(2);
    tprof_step_begin(3); /* the window closes: the client's subscriber stays its own */
    CHECK(subs() == 1, 30);
    if (!g_elsewhere) CHECK(api_exit() == 1 && g_other_calls == 2, 31);
    tprof_step_end(3);
}

static void test_calls_from_our_call(void **state) {
    (void)state;
    for (g_elsewhere = 0; g_elsewhere < 2; g_elsewhere++) {
        fresh_dir(g_elsewhere ? "calls-elsewhere" : "calls");
        g_t0 = mono_ns() + 1000000000ull;
        in_child(calls_body);
        tp_run run;
        load(&run);
        assert_int_equal(kernel_corrs(&run.procs[0], NULL, 0), 1);
        tp_run_free(&run);
    }
}

/* ---------------------------------------------------------------- clock */

static uint64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static int near(uint64_t a, uint64_t b) { return (a > b ? a - b : b - a) < 1000000000ull; }
static uint64_t CUPTIAPI client_clock(void) { return 42; }

/* The client's window in `step`: its clock registered first (with_clock), its buffers, kernels
 * on, the registered clock read into g_seen_clock, kernels off and flushed; capture comes back
 * at the next step. `code`: the first of its CHECK codes. */
static uint64_t g_seen_clock;
static void client_window(uint64_t step, int with_clock, uint64_t (*clock)(void), int code) {
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers");
    const int before = regs();
    tprof_step_begin(step);
    if (with_clock)
        CHECK(client_clock_set(client_clock) == CUPTI_SUCCESS, code);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, code + 1);
    CHECK(client_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, code + 2);
    g_seen_clock = clock();
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, code + 4);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, code + 5);
    tprof_step_end(step);
    tprof_step_begin(step + 1);
    taken_back(before + 2);
    CHECK(regs() == before + 2 && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), code + 6);
    tprof_step_end(step + 1);
}

static void clock_body(void) {
    share_start("all");
    uint64_t (*clock)(void);
    *(void **)&clock = dlsym(g_h, "fake_cupti_clock");
    CHECK(clock != NULL, 50);
    CHECK(near(clock(), mono_ns()), 51); /* trainprof's: CLOCK_MONOTONIC */
    /* a client without a clock of its own: CUPTI's default, the real-time clock */
    client_window(0, 0, clock, 52);
    CHECK(near(g_seen_clock, real_ns()) && !near(g_seen_clock, mono_ns()), 60);
    CHECK(near(clock(), mono_ns()), 61); /* trainprof's again */
    /* a client with its own clock: its clock; then a window in which it does not register it
     * again: still its clock */
    client_window(2, 1, clock, 62);
    CHECK(g_seen_clock == 42, 70);
    CHECK(near(clock(), mono_ns()), 71);
    client_window(4, 0, clock, 72);
    CHECK(g_seen_clock == 42, 80);
    CHECK(near(clock(), mono_ns()), 81);
}

static void test_clock(void **state) {
    (void)state;
    fresh_dir("clock");
    in_child(clock_body);
}

/* ---------------------------------------------------------------- enable only */

static void enable_only_body(void) {
    share_start("all");
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers"),
                forced = fake_fn(g_h, "fake_cupti_forced");
    CHECK(regs && forced, 90);
    tprof_step_begin(0);
    CHECK(g_deliver(1, 0, g_t0) != 0, 91); /* trainprof's */
    tprof_step_end(0);
    /* the client's first window: registered, kernels on, off, flushed */
    tprof_step_begin(1);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 92);
    CHECK(client_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 93);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 94);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 95);
    tprof_step_end(1);
    tprof_step_begin(2);
    taken_back(3);
    CHECK(regs() == 3 && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 96); /* trainprof's */
    tprof_step_end(2);
    /* its second window: kernels on, without registering again */
    tprof_step_begin(3);
    const int f0 = forced(), b0 = g_other_buffers;
    CHECK(client_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 97);
    CHECK(forced() > f0, 98); /* trainprof's records flushed first */
    CHECK(g_deliver(1, 0, g_t0 + 3000000) != 0 && g_other_buffers == b0 + 1, 99); /* the client's */
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 100);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 101);
    tprof_step_end(3);
    tprof_step_begin(4);
    taken_back(5);
    CHECK(regs() == 5 && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 102); /* trainprof's */
    CHECK(g_deliver(1, 0, g_t0 + 4000000) != 0 && g_other_buffers == b0 + 1, 103);
    tprof_step_end(4);
}

static void test_enable_only(void **state) {
    (void)state;
    fresh_dir("enable-only");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(enable_only_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(kernel_corrs(p, NULL, 0), 2); /* steps 0 and 4: the client's is its own */
    const char *pauses = tp_meta(p, "gpu_capture.pauses");
    unsigned long long a, b, c, d;
    assert_non_null(pauses);
    assert_int_equal(sscanf(pauses, "%llu-%llu,%llu-%llu", &a, &b, &c, &d), 4);
    assert_true(a < b && b < c && c < d);
    tp_run_free(&run);
}

/* ---------------------------------------------------------------- no steps */

static void no_steps_body(void) {
    share_start("all");
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers");
    CHECK(regs != NULL, 130);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 131);
    CHECK(client_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 132);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 133);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 134);
    uint64_t flushed = mono_ns();
    usleep(600000);
    /* still the client's, unless a loaded machine held this thread past the quiet second
     * (then nothing can be said: capture may rightly have come back) */
    int held = regs() == 2;
    CHECK(held || mono_ns() - flushed >= 900000000ull, 135);
    /* its trace processing flushes once more: the quiet time counts from this call */
    uint64_t last = mono_ns();
    CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS, 136);
    alarm(40);
    /* taken back: registered, then (a moment later, on the flusher) its kernel kind on */
    while ((regs() < 3 || !kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) &&
           mono_ns() - last < 30000000000ull)
        usleep(10000);
    uint64_t back = mono_ns();
    CHECK(regs() == 3 && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 137); /* trainprof's */
    CHECK(back - last >= 1000000000ull, 138);
}

static void test_no_steps(void **state) {
    (void)state;
    fresh_dir("no-steps");
    in_child(no_steps_body);
}

/* A client that never stops calling CUPTI (here it flushes without pause for 3 s, after its
 * window): capture stays the client's throughout, whichever of the two threads reads the
 * clock last (a call timed after the flusher's clock reading is no quiet second). */
static void busy_client_body(void) {
    share_start("all");
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers");
    CHECK(regs != NULL, 140);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 141);
    CHECK(client_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 142);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 143);
    uint64_t t0 = mono_ns(), last = t0, gap = 0;
    while (mono_ns() - t0 < 3000000000ull && regs() == 2) {
        CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS, 144);
        uint64_t now = mono_ns();
        if (now - last > gap) gap = now - last;
        last = now;
    }
    /* still the client's, unless a loaded machine held this thread between two of its calls
     * for most of the quiet second (then capture may rightly have come back) */
    CHECK(regs() == 2 || gap >= 900000000ull, 145);
}

static void test_busy_client(void **state) {
    (void)state;
    fresh_dir("busy-client");
    in_child(busy_client_body);
}

/* ---------------------------------------------------------------- many pauses */

#define MANY_PAUSES 3000 /* past 64 pages of 23 (20-digit times) to 44 (10-digit ones) */
static uint64_t g_last_pause_ns;
static void many_pauses_body(void) {
    share_start("all");
    for (int i = 0; i < MANY_PAUSES; i++) {
        char why[16];
        snprintf(why, sizeof why, "p%d", i); /* each pause named, as trainprof.torch names its */
        CHECK(tprof_set_metadata("gpu_capture.pause_reason", why) == TPROF_OK, 153);
        tprof_step_begin((uint64_t)i);
        CHECK(tprof_gpu_capture_pause() == TPROF_OK, 150);
        g_last_pause_ns = mono_ns();
        CHECK(tprof_gpu_capture_resume() == TPROF_OK, 151);
        tprof_step_end((uint64_t)i);
    }
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)g_last_pause_ns);
    CHECK(tprof_set_metadata("test.last_pause_ns", v) == TPROF_OK, 152);
}

/* The pauses go on in pages (gpu_capture.pauses.2, ...; their reasons in
 * gpu_capture.pause_reasons.2, ... beside them), up to 64: each listed pause keeps its own
 * reason; past the last page the last listed pause reaches the end of the last pause, and the
 * rest are counted as merged. */
static void test_many_pauses(void **state) {
    (void)state;
    fresh_dir("many-pauses");
    in_child(many_pauses_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const char *merged = tp_meta(p, "gpu_capture.pauses_merged"),
               *last = tp_meta(p, "test.last_pause_ns");
    assert_non_null(merged);
    assert_non_null(last);
    unsigned pages = 0;
    while (tp_meta_page(p, "gpu_capture.pauses", pages + 1)) pages++;
    assert_int_equal(pages, 64);
    size_t listed = tp_capture_npauses(p);
    assert_true(listed > 64 * 20);
    assert_int_equal(listed + strtoull(merged, NULL, 10), MANY_PAUSES);
    tp_capture_pause *v = NULL;
    size_t n = 0;
    assert_int_equal(tp_capture_pause_list(p, &v, &n), TPROF_OK);
    assert_int_equal(n, listed);
    const char **rs = calloc(listed, sizeof *rs);
    size_t *rl = calloc(listed, sizeof *rl);
    assert_non_null(rs);
    assert_non_null(rl);
    tp_capture_pause_reasons(p, rs, rl, listed);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof want, "p%zu", i);
        const char *r = rs[v[i].at];
        size_t len = rl[v[i].at];
        assert_non_null(r);
        if (len != strlen(want) || memcmp(r, want, len))
            fail_msg("pause %zu: reason %.*s, not %s", i, (int)len, r, want);
        if (i) assert_true(v[i].from_ns >= v[i - 1].to_ns);
    }
    free(rs);
    free(rl);
    /* the last listed pause ends after the last pause began */
    assert_true(v[n - 1].to_ns >= strtoull(last, NULL, 10));
    free(v);
    tp_run_free(&run);
}

/* ---------------------------------------------------------------- reasons */

static void reasons_body(void) {
    share_start("all");
    /* trainprof.torch names its pause, then pauses around torch.profiler */
    CHECK(tprof_set_metadata("gpu_capture.pause_reason", "torch.profiler") == TPROF_OK, 110);
    tprof_step_begin(0);
    CHECK(tprof_gpu_capture_pause() == TPROF_OK, 111);
    tprof_step_end(0);
    tprof_step_begin(1);
    CHECK(tprof_gpu_capture_resume() == TPROF_OK, 112);
    tprof_step_end(1);
    /* then another CUPTI client of the program's, without trainprof.torch */
    tprof_step_begin(2);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 113);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 114);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 115);
    tprof_step_end(2);
    tprof_step_begin(3);
    fake_int_fn regs = fake_fn(g_h, "fake_cupti_registers");
    taken_back(4);
    CHECK(regs() == 4, 116);
    tprof_step_end(3);
    /* a third pause, named as the first, never resumed */
    CHECK(tprof_gpu_capture_pause() == TPROF_OK, 117);
}

static void test_reasons(void **state) {
    (void)state;
    fresh_dir("reasons");
    in_child(reasons_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const char *pauses = tp_meta(p, "gpu_capture.pauses"),
               *why = tp_meta(p, "gpu_capture.pause_reasons");
    assert_non_null(pauses);
    assert_non_null(why);
    unsigned long long a, b, c, d;
    assert_int_equal(sscanf(pauses, "%llu-%llu,%llu-%llu", &a, &b, &c, &d), 4);
    assert_string_equal(why, "torch.profiler,another CUPTI client,torch.profiler");
    tp_run_free(&run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_from_our_call),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_enable_only),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_no_steps),
        cmocka_unit_test(test_many_pauses),
        cmocka_unit_test(test_busy_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
