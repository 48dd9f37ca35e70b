/*
 * test_metrics_endpoint.c — the live metrics' endpoint of a real session on an ephemeral
 * loopback port (docs/metrics.md): step metrics from API steps, OpenMetrics negotiation,
 * the token, the capture toggle, malformed and oversized requests, a slow client and 200
 * concurrent connections while a job steps ("storm", its own ctest), 160 slow clients
 * (slowloris) beside 8 scrapes; label values that are not UTF-8 (a rank, a timer name cut
 * inside a character, an invalid byte). Every scrape checked here passes the test's own
 * check of the text format and, when promtool is installed, `promtool check metrics`.
 *
 * One session per process: each endpoint case runs in a forked child that sets its
 * TRAINPROF_METRICS_* variables, starts a session and checks with CHECK (exit status).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "capture/comm_ext.h"
#include "core/metrics.h"
#include "trainprof.h"

#include "metrics_check.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ HTTP client */

static int connect_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends `req` raw; returns the status (0 when the server closed without one) and the body
 * (malloc'ed, NUL-terminated) in *body when body is not NULL. */
static int http_raw(int port, const char *req, size_t reqlen, char **body) {
    if (body) *body = NULL;
    int fd = connect_port(port);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < reqlen) {
        ssize_t w = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may close early (oversized header) */
        off += (size_t)w;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) buf = realloc(buf, cap *= 2);
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    int status = 0;
    if (n > 12 && !strncmp(buf, "HTTP/1.", 7)) status = atoi(buf + 9);
    char *b = strstr(buf, "\r\n\r\n");
    if (body && b) {
        *body = strdup(b + 4);
    }
    if (body && !*body) *body = strdup("");
    /* keep the headers reachable for content-type checks */
    if (body && b) {
        b[0] = 0;
        size_t hl = strlen(buf), bl = strlen(*body);
        char *both = malloc(hl + bl + 8);
        memcpy(both, buf, hl);
        memcpy(both + hl, "\n\n", 2);
        memcpy(both + hl + 2, *body, bl + 1);
        free(*body);
        *body = both;
    }
    free(buf);
    return status;
}

static int http(int port, const char *method, const char *path, const char *extra_headers,
                char **resp) {
    char req[4096];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n",
                     method, path, extra_headers ? extra_headers : "");
    return http_raw(port, req, (size_t)n, resp);
}

/* In the child: a session on g_dir with the endpoint on an ephemeral port. */
static int start_child_session(const char *token) {
    setenv("TRAINPROF_METRICS_PORT", "0", 1);
    if (token) setenv("TRAINPROF_METRICS_TOKEN", token, 1);
    else unsetenv("TRAINPROF_METRICS_TOKEN");
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.nvml_hz = 0;
    c.flush_interval_ms = 20;
    CHECK(tprof_init(&c) == TPROF_OK);
    int port = tprof_metrics_port();
    CHECK(port > 0);
    return port;
}

static void run_child(void (*body)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        body();
        tprof_shutdown();
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void body_steps(void) {
    int port = start_child_session(NULL);
    tprof_set_metadata("tokens_per_step", "1000");
    /* figures no job has are refused, and the ones given stay */
    CHECK(tprof_set_metadata("flops_per_step", "1e300") == TPROF_ERR_INVALID_ARG);
    CHECK(tprof_set_metadata("tokens_per_step", "12abc") == TPROF_ERR_INVALID_ARG);
    tprof_set_metadata("flops_per_step", "2e12");
    double measured = 0;
    for (uint64_t s = 0; s < 20; s++) {
        double t0 = now_s();
        tprof_step_begin(s);
        sleep_ms(5);
        tprof_step_end(s);
        measured += now_s() - t0;
    }
    CHECK(tprof_flush() == TPROF_OK);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(strstr(r, "Content-Type: text/plain; version=0.0.4"));
    CHECK(sample(r, "trainprof_steps_total") == 20);
    CHECK(sample(r, "trainprof_step_duration_seconds_count") == 20);
    double sum = sample(r, "trainprof_step_duration_seconds_sum");
    fprintf(stderr, "20 steps of 5 ms: histogram sum %.4f s, measured around the calls %.4f s\n",
            sum, measured);
    /* the API's own timestamps lie inside the measured interval of each step; what lies
     * outside them is the calls' own cost, at most 0.5 ms a step even under ASan (seen:
     * 0.1 ms a step in a Debug+ASan build on a loaded 2-core machine) */
    CHECK(sum >= 0.1 && sum <= measured + 1e-6 && sum > measured - 20 * 0.0005);
    CHECK(sum < 1.0); /* sleeps overshoot on a loaded machine; the match above is exact */
    CHECK(sample(r, "trainprof_step_duration_seconds_bucket{le=\"0.001\"}") == 0);
    CHECK(sample(r, "trainprof_step_duration_seconds_bucket{le=\"+Inf\"}") == 20);
    CHECK(sample(r, "trainprof_step_number") == 19);
    CHECK(sample(r, "trainprof_tokens_total") == 20000);
    CHECK(sample(r, "trainprof_model_flops_total") == 4e13);
    /* FLOP/s of the last step: its FLOPs over its own duration */
    double last = sample(r, "trainprof_step_last_duration_seconds");
    CHECK(last >= 0.005 && fabs(sample(r, "trainprof_model_flops_per_second") * last / 2e12 - 1) < 1e-9);
    CHECK(sample(r, "trainprof_events_dropped_total") == 0);
    CHECK(sample(r, "trainprof_http_connections_evicted_total") == 0);
    CHECK(sample(r, "trainprof_detail_capture") == 1);
    CHECK(strstr(r, "\ntrainprof_build_info{version=\""));
    CHECK(sample(r, "process_start_time_seconds") > 1.6e9);
    promtool_check(strstr(r, "\n\n") + 2);
    free(r);
    /* OpenMetrics by content negotiation */
    CHECK(http(port, "GET", "/metrics",
               "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n",
               &r) == 200);
    CHECK(strstr(r, "Content-Type: application/openmetrics-text; version=1.0.0"));
    CHECK(strstr(r, "\n# TYPE trainprof_steps counter\n"));
    CHECK(sample(r, "trainprof_steps_total") == 20);
    size_t n = strlen(r);
    CHECK(n > 6 && !strcmp(r + n - 6, "# EOF\n"));
    free(r);
    CHECK(http(port, "HEAD", "/metrics", NULL, NULL) == 200);
    CHECK(http(port, "GET", "/healthz", NULL, &r) == 200);
    CHECK(strstr(r, "\n\nok\n"));
    free(r);
    /* the capture toggle applies at the next step */
    CHECK(http(port, "GET", "/capture?detail=off", NULL, NULL) == 405);
    CHECK(http(port, "POST", "/capture?detail=maybe", "Content-Length: 0\r\n", NULL) == 400);
    CHECK(http(port, "POST", "/capture?detail=off", "Content-Length: 0\r\n", NULL) == 202);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_detail_capture") == 1); /* no step began yet */
    free(r);
    tprof_step_begin(20);
    tprof_step_end(20);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_detail_capture") == 0);
    CHECK(sample(r, "trainprof_steps_total") == 21);
    free(r);
    CHECK(http(port, "POST", "/capture?detail=on", NULL, NULL) == 202);
    tprof_step_begin(21);
    tprof_step_end(21);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_detail_capture") == 1);
    free(r);
}

static void test_endpoint_steps(void **state) {
    (void)state;
    fresh_dir("steps");
    run_child(body_steps);
}

/* Communication records (as the NCCL plugin, the PMPI wrappers and trainprof.torch write
 * them) become per-communicator, per-op counters and a per-op duration histogram: GPU-side
 * time when the record has it, else the host call; communicators past the 32nd fold into
 * comm="other" so the series stay bounded. */
static void body_comm(void) {
    int port = start_child_session(NULL);
    uint64_t t0 = 1000000000ull;
    for (int i = 0; i < 3; i++) {
        tprof_pl_comm pl = {0};
        pl.op = TPROF_COMM_ALLREDUCE;
        pl.comm_hash = 0xabcull;
        pl.bytes = 1u << 20;
        pl.end_ns = t0 + 900000; /* host: 900 us */
        pl.flags = TPROF_COMM_F_GPU_TIME;
        pl.gpu_start_ns = t0 + 100000;
        pl.gpu_end_ns = t0 + 300000; /* GPU: 200 us, the one counted */
        pl.source = TPROF_COMM_SRC_NCCL;
        CHECK(tprof__comm_record("AllReduce", t0, &pl) == 1);
    }
    tprof_pl_comm bc = {0};
    bc.op = TPROF_COMM_BROADCAST;
    bc.comm_hash = 0xabcull;
    bc.bytes = 4096;
    bc.end_ns = t0 + 30000000; /* host time only: 30 ms */
    bc.source = TPROF_COMM_SRC_MPI;
    CHECK(tprof__comm_record("Broadcast", t0, &bc) == 1);
    bc.flags = TPROF_COMM_F_UNFINISHED; /* counted, not timed */
    CHECK(tprof__comm_record("Broadcast", t0, &bc) == 1);
    for (uint64_t c = 1; c <= 40; c++) { /* 40 more communicators: 31 labelled, 9 folded */
        tprof_pl_comm g = {0};
        g.op = TPROF_COMM_ALLGATHER;
        g.comm_hash = 0x1000 + c;
        g.bytes = 100;
        g.end_ns = t0 + 1000;
        CHECK(tprof__comm_record("AllGather", t0, &g) == 1);
    }
    CHECK(tprof_flush() == TPROF_OK);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    const char *ar = "{comm=\"0000000000000abc\",op=\"AllReduce\"}";
    char k[200];
    snprintf(k, sizeof k, "trainprof_comm_operations_total%s", ar);
    CHECK(sample(r, k) == 3);
    snprintf(k, sizeof k, "trainprof_comm_bytes_total%s", ar);
    CHECK(sample(r, k) == 3 * 1048576.0);
    snprintf(k, sizeof k, "trainprof_comm_seconds_total%s", ar);
    CHECK(fabs(sample(r, k) - 3 * 200e-6) < 1e-12);
    CHECK(sample(r, "trainprof_comm_duration_seconds_bucket{op=\"AllReduce\",le=\"0.0001\"}") == 0);
    CHECK(sample(r, "trainprof_comm_duration_seconds_bucket{op=\"AllReduce\",le=\"0.00025\"}") == 3);
    CHECK(sample(r, "trainprof_comm_operations_total{comm=\"0000000000000abc\",op=\"Broadcast\"}") == 2);
    CHECK(fabs(sample(r, "trainprof_comm_seconds_total{comm=\"0000000000000abc\",op=\"Broadcast\"}") - 0.03) < 1e-12);
    CHECK(sample(r, "trainprof_comm_duration_seconds_count{op=\"Broadcast\"}") == 1);
    CHECK(sample(r, "trainprof_comm_operations_total{comm=\"0000000000001001\",op=\"AllGather\"}") == 1);
    CHECK(sample(r, "trainprof_comm_operations_total{comm=\"000000000000101f\",op=\"AllGather\"}") == 1);
    CHECK(isnan(sample(r, "trainprof_comm_operations_total{comm=\"0000000000001020\",op=\"AllGather\"}")));
    CHECK(sample(r, "trainprof_comm_operations_total{comm=\"other\",op=\"AllGather\"}") == 9);
    CHECK(sample(r, "trainprof_comm_bytes_total{comm=\"other\",op=\"AllGather\"}") == 900);
    promtool_check(strstr(r, "\n\n") + 2);
    free(r);
}

/* The caching allocator's counters (trainprof.torch's samples) as live gauges: allocated,
 * reserved, their fragmentation 1 - 6/8 = 0.25, then 1 - 7/8 = 0.125 at the next sample
 * (the names now by their interned ids), and the cumulative retries. */
static void body_memory(void) {
    int port = start_child_session(NULL);
    tprof_counter("cuda.memory_allocated_bytes", 6e9);
    tprof_counter("cuda.memory_reserved_bytes", 8e9);
    tprof_counter("cuda.memory_alloc_retries", 3);
    tprof_counter("other.counter", 5);
    CHECK(tprof_flush() == TPROF_OK);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_cuda_memory_allocated_bytes") == 6e9);
    CHECK(sample(r, "trainprof_cuda_memory_reserved_bytes") == 8e9);
    CHECK(sample(r, "trainprof_cuda_memory_fragmentation_ratio") == 0.25);
    CHECK(sample(r, "trainprof_cuda_memory_alloc_retries_total") == 3);
    promtool_check(strstr(r, "\n\n") + 2);
    free(r);
    tprof_counter("cuda.memory_allocated_bytes", 7e9);
    tprof_counter("cuda.memory_reserved_bytes", 8e9);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_cuda_memory_allocated_bytes") == 7e9);
    CHECK(sample(r, "trainprof_cuda_memory_fragmentation_ratio") == 0.125);
    free(r);
    /* a sample the flusher drained half-written (its allocated, not yet its reserved): the
     * ratio stays the last whole sample's, never 1 - 12/8 from two samples */
    tprof_counter("cuda.memory_allocated_bytes", 12e9);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_cuda_memory_allocated_bytes") == 12e9);
    CHECK(sample(r, "trainprof_cuda_memory_fragmentation_ratio") == 0.125);
    free(r);
    tprof_counter("cuda.memory_reserved_bytes", 16e9);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_cuda_memory_fragmentation_ratio") == 0.25);
    free(r);
    /* more allocated than reserved: no ratio from it */
    tprof_counter("cuda.memory_allocated_bytes", 9e9);
    tprof_counter("cuda.memory_reserved_bytes", 4e9);
    CHECK(tprof_flush() == TPROF_OK);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_cuda_memory_reserved_bytes") == 4e9);
    CHECK(sample(r, "trainprof_cuda_memory_fragmentation_ratio") == 0.25);
    free(r);
}

static void test_endpoint_memory(void **state) {
    (void)state;
    fresh_dir("memory");
    run_child(body_memory);
}

/* Timers gathered for a log set trainprof_timer_elapsed_seconds{timer} to this rank's value. */
static void body_timers(void) {
    int port = start_child_session(NULL);
    tprof_timers *t;
    CHECK(tprof_timers_create(2, TPROF_TIMERS_MINMAX, &t) == TPROF_OK);
    CHECK(tprof_timer_set_elapsed(tprof_timer_get(t, "forward-compute", 1), 0.125) == TPROF_OK);
    CHECK(tprof_timer_set_elapsed(tprof_timer_get(t, "optimizer", 1), 0.5) == TPROF_OK);
    const char *names[] = {"forward-compute", "optimizer"};
    double *m = NULL;
    int world = 0;
    size_t n = 0;
    tprof_timers_gather(t, names, 2, 1, 0, &m, &world, &n); /* no hook: this rank's row */
    CHECK(m && n == 2 && m[0] == 0.125);
    free(m);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_timer_elapsed_seconds{timer=\"forward-compute\"}") == 0.125);
    CHECK(sample(r, "trainprof_timer_elapsed_seconds{timer=\"optimizer\"}") == 0.5);
    free(r);
    /* the gather reset them: the next log shows 0 */
    tprof_timers_gather(t, names, 2, 1, 0, &m, &world, &n);
    free(m);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_timer_elapsed_seconds{timer=\"optimizer\"}") == 0);
    free(r);
    tprof_timers_destroy(t);
}

/* A session whose rank and timer names are not clean UTF-8: RANK of 14 digits and a 3-byte
 * character (the rank label holds 15 bytes, a cut inside that character), a timer name
 * whose 63-byte cut falls inside a 3-byte character, one with an invalid byte. The scrape
 * stays valid and says exactly what it should. */
static void body_utf8(void) {
    setenv("RANK", "12345678901234\xE2\x82\xAC", 1);
    int port = start_child_session(NULL);
    char longname[80];
    memset(longname, 'a', 62);
    snprintf(longname + 62, sizeof longname - 62, "\xE2\x82\xAC-tail"); /* bytes 62..64 */
    const char *names[] = {longname, "bad\xff" "name", "ok"};
    const double secs[] = {0.25, 0.5, 0.75};
    tprof_timers *t;
    CHECK(tprof_timers_create(2, TPROF_TIMERS_MINMAX, &t) == TPROF_OK);
    for (int i = 0; i < 3; i++)
        CHECK(tprof_timer_set_elapsed(tprof_timer_get(t, names[i], 1), secs[i]) == TPROF_OK);
    double *m = NULL;
    int world = 0;
    size_t n = 0;
    tprof_timers_gather(t, names, 3, 1, 0, &m, &world, &n);
    CHECK(m && n == 3);
    free(m);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    const char *body = strstr(r, "\n\n") + 2;
    const char *bad = exposition_error(body);
    if (bad) fprintf(stderr, "scrape not in the text format: %s\n", bad);
    CHECK(bad == NULL);
    promtool_check(body);
    char k[200];
    snprintf(k, sizeof k, "trainprof_timer_elapsed_seconds{rank=\"12345678901234\",timer=\"%.62s\"}",
             longname);
    CHECK(sample(r, k) == 0.25);
    CHECK(sample(r, "trainprof_timer_elapsed_seconds{rank=\"12345678901234\",timer=\"bad" FFFD "name\"}") == 0.5);
    CHECK(sample(r, "trainprof_timer_elapsed_seconds{rank=\"12345678901234\",timer=\"ok\"}") == 0.75);
    free(r);
    tprof_timers_destroy(t);
}

static void test_endpoint_utf8(void **state) {
    (void)state;
    fresh_dir("utf8-session");
    run_child(body_utf8);
}

static void test_endpoint_timers(void **state) {
    (void)state;
    fresh_dir("timers");
    run_child(body_timers);
}

static void test_endpoint_comm(void **state) {
    (void)state;
    fresh_dir("comm");
    run_child(body_comm);
}

static void body_token(void) {
    int port = start_child_session("s3cret-token");
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 401);
    CHECK(strstr(r, "WWW-Authenticate: Bearer"));
    free(r);
    CHECK(http(port, "GET", "/metrics", "Authorization: Bearer wrong\r\n", NULL) == 401);
    CHECK(http(port, "GET", "/metrics", "Authorization: Bearer s3cret-tokenX\r\n", NULL) == 401);
    CHECK(http(port, "GET", "/metrics", "Authorization: Bearer s3cret-toke\r\n", NULL) == 401);
    CHECK(http(port, "GET", "/metrics", "Authorization: Basic czNjcmV0\r\n", NULL) == 401);
    CHECK(http(port, "POST", "/capture?detail=off", NULL, NULL) == 401);
    CHECK(http(port, "GET", "/metrics", "Authorization: Bearer s3cret-token\r\n", &r) == 200);
    CHECK(strstr(r, "trainprof_build_info"));
    free(r);
    CHECK(http(port, "GET", "/healthz", NULL, NULL) == 200); /* says nothing: no token */
}

static void test_endpoint_token(void **state) {
    (void)state;
    fresh_dir("token");
    run_child(body_token);
}

static void body_malformed(void) {
    int port = start_child_session(NULL);
    char *r;
    static const char *const bad[] = {
        "GARBAGE\r\n\r\n",
        "GET\r\n\r\n",
        "GET /metrics HTTP/9.9\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n",
        "\x01\x02\x03\xff\xfe\r\n\r\n",
        "DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "POST /capture?detail=on HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = http_raw(port, bad[i], strlen(bad[i]), NULL);
        if (!(st == 0 || (st >= 400 && st < 500) || st == 505))
            fprintf(stderr, "request %zu: status %d\n", i, st);
        CHECK(st == 0 || (st >= 400 && st < 500) || st == 505); /* 505: HTTP/9.9 */
    }
    /* a chunked body past the bound */
    {
        char req[8192];
        int n = snprintf(req, sizeof req, "POST /capture?detail=on HTTP/1.1\r\nHost: x\r\n"
                                          "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                          "1000\r\n");
        memset(req + n, 'a', 4096);
        memcpy(req + n + 4096, "\r\n0\r\n\r\n", 7);
        int st = http_raw(port, req, (size_t)n + 4103, NULL);
        CHECK(st == 413 || st == 0);
    }
    /* a 1 MiB header: refused (431) or cut off, and the server lives on */
    size_t big = 1u << 20;
    char *req = malloc(big + 256);
    int n = snprintf(req, 256, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'A', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    int st = http_raw(port, req, (size_t)n + big + 4, NULL);
    CHECK(st == 0 || st == 431 || st == 413 || st == 400);
    free(req);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    free(r);
}

static void test_endpoint_malformed(void **state) {
    (void)state;
    fresh_dir("malformed");
    run_child(body_malformed);
}

/* ---------------------------------------------- a job under a storm of connections */

typedef struct job {
    int steps;
    double step_ms;
    double max_ms, total_ms; /* time inside trainprof's calls, not the step's sleep */
} job;

/* The job's own time is its sleep, whose wake-up a loaded machine delays at will; what the
 * endpoint could harm is the time the job spends inside trainprof's calls, so that is what
 * is measured. */
static void *job_main(void *p) {
    job *j = p;
    for (int s = 0; s < j->steps; s++) {
        double t0 = now_s();
        tprof_step_begin((uint64_t)s);
        double t1 = now_s();
        sleep_ms(j->step_ms);
        double t2 = now_s();
        tprof_step_end((uint64_t)s);
        double ms = (now_s() - t2 + t1 - t0) * 1e3;
        j->total_ms += ms;
        if (ms > j->max_ms) j->max_ms = ms;
    }
    return NULL;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

static void body_storm(void) {
    int port = start_child_session(NULL);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    free(r);
    long rss0 = rss_kb();
    job j = {SANITIZED ? 150 : 300, 2.0, 0, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, job_main, &j) == 0);
    /* 200 concurrent connections: 100 slow clients that send half a request line and stay,
     * 100 that send garbage or a request and go */
    enum { NCONN = 200 };
    int fds[NCONN];
    int opened = 0;
    for (int i = 0; i < NCONN; i++) {
        fds[i] = connect_port(port);
        if (fds[i] < 0) continue;
        opened++;
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
        const char *msg = i % 2 ? "GET /metr" : (i % 4 ? "\x16\x03\x01 garbage\r\n\r\n"
                                                        : "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        ssize_t w = send(fds[i], msg, strlen(msg), MSG_NOSIGNAL);
        (void)w;
    }
    /* the quick half goes (the server has them all open at once before) */
    sleep_ms(50);
    for (int i = 0; i < NCONN; i += 2)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    CHECK(opened > 0);
    /* the slow half trickles a byte now and then while scrapers hammer the endpoint */
    int ok = 0, tried = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 1; i < NCONN; i += 2) {
            if (fds[i] < 0) continue;
            ssize_t w = send(fds[i], "r", 1, MSG_NOSIGNAL);
            (void)w;
        }
        tried++;
        int st = http(port, "GET", "/metrics", NULL, NULL);
        if (st == 200) ok++;
        sleep_ms(10);
    }
    for (int i = 0; i < NCONN; i++)
        if (fds[i] >= 0) close(fds[i]);
    pthread_join(th, NULL);
    /* after the storm the endpoint answers again */
    int st = 0;
    for (int k = 0; k < 50 && st != 200; k++) {
        st = http(port, "GET", "/metrics", NULL, &r);
        if (st != 200) {
            free(r);
            sleep_ms(100);
        }
    }
    CHECK(st == 200);
    CHECK(tprof_flush() == TPROF_OK);
    free(r);
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    CHECK(sample(r, "trainprof_steps_total") == j.steps);
    free(r);
    double mean = j.total_ms / j.steps;
    long rss1 = rss_kb();
    fprintf(stderr, "storm: %d connections, %d/%d scrapes answered during it; job steps of "
                    "%.1f ms: step calls mean %.3f ms, max %.2f ms; RSS %ld -> %ld kB\n",
            opened, ok, tried, j.step_ms, mean, j.max_ms, rss0, rss1);
    /* the job kept its timing: nothing it does waits on the endpoint */
    CHECK(ok > 0); /* 100 slow clients hold 100 of the 128 slots: scrapes still get in */
    /* a step call that waited on the endpoint would wait for the storm (seconds); a
     * descheduled thread on a loaded machine loses tens of milliseconds at most */
    CHECK(mean < (SANITIZED ? 3.0 : 1.0));
    CHECK(j.max_ms < (SANITIZED ? 300.0 : 150.0));
    /* bounded memory: 32 connections of 16 KiB, no per-connection growth */
    CHECK(rss1 - rss0 < (SANITIZED ? 64 * 1024 : 16 * 1024));
}

static void test_endpoint_storm(void **state) {
    (void)state;
    fresh_dir("storm");
    run_child(body_storm);
}

/* Slow and hostile clients (slowloris) on loopback: LORIS_N connections, most from the
 * scraper's own address (127.0.0.1), a quarter from 127.0.0.2; half sending nothing, half a
 * request one byte every 100 ms that never ends, each reopened at once when the server
 * closes it. While they go on, 8 scrapes in a row must
 * each get a whole 200 answer within SCRAPE_MAX_S. Every loop here is bounded in time. */
#define LORIS_N 160
#define SCRAPE_MAX_S 2.0
typedef struct loris {
    int port;
    _Atomic int stop;
    int opened, closed_by_server, max_open;
} loris;

/* A non-blocking connection to the loopback port; from `src` (another loopback address:
 * another host, as the server sees it) when not 0 and the system lets it bind there. */
static int connect_nb(int port, uint32_t src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (src) {
        struct sockaddr_in b = {.sin_family = AF_INET};
        b.sin_addr.s_addr = htonl(src);
        if (bind(fd, (struct sockaddr *)&b, sizeof b)) {} /* else from 127.0.0.1 */
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *loris_main(void *p) {
    loris *l = p;
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    int fds[LORIS_N];
    size_t pos[LORIS_N];
    for (int i = 0; i < LORIS_N; i++) fds[i] = -1, pos[i] = 0;
    double end = now_s() + 60; /* a bound of its own, whatever the main thread does */
    while (!atomic_load(&l->stop) && now_s() < end) {
        int open_now = 0;
        for (int i = 0; i < LORIS_N; i++) {
            if (fds[i] >= 0) {
                char c[256];
                ssize_t r = recv(fds[i], c, sizeof c, MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                    close(fds[i]);
                    fds[i] = -1;
                    l->closed_by_server++;
                }
            }
            if (fds[i] < 0) {
                fds[i] = connect_nb(l->port, i % 4 == 3 ? 0x7f000002u : 0); /* a quarter from 127.0.0.2 */
                pos[i] = 0;
                if (fds[i] >= 0) l->opened++;
            }
            if (fds[i] < 0) continue;
            open_now++;
            if (i % 2) { /* one more byte; past the request line, the header never ends */
                char b = pos[i] < sizeof req - 1 ? req[pos[i]] : 'a';
                pos[i]++;
                ssize_t w = send(fds[i], &b, 1, MSG_NOSIGNAL);
                (void)w;
            }
        }
        if (open_now > l->max_open) l->max_open = open_now;
        sleep_ms(100);
    }
    for (int i = 0; i < LORIS_N; i++)
        if (fds[i] >= 0) close(fds[i]);
    return NULL;
}

static void body_slowloris(void) {
    int port = start_child_session(NULL);
    loris l = {.port = port};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, loris_main, &l) == 0);
    sleep_ms(1500); /* every slot taken, the nothing-senders near their inactivity timeout */
    int ok = 0;
    double worst = 0;
    for (int k = 0; k < 8; k++) {
        double t0 = now_s();
        char *r = NULL;
        int st = http(port, "GET", "/metrics", NULL, &r);
        double dt = now_s() - t0;
        if (dt > worst) worst = dt;
        int good = st == 200 && r && strstr(r, "\ntrainprof_build_info{") && dt <= SCRAPE_MAX_S;
        if (!good) fprintf(stderr, "scrape %d under %d slow connections: status %d in %.2f s\n",
                           k, LORIS_N, st, dt);
        free(r);
        if (!good) break; /* a failed scrape costs seconds: stop at the first */
        ok++;
        sleep_ms(100);
    }
    atomic_store(&l.stop, 1);
    pthread_join(th, NULL);
    char *r;
    CHECK(http(port, "GET", "/metrics", NULL, &r) == 200);
    double evicted = sample(r, "trainprof_http_connections_evicted_total");
    free(r);
    fprintf(stderr, "slowloris: %d slow connections (%d opened, %d closed by the server, at most "
                    "%d open at once, %.0f evicted): %d/8 scrapes answered, the slowest in %.3f s\n",
            LORIS_N, l.opened, l.closed_by_server, l.max_open, evicted, ok, worst);
    CHECK(ok == 8);
    CHECK(evicted > 0 && evicted <= l.opened); /* the operator sees them */
}

static void test_endpoint_slowloris(void **state) {
    (void)state;
    fresh_dir("slowloris");
    run_child(body_slowloris);
}

/* No endpoint unless asked for */
static void body_off(void) {
    unsetenv("TRAINPROF_METRICS_PORT");
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.nvml_hz = 0;
    CHECK(tprof_init(&c) == TPROF_OK);
    CHECK(tprof_metrics_port() == TPROF_ERR_DISABLED);
}

static void test_endpoint_off(void **state) {
    (void)state;
    fresh_dir("off");
    run_child(body_off);
}

/* The capture toggle over a plan of one window, 1-2 (TRAINPROF_GPU_CAPTURE): the window
 * opens at step 1 and closes at 3; detail=on applies at step 4, detail=off at step 6, and all
 * of it is the one list gpu_capture.windows. Under the plan "off" CUPTI was never loaded:
 * the toggle is refused. */
static void body_plan_toggle(void) {
    setenv("TRAINPROF_GPU_CAPTURE", "1-2", 1);
    int port = start_child_session(NULL);
    for (uint64_t s = 0; s < 8; s++) {
        if (s == 4) CHECK(http(port, "POST", "/capture?detail=on", NULL, NULL) == 202);
        if (s == 6) CHECK(http(port, "POST", "/capture?detail=off", NULL, NULL) == 202);
        tprof_step_begin(s);
        sleep_ms(1);
        tprof_step_end(s);
    }
    unsetenv("TRAINPROF_GPU_CAPTURE");
}

static void body_plan_off_toggle(void) {
    setenv("TRAINPROF_GPU_CAPTURE", "off", 1);
    int port = start_child_session(NULL);
    CHECK(http(port, "POST", "/capture?detail=on", NULL, NULL) == 409);
    unsetenv("TRAINPROF_GPU_CAPTURE");
}

static void test_endpoint_plan_toggle(void **state) {
    (void)state;
    fresh_dir("plan-toggle");
    run_child(body_plan_toggle);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(g_dir, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 1);
    const tp_process *p = &run.procs[0];
    const char *w = tp_meta(p, "gpu_capture.windows");
    assert_non_null(w);
    uint64_t t[4];
    for (int i = 0; i < 4; i++) {
        char *e;
        t[i] = strtoull(w, &e, 10);
        assert_int_equal(*e, i == 3 ? 0 : i % 2 ? ',' : '-');
        w = e + 1;
    }
    const tp_stepev *ev = NULL;
    for (size_t k = 0; k < p->nthreads; k++)
        if (p->threads[k].nsteps) ev = p->threads[k].steps;
    assert_non_null(ev);
    static const int at[4] = {1, 3, 4, 6}; /* the begin of step k is event 2k */
    for (int i = 0; i < 4; i++) {
        if (i) assert_true(t[i] > t[i - 1]);
        assert_true(t[i] >= ev[2 * at[i] - 1].ts && t[i] <= ev[2 * at[i]].ts);
    }
    tp_run_free(&run);
    fresh_dir("plan-off-toggle");
    run_child(body_plan_off_toggle);
}

int main(int argc, char **argv) {
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_endpoint_utf8),
        cmocka_unit_test(test_endpoint_comm),
        cmocka_unit_test(test_endpoint_timers),
        cmocka_unit_test(test_endpoint_memory),
        cmocka_unit_test(test_endpoint_off),
        cmocka_unit_test(test_endpoint_steps),
        cmocka_unit_test(test_endpoint_plan_toggle),
        cmocka_unit_test(test_endpoint_token),
        cmocka_unit_test(test_endpoint_malformed),
        cmocka_unit_test(test_endpoint_slowloris),
    };
    const struct CMUnitTest storm[] = {
        cmocka_unit_test(test_endpoint_storm),
    };
    if (argc > 1 && !strcmp(argv[1], "storm")) return cmocka_run_group_tests(storm, NULL, NULL);
    return cmocka_run_group_tests(unit, NULL, NULL);
}
