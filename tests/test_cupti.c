/*
 * test_cupti.c — GPU activity capture (capture/cupti.c) without a GPU, against a scripted
 * libcupti (fake_cupti.c) chosen with TRAINPROF_CUPTI_LIB: each scenario calls
 * InitializeInjection, as the CUDA driver would, in a child process of its own.
 *
 *   capture    all seven activity kinds enabled (and device records); records delivered
 *              twice come back as kernels with their names and times, in the same (reused)
 *              buffer; records with an unknown start or end, or an end before the start, are
 *              left out and counted (cupti.untimed_records, the report's
 *              gpu.cupti_records_untimed); a pause disables the kinds and force-flushes,
 *              resume enables them again; CUPTI's overhead records come back with what CUPTI
 *              did, on its thread or device; a device record becomes the cuda.<ordinal>.*
 *              metadata (UUID in NVML's spelling)
 *   detach     a kernel-capture window (TRAINPROF_KERNEL_STEPS=1-1): the kinds go off as step 2
 *              begins; as step 3 begins a callback is subscribed, and at the exit of the next
 *              CUDA call CUPTI is flushed and detached (cuptiFinalize); from then on no CUPTI
 *              call attaches it again, not a pause, a resume, nor the end of the session,
 *              and the window's kernels are in the file. TRAINPROF_CUPTI_DETACH=0 keeps
 *              CUPTI attached; with another subscriber, CUPTI stays attached
 *   plan       a capture plan of repeated windows (TRAINPROF_GPU_CAPTURE=2-3/5) over 15 steps:
 *              the kinds are on in steps 2, 3, 7, 8, 12 and 13 only; one step after each
 *              window CUPTI detaches at the next CUDA call, and each later window attaches it
 *              again; every window's kernels are in the file, and its times in
 *              gpu_capture.windows. The plan "off" does not load CUPTI at all
 *   mapped     a libcupti the process mapped before CUDA started (libcupti.so.99 here) is
 *              the one used: no second copy is loaded
 *   oom        failed device allocations (subscriber callbacks on the allocation calls only):
 *              a failed cudaMalloc, with the failed driver allocation inside it, is one OOM
 *              and a failed cuMemAlloc of its own a second: two cuda.oom marks, the
 *              memory.oom.* keys of the first (size from the call's parameters, device, free
 *              and total from the driver the program mapped), flushed at once; a pause gives
 *              the subscriber up and a resume takes it back; once trainprof.torch observes the
 *              allocator, failed cudaMallocs are its to report; TRAINPROF_MEMORY=0 subscribes
 *              nothing
 *   driver launches  by callbacks on the launch calls alone, as API records with the
 *              callback's correlation id, none while paused, none for an exit whose entry
 *              was not seen (whatever correlationData held), one without correlationData;
 *              by CUPTI's DRIVER kind when the subscriber is another client's or
 *              TRAINPROF_CUPTI_DRIVER=activity, which stays on when another client turns it
 *              off. Another CUPTI client of the program: tests/test_cupti_foreign.c
 *   backs off  no libcupti, a libcupti of another API version, another client holding the
 *              activity API, TRAINPROF_CUPTI=0: one capability line each, and the session
 *              records on (a step)
 */
#include "cupti_test.h"

static void capture_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1); /* every step: the status says "on" */
    start_session();
    CHECK(InitializeInjection() == 1, 20);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD); /* the copy trainprof loaded */
    CHECK(h != NULL, 21);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    int (*enabled)(void) = (int (*)(void))dlsym(h, "fake_cupti_enabled");
    int (*forced)(void) = (int (*)(void))dlsym(h, "fake_cupti_forced");
    uintptr_t (*overhead)(uint64_t, uint32_t) =
        (uintptr_t(*)(uint64_t, uint32_t))dlsym(h, "fake_cupti_overhead");
    uintptr_t (*device)(uint32_t) = (uintptr_t(*)(uint32_t))dlsym(h, "fake_cupti_device");
    uintptr_t (*mig)(uint32_t) = (uintptr_t(*)(uint32_t))dlsym(h, "fake_cupti_mig_device");
    CHECK(deliver && enabled && forced && overhead && device && mig, 22);
    /* kernel, memcpy (two kinds), memset, memory, sync, runtime, overhead; and device (the
     * driver launches are callbacks: test_driver_launches) */
    CHECK(enabled() == 9, 23);
    CHECK(device(1) != 0, 30);
    CHECK(mig(2) != 0, 31);
    one_step();
    uintptr_t a = deliver(5, 3, g_t0);
    uintptr_t b = deliver(4, 0, g_t0 + 1000000);
    CHECK(a != 0 && a == b, 24); /* the buffer came back and was handed out again */
    CHECK(overhead(g_t0 + 2000000, 4242) != 0, 29);
    CHECK(tprof_gpu_capture_pause() == TPROF_OK, 25);
    CHECK(enabled() == 1 && forced() == 1, 26); /* device records stay on */
    CHECK(tprof_gpu_capture_resume() == TPROF_OK, 27);
    CHECK(enabled() == 9, 28);
}


static void test_capture(void **state) {
    (void)state;
    fresh_dir("capture");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(capture_body);
    tp_run run;
    load(&run);
    const char *st = status_of(&run);
    if (!strstr(st, "activity capture on: 9 kinds, " FAKE_CUPTI_PATH) ||
        !strstr(st, "buffers reused"))
        fail_msg("capability.cupti: %s", st);
    const tp_process *p = &run.procs[0];
    size_t kernels = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_KERNEL) continue;
        kernels++;
        assert_int_equal(o->end - o->start, 500);
        assert_true(o->start >= g_t0 && o->start < g_t0 + 2000000);
        assert_int_equal(o->stream, 7);
        char want[32];
        snprintf(want, sizeof want, "fake_kernel_%u", (o->correlation - 1) % 3);
        assert_string_equal(o->name, want);
    }
    assert_int_equal(kernels, 9); /* 5 + 4; the 3 untimed left out */
    /* overhead: the flush on its thread, the instrumentation on device 0, one left out */
    assert_int_equal(p->novh, 2);
    const tp_gpu_op *fl = &p->ovh[0], *in = &p->ovh[1];
    if (fl->start > in->start) {
        const tp_gpu_op *x = fl;
        fl = in;
        in = x;
    }
    assert_string_equal(fl->name, "CUPTI buffer flush");
    assert_int_equal(fl->os_tid, 4242);
    assert_int_equal(fl->start, g_t0 + 2000000);
    assert_int_equal(fl->end - fl->start, 100000);
    assert_int_equal(fl->device, TPROF_DEVICE_UNKNOWN);
    assert_string_equal(in->name, "CUPTI instrumentation");
    assert_int_equal(in->device, 0);
    assert_int_equal(in->end - in->start, 50000);
    assert_string_equal(tp_meta(p, "cupti.untimed_records"), "4");
    assert_string_equal(tp_meta(p, "cupti.kinds"),
                        "kernel,memcpy,memset,memory,sync,runtime,overhead,driver");
    /* the device record */
    assert_string_equal(tp_meta(p, "cuda.1.uuid"), "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
    assert_string_equal(tp_meta(p, "cuda.1.name"), "Fake H200");
    assert_string_equal(tp_meta(p, "cuda.1.sm_count"), "132");
    assert_string_equal(tp_meta(p, "cuda.1.memory_total_bytes"), "151397597184");
    assert_string_equal(tp_meta(p, "cuda.1.sm_clock_max_mhz"), "1980");
    assert_string_equal(tp_meta(p, "cuda.1.compute_capability"), "9.0");
    assert_null(tp_meta(p, "cuda.1.gpu_uuid"));
    /* a MIG device: its own UUID as NVML spells a MIG device's, and its GPU's */
    assert_string_equal(tp_meta(p, "cuda.2.uuid"), "MIG-30313233-3435-3637-3839-3a3b3c3d3e3f");
    assert_string_equal(tp_meta(p, "cuda.2.gpu_uuid"), "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
    tp_run_free(&run);
}

/* ---- a libcupti already mapped */
static int count_cupti(struct dl_phdr_info *info, size_t size, void *n) {
    (void)size;
    const char *b = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    *(int *)n += b && strstr(b + 1, "cupti") != NULL; /* any copy, the fake's own name too */
    return 0;
}

static void mapped_body(void) {
    CHECK(dlopen(MAPPED_CUPTI_PATH, RTLD_NOW | RTLD_GLOBAL) != NULL, 40);
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1); /* not this one: the mapped one wins */
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 41);
    int n = 0;
    dl_iterate_phdr(count_cupti, &n);
    CHECK(n == 1, 42);
    CHECK(dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD) == NULL, 43);
}



/* the detach scenario; want_detach: whether CUPTI should end detached; oom_sub: whether our
 * subscriber is held for failed allocations from the start (another tool may hold it) */
static void detach_run(int want_detach, int oom_sub) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_KERNEL_STEPS", "1-1", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 40);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 41);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled");
    fake_int_fn api_exit = fake_fn(h, "fake_cupti_api_exit");
    fake_int_fn attached = fake_fn(h, "fake_cupti_attached");
    fake_int_fn fin = fake_fn(h, "fake_cupti_finalizes");
    fake_int_fn subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(deliver && enabled && api_exit && attached && fin && subs, 42);
    CHECK(enabled() == 1, 43); /* device records only, until the window */
    tprof_step_begin(0);
    tprof_step_end(0);
    tprof_step_begin(1);
    /* the driver launches by callbacks, or by their activity kind when another tool holds
     * CUPTI's subscriber */
    const char *taken = getenv("FAKE_CUPTI_SUBSCRIBE_FAIL");
    CHECK(enabled() == (taken && !strcmp(taken, "1") ? 10 : 9), 44);
    CHECK(deliver(3, 0, g_t0) != 0, 45);
    tprof_step_end(1);
    tprof_step_begin(2); /* the window closes: kinds off, still attached */
    CHECK(enabled() == 1 && fin() == 0 && subs() == oom_sub, 46);
    tprof_step_end(2);
    tprof_step_begin(3); /* one step later: the detach is asked for (on the same subscriber) */
    CHECK(subs() == (want_detach || oom_sub), 47);
    CHECK(api_exit() == want_detach, 48); /* the next CUDA call returns */
    CHECK(fin() == want_detach && attached() == !want_detach, 49);
    tprof_step_end(3);
    tprof_step_begin(4);
    tprof_step_end(4);
    CHECK(tprof_gpu_capture_pause() == TPROF_OK, 50);
    CHECK(tprof_gpu_capture_resume() == TPROF_OK, 51);
    CHECK(tprof_shutdown() == TPROF_OK, 52);
    CHECK(attached() == !want_detach && fin() == want_detach, 53);
    _exit(0);
}
static void detach_body(void) { detach_run(1, 1); }

/* The default plan, auto: the kinds on from the start (before any step), through step 4;
 * off as step 5 begins, CUPTI detached a step later; on again for steps 1000-1004. */
static void auto_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    unsetenv("TRAINPROF_GPU_CAPTURE");
    unsetenv("TRAINPROF_KERNEL_STEPS");
    start_session();
    CHECK(InitializeInjection() == 1, 60);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 61);
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled");
    fake_int_fn api_exit = fake_fn(h, "fake_cupti_api_exit");
    fake_int_fn fin = fake_fn(h, "fake_cupti_finalizes");
    CHECK(enabled && api_exit && fin, 62);
    CHECK(enabled() == 9, 63); /* before the first step */
    for (uint64_t k = 0; k < 5; k++) {
        tprof_step_begin(k);
        CHECK(enabled() == 9, 64);
        tprof_step_end(k);
    }
    tprof_step_begin(5);
    CHECK(enabled() == 1, 65); /* device records only */
    tprof_step_end(5);
    tprof_step_begin(6); /* a step later: detach at the next CUDA call's exit */
    CHECK(api_exit() == 1 && fin() == 1, 66);
    tprof_step_end(6);
    tprof_step_begin(1000); /* attached again: the 8 kinds (the device kind was for once) */
    CHECK(enabled() == 8, 67);
    tprof_step_end(1000);
    tprof_step_begin(1005);
    CHECK(enabled() == 0, 68);
    tprof_step_end(1005);
}

static void test_plan_auto(void **state) {
    (void)state;
    fresh_dir("auto");
    in_child(auto_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const char *st = status_of(&run);
    if (!strstr(st, "in the steps of the capture plan auto")) fail_msg("capability.cupti: %s", st);
    assert_string_equal(tp_meta(p, "gpu_capture"), "auto");
    /* two windows: from the start to step 5's beginning, and steps 1000-1004 */
    const char *w = tp_meta(p, "gpu_capture.windows");
    assert_non_null(w);
    unsigned long long a, b, c, d;
    assert_int_equal(sscanf(w, "%llu-%llu,%llu-%llu", &a, &b, &c, &d), 4);
    assert_true(a <= p->first_ts && a < b && b < c && c < d); /* on before any event */
    tp_run_free(&run);
}
static void stay_body(void) {
    setenv("TRAINPROF_CUPTI_DETACH", "0", 1);
    detach_run(0, 1);
}
static void other_subscriber_body(void) {
    setenv("FAKE_CUPTI_SUBSCRIBE_FAIL", "1", 1);
    detach_run(0, 0);
}
/* without the failed-allocation callbacks, the detach subscribes for itself */
static void detach_no_memory_body(void) {
    setenv("TRAINPROF_MEMORY", "0", 1);
    detach_run(1, 0);
}

static void test_detach(void **state) {
    (void)state;
    void (*bodies[])(void) = {detach_body, stay_body, other_subscriber_body,
                              detach_no_memory_body};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        fresh_dir("detach");
        g_t0 = mono_ns() + 1000000000ull;
        in_child(bodies[i]);
        tp_run run;
        load(&run);
        const tp_process *p = &run.procs[0];
        size_t kernels = kernel_corrs(p, NULL, 0);
        assert_int_equal(kernels, 3); /* the window's, whether detached or not */
        tp_run_free(&run);
    }
}

typedef int (*fake_alloc_fn)(int, uint32_t, size_t, int, int);

static void oom_run(int memory_on) {
    /* the program's own driver (the fake), mapped as a CUDA program maps libcuda */
    CHECK(dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_GLOBAL) != NULL, 70);
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    if (!memory_on) setenv("TRAINPROF_MEMORY", "0", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 71);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 72);
    fake_alloc_fn alloc;
    *(void **)&alloc = dlsym(h, "fake_cupti_alloc");
    fake_int_fn subs = fake_fn(h, "fake_cupti_subscribers");
    CHECK(alloc && subs, 73);
    const uint32_t rt = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                   drv = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
    if (!memory_on) { /* the subscriber may be held for driver launches: no allocation callback */
        CHECK(alloc(0, rt, 3ull << 30, cudaErrorMemoryAllocation, 1) == 0, 75);
        return;
    }
    CHECK(subs() == 1, 76);
    /* succeeds: its enter and exit, nothing recorded */
    CHECK(alloc(0, rt, 1u << 20, cudaSuccess, 0) == 2, 77);
    /* 3 GiB that fail, the runtime's own driver allocation failing inside: one OOM */
    CHECK(alloc(0, rt, 3ull << 30, cudaErrorMemoryAllocation, 1) == 4, 78);
    /* a driver allocation of the program's that fails: the second */
    CHECK(alloc(1, drv, 4096, CUDA_ERROR_OUT_OF_MEMORY, 0) == 2, 79);
    /* paused: CUPTI's one subscriber is the other client's to take; resumed: ours again */
    CHECK(tprof_gpu_capture_pause() == TPROF_OK, 80);
    CHECK(subs() == 0 && alloc(1, drv, 4096, CUDA_ERROR_OUT_OF_MEMORY, 0) == 0, 81);
    CHECK(tprof_gpu_capture_resume() == TPROF_OK && subs() == 1, 82);
    /* trainprof.torch observes PyTorch's allocator: a failed cudaMalloc is no OOM of ours */
    tprof__oom_torch_observes();
    CHECK(alloc(0, rt, 1ull << 30, cudaErrorMemoryAllocation, 1) == 4, 83);
}
static void oom_body(void) { oom_run(1); }
static void oom_off_body(void) { oom_run(0); }

static size_t count_marks(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nmarks; k++)
            n += p->threads[t].marks[k].name && !strcmp(p->threads[t].marks[k].name, name);
    return n;
}

static void test_oom(void **state) {
    (void)state;
    fresh_dir("oom");
    in_child(oom_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(count_marks(p, "cuda.oom"), 2);
    static const char *const want[][2] = {
        {"memory.oom.source", "cuda"},          {"memory.oom.request_bytes", "3221225472"},
        {"memory.oom.device", "1"},             {"memory.oom.free_bytes", "536870912"},
        {"memory.oom.total_bytes", "151397597184"}, {"memory.oom.count", "2"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *v = tp_meta(p, want[i][0]);
        if (!v || strcmp(v, want[i][1])) fail_msg("%s = %s, not %s", want[i][0], v, want[i][1]);
    }
    assert_null(tp_meta(p, "memory.oom.phase")); /* unknown to the driver's side */
    tp_run_free(&run);
    fresh_dir("oom-off");
    in_child(oom_off_body);
    load(&run);
    assert_int_equal(count_marks(&run.procs[0], "cuda.oom"), 0);
    assert_null(tp_meta(&run.procs[0], "memory.oom.source"));
    tp_run_free(&run);
}

/* "2-3/5" over steps 0..14, one CUDA call returning in each step. Windows open as steps 2, 7,
 * 12 begin and close as 4, 9, 14 begin. Kinds on (fake_cupti_enabled): the device kind from
 * the start, the 8 chosen activity kinds inside the windows (the driver launches are
 * callbacks); cuptiFinalize drops them all, and a re-attach turns on the 8 chosen ones only
 * (the devices were described). So, per step: 1 before the first window, 9 in it, 1 at step 4
 * (closed, still attached), 0 from step 5's CUDA call on (detached: step 4 + 1 asks, the call
 * detaches), 8 in 7-8, 0 at 9 (closed), 0 after 10's detach, 8 in 12-13, 0 at 14.
 * cuptiFinalize: 1 from step 5, 2 from step 10;
 * cuptiActivityRegisterCallbacks: 1 at start, 2 from step 7, 3 from step 12. */
static void plan_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "2-3/5", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 60);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 61);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    fake_int_fn enabled = fake_fn(h, "fake_cupti_enabled"),
                api_exit = fake_fn(h, "fake_cupti_api_exit"),
                attached = fake_fn(h, "fake_cupti_attached"),
                fin = fake_fn(h, "fake_cupti_finalizes"), regs = fake_fn(h, "fake_cupti_registers");
    CHECK(deliver && enabled && api_exit && attached && fin && regs, 62);
    static const int want_on[15] = {1, 1, 9, 9, 1, 0, 0, 8, 8, 0, 0, 0, 8, 8, 0};
    static const int want_fin[15] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
    static const int want_reg[15] = {1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3};
    for (int k = 0; k < 15; k++) {
        tprof_step_begin((uint64_t)k);
        int inside = want_on[k] >= 8;
        if (inside && (k == 2 || k == 7 || k == 12)) /* one kernel per window */
            CHECK(deliver(1, 0, g_t0 + (uint64_t)k * 1000000) != 0, 63);
        api_exit(); /* a CUDA call of the step returns */
        if (enabled() != want_on[k] || fin() != want_fin[k] || regs() != want_reg[k] ||
            attached() != (want_fin[k] == 0 || want_reg[k] > want_fin[k])) {
            fprintf(stderr, "step %d: enabled %d (want %d), finalizes %d (%d), registers %d "
                            "(%d), attached %d\n", k, enabled(), want_on[k], fin(), want_fin[k],
                    regs(), want_reg[k], attached());
            _exit(64);
        }
        tprof_step_end((uint64_t)k);
    }
    CHECK(tprof_shutdown() == TPROF_OK, 65);
    CHECK(fin() == 2 && regs() == 3, 66);
    _exit(0);
}

static void test_plan(void **state) {
    (void)state;
    fresh_dir("plan");
    g_t0 = mono_ns() + 1000000000ull;
    in_child(plan_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    if (!strstr(status_of(&run),
                "activity capture in the steps of the capture plan 2-3/5: 9 kinds"))
        fail_msg("capability.cupti: %s", status_of(&run));
    size_t kernels = kernel_corrs(p, NULL, 0);
    assert_int_equal(kernels, 3); /* one per window, re-attached or not */
    /* three windows, in order, each between its steps' begin records */
    const char *w = tp_meta(p, "gpu_capture.windows");
    assert_non_null(w);
    uint64_t t[6];
    for (int i = 0; i < 6; i++) {
        char *e;
        t[i] = strtoull(w, &e, 10);
        assert_int_equal(*e, i == 5 ? 0 : i % 2 ? ',' : '-');
        w = e + 1;
    }
    const tp_stepev *ev = NULL;
    for (size_t k = 0; k < p->nthreads; k++)
        if (p->threads[k].nsteps) ev = p->threads[k].steps;
    assert_non_null(ev);
    static const int at[6] = {2, 4, 7, 9, 12, 14}; /* begin of step k is event 2k */
    for (int i = 0; i < 6; i++) {
        if (i) assert_true(t[i] > t[i - 1]);
        assert_true(t[i] >= ev[2 * at[i] - 1].ts && t[i] <= ev[2 * at[i]].ts);
    }
    tp_run_free(&run);
}

/* "off": CUPTI is never loaded, so no kind is ever enabled; the capability says why */
static void plan_off_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "off", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 70);
    CHECK(dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD) == NULL, 71);
    one_step();
    CHECK(tprof_gpu_capture_pause() == TPROF_ERR_UNAVAILABLE, 72);
}

static void test_plan_off(void **state) {
    (void)state;
    fresh_dir("planoff");
    in_child(plan_off_body);
    tp_run run;
    load(&run);
    assert_string_equal(status_of(&run), "off (TRAINPROF_GPU_CAPTURE=off)");
    assert_string_equal(tp_meta(&run.procs[0], "gpu_capture"), "off");
    tp_run_free(&run);
}

static void test_mapped(void **state) {
    (void)state;
    fresh_dir("mapped");
    in_child(mapped_body);
    tp_run run;
    load(&run);
    if (!strstr(status_of(&run),
                "activity capture on: 9 kinds, " MAPPED_CUPTI_PATH " (already loaded)"))
        fail_msg("capability.cupti: %s", status_of(&run));
    tp_run_free(&run);
}

/* ---- back-off scenarios: the variable to set, and the capability status expected */
static const char *g_var, *g_val;

static void backoff_body(void) {
    if (g_var) setenv(g_var, g_val, 1);
    setenv("TRAINPROF_CUPTI_LIB", getenv("TEST_CUPTI_LIB"), 1);
    start_session();
    CHECK(InitializeInjection() == 1, 30); /* never an error for the driver */
    one_step();
}

static void backoff(const char *tag, const char *lib, const char *var, const char *val,
                    const char *want) {
    fresh_dir(tag);
    setenv("TEST_CUPTI_LIB", lib, 1);
    g_var = var;
    g_val = val;
    in_child(backoff_body);
    tp_run run;
    load(&run);
    if (!strstr(status_of(&run), want))
        fail_msg("capability.cupti \"%s\" lacks \"%s\"", status_of(&run), want);
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    cJSON *steps =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0), "steps");
    /* recording went on */
    assert_int_equal((int)cJSON_GetObjectItem(steps, "count")->valuedouble, 1);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* Driver-API launches by callbacks on the launch calls (default), by the DRIVER activity kind
 * where the subscriber is another client's or TRAINPROF_CUPTI_DRIVER=activity asks for it. */
static int g_drv_case; /* 0 callbacks, 1 subscriber taken, 2 activity asked for */
static void driver_body(void) {
    setenv("TRAINPROF_CUPTI_LIB", FAKE_CUPTI_PATH, 1);
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    if (g_drv_case == 1) setenv("FAKE_CUPTI_SUBSCRIBE_FAIL", "1", 1);
    if (g_drv_case == 2) setenv("TRAINPROF_CUPTI_DRIVER", "activity", 1);
    start_session();
    CHECK(InitializeInjection() == 1, 90);
    void *h = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, 91);
    uintptr_t (*deliver)(int, int, uint64_t) =
        (uintptr_t(*)(int, int, uint64_t))dlsym(h, "fake_cupti_deliver");
    int (*kind_on)(int) = (int (*)(int))dlsym(h, "fake_cupti_kind_on");
    int (*launch)(uint32_t) = (int (*)(uint32_t))dlsym(h, "fake_cupti_driver_launch");
    CHECK(deliver && kind_on && launch, 92);
    one_step();
    if (g_drv_case) {
        CHECK(kind_on(CUPTI_ACTIVITY_KIND_DRIVER) == 1, 93);
        CHECK(launch(1) == 0, 94);
        /* another client tidying up its kinds (Kineto turns its DRIVER kind off as it writes
         * its trace) leaves ours on */
        CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS, 103);
        CHECK(kind_on(CUPTI_ACTIVITY_KIND_DRIVER) == 1, 104);
    } else {
        CHECK(kind_on(CUPTI_ACTIVITY_KIND_DRIVER) == 0, 95);
        CHECK(launch(1) == 1, 96); /* the launch of the kernel delivered next (correlation 1) */
        /* a call whose entry was not seen (the callbacks went on during it): no record, whatever
         * its slot held; a call without the slot: recorded all the same */
        int (*odd)(uint32_t, int) =
            (int (*)(uint32_t, int))dlsym(h, "fake_cupti_driver_launch_odd");
        CHECK(odd && odd(7, 1) == 1 && odd(8, 2) == 1, 102);
        /* paused for another client: no callback of ours, and the subscriber is free */
        CHECK(tprof_gpu_capture_pause() == TPROF_OK, 97);
        CHECK(launch(2) == 0 && kind_on(CUPTI_ACTIVITY_KIND_DRIVER) == 0, 98);
        CHECK(tprof_gpu_capture_resume() == TPROF_OK, 99);
        CHECK(launch(3) == 1, 100);
    }
    CHECK(deliver(3, 0, g_t0) != 0, 101);
}

static void test_driver_launches(void **state) {
    (void)state;
    for (g_drv_case = 0; g_drv_case < 3; g_drv_case++) {
        fresh_dir("driver");
        g_t0 = mono_ns() + 1000000000ull;
        in_child(driver_body);
        tp_run run;
        load(&run);
        const tp_process *p = &run.procs[0];
        size_t launches = 0;
        uint32_t corr[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < p->napi; i++) {
            if (strcmp(p->api[i].name, "cuLaunchKernel")) continue;
            if (launches < 4) corr[launches] = p->api[i].correlation;
            launches++;
            assert_true(p->api[i].end >= p->api[i].start);
            assert_int_not_equal(p->api[i].os_tid, 0);
        }
        if (g_drv_case) {
            assert_int_equal(launches, 0);
        } else {
            /* correlations 1, 8 and 3 in call order; none while paused, none without entry */
            assert_int_equal(launches, 3);
            assert_int_equal(corr[0], 1);
            assert_int_equal(corr[1], 8);
            assert_int_equal(corr[2], 3);
        }
        tp_run_free(&run);
    }
}

static void test_backoff(void **state) {
    (void)state;
    backoff("nolib", "/nonexistent/libcupti.so.13", NULL, NULL,
            "unavailable: no libcupti found (set TRAINPROF_CUPTI_LIB)");
    backoff("version", FAKE_CUPTI_PATH, "FAKE_CUPTI_VERSION", "120000",
            "unavailable: libcupti API version 120000, built for");
    backoff("taken", FAKE_CUPTI_PATH, "FAKE_CUPTI_REGISTER_FAIL", "1",
            "unavailable: another CUPTI client holds the activity API "
            "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)");
    backoff("off", FAKE_CUPTI_PATH, "TRAINPROF_CUPTI", "0", "off (TRAINPROF_CUPTI=0)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_plan_off),
        cmocka_unit_test(test_plan_auto),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_mapped),
        cmocka_unit_test(test_driver_launches),
        cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
