/*
 * test_cupti_foreign.c — another CUPTI client in the program (Kineto under torch.profiler, any
 * CUPTI tool), without trainprof.torch: its calls reach libcupti through libtrainprof's
 * definitions (capture/cupti.c, "another CUPTI client"), which hand GPU capture over. Against
 * the scripted libcupti (fake_cupti.c), each scenario in a child process of its own, as
 * tests/test_cupti.c's (cupti_test.h).
 *
 *   foreign client  another CUPTI client of the program registers its buffers: ours are
 *              flushed and capture pauses, its subscription gets CUPTI's one subscriber; when
 *              it turns its kernels off and flushes, the flusher takes capture back once the
 *              program begins its next step, and keeps our kinds on when it tidies up; the
 *              pause is in gpu_capture.pauses, named "another CUPTI client"
 *   subscribe first  the client subscribes before it registers (Kineto in torch 2.11): the
 *              claim comes at the subscription, and our records whose times CUPTI has not
 *              filled in yet are flushed unforced until they are complete, none untimed; a
 *              client that subscribes and never registers has capture back 2 s later
 *   foreign finalize  the other client finalizes CUPTI at the end of its window, and again
 *              under trainprof's capture: capture comes back at the next step each time, and
 *              the kernels' correlation ids stay unique (1, 2, 3, 4) though CUPTI's start over,
 *              and CUPTI's thread ids are the system's again
 *   finalize in our call  the client finalizes while trainprof holds its lock inside a CUPTI
 *              call of its own: the client does not wait, and the next window attaches again
 *   forked child  a child forked from a recording process calls no CUPTI function for
 *              trainprof: its pause answers ERR_UNAVAILABLE, its shutdown flushes nothing
 *   subscribe while detaching  another client's cuptiSubscribe while trainprof's detach
 *              waits for the next CUDA call: the subscription succeeds and gets the calls;
 *              CUPTI stays attached
 *   racing start  the other client registers (another thread) just after trainprof's own
 *              registration as CUDA starts: trainprof starts paused, as for a client that came
 *              first, and takes capture after the client's window
 *   subscribe refused  the client subscribes, then CUPTI refuses its registration: capture
 *              is back at once, not paused to the end of the run
 *   hand-over trace  TRAINPROF_LOG=debug prints the client's calls with the time in the run
 *   foreign refused  a registration of the other client's that CUPTI refuses (a NULL
 *              callback, before or after trainprof's CUPTI started; CUPTI's own refusal)
 *              leaves trainprof's capture on, or has it back at once
 *   private libcupti  the program's libcupti loaded privately (RTLD_LOCAL) and trainprof's
 *              CUPTI off: the program's calls still reach it, with its answers
 */
#define CHILD_PREFIX "cupti-foreign"
#include "cupti_test.h"

/* Another CUPTI client in the program (Kineto under torch.profiler, without trainprof.torch):
 * its calls reach libcupti through trainprof's definitions, which hand capture over. */
static void CUPTIAPI other_req(uint8_t **buf, size_t *size, size_t *max) {
    static uint8_t mem[1 << 16] __attribute__((aligned(8)));
    *buf = mem;
    *size = sizeof mem;
    *max = 0;
}
static void CUPTIAPI other_done(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid) {
    (void)c, (void)s, (void)buf, (void)size, (void)valid;
}

/* The other client's API callback: counts the calls it gets. */
static int g_other_calls;
static void CUPTIAPI other_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                              const void *data) {
    (void)ud, (void)d, (void)id, (void)data;
    g_other_calls++;
}

static void foreign_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 110);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 111);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers"),
                subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(deliver && enabled && regs && subs, 112);
    tprof_step_begin(0);
    CHECK(deliver(2, 0, g_t0) != 0, 113);
    tprof_step_end(0);
    tprof_step_begin(1);
    /* the other client starts by sizing CUPTI's buffers: ours flushed and paused before that
     * reaches CUPTI; then its callbacks registered */
    fake_int_fn forced = fake_fn(h, "fake_cupti_forced");
    int forced_before = forced();
    size_t bytes = 8u << 20, sz = sizeof bytes;
    CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &bytes) ==
              CUPTI_SUCCESS, 125);
    CHECK(enabled() == 1 && forced() > forced_before && regs() == 1, 126);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 114);
    CHECK(enabled() == 1 && subs() == 0 && regs() == 2, 115);
    CHECK(tprof_gpu_capture_pause() == TPROF_ERR_ALREADY, 116);
    CHECK(cuptiSubscribe(&(CUpti_SubscriberHandle){0}, NULL, NULL) == CUPTI_SUCCESS, 117);
    tprof_step_end(1);
    tprof_step_begin(2);
    /* its window ends: kernels off, its last records flushed to it */
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 118);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 119);
    tprof_step_end(2);
    usleep(200000); /* flusher passes: not taken back before the program's next step */
    CHECK(regs() == 2, 124);
    tprof_step_begin(3);
    /* the flusher's next pass: registers, then enables (waited for) */
    for (int i = 0; i < 500 && enabled() < 9; i++) usleep(10000);
    CHECK(regs() == 3 && enabled() == 9, 120); /* ours again */
    /* the client tidies up after its window: our kinds stay on */
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 122);
    CHECK(enabled() == 9, 123);
    CHECK(deliver(1, 0, g_t0 + 3000000) != 0, 121);
    tprof_step_end(3);
}

/* The other client registers before the CUDA driver starts trainprof's CUPTI: trainprof's
 * starts paused, touching nothing of CUPTI's, and takes capture after the client's window. */
static void foreign_early_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_GLOBAL); /* the program's libcupti */
    CHECK(h != NULL, 130);
    start_session();
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 131);
    CHECK(InitializeInjection() == 1, 132);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers"),
                subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(deliver && enabled && regs && subs, 133);
    CHECK(regs() == 1 && enabled() == 0 && subs() == 0, 134); /* the client's alone */
    tprof_step_begin(0);
    tprof_step_end(0);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 135);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 136);
    tprof_step_begin(1);
    for (int i = 0; i < 500 && subs() < 1; i++) usleep(10000); /* registers, then subscribes */
    CHECK(regs() == 2 && subs() == 1, 137);                    /* ours, with our subscriber */
    CHECK(deliver(2, 0, g_t0) != 0, 138);
    tprof_step_end(1);
}

/* A program that only sizes CUPTI's buffers and never registers: the claim made at the sizing
 * is undone 2 s later, capture back with our own callbacks. */
static void sizing_only_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 230);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 231);
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers");
    CHECK(enabled && regs, 232);
    size_t bytes = 8u << 20, sz = sizeof bytes;
    CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &bytes) ==
              CUPTI_SUCCESS, 233);
    CHECK(enabled() == 1 && regs() == 1, 234); /* paused for the client to come */
    /* the resume registers, then enables the kinds: wait for both */
    for (int i = 0; i < 800 && (regs() < 2 || enabled() < 9); i++) usleep(10000);
    CHECK(regs() == 2 && enabled() == 9, 235); /* none came: ours again */
}

static void test_sizing_only(void **state) {
    (void)state;
    fresh_dir("sizing-only");
    in_child(sizing_only_body);
    tp_run run;
    load(&run);
    const char *pauses = tp_meta(&run.procs[0], "gpu_capture.pauses");
    unsigned long long a = 0, b = 0;
    assert_non_null(pauses);
    assert_int_equal(sscanf(pauses, "%llu-%llu", &a, &b), 2);
    assert_true(b - a >= 1900000000ull); /* the 2 s the claim waited */
    tp_run_free(&run);
}

/* The client unsubscribes through the program's libcupti (h): trainprof defines no
 * cuptiUnsubscribe. 1 when CUPTI said yes. */
static int unsubscribe_client(void *h, CUpti_SubscriberHandle sub) {
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) =
        (CUptiResult(*)(CUpti_SubscriberHandle))dlsym(h, "cuptiUnsubscribe");
    return unsubscribe && unsubscribe(sub) == CUPTI_SUCCESS;
}

static void subscribe_first_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 240);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 241);
    int (*hold)(int, uint64_t, int) = (int (*)(int, uint64_t, int))dlsym(h, "fake_cupti_hold");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers");
    CHECK(hold && enabled && regs, 242);
    tprof_step_begin(0);
    CHECK(hold(4, g_t0, 3) == 1, 243); /* complete after three unforced flushes */
    tprof_step_end(0);
    tprof_step_begin(1);
    CUpti_SubscriberHandle sub = 0;
    CHECK(cuptiSubscribe(&sub, other_cb, NULL) == CUPTI_SUCCESS, 244);
    CHECK(enabled() == 1 && regs() == 1, 245); /* paused at the subscription */
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 246);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 247);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 248);
    CHECK(unsubscribe_client(h, sub), 249);
    tprof_step_end(1);
    tprof_step_begin(2);
    /* ours again (the fake counts enables less disables: the client's disable of a kind
     * it never enabled took one off) */
    for (int i = 0; i < 500 && (regs() < 3 || enabled() < 8); i++) usleep(10000);
    CHECK(regs() == 3 && enabled() == 8, 250);
    tprof_step_end(2);
}

static void subscribe_only_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 260);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 261);
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers");
    CHECK(enabled && regs, 262);
    CUpti_SubscriberHandle sub = 0;
    CHECK(cuptiSubscribe(&sub, other_cb, NULL) == CUPTI_SUCCESS, 263);
    CHECK(enabled() == 1 && regs() == 1, 264);
    CHECK(unsubscribe_client(h, sub), 266);
    /* no registration came: ours again (the resume registers, then enables) */
    for (int i = 0; i < 800 && (regs() < 2 || enabled() < 9); i++) usleep(10000);
    CHECK(regs() == 2 && enabled() == 9, 265);
}

static void test_subscribe_first(void **state) {
    (void)state;
    fresh_dir("subscribe-first");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(subscribe_first_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(kernel_corrs(p, NULL, 0), 4); /* every kernel, with its times */
    assert_null(tp_meta(p, "cupti.untimed_records"));
    tp_run_free(&run);
    fresh_dir("subscribe-only");
    in_child(subscribe_only_body);
    load(&run);
    const char *pauses = tp_meta(&run.procs[0], "gpu_capture.pauses");
    unsigned long long a = 0, b = 0;
    assert_non_null(pauses);
    assert_int_equal(sscanf(pauses, "%llu-%llu", &a, &b), 2);
    assert_true(b - a >= 1900000000ull); /* the 2 s the claim waited */
    tp_run_free(&run);
}

/* The client subscribes (the claim), then CUPTI refuses its registration: the client holds
 * nothing of the activity API, so capture is back at once, as after a refused registration
 * alone; the same when it sized the buffers in between (g_sized). */
static int g_sized;
static void subscribe_refused_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 270);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 271);
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers");
    void (*refuse)(void) = (void (*)(void))dlsym(h, "fake_cupti_refuse_next_register");
    CHECK(enabled && regs && refuse, 272);
    CUpti_SubscriberHandle sub = 0;
    CHECK(cuptiSubscribe(&sub, other_cb, NULL) == CUPTI_SUCCESS, 273);
    CHECK(enabled() == 1 && regs() == 1, 274); /* paused at the subscription */
    size_t bytes = 8u << 20, sz = sizeof bytes;
    if (g_sized)
        CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &bytes) ==
                  CUPTI_SUCCESS, 275);
    refuse();
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) ==
              CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 276);
    /* taken back at once: registered again, the kinds on (the driver launches by their kind,
     * the client holding the subscriber) */
    CHECK(regs() == 2 && enabled() == 10, 277);
    one_step();
}

static void test_subscribe_refused(void **state) {
    (void)state;
    for (g_sized = 0; g_sized < 2; g_sized++) {
        fresh_dir("subscribe-refused");
        in_child(subscribe_refused_body);
        tp_run run;
        load(&run);
        const char *open = tp_meta(&run.procs[0], "gpu_capture.paused_since_ns");
        assert_true(!open || !*open); /* not left paused */
        tp_run_free(&run);
    }
}

/* TRAINPROF_LOG=debug: each call of the client's in stderr, with its time in the run as the
 * report gives times (from the start of the run, not of the machine's clock). */
static void trace_body(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/stderr.txt", g_dir);
    CHECK(freopen(path, "w", stderr) != NULL, 280);
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    tprof_config c; /* start_session's, at debug level */
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.sample_hz = 0;
    c.nvml_hz = 0;
    c.log_level = TPROF_LOG_DEBUG;
    CHECK(tprof_init(&c) == TPROF_OK, 284);
    CHECK(InitializeInjection() == 1, 281);
    one_step();
    CUpti_SubscriberHandle sub = 0;
    CHECK(cuptiSubscribe(&sub, other_cb, NULL) == CUPTI_SUCCESS, 282);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 283);
    fflush(stderr);
}

static void test_handover_trace(void **state) {
    (void)state;
    fresh_dir("trace");
    const double boot_s = (double)mono_ns() / 1e9;
    in_child(trace_body);
    char path[600], line[512];
    snprintf(path, sizeof path, "%s/stderr.txt", g_dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    double at = -1;
    while (fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "CUPTI client: cuptiSubscribe(0) at ");
        if (m) at = strtod(m + strlen("CUPTI client: cuptiSubscribe(0) at "), NULL);
    }
    fclose(f);
    assert_true(at >= 0);
    /* seconds of the run (under a second here), where the machine's clock reads boot_s */
    if (boot_s > 30) assert_true(at < 10);
}

static void test_foreign_client(void **state) {
    (void)state;
    fresh_dir("foreign");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(foreign_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    size_t kernels = kernel_corrs(p, NULL, 0);
    assert_int_equal(kernels, 3); /* before and after the other client's window */
    const char *why = tp_meta(p, "gpu_capture.pause_reason"),
               *pauses = tp_meta(p, "gpu_capture.pauses");
    assert_non_null(why);
    assert_string_equal(why, "another CUPTI client");
    unsigned long long a = 0, b = 0;
    assert_non_null(pauses);
    assert_int_equal(sscanf(pauses, "%llu-%llu", &a, &b), 2);
    assert_true(a > p->hdr.start_mono_ns && b > a);
    assert_null(strchr(pauses, ',')); /* one pause */
    tp_run_free(&run);
    fresh_dir("foreign-early");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(foreign_early_body);
    load(&run);
    p = &run.procs[0];
    kernels = kernel_corrs(p, NULL, 0);
    assert_int_equal(kernels, 2);
    why = tp_meta(p, "gpu_capture.pause_reason");
    pauses = tp_meta(p, "gpu_capture.pauses");
    assert_non_null(why);
    assert_string_equal(why, "another CUPTI client");
    assert_non_null(pauses);
    assert_int_equal(sscanf(pauses, "%llu-%llu", &a, &b), 2);
    assert_true(b > a);
    tp_run_free(&run);
}

/* The other client finalizes CUPTI (Kineto with TEARDOWN_CUPTI=1): at the end of its window,
 * and again from its own callback after trainprof took capture back. CUPTI attached again
 * may number its records from 1 again: the correlation ids of the file stay unique. After a
 * finalize under trainprof's own capture, capture comes back at the program's next step. */
static void foreign_finalize_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 170);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 171);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers"),
                subs = fake_fn(h, "fake_cupti_subscribers"),
                fin = fake_fn(h, "fake_cupti_finalizes"),
                attached = fake_fn(h, "fake_cupti_attached");
    CHECK(deliver && enabled && regs && subs && fin && attached, 172);
    tprof_step_begin(0);
    CHECK(deliver(2, 0, g_t0) != 0, 173); /* correlations 1, 2 */
    tprof_step_end(0);
    tprof_step_begin(1);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS, 174);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 175);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 176);
    CHECK(cuptiFinalize() == CUPTI_SUCCESS && fin() == 1 && !attached(), 177);
    tprof_step_end(1);
    tprof_step_begin(2);
    for (int i = 0; i < 500 && enabled() < 8; i++) usleep(10000); /* registers, then enables */
    CHECK(regs() == 3 && enabled() == 8 && subs() == 1, 178);     /* ours again */
    /* with our thread ids (the system's, as the driver launches' and the CPU records'), which
     * the finalize reset */
    fake_int_fn tid_type = fake_fn(h, "fake_cupti_thread_id_type");
    CHECK(tid_type && tid_type() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, 183);
    CHECK(deliver(1, 0, g_t0 + 2000000) != 0, 179); /* CUPTI's correlation 1 again */
    /* the client's teardown finalizes CUPTI under our capture */
    CHECK(cuptiFinalize() == CUPTI_SUCCESS && fin() == 2 && !attached(), 180);
    tprof_step_end(2);
    tprof_step_begin(3);
    for (int i = 0; i < 500 && enabled() < 8; i++) usleep(10000);
    CHECK(regs() == 4 && enabled() == 8 && subs() == 1, 181);
    CHECK(tid_type() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, 184);
    CHECK(deliver(1, 0, g_t0 + 3000000) != 0, 182); /* and 1 again */
    tprof_step_end(3);
}

static void test_foreign_finalize(void **state) {
    (void)state;
    fresh_dir("foreign-finalize");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(foreign_finalize_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    uint32_t corr[8];
    size_t n = kernel_corrs(p, corr, 8);
    assert_int_equal(n, 4);
    /* in start order: 1, 2 before; CUPTI's 1 after each re-attach, as 3 and 4 */
    for (size_t k = 0; k < n; k++) assert_int_equal(corr[k], k + 1);
    const char *pauses = tp_meta(p, "gpu_capture.pauses");
    assert_non_null(pauses);
    unsigned long long a, b, c, d;
    assert_int_equal(sscanf(pauses, "%llu-%llu,%llu-%llu", &a, &b, &c, &d), 4);
    assert_true(a < b && b <= c && c < d);
    tp_run_free(&run);
}

/* The other client finalizes CUPTI (from its callback, inside a CUDA call) while trainprof is
 * inside a CUPTI call of its own, holding its lock (here: turning its kinds off as the window
 * closes, the finalize on the same thread): the client's call does not wait for trainprof,
 * and trainprof's state is settled after it: the next window attaches CUPTI again, with
 * trainprof's buffers. */
static void finalize_client(void) {
    if (cuptiFinalize() != CUPTI_SUCCESS) _exit(229);
}
static void finalize_in_call_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "1-1/4", 1); /* windows at steps 1, 5, ... */
    start_session();
    CHECK(InitializeInjection() == 1, 220);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 221);
    void (*in_disable)(void (*)(void)) =
        (void (*)(void (*)(void)))dlsym(h, "fake_cupti_in_disable");
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn regs = fake_fn(h, "fake_cupti_registers"), fin = fake_fn(h, "fake_cupti_finalizes");
    CHECK(in_disable && deliver && regs && fin, 222);
    tprof_step_begin(0);
    tprof_step_end(0);
    tprof_step_begin(1); /* the window */
    CHECK(deliver(1, 0, g_t0) != 0 && regs() == 1, 223);
    tprof_step_end(1);
    in_disable(finalize_client);
    tprof_step_begin(2); /* the window closes: the client finalizes inside our first disable */
    CHECK(fin() == 1, 224);
    tprof_step_end(2);
    for (uint64_t k = 3; k < 5; k++) {
        tprof_step_begin(k);
        tprof_step_end(k);
    }
    tprof_step_begin(5); /* the next window: attached again, our buffers registered */
    CHECK(regs() == 2, 225);
    CHECK(deliver(1, 0, g_t0 + 5000000) != 0, 226);
    tprof_step_end(5);
}

static void test_finalize_in_our_call(void **state) {
    (void)state;
    fresh_dir("finalize-in-call");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(finalize_in_call_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    uint32_t corr[4];
    /* both windows' kernels, with distinct correlation ids */
    assert_int_equal(kernel_corrs(p, corr, 4), 2);
    assert_int_equal(corr[0], 1);
    assert_int_equal(corr[1], 2);
    tp_run_free(&run);
}

/* A child forked from a process that records GPU activity (a DataLoader worker, a helper
 * process): CUDA cannot be used in it, so nothing of the parent's CUPTI is the child's: its
 * pause answers ERR_UNAVAILABLE, and neither it, the child's steps nor the child's shutdown
 * calls CUPTI. */
static void forked_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 190);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 191);
    fake_int_fn flushes = fake_fn(h, "fake_cupti_flushes"),
                enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers");
    CHECK(flushes && enabled && regs, 192);
    one_step();
    const int f0 = flushes(), e0 = enabled(), r0 = regs();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, 193);
    if (pid == 0) {
        if (tprof_gpu_capture_pause() != TPROF_ERR_UNAVAILABLE) _exit(1);
        one_step(); /* the child's own file */
        if (tprof_shutdown() != TPROF_OK) _exit(2);
        _exit(flushes() == f0 && enabled() == e0 && regs() == r0 ? 0 : 3);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, 194);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fprintf(stderr, "forked child: status %d\n", st);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 195);
}

static void test_forked_child(void **state) {
    (void)state;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer cannot start threads (the child's flusher) in a child forked from a
     * process with threads */
    skip();
#endif
    fresh_dir("forked");
    in_child(forked_body);
    /* the parent's file and the forked child's */
    char err[256];
    tp_run run;
    assert_int_equal(tp_run_load(g_dir, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 2);
    tp_run_free(&run);
}

/* Another client subscribes while trainprof's detach waits for the next CUDA call (the step
 * after a window): the program's subscription succeeds, its callback gets the calls, and
 * CUPTI stays attached (the detach needs the one subscriber). */
static void subscribe_detaching_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_KERNEL_STEPS", "1-1", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 200);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 201);
    fake_int_fn api_exit = fake_fn(h, "fake_cupti_api_exit"),
                fin = fake_fn(h, "fake_cupti_finalizes"),
                subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(api_exit && fin && subs, 202);
    for (uint64_t k = 0; k < 3; k++) {
        tprof_step_begin(k);
        tprof_step_end(k);
    }
    tprof_step_begin(3); /* the detach is asked for: our subscriber waits for a CUDA call */
    CHECK(subs() == 1, 203);
    CUpti_SubscriberHandle other;
    CHECK(cuptiSubscribe(&other, other_cb, NULL) == CUPTI_SUCCESS, 204);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    *(void **)&enable_domain = dlsym(h, "cuptiEnableDomain");
    CHECK(enable_domain && enable_domain(1, other, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS,
          205);
    CHECK(api_exit() == 1 && g_other_calls == 1 && fin() == 0, 206);
    tprof_step_end(3);
}

static void test_subscribe_while_detaching(void **state) {
    (void)state;
    fresh_dir("subscribe-detaching");
    in_child(subscribe_detaching_body);
}

/* The other client registers on another thread while the driver starts trainprof's CUPTI,
 * just after trainprof registered: the client holds CUPTI, so trainprof's capture starts
 * paused, as for a client that came first, and takes over after the client's window. */
static void register_other(void) {
    if (cuptiActivityRegisterCallbacks(other_req, other_done) != CUPTI_SUCCESS) _exit(219);
}
static void foreign_racing_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_GLOBAL);
    CHECK(h != NULL, 210);
    void (*after)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(h, "fake_cupti_after_register");
    int (*kind_on)(int) = (int (*)(int))dlsym(h, "fake_cupti_kind_on");
    fake_int_fn regs = fake_fn(h, "fake_cupti_registers");
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    CHECK(after && kind_on && regs && deliver, 211);
    start_session();
    after(register_other);
    CHECK(InitializeInjection() == 1, 212);
    CHECK(regs() == 2 && !kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 213); /* the client's */
    tprof_step_begin(0);
    tprof_step_end(0);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 214);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS, 215);
    tprof_step_begin(1);
    /* the flusher's next pass registers, then enables: wait for both */
    for (int i = 0; i < 500 && !kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); i++) usleep(10000);
    CHECK(regs() == 3 && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 216); /* ours */
    CHECK(deliver(2, 0, g_t0) != 0, 217);
    tprof_step_end(1);
}

static void test_foreign_racing_start(void **state) {
    (void)state;
    fresh_dir("foreign-racing");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(foreign_racing_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    size_t kernels = kernel_corrs(p, NULL, 0);
    assert_int_equal(kernels, 2);
    const char *why = tp_meta(p, "gpu_capture.pause_reason");
    assert_non_null(why);
    assert_string_equal(why, "another CUPTI client");
    tp_run_free(&run);
}

/* Another client's registration that CUPTI refuses (a NULL callback; CUPTI's own refusal)
 * hands nothing over: trainprof's capture goes on, its buffers and subscriber in place; the
 * same before the driver started trainprof's CUPTI (g_early) */
static int g_early;
static void foreign_refused_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_GLOBAL);
    CHECK(h != NULL, 150);
    start_session();
    if (g_early)
        CHECK(cuptiActivityRegisterCallbacks(NULL, other_done) == CUPTI_ERROR_INVALID_PARAMETER,
              151);
    CHECK(InitializeInjection() == 1, 152);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                regs = fake_fn(h, "fake_cupti_registers"),
                subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(deliver && enabled && regs && subs, 153);
    CHECK(regs() == 1 && enabled() == 9 && subs() == 1, 154);
    tprof_step_begin(0);
    CHECK(cuptiActivityRegisterCallbacks(other_req, NULL) == CUPTI_ERROR_INVALID_PARAMETER, 155);
    CHECK(regs() == 1 && enabled() == 9 && subs() == 1, 156);
    void (*refuse)(void) = (void (*)(void))dlsym(h, "fake_cupti_refuse_next_register");
    CHECK(refuse != NULL, 160);
    refuse();
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) ==
              CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
          157);
    CHECK(enabled() == 9 && subs() == 1, 158); /* taken back at once */
    CHECK(deliver(2, 0, g_t0) != 0, 159);
    tprof_step_end(0);
}

static void test_foreign_refused(void **state) {
    (void)state;
    for (g_early = 0; g_early < 2; g_early++) {
        fresh_dir("foreign-refused");
        g_t0 = mono_ns() + 1000000000ull;
        in_child(foreign_refused_body);
        tp_run run;
        load(&run);
        const tp_process *p = &run.procs[0];
        size_t kernels = kernel_corrs(p, NULL, 0);
        assert_int_equal(kernels, 2);
        assert_null(tp_meta(p, "gpu_capture.paused_since_ns") &&
                            *tp_meta(p, "gpu_capture.paused_since_ns")
                        ? "paused"
                        : NULL);
        tp_run_free(&run);
    }
}

/* The program's own libcupti is private to the library that uses it (torch's, loaded with
 * RTLD_LOCAL under Python), so the preloaded definitions cannot find it with RTLD_NEXT, and
 * trainprof bound none of its own (TRAINPROF_CUPTI=0 here; also before the driver starts
 * trainprof's CUPTI, or with no session): each call still reaches that libcupti, with its
 * answer. */
static void foreign_private_body(void) {
    setenv("TRAINPROF_CUPTI", "0", 1);
    void *h = dlopen(MAPPED_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, 140);
    start_session();
    CHECK(InitializeInjection() == 1, 141);
    fake_int_fn regs = fake_fn(h, "fake_cupti_registers"),
                subs = fake_fn(h, "fake_cupti_subscribers"),
                flushes = fake_fn(h, "fake_cupti_flushes"),
                fin = fake_fn(h, "fake_cupti_finalizes");
    CHECK(regs && subs && flushes && fin, 142);
    CHECK(cuptiActivityRegisterCallbacks(other_req, other_done) == CUPTI_SUCCESS && regs() == 1,
          143);
    CHECK(cuptiSubscribe(&(CUpti_SubscriberHandle){0}, NULL, NULL) == CUPTI_SUCCESS && subs() == 1,
          144);
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS, 145);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS &&
              flushes() == 1,
          146);
    CHECK(cuptiFinalize() == CUPTI_SUCCESS && fin() == 1, 147);
    one_step();
}

static void test_foreign_private_cupti(void **state) {
    (void)state;
    fresh_dir("foreign-private");
    in_child(foreign_private_body);
    tp_run run;
    load(&run);
    assert_string_equal(status_of(&run), "off (TRAINPROF_CUPTI=0)");
    assert_null(tp_meta(&run.procs[0], "gpu_capture.pause_reason")); /* nothing of ours ran */
    tp_run_free(&run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_client),
        cmocka_unit_test(test_sizing_only),
        cmocka_unit_test(test_subscribe_first),
        cmocka_unit_test(test_subscribe_refused),
        cmocka_unit_test(test_handover_trace),
        cmocka_unit_test(test_foreign_finalize),
        cmocka_unit_test(test_finalize_in_our_call),
        cmocka_unit_test(test_forked_child),
        cmocka_unit_test(test_subscribe_while_detaching),
        cmocka_unit_test(test_foreign_racing_start),
        cmocka_unit_test(test_foreign_refused),
        cmocka_unit_test(test_foreign_private_cupti),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
