/*
 * bench_metrics_scrape.c — the live metrics endpoint (docs/metrics.md):
 *
 *  1. Scrape latency of 1000 series: a registry (core/metrics.c, compiled in) with 1000
 *     series in the shapes trainprof serves (per-GPU gauges with gpu/uuid/host labels,
 *     per-op counters, step histograms), served by the endpoint code (core/metrics_http.c,
 *     compiled in) on loopback; GET /metrics on a fresh connection each time (as costly as
 *     a scrape gets), p50 and p99 over 2000 scrapes. Target: p99 <= 1 ms.
 *  2. The job's cost: a recording session with its endpoint (TRAINPROF_METRICS_PORT=0)
 *     runs steps of ~2 ms of arithmetic through the API, alternately without scrapes and
 *     with 10 scrapes/s of both the session's endpoint and the 1000-series one; the ratio
 *     of mean step times. Target: <= 1.01 (nothing measurable). Phases alternate so that a
 *     noisy VM moves both.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_common.h"
#include "core/metrics.h"
#include "trainprof.h"

/* metrics_http.c is compiled into this program, outside libtrainprof, whose internals are
 * hidden: the two it calls (core/writer.h, core/internal.h), standing in. */
int tprof__fd_reserved_base(void);
int tprof__fd_reserved_base(void) { return 960; }
void tprof__log(int level, const char *fmt, ...);
void tprof__log(int level, const char *fmt, ...) {
    va_list ap;
    (void)level;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int scrape(int port, size_t *bytes) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    static const char req[] =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return -1;
    }
    char buf[65536];
    size_t n = 0;
    int status = 0;
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        if (n == 0 && r > 12) status = atoi(buf + 9);
        n += (size_t)r;
    }
    close(fd);
    if (bytes) *bytes = n;
    return status;
}

/* 1000 series: 8 GPUs x 10 gauges, 4 step histograms (19 lines each, counted as 1 series
 * each), and per-op/communicator counters to fill up */
static void fill_registry(void) {
    tprof__m_enable();
    static const char *const gnames[10] = {
        "trainprof_gpu_power_watts", "trainprof_gpu_power_instant_watts",
        "trainprof_gpu_energy_joules_total", "trainprof_gpu_utilization_ratio",
        "trainprof_gpu_memory_utilization_ratio", "trainprof_gpu_memory_used_bytes",
        "trainprof_gpu_sm_clock_hertz", "trainprof_gpu_temperature_celsius",
        "trainprof_gpu_power_limit_watts", "trainprof_gpu_clock_event_reasons"};
    int series = 0;
    for (int m = 0; m < 10; m++) {
        int f = tprof__m_family(gnames[m], "a GPU metric", m == 2 ? TPROF_M_COUNTER : TPROF_M_GAUGE,
                                NULL, 0);
        for (int g = 0; g < 8; g++) {
            char gi[8], uuid[64];
            snprintf(gi, sizeof gi, "%d", g);
            snprintf(uuid, sizeof uuid, "GPU-5b1a7e2c-0c61-4f8a-9d3e-00000000000%d", g);
            int s = tprof__m_series(f, (const char *const[]){"gpu", gi, "uuid", uuid, "host",
                                                             "node-017", NULL});
            tprof__m_set(s, 123.456 * (g + 1) + m);
            series++;
        }
    }
    static const double b[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                               0.5,   1,      2.5,   5,    10,    25,    60,   120};
    int h = tprof__m_family("trainprof_step_duration_seconds", "steps", TPROF_M_HISTOGRAM, b, 16);
    for (int r = 0; r < 4; r++) {
        char rk[8];
        snprintf(rk, sizeof rk, "%d", r);
        int s = tprof__m_series(h, (const char *const[]){"rank", rk, NULL});
        for (int k = 0; k < 100; k++) tprof__m_observe(s, 0.0371 + 0.0001 * k);
        series++;
    }
    static const char *const ops[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                      "Send", "Recv", "AllToAll", "Barrier"};
    int fb = tprof__m_family("trainprof_comm_bytes_total", "bytes", TPROF_M_COUNTER, NULL, 0);
    int ft = tprof__m_family("trainprof_comm_seconds_total", "time", TPROF_M_COUNTER, NULL, 0);
    for (int c = 0; series < 1000; c++) {
        char comm[24];
        snprintf(comm, sizeof comm, "0x%016x", 0x9e3779b9u * (unsigned)(c + 1));
        for (int o = 0; o < 8 && series < 1000; o++) {
            int s = tprof__m_series(o % 2 ? ft : fb, (const char *const[]){
                "communicator", comm, "op", ops[o], NULL});
            tprof__m_add(s, 1e9 * (o + 1) + c);
            series++;
        }
    }
}

static volatile double g_sink;

/* ~`ms` of arithmetic, calibrated once */
static long g_iters_per_ms;
static void work(double ms) {
    double x = 1.0;
    long n = (long)(ms * (double)g_iters_per_ms);
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    g_sink = x;
}

static _Atomic int g_scrape_on, g_stop;
static int g_port_big, g_port_job;
static _Atomic long g_scrapes;

static void *scraper(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        if (atomic_load(&g_scrape_on)) {
            scrape(g_port_big, NULL);
            scrape(g_port_job, NULL);
            atomic_fetch_add(&g_scrapes, 1);
        }
        usleep(100000); /* 10 scrapes/s of each */
    }
    return NULL;
}

int main(void) {
    bench_banner("bench_metrics_scrape", "live metrics endpoint: scrape latency and job cost");
    fill_registry();
    tprof__http_cfg cfg = {"127.0.0.1", 0, NULL, NULL};
    char why[256];
    g_port_big = tprof__http_start(&cfg, why, sizeof why);
    if (g_port_big <= 0) {
        fprintf(stderr, "bench_metrics_scrape: no endpoint: %s\n", why);
        return 2;
    }
    size_t bytes = 0;
    if (scrape(g_port_big, &bytes) != 200) {
        fprintf(stderr, "bench_metrics_scrape: the endpoint does not answer 200\n");
        return 2;
    }
    char *text;
    size_t len;
    tprof__m_render(0, &text, &len);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    free(text);
    /* 1. latency */
    enum { N = 2000 };
    static double lat[N], rend[N];
    for (int i = 0; i < 100; i++) scrape(g_port_big, NULL); /* warm */
    for (int i = 0; i < N; i++) {
        uint64_t t0 = bench_mono_ns();
        if (scrape(g_port_big, NULL) != 200) {
            fprintf(stderr, "bench_metrics_scrape: a scrape failed\n");
            return 2;
        }
        lat[i] = (double)(bench_mono_ns() - t0) * 1e-3;
        t0 = bench_mono_ns();
        tprof__m_render(0, &text, &len);
        rend[i] = (double)(bench_mono_ns() - t0) * 1e-3;
        free(text);
    }
    qsort(lat, N, sizeof *lat, bench_cmp_double);
    qsort(rend, N, sizeof *rend, bench_cmp_double);
    printf("  1000 series (%zu lines, %zu bytes of response): scrape on a fresh loopback "
           "connection p50 %.0f us, p99 %.0f us, max %.0f us; rendering alone p50 %.0f us, "
           "p99 %.0f us\n",
           lines, bytes, lat[N / 2], lat[N * 99 / 100], lat[N - 1], rend[N / 2],
           rend[N * 99 / 100]);
    bench_target("scrape of 1000 series, p99", lat[N * 99 / 100] / 1000.0, 1.0, " ms");

    /* 2. the job */
    char *dir = bench_mkdtemp("metrics");
    setenv("TRAINPROF_METRICS_PORT", "0", 1);
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = dir;
    c.nvml_hz = 0;
    if (tprof_init(&c) != TPROF_OK || (g_port_job = tprof_metrics_port()) <= 0) {
        fprintf(stderr, "bench_metrics_scrape: no session endpoint\n");
        return 2;
    }
    uint64_t t0 = bench_mono_ns();
    g_iters_per_ms = 1000000;
    work(5);
    double ms = (double)(bench_mono_ns() - t0) * 1e-6;
    g_iters_per_ms = (long)(5.0 * 1000000 / ms);
    pthread_t th;
    pthread_create(&th, NULL, scraper, NULL);
    enum { PHASES = 8, STEPS = 400 };
    double mean[2] = {0, 0};
    uint64_t step = 0;
    for (int ph = 0; ph < PHASES; ph++) {
        int on = ph % 2;
        atomic_store(&g_scrape_on, on);
        usleep(50000);
        double sum = 0;
        for (int s = 0; s < STEPS; s++) {
            uint64_t a = bench_mono_ns();
            tprof_step_begin(step);
            work(2.0);
            tprof_step_end(step++);
            sum += (double)(bench_mono_ns() - a) * 1e-6;
        }
        mean[on] += sum / STEPS / (PHASES / 2);
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    tprof_shutdown();
    tprof__http_stop();
    printf("  job steps of ~2 ms, %d phases of %d: mean %.4f ms without scrapes, %.4f ms "
           "with %ld scrapes at 10/s (of 1000 series and of the job's own endpoint)\n",
           PHASES, STEPS, mean[0], mean[1], atomic_load(&g_scrapes));
    bench_target("step time with / without 10 scrapes/s", mean[1] / mean[0], 1.01, "x");
    bench_rm_dir(dir);
    free(dir);
    return 0;
}
