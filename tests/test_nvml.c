/*
 * test_nvml.c — the NVML sampler (capture/nvml.c), the report's "nvml" section and the
 * EnergyMonitor (core/energy.c), against the scripted fake libnvidia-ml of fake_nvml.c
 * (selected with TRAINPROF_NVML_LIB), with known answers.
 *
 * Recording scenarios run in a fresh process (fork, then exec of this binary with
 * "--child"), because the library loads NVML once per process and remembers a failure: each
 * scenario must start with its own environment and an untouched loader. The parent then
 * loads the rank file with the model and the report and checks the figures against the
 * fake's script (power 250 W on GPU 0, a ramp on GPU 1, etc.). The EnergyMonitor tests run
 * in this process, pinning the fake's energy counters to chosen values.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "json_path.h"
#include "report_text.h"
#include "analysis/steps.h"
#include "trainprof.h"
#include "synth.h"
#include "format/format.h"
#include "common/nvml_shared.h"

#define CHILD_PREFIX "nvml"
#include "child.h" /* fresh_dir, g_dir, load */

#ifndef FAKE_NVML_PATH
#error "FAKE_NVML_PATH must name the fake libnvidia-ml (tests/nvml.cmake)"
#endif

#define UUID0 "GPU-5a1e0000-0000-4000-8000-000000000000"
#define UUID1 "GPU-5a1e0000-0000-4000-8000-000000000001"

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ child scenarios */

/* A session sampling at 50 Hz (flush every 10 ms): 100 ms idle, a 100 ms warm-up step and
 * four 150 ms steps ("short": one 60 ms step), 100 ms idle, shutdown. EXPECT_FAKE says
 * whether the sampler must have loaded the fake; when it did, the energy counter must only
 * have been read on the flusher thread. Exit codes name the failed check. */
static int child_session(const char *dir, int short_run) {
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = dir;
    c.sample_hz = 0;
    c.nvml_hz = 50;
    c.flush_interval_ms = 10;
    if (getenv("CHILD_FLUSH_MS")) c.flush_interval_ms = (uint32_t)atoi(getenv("CHILD_FLUSH_MS"));
    if (tprof_init(&c) != TPROF_OK) return 10;
    sleep_ms(100);
    if (getenv("FORK_CHILD")) {
        /* a forked child (a DataLoader worker, say) that records: it must not sample again */
        pid_t pid = fork();
        if (pid < 0) return 18;
        if (pid == 0) {
            tprof_step_begin(0);
            /* one pass of the child's flusher while its session records, however loaded the
             * machine: the pass in which the NVML source decides not to sample here */
            tprof_flush();
            sleep_ms(60);
            tprof_step_end(0);
            tprof_shutdown();
            _exit(0);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return 19;
    }
    int nsteps = short_run ? 1 : 5;
    for (int i = 0; i < nsteps; i++) {
        tprof_step_begin((uint64_t)i);
        sleep_ms(short_run ? 60 : i == 0 ? 100 : 150);
        tprof_step_end((uint64_t)i);
    }
    sleep_ms(100);
    const char *expect = getenv("EXPECT_FAKE");
    void *fake = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (expect && !strcmp(expect, "0")) {
        tprof_shutdown();
        return fake ? 11 : 0; /* a rank that does not sample does not even load NVML */
    }
    if (!fake) return 12;
    double (*t0)(void) = (double (*)(void))dlsym(fake, "fake_nvml_t0");
    unsigned long long (*calls)(void) =
        (unsigned long long (*)(void))dlsym(fake, "fake_nvml_energy_calls");
    unsigned long long (*off)(const char *) =
        (unsigned long long (*)(const char *))dlsym(fake, "fake_nvml_energy_calls_off");
    int (*refs)(void) = (int (*)(void))dlsym(fake, "fake_nvml_refs");
    if (!t0 || !calls || !off || !refs) return 13;
    char v[64];
    snprintf(v, sizeof v, "%.9f", t0());
    tprof_set_metadata("fake.t0_s", v);
    if (tprof_shutdown() != TPROF_OK) return 14;
    if (calls() == 0) return 15;
    if (off("trainprof-flush") != 0) return 16; /* energy read only on the flusher thread */
    if (refs() != 0) return 17;                 /* the sampler gave its NVML reference back */
    return 0;
}

/* NVML missing (or failing): the monitor answers TPROF_ERR_UNAVAILABLE with zeros, and a
 * session records as usual. */
static int child_absent(const char *dir) {
    tprof_energy *m = NULL;
    if (tprof_energy_setup(NULL, 0, &m) != TPROF_ERR_UNAVAILABLE) return 20;
    if (!m || tprof_energy_gpu_count(m) != 0) return 21;
    if (tprof_energy_resume(m) != TPROF_ERR_UNAVAILABLE) return 22;
    double r = 1, w = 1;
    if (tprof_energy_lap(m, &r, &w) != TPROF_ERR_UNAVAILABLE || r != 0 || w != 0) return 23;
    r = w = 1;
    if (tprof_energy_get_total(m, &r, &w) != TPROF_ERR_UNAVAILABLE || r != 0 || w != 0) return 24;
    if (tprof_energy_pause(m) != TPROF_ERR_UNAVAILABLE) return 25;
    tprof_energy_gpu gi = {.struct_size = sizeof gi};
    if (tprof_energy_gpu_info(m, 0, &gi) != TPROF_ERR_NOT_FOUND) return 26;
    tprof_energy_shutdown(m);
    r = w = 1;
    if (tprof_energy_lap(NULL, &r, &w) != TPROF_ERR_UNAVAILABLE || r != 0 || w != 0) return 27;
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = dir;
    c.flush_interval_ms = 10;
    if (tprof_init(&c) != TPROF_OK) return 28;
    for (int i = 0; i < 3; i++) {
        tprof_step_begin((uint64_t)i);
        sleep_ms(20);
        tprof_step_end((uint64_t)i);
    }
    return tprof_shutdown() == TPROF_OK ? 0 : 29;
}

/* trainprof run's node sampler, as cli/trainprof.c starts it: a session of this process
 * named by TRAINPROF_NVML_SAMPLER, with the node-sampler role, sampling for 400 ms. */
static int child_node_sampler(const char *dir) {
    char me[24];
    snprintf(me, sizeof me, "%d", (int)getpid());
    setenv("TRAINPROF_NVML_SAMPLER", me, 1);
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = dir;
    c.sample_hz = 0;
    c.nvml_hz = 50;
    c.flush_interval_ms = 10;
    if (tprof_init(&c) != TPROF_OK) return 40;
    tprof_set_metadata("trainprof.role", "node-sampler");
    sleep_ms(400);
    return tprof_shutdown() == TPROF_OK ? 0 : 41;
}

static int child_main(const char *scenario, const char *dir) {
    if (!strcmp(scenario, "node")) return child_node_sampler(dir);
    if (!strcmp(scenario, "session")) return child_session(dir, 0);
    if (!strcmp(scenario, "short")) return child_session(dir, 1);
    if (!strcmp(scenario, "absent")) return child_absent(dir);
    return 99;
}

/* ------------------------------------------------------------------ parent helpers */

/* Runs `scenario` in a fresh process with `env` ("K=V", NULL-terminated) added; asserts it
 * exits 0. */
static void run_child(const char *scenario, const char *const *env) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (size_t i = 0; env && env[i]; i++) putenv((char *)env[i]);
        char *argv[] = {(char *)"test_nvml", (char *)"--child", (char *)scenario, g_dir, NULL};
        execv("/proc/self/exe", argv);
        _exit(98);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st)) fprintf(stderr, "child %s exited %d\n", scenario, WEXITSTATUS(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* Values of counter `name` in time order (the sampler writes from one thread). */
static size_t series(const tp_process *p, const char *name, uint64_t *ts, double *v, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].ncounters; k++) {
            const tp_counter *c = &p->threads[i].counters[k];
            if (strcmp(c->name, name)) continue;
            if (n < max) {
                if (ts) ts[n] = c->ts;
                if (v) v[n] = c->value;
            }
            n++;
        }
    return n;
}

static size_t count_gpu_counters(const tp_process *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].ncounters; k++)
            n += !strncmp(p->threads[i].counters[k].name, "gpu", 3);
    return n;
}

static void assert_near(double got, double want, double rel, const char *what) {
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("%s: got %.6f, want %.6f (within %.1f %%)", what, got, want, 100 * rel);
}

static const char *const k_fake_env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, NULL};

/* ------------------------------------------------------------------ the sampler */

static void test_sampler_counters(void **state) {
    (void)state;
    fresh_dir("counters");
    run_child("session", k_fake_env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    static uint64_t ts[4096];
    static double v[4096];
    /* every metric, for both GPUs; the instant power field only where the fake supports it */
    static const char *const both[] = {"power_w", "energy_j", "util_percent", "mem_util_percent",
                                       "mem_used_bytes", "sm_clock_mhz", "temp_c",
                                       "power_limit_w", "clock_event_reasons"};
    for (int g = 0; g < 2; g++)
        for (size_t m = 0; m < sizeof both / sizeof *both; m++) {
            char name[64];
            snprintf(name, sizeof name, "gpu%d.%s", g, both[m]);
            size_t n = series(p, name, NULL, NULL, 0);
            if (n < 20) fail_msg("%s: %zu samples, want >= 20 (50 Hz over ~0.9 s)", name, n);
        }
    assert_true(series(p, "gpu0.power_instant_w", NULL, v, 1) > 0);
    assert_true(v[0] == 250.0);
    assert_int_equal(series(p, "gpu1.power_instant_w", NULL, NULL, 0), 0);
    /* scripted values arrive unchanged, in their units */
    size_t n = series(p, "gpu0.power_w", NULL, v, 4096);
    for (size_t i = 0; i < n; i++) assert_true(v[i] == 250.0);
    series(p, "gpu0.util_percent", NULL, v, 1);
    assert_true(v[0] == 95.0);
    series(p, "gpu1.temp_c", NULL, v, 1);
    assert_true(v[0] == 72.0);
    series(p, "gpu0.power_limit_w", NULL, v, 1);
    assert_true(v[0] == 700.0);
    series(p, "gpu0.sm_clock_mhz", NULL, v, 1);
    assert_true(v[0] == 1980.0);
    n = series(p, "gpu1.sm_clock_mhz", NULL, v, 4096);
    for (size_t i = 0; i < n; i++) assert_true(v[i] == 1500.0 || v[i] == 1700.0);
    n = series(p, "gpu1.clock_event_reasons", NULL, v, 4096);
    for (size_t i = 0; i < n; i++) assert_true(v[i] == 4.0); /* SW power cap */
    series(p, "gpu0.clock_event_reasons", NULL, v, 1);
    assert_true(v[0] == 0.0);
    /* energy: 0 at the first sample, then 250 W times the time between samples */
    n = series(p, "gpu0.energy_j", ts, v, 4096);
    assert_true(n >= 20 && n < 4096);
    assert_true(v[0] == 0.0);
    for (size_t i = 1; i < n; i++) assert_true(v[i] >= v[i - 1]);
    assert_near(v[n - 1], 250.0 * (double)(ts[n - 1] - ts[0]) / 1e9, 0.01,
                "gpu0 energy over the run");
    /* the last sample is the one taken at shutdown, after the last step */
    tp_steps st;
    assert_int_equal(tp_find_steps(p, NULL, 1, &st), TPROF_OK);
    assert_int_equal(st.nsteps, 5);
    assert_true(ts[n - 1] > st.steps[4].end);
    tp_steps_free(&st);
    /* metadata, once */
    assert_string_equal(tp_meta(p, "gpu.0.uuid"), UUID0);
    assert_string_equal(tp_meta(p, "gpu.1.uuid"), UUID1);
    assert_string_equal(tp_meta(p, "gpu.1.name"), "Fake GPU 1");
    assert_string_equal(tp_meta(p, "gpu.0.memory_total_bytes"), "85899345920");
    assert_true(atof(tp_meta(p, "gpu.1.power_limit_w")) == 400.0);
    assert_string_equal(tp_meta(p, "gpu.0.pci_bus_id"), "00000000:10:00.0");
    assert_string_equal(tp_meta(p, "gpu.0.sm_clock_max_mhz"), "1980");
    assert_string_equal(tp_meta(p, "nvml.driver_version"), "999.99.99-fake");
    assert_string_equal(tp_meta(p, "nvml.devices"), "0,1");
    assert_string_equal(tp_meta(p, "nvml.match"), "all");
    assert_non_null(
        strstr(tp_meta(p, "capability.nvml"), "sampling 2 GPUs (NVML indices 0,1) at 50 Hz"));
    tp_run_free(&run);
}

/* A rate past one sample a flush is said as asked and bounded: 50 Hz with a 40 ms flusher. */
static void test_sampler_rate_bound(void **state) {
    (void)state;
    fresh_dir("rate");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "CHILD_FLUSH_MS=40",
                                      NULL};
    run_child("session", env);
    tp_run run;
    load(&run);
    const char *cap = tp_meta(&run.procs[0], "capability.nvml");
    assert_non_null(cap);
    assert_non_null(strstr(cap, "sampling 2 GPUs (NVML indices 0,1) at 50 Hz asked, at most 25 Hz "
                                "(one sample a flush, TRAINPROF_FLUSH_MS=40), driver "));
    tp_run_free(&run);
}

/* E(t) of GPU 1 in the fake's script, joules since the fake's t=0 */
static double gpu1_energy(double t) { return 100.0 * t + 25.0 * t * t; }

static void test_report_energy(void **state) {
    (void)state;
    fresh_dir("report");
    run_child("session", k_fake_env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    assert_string_equal(jstr(rep, "ranks.0.nvml.per"), "step");
    assert_int_equal((int)jnum(rep, "ranks.0.steps.measured"), 4);
    /* GPU 0 draws 250 W: energy per step is 250 W times the mean step time */
    double mean_s = jnum(rep, "ranks.0.steps.mean_ms") / 1e3;
    assert_int_equal((int)jnum(rep, "ranks.0.nvml.gpus.0.steps_with_energy"), 4);
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j"), 250.0 * mean_s, 0.02,
                "gpu0 J/step");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_wh"), 250.0 * mean_s / 3600.0,
                0.02, "gpu0 Wh/step");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.avg_power_w"), 250.0, 0.02, "gpu0 W");
    /* the integral of the power samples over the same span gives the same energy */
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_from_power_j"),
                jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j"), 0.02, "gpu0 J/step from power");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.power_mean_w"), 250.0, 1e-9, "gpu0 power samples");
    /* GPU 1's power ramps: its energy per step is the integral of the ramp over each step */
    tp_steps st;
    assert_int_equal(tp_find_steps(p, NULL, 1, &st), TPROF_OK);
    double t0 = atof(tp_meta(p, "fake.t0_s")), want = 0;
    for (size_t i = st.nwarmup; i < st.nsteps; i++)
        want += gpu1_energy((double)st.steps[i].end / 1e9 - t0) -
                gpu1_energy((double)st.steps[i].start / 1e9 - t0);
    want /= (double)(st.nsteps - st.nwarmup);
    tp_steps_free(&st);
    assert_near(jnum(rep, "ranks.0.nvml.gpus.1.energy_per_step_j"), want, 0.02, "gpu1 J/step");
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.power_max_w") >
                jnum(rep, "ranks.0.nvml.gpus.1.power_mean_w"));
    /* both together */
    assert_near(jnum(rep, "ranks.0.nvml.energy_per_step_j"), 250.0 * mean_s + want, 0.02,
                "sum J/step");
    /* the gauges */
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.power_limit_w") == 700.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.power_limit_w") == 400.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.sm_clock_mhz_min") == 1500.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.sm_clock_mhz_max") == 1700.0);
    double mean_clk = jnum(rep, "ranks.0.nvml.gpus.1.sm_clock_mhz_mean");
    assert_true(mean_clk > 1500.0 && mean_clk < 1700.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.sm_clock_mhz_mean") == 1980.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.temp_c_max") == 72.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.util_percent_mean") == 95.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.mem_used_peak_bytes") == 2.0 * 1073741824.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.mem_total_bytes") == 80.0 * 1073741824.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.mem_used_peak_share") == 2.0 / 80.0);
    /* GPU 0's memory grows 1 GiB/s from 1 GiB: the peak inside the steps is above 1.5 GiB */
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.mem_used_peak_bytes") > 1.5 * 1073741824.0);
    /* clock events: GPU 1 is held by the power cap in every sample, GPU 0 never */
    assert_true(cJSON_IsTrue(jget(rep, "ranks.0.nvml.gpus.1.clock_events.throttled")));
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.clock_events.throttled_share") == 1.0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.1.clock_events.reasons.0"), "SW power cap");
    assert_true(cJSON_IsFalse(jget(rep, "ranks.0.nvml.gpus.0.clock_events.throttled")));
    assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.nvml.gpus.0.clock_events.reasons")), 0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.uuid"), UUID0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.name"), "Fake GPU 0");
    assert_string_equal(jstr(rep, "ranks.0.nvml.driver_version"), "999.99.99-fake");
    assert_non_null(strstr(jstr(rep, "capabilities.nvml.status"), "sampling 2 GPUs"));
    /* the text report has the same figures */
    char *text = report_text(&run, &o);
    char line[128];
    snprintf(line, sizeof line, "NVML GPU 0 Fake GPU 0 (%s): %.1f J per step", UUID0,
             jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j"));
    if (!strstr(text, line)) fail_msg("no \"%s\" in:\n%s", line, text);
    assert_non_null(strstr(text, "clock events: SW power cap (throttled in 100 % of samples)"));
    assert_non_null(strstr(text, "NVML GPUs together:"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* A GPU without the energy counter (NOT_SUPPORTED, as on many GPUs and vGPUs): the sampler
 * records why, and the report integrates the power it sampled. GPU 0 draws a constant 250 W
 * (its instantaneous field is sampled): the integral over the measured steps' span is 250 W
 * times that span, to rounding; GPU 1's power ramps (only the averaged reading, power_w):
 * the integral of the ramp's samples. */
static void test_report_energy_without_counter(void **state) {
    (void)state;
    fresh_dir("nocounter");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "FAKE_NVML_NO_ENERGY=1",
                                      NULL};
    run_child("session", env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(series(p, "gpu0.energy_j", NULL, NULL, 0), 0);
    const char *why =
        "unsupported: nvmlDeviceGetTotalEnergyConsumption answered \"Not Supported\" (3)";
    assert_string_equal(tp_meta(p, "gpu.0.energy_counter"), why);
    assert_string_equal(tp_meta(p, "gpu.1.energy_counter"), why);
    tp_steps st;
    assert_int_equal(tp_find_steps(p, NULL, 1, &st), TPROF_OK);
    assert_int_equal(st.nsteps - st.nwarmup, 4);
    uint64_t w0 = st.steps[st.nwarmup].start, w1 = st.steps[st.nsteps - 1].end;
    double t0 = atof(tp_meta(p, "fake.t0_s"));
    double ramp = gpu1_energy((double)w1 / 1e9 - t0) - gpu1_energy((double)w0 / 1e9 - t0);
    tp_steps_free(&st);
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    assert_string_equal(jstr(rep, "ranks.0.nvml.energy_method"), "integrated_power");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_method"), "integrated_power");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_series"), "power_instant_w");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_counter"), why);
    double span_s = (double)(w1 - w0) / 1e9;
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_j"), 250.0 * span_s, 1e-12, "gpu0 J");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j"), 250.0 * span_s / 4.0, 1e-12,
                "gpu0 J/step");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.avg_power_w"), 250.0, 1e-12, "gpu0 W");
    /* 50 Hz with a 10 ms flusher: samples about 20 ms apart; steps of 150 ms are longer
     * than the readings' 100 ms resolution */
    double iv = jnum(rep, "ranks.0.nvml.gpus.0.sample_interval_ms");
    assert_true(iv >= 15.0 && iv <= 40.0);
    assert_true(cJSON_IsFalse(jget(rep, "ranks.0.nvml.gpus.0.energy_approximate")));
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.1.energy_series"), "power_w");
    assert_near(jnum(rep, "ranks.0.nvml.gpus.1.energy_j"), ramp, 0.02, "gpu1 J");
    char *text = report_text(&run, &o);
    assert_non_null(strstr(text, "integrated from power_instant_w samples every"));
    assert_null(strstr(text, ": no energy ("));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* A driver reload restarts the counter at 0: the recorded energy goes on from where it was
 * (losing at most the part between the last sample before the reload and the reload). */
static void test_energy_counter_reset(void **state) {
    (void)state;
    fresh_dir("reset");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH,
                                      "FAKE_NVML_RESET_MS=400", NULL};
    run_child("session", env);
    tp_run run;
    load(&run);
    static uint64_t ts[4096];
    static double v[4096];
    size_t n = series(&run.procs[0], "gpu0.energy_j", ts, v, 4096);
    assert_true(n >= 20 && n < 4096);
    for (size_t i = 1; i < n; i++)
        if (v[i] < v[i - 1])
            fail_msg("energy went back at sample %zu: %f -> %f", i, v[i - 1], v[i]);
    double span = (double)(ts[n - 1] - ts[0]) / 1e9, full = 250.0 * span;
    /* before the reload the fake's counter stood near 5e6 mJ: re-basing on it would jump by
     * thousands of joules; losing the last 20 ms sample gap before the reload costs 5 J
     * (generously 50 J on a loaded machine) */
    assert_true(v[n - 1] <= full * 1.01);
    assert_true(v[n - 1] >= full - 50.0);
    tp_run_free(&run);
}

static void test_local_rank_1_does_not_sample(void **state) {
    (void)state;
    fresh_dir("lr1");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "LOCAL_RANK=1",
                                      "EXPECT_FAKE=0", NULL};
    run_child("short", env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(count_gpu_counters(p), 0);
    assert_non_null(strstr(tp_meta(p, "capability.nvml"), "not sampled here: LOCAL_RANK=1"));
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_null(jget(rep, "ranks.0.nvml"));
    cJSON_Delete(rep);
    tp_run_free(&run);
}

static void test_all_ranks_and_visible_uuid(void **state) {
    (void)state;
    fresh_dir("allranks");
    /* local rank 1 samples when asked to; CUDA_VISIBLE_DEVICES by UUID prefix picks GPU 1 */
    static const char *const env2[] = {
        "TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "LOCAL_RANK=1", "TRAINPROF_NVML_ALL_RANKS=1",
        "CUDA_VISIBLE_DEVICES=GPU-5a1e0000-0000-4000-8000-000000000001", NULL};
    run_child("short", env2);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_true(series(p, "gpu1.energy_j", NULL, NULL, 0) > 3);
    assert_int_equal(series(p, "gpu0.energy_j", NULL, NULL, 0), 0);
    assert_string_equal(tp_meta(p, "nvml.devices"), "1");
    assert_string_equal(tp_meta(p, "nvml.match"), "uuid");
    tp_run_free(&run);
}

static void test_forked_child_does_not_sample(void **state) {
    (void)state;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer cannot follow a child that starts threads after a threaded fork
     * ("dup thread with used id"); the plain and ASan builds run this case */
    skip();
#endif
    fresh_dir("fork");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "FORK_CHILD=1", NULL};
    run_child("short", env);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(g_dir, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 2);
    int parent = run.procs[0].hdr.ppid == run.procs[1].hdr.pid ? 1 : 0;
    const tp_process *pp = &run.procs[parent], *cp = &run.procs[1 - parent];
    assert_int_equal(cp->hdr.ppid, pp->hdr.pid);
    assert_true(count_gpu_counters(pp) > 0);
    assert_int_equal(count_gpu_counters(cp), 0);
    assert_non_null(
        strstr(tp_meta(cp, "capability.nvml"), "not sampled here: forked from process"));
    tp_run_free(&run);
}

static void test_visible_index(void **state) {
    (void)state;
    fresh_dir("index");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH,
                                      "CUDA_VISIBLE_DEVICES=1", NULL};
    run_child("short", env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_true(series(p, "gpu1.power_w", NULL, NULL, 0) > 3);
    assert_int_equal(series(p, "gpu0.power_w", NULL, NULL, 0), 0);
    assert_string_equal(tp_meta(p, "nvml.match"), "index");
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_string_equal(jstr(rep, "ranks.0.nvml.device_match"), "index");
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* CUDA_VISIBLE_DEVICES=1,0 on a node of three GPUs: CUDA reads the indices in its own order
 * (fastest first), which NVML cannot know. The node sampler samples every GPU, and a rank
 * whose file names its CUDA device 0 as NVML's GPU 2 gets GPU 2's energy (150 W), found by
 * UUID (read as NVML indices 1,0, GPU 2 was not sampled at all). */
static void test_node_sampler_every_gpu_for_indices(void **state) {
    (void)state;
    fresh_dir("node-index");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "FAKE_NVML_GPUS=3",
                                      "CUDA_VISIBLE_DEVICES=1,0", NULL};
    run_child("node", env);
    tp_run run;
    load(&run);
    const tp_process *sp = &run.procs[0];
    assert_string_equal(tp_meta(sp, "nvml.devices"), "0,1,2");
    assert_string_equal(tp_meta(sp, "nvml.match"), "all");
    static uint64_t ts[4096];
    size_t n = series(sp, "gpu2.energy_j", ts, NULL, 4096);
    assert_true(n >= 10 && n < 4096);
    /* a rank of the same host inside the samples: 4 steps of 60 ms (the first warm-up) */
    char host[sizeof sp->hdr.host];
    snprintf(host, sizeof host, "%s", sp->hdr.host);
    uint64_t rt = sp->hdr.start_realtime_ns, mono = sp->hdr.start_mono_ns, b0 = ts[0] + 40000000ull;
    assert_true(b0 + 240000000ull + 40000000ull < ts[n - 1]);
    tp_run_free(&run);
    synth_file *f = synth_open(g_dir, host, 424242, rt, mono);
    assert_non_null(f);
    synth_thread(f, 1, 424242);
    synth_rank(f, 0, 1);
    synth_meta(f, "cuda.0.uuid", "GPU-5a1e0000-0000-4000-8000-000000000002");
    synth_meta(f, "cuda.1.uuid", UUID1);
    for (uint64_t k = 0; k < 4; k++) {
        synth_step_begin(f, 1, b0 + k * 60000000ull, k);
        synth_kernel(f, 1, b0 + k * 60000000ull + 1000000, b0 + k * 60000000ull + 2000000, 0, 7,
                     (uint32_t)k + 1, "gemm_kernel");
        synth_step_end(f, 1, b0 + (k + 1) * 60000000ull, k);
    }
    synth_end_of_file(f, b0 + 250000000ull, 0);
    assert_int_equal(synth_close(f), 0);
    char err[256];
    assert_int_equal(tp_run_load(g_dir, &run, err, sizeof err), TPROF_OK);
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    assert_string_equal(jstr(rep, "ranks.0.nvml.sampled_by"), "node sampler");
    assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.nvml.gpus")), 1);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.index") == 2.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.cuda_device") == 0.0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_method"), "counter");
    /* the fake's counter is read a moment before or after the sampler stamps the sample:
     * with every core busy (the TSan suite under load) that moment reached 0.34 % of a step */
    assert_near(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j"), 150.0 * 0.060, 2e-2,
                "GPU 2 J/step");
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* CUDA_VISIBLE_DEVICES names a MIG device: its GPU (1) is sampled, with its MIG devices
 * listed and the one named, and the report flags its energy as shared by the MIG
 * instances. */
static void test_visible_mig(void **state) {
    (void)state;
    fresh_dir("mig");
    static const char *const env[] = {
        "TRAINPROF_NVML_LIB=" FAKE_NVML_PATH, "FAKE_NVML_MIG=1",
        "CUDA_VISIBLE_DEVICES=MIG-5a1e0000-0000-5000-8000-0000000001a1", NULL};
    run_child("short", env);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_string_equal(tp_meta(p, "nvml.devices"), "1");
    assert_true(series(p, "gpu1.power_w", NULL, NULL, 0) > 3);
    assert_int_equal(series(p, "gpu0.power_w", NULL, NULL, 0), 0);
    assert_string_equal(tp_meta(p, "gpu.1.mig_uuids"), "MIG-5a1e0000-0000-5000-8000-0000000001a0,"
                                                       "MIG-5a1e0000-0000-5000-8000-0000000001a1");
    assert_string_equal(tp_meta(p, "gpu.1.mig_device"), "MIG-5a1e0000-0000-5000-8000-0000000001a1");
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    assert_true(cJSON_IsTrue(jget(rep, "ranks.0.nvml.gpus.0.shared_by_mig_instances")));
    cJSON_Delete(rep);
    tp_run_free(&run);
}

static void check_absent(const char *const *env, const char *reason) {
    run_child("absent", env);
    tp_run run;
    load(&run);
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    const char *status = jstr(rep, "capabilities.nvml.status");
    if (!strstr(status, reason)) fail_msg("nvml status \"%s\" lacks \"%s\"", status, reason);
    assert_null(jget(rep, "ranks.0.nvml"));
    assert_int_equal((int)jnum(rep, "ranks.0.steps.count"), 3); /* the rest recorded */
    assert_int_equal(count_gpu_counters(&run.procs[0]), 0);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

static void test_absent_library(void **state) {
    (void)state;
    fresh_dir("absent");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=/nonexistent/libnvidia-ml.so.1", NULL};
    check_absent(env, "unavailable: cannot load /nonexistent/libnvidia-ml.so.1");
}

static void test_init_fails(void **state) {
    (void)state;
    fresh_dir("initfail");
    static const char *const env[] = {"TRAINPROF_NVML_LIB=" FAKE_NVML_PATH,
                                      "FAKE_NVML_INIT_FAIL=1", NULL};
    check_absent(env, "unavailable: no NVIDIA driver loaded");
}

/* ------------------------------------------------------------------ the EnergyMonitor */

static void *g_fake;
static void (*g_set)(unsigned, unsigned long long);
static int (*g_refs)(void);

static void fake_setup(void) {
    if (!g_fake) g_fake = dlopen(FAKE_NVML_PATH, RTLD_NOW);
    assert_non_null(g_fake);
    g_set = (void (*)(unsigned, unsigned long long))dlsym(g_fake, "fake_nvml_set_energy");
    g_refs = (int (*)(void))dlsym(g_fake, "fake_nvml_refs");
    assert_non_null(g_set);
    assert_non_null(g_refs);
}

static double gpu_j(tprof_energy *m, size_t i, int which) {
    tprof_energy_gpu gi;
    memset(&gi, 0, sizeof gi);
    gi.struct_size = sizeof gi;
    assert_int_equal(tprof_energy_gpu_info(m, i, &gi), TPROF_OK);
    return which == 0 ? gi.lap_joules : which == 1 ? gi.total_joules : gi.current_joules;
}

static void test_monitor_arithmetic(void **state) {
    (void)state;
    fake_setup();
    const char *devs[] = {UUID0, "1"};
    tprof_energy *m = NULL;
    assert_int_equal(tprof_energy_setup(devs, 2, &m), TPROF_OK);
    assert_int_equal(tprof_energy_gpu_count(m), 2);
    assert_int_equal(g_refs(), 1);
    tprof_energy_gpu gi = {.struct_size = sizeof gi};
    assert_int_equal(tprof_energy_gpu_info(m, 1, &gi), TPROF_OK);
    assert_string_equal(gi.uuid, UUID1);
    assert_string_equal(gi.name, "Fake GPU 1");
    assert_int_equal(gi.nvml_index, 1);
    double r, w;
    /* paused after setup: nothing counts */
    g_set(0, 1000), g_set(1, 2000);
    assert_int_equal(tprof_energy_lap(m, &r, &w), TPROF_OK);
    assert_true(r == 0 && w == 0);
    /* resume, then 2 J + 0.5 J */
    assert_int_equal(tprof_energy_resume(m), TPROF_OK);
    g_set(0, 3000), g_set(1, 2500);
    assert_int_equal(tprof_energy_lap(m, &r, &w), TPROF_OK);
    assert_true(r == 2.5 && w == 2.5); /* no hook: the world is this rank */
    assert_true(gpu_j(m, 0, 0) == 2.0 && gpu_j(m, 1, 0) == 0.5);
    /* 0.5 + 0.1 J, a pause during which 6.5 + 6.4 J are drawn, then 0.5 + 0.1 J again */
    g_set(0, 3500), g_set(1, 2600);
    assert_int_equal(tprof_energy_pause(m), TPROF_OK);
    assert_true(gpu_j(m, 0, 2) == 0.5);
    g_set(0, 10000), g_set(1, 9000);
    assert_int_equal(tprof_energy_resume(m), TPROF_OK);
    g_set(0, 10500), g_set(1, 9100);
    assert_int_equal(tprof_energy_resume(m), TPROF_OK); /* already running: no effect */
    assert_int_equal(tprof_energy_lap(m, &r, NULL), TPROF_OK);
    assert_true(fabs(r - 1.2) < 1e-12);
    assert_true(gpu_j(m, 0, 0) == 1.0 && fabs(gpu_j(m, 1, 0) - 0.2) < 1e-12);
    assert_int_equal(tprof_energy_get_total(m, &r, &w), TPROF_OK);
    assert_true(fabs(r - 3.7) < 1e-12 && fabs(w - 3.7) < 1e-12);
    assert_true(gpu_j(m, 0, 1) == 3.0 && fabs(gpu_j(m, 1, 1) - 0.7) < 1e-12);
    /* a lap while paused counts nothing drawn since the pause */
    assert_int_equal(tprof_energy_pause(m), TPROF_OK);
    g_set(0, 20000);
    assert_int_equal(tprof_energy_lap(m, &r, &w), TPROF_OK);
    assert_true(r == 0);
    /* a driver reload: the counter restarts from 0; what it shows is the energy since */
    assert_int_equal(tprof_energy_resume(m), TPROF_OK);
    g_set(0, 100);
    assert_int_equal(tprof_energy_lap(m, &r, &w), TPROF_OK);
    assert_true(fabs(r - 0.1) < 1e-12);
    assert_int_equal(tprof_energy_get_total(m, &r, NULL), TPROF_OK);
    assert_true(fabs(r - 3.8) < 1e-12);
    tprof_energy_shutdown(m);
    assert_int_equal(g_refs(), 0); /* the monitor's NVML reference is given back */
    assert_int_equal(tprof_energy_gpu_info(NULL, 0, &gi), TPROF_ERR_NOT_FOUND);
    gi.struct_size = 1;
    assert_int_equal(tprof_energy_gpu_info(m, 0, &gi), TPROF_ERR_INVALID_ARG);
    assert_int_equal(tprof_energy_setup(NULL, 1, &m), TPROF_ERR_INVALID_ARG);
    assert_int_equal(tprof_energy_setup(NULL, 0, NULL), TPROF_ERR_INVALID_ARG);
}

/* Devices chosen by default and by name. */
static size_t setup_count(const char *const *devs, size_t n, int want_rc, unsigned *first) {
    tprof_energy *m = NULL;
    int rc = tprof_energy_setup(devs, n, &m);
    if (rc != want_rc) fail_msg("setup returned %d, want %d", rc, want_rc);
    assert_non_null(m);
    size_t c = tprof_energy_gpu_count(m);
    if (c && first) {
        tprof_energy_gpu gi = {.struct_size = sizeof gi};
        assert_int_equal(tprof_energy_gpu_info(m, 0, &gi), TPROF_OK);
        *first = (unsigned)gi.nvml_index;
    }
    tprof_energy_shutdown(m);
    return c;
}

/* A GPU without the energy counter: the monitor says so once, at setup, by name, and its laps
 * count nothing and answer TPROF_ERR_UNAVAILABLE (never a silent 0 J "success"). */
static void test_monitor_without_counter(void **state) {
    (void)state;
    fake_setup();
    setenv("FAKE_NVML_NO_ENERGY", "1", 1);
    char path[] = "/tmp/tprof-nvml-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    const char *devs[] = {"1"};
    tprof_energy *m = NULL;
    int rc = tprof_energy_setup(devs, 1, &m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    int resumed = tprof_energy_resume(m);
    double r = 1, w = 1;
    int lapped = tprof_energy_lap(m, &r, &w);
    tprof_energy_shutdown(m);
    unsetenv("FAKE_NVML_NO_ENERGY"); /* before any assertion: the later tests need the counter */
    char buf[2048] = "";
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    assert_int_equal(rc, TPROF_OK);
    assert_int_equal(resumed, TPROF_ERR_UNAVAILABLE);
    assert_int_equal(lapped, TPROF_ERR_UNAVAILABLE);
    assert_true(r == 0.0);
    assert_true(got > 0);
    buf[got] = 0;
    if (!strstr(buf, "EnergyMonitor: GPU 1 (" UUID1 ") gives no total-energy counter"))
        fail_msg("no warning naming GPU 1 in: %s", buf);
}

static void test_monitor_devices(void **state) {
    (void)state;
    fake_setup();
    unsigned first = 99;
    assert_int_equal(setup_count(NULL, 0, TPROF_OK, NULL), 2); /* everything visible */
    setenv("LOCAL_RANK", "1", 1); /* torchrun: this rank's GPU is cuda:1 */
    assert_int_equal(setup_count(NULL, 0, TPROF_OK, &first), 1);
    assert_int_equal(first, 1);
    unsetenv("LOCAL_RANK");
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    assert_int_equal(setup_count(NULL, 0, TPROF_OK, &first), 1);
    assert_int_equal(first, 1);
    setenv("CUDA_VISIBLE_DEVICES", " " UUID0 " ", 1);
    assert_int_equal(setup_count(NULL, 0, TPROF_OK, &first), 1);
    assert_int_equal(first, 0);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1e0000-0000-4000-8000-00000000000", 1); /* ambiguous */
    assert_int_equal(setup_count(NULL, 0, TPROF_ERR_UNAVAILABLE, NULL), 0);
    setenv("CUDA_VISIBLE_DEVICES", "1,7,0", 1); /* CUDA stops at the invalid 7 */
    assert_int_equal(setup_count(NULL, 0, TPROF_OK, &first), 1);
    assert_int_equal(first, 1);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    assert_int_equal(setup_count(NULL, 0, TPROF_ERR_UNAVAILABLE, NULL), 0);
    unsetenv("CUDA_VISIBLE_DEVICES");
    /* by name: torch prints UUIDs without "GPU-"; a prefix is enough when unique */
    const char *bare[] = {"5A1E0000-0000-4000-8000-000000000001"};
    assert_int_equal(setup_count(bare, 1, TPROF_OK, &first), 1);
    assert_int_equal(first, 1);
    const char *dup[] = {"0", UUID0, "5a1e0000-0000-4000-8000-000000000000"};
    assert_int_equal(setup_count(dup, 3, TPROF_OK, &first), 1);
    const char *missing[] = {"GPU-ffff", "0"};
    assert_int_equal(setup_count(missing, 2, TPROF_ERR_NOT_FOUND, &first), 1);
    assert_int_equal(first, 0);
    assert_int_equal(g_refs(), 0);
}

/* Two simulated ranks (threads) sharing a collectives hook: lap and get_total return each
 * rank's own energy and the sum over both. */
static pthread_barrier_t g_hook_bar, g_phase;
static double g_slot[2];
static __thread int t_rank;

static int hook_all_reduce(void *ctx, double *values, size_t count, tprof_reduce_op op) {
    (void)ctx;
    if (count != 1 || op != TPROF_REDUCE_SUM) return 1;
    g_slot[t_rank] = values[0];
    pthread_barrier_wait(&g_hook_bar);
    double s = g_slot[0] + g_slot[1];
    pthread_barrier_wait(&g_hook_bar);
    values[0] = s;
    return 0;
}

static int hook_all_gather(void *ctx, const void *send, size_t bytes, void *recv) {
    (void)ctx, (void)send, (void)bytes, (void)recv;
    return 1; /* not used by the EnergyMonitor when all_reduce exists */
}

typedef struct rank_result {
    int rank;
    double lap_rank, lap_world, tot_rank, tot_world;
    int rc[4];
} rank_result;

static void *rank_main(void *arg) {
    rank_result *res = arg;
    t_rank = res->rank;
    const char *dev[1] = {res->rank == 0 ? UUID0 : "1"};
    tprof_energy *m = NULL;
    res->rc[0] = tprof_energy_setup(dev, 1, &m);
    res->rc[1] = tprof_energy_resume(m);
    pthread_barrier_wait(&g_phase); /* counters read at resume */
    pthread_barrier_wait(&g_phase); /* the main thread moved them */
    res->rc[2] = tprof_energy_lap(m, &res->lap_rank, &res->lap_world);
    res->rc[3] = tprof_energy_get_total(m, &res->tot_rank, &res->tot_world);
    tprof_energy_shutdown(m);
    return NULL;
}

static void test_monitor_world_sum(void **state) {
    (void)state;
    fake_setup();
    pthread_barrier_init(&g_hook_bar, NULL, 2);
    pthread_barrier_init(&g_phase, NULL, 3);
    tprof_collectives c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.rank = 0;
    c.world_size = 2;
    c.all_reduce = hook_all_reduce;
    c.all_gather = hook_all_gather;
    assert_int_equal(tprof_set_collectives(&c), TPROF_OK);
    g_set(0, 1000), g_set(1, 50000);
    rank_result res[2] = {{.rank = 0}, {.rank = 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, rank_main, &res[i]), 0);
    pthread_barrier_wait(&g_phase);
    g_set(0, 4000), g_set(1, 57000); /* rank 0's GPU: 3 J, rank 1's: 7 J */
    pthread_barrier_wait(&g_phase);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_int_equal(tprof_set_collectives(NULL), TPROF_OK);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) assert_int_equal(res[i].rc[k], TPROF_OK);
    assert_true(res[0].lap_rank == 3.0 && res[1].lap_rank == 7.0);
    assert_true(res[0].lap_world == 10.0 && res[1].lap_world == 10.0);
    assert_true(res[0].tot_rank == 3.0 && res[1].tot_rank == 7.0);
    assert_true(res[0].tot_world == 10.0 && res[1].tot_world == 10.0);
    pthread_barrier_destroy(&g_hook_bar);
    pthread_barrier_destroy(&g_phase);
    assert_int_equal(g_refs(), 0);
}

/* The shared loader's failures are codes of the public table: a device no spec matches is
 * not found; a counter the GPU lacks, a driver that does not initialise, unavailable. */
static void test_shared_loader_codes(void **state) {
    (void)state;
    char why[256] = "";
    const tprof__nvml_api *api = tprof__nvml_load(FAKE_NVML_PATH, why, sizeof why);
    if (!api) fail_msg("the fake NVML did not load: %s", why);
    assert_int_equal(tprof__nvml_init(api, why, sizeof why), TPROF_OK);
    tprof__nvml_dev d;
    assert_int_equal(tprof__nvml_lookup(api, "1", &d), TPROF_OK);
    assert_string_equal(d.uuid, UUID1);
    assert_int_equal(tprof__nvml_lookup(api, "GPU-ffffffff", &d), TPROF_ERR_NOT_FOUND);
    assert_int_equal(tprof__nvml_lookup(api, "7", &d), TPROF_ERR_NOT_FOUND);
    assert_int_equal(tprof__nvml_lookup(api, NULL, &d), TPROF_ERR_INVALID_ARG);
    uint64_t mj = 0;
    assert_int_equal(tprof__nvml_lookup(api, "0", &d), TPROF_OK);
    assert_int_equal(tprof__nvml_energy_mj(api, d.dev, &mj), TPROF_OK);
    setenv("FAKE_NVML_NO_ENERGY", "1", 1);
    int no_counter = tprof__nvml_energy_mj(api, d.dev, &mj);
    unsetenv("FAKE_NVML_NO_ENERGY"); /* before any assertion: the later tests need it */
    assert_int_equal(no_counter, TPROF_ERR_UNAVAILABLE);
    api->nvmlShutdown();
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
    int init = tprof__nvml_init(api, why, sizeof why);
    unsetenv("FAKE_NVML_INIT_FAIL");
    assert_int_equal(init, TPROF_ERR_UNAVAILABLE);
    assert_non_null(strstr(why, "no NVIDIA driver loaded"));
}

static void test_helpers(void **state) {
    (void)state;
    assert_true(tprof_energy_joules_per_step(10.0, 4) == 2.5);
    assert_true(tprof_energy_wh_per_step(3600.0, 2) == 0.5);
    assert_true(tprof_energy_joules_per_sample(12.0, 48) == 0.25);
    assert_true(tprof_energy_wh_per_sample(7200.0, 4) == 0.5);
    assert_true(tprof_energy_avg_watts(500.0, 2000000000ull) == 250.0);
    assert_true(tprof_energy_joules_per_step(1.0, 0) == 0.0);
    assert_true(tprof_energy_wh_per_sample(1.0, 0) == 0.0);
    assert_true(tprof_energy_avg_watts(1.0, 0) == 0.0);
    /* Megatron's log line for 20 iterations on 8 GPUs taking 10 s in all */
    double world = 16000.0;
    assert_true(tprof_energy_joules_per_step(world, 20) / 8 == 100.0);
    assert_true(tprof_energy_avg_watts(world / 8, 10000000000ull) == 200.0);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3]);
    /* hermetic: the launcher's variables of the machine running the tests do not apply */
    static const char *const clear[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID",
                                        "CUDA_VISIBLE_DEVICES", "TRAINPROF_NVML_ALL_RANKS",
                                        "TRAINPROF_NVML_HZ", "TRAINPROF_DIR", "FAKE_NVML_GPUS",
                                        "FAKE_NVML_RESET_MS", "FAKE_NVML_INIT_FAIL"};
    for (size_t i = 0; i < sizeof clear / sizeof *clear; i++) unsetenv(clear[i]);
    setenv("TRAINPROF_NVML_LIB", FAKE_NVML_PATH, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampler_counters),
        cmocka_unit_test(test_sampler_rate_bound),
        cmocka_unit_test(test_report_energy),
        cmocka_unit_test(test_report_energy_without_counter),
        cmocka_unit_test(test_energy_counter_reset),
        cmocka_unit_test(test_local_rank_1_does_not_sample),
        cmocka_unit_test(test_all_ranks_and_visible_uuid),
        cmocka_unit_test(test_forked_child_does_not_sample),
        cmocka_unit_test(test_visible_index),
        cmocka_unit_test(test_node_sampler_every_gpu_for_indices),
        cmocka_unit_test(test_visible_mig),
        cmocka_unit_test(test_absent_library),
        cmocka_unit_test(test_init_fails),
        cmocka_unit_test(test_monitor_arithmetic),
        cmocka_unit_test(test_monitor_devices),
        cmocka_unit_test(test_monitor_without_counter),
        cmocka_unit_test(test_monitor_world_sum),
        cmocka_unit_test(test_shared_loader_codes),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
