/*
 * test_metrics_rlimit.c — the job's address space is the job's: under RLIMIT_AS (`ulimit -v`,
 * a batch scheduler's memory limit) set just above what the job needs for its own threads,
 * the job's pthread_create must succeed with trainprof's session, metrics endpoint included,
 * running beside it. trainprof's threads take a small explicit stack (src/core/threads.c);
 * with glibc's default they took RLIMIT_STACK's 8 MiB each, 16 MiB of the job's limit.
 *
 * Each case runs in a forked child: it reads its address space (VmSize) before the session
 * starts, sets RLIMIT_AS to that + its own threads' stacks + ALLOWANCE, starts the session
 * (in the `traced` case: endpoint up and answering, a step recorded and flushed, so every
 * thread and buffer of trainprof is there), then creates NTHREADS threads with default
 * attributes. ALLOWANCE covers trainprof's other mappings (libmicrohttpd with its TLS
 * libraries, about 7 MiB of address space on Debian 12; the metrics registry, 1 MiB; a ring;
 * the compressor) and the two small stacks, and is half of what two default stacks take.
 * The `alone` case, without the session, checks that the limit fits the job itself.
 * Not for sanitizer builds: their shadow memory needs terabytes of address space.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trainprof.h"

#define NTHREADS 3
#define ALLOWANCE_KB (16 * 1024)

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            _exit(1);                                                             \
        }                                                                         \
    } while (0)

static long vm_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) v = atol(line + kl);
    if (f) fclose(f);
    return v;
}

static void *idle(void *p) { return p; }

/* One GET /metrics on loopback; 1 when it answers 200. */
static int scrape_ok(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char buf[64] = "";
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1) &&
             recv(fd, buf, sizeof buf - 1, MSG_WAITALL) > 12 && !strncmp(buf + 9, "200", 3);
    close(fd);
    return ok;
}

static void job(int traced) {
    /* what the job's own threads take: glibc's default stack and its guard page each */
    pthread_attr_t da;
    size_t stack = 0, guard = 0;
    CHECK(pthread_getattr_default_np(&da) == 0);
    pthread_attr_getstacksize(&da, &stack);
    pthread_attr_getguardsize(&da, &guard);
    pthread_attr_destroy(&da);
    long own_kb = NTHREADS * (long)((stack + guard) >> 10);
    long v0 = vm_kb("VmSize:");
    CHECK(v0 > 0);
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)(v0 + own_kb + ALLOWANCE_KB) << 10;
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    if (traced) {
        char dir[512];
        const char *base = getenv("TPROF_TEST_TMP");
        snprintf(dir, sizeof dir, "%s/rlimit-XXXXXX", base && *base ? base : "/tmp");
        CHECK(mkdtemp(dir));
        setenv("TRAINPROF_METRICS_PORT", "0", 1);
        tprof_config c;
        tprof_config_init(&c);
        c.output_dir = dir;
        c.nvml_hz = 0;
        c.ring_bytes = 256u << 10;
        CHECK(tprof_init(&c) == TPROF_OK);
        int port = tprof_metrics_port();
        CHECK(port > 0); /* trainprof fully up, its endpoint thread too */
        tprof_step_begin(0);
        tprof_step_end(0);
        CHECK(tprof_flush() == TPROF_OK);
        CHECK(scrape_ok(port));
    }
    long v1 = vm_kb("VmSize:");
    pthread_t th[NTHREADS];
    int made = 0, err = 0;
    for (; made < NTHREADS; made++) {
        err = pthread_create(&th[made], NULL, idle, NULL);
        if (err) break;
    }
    fprintf(stderr, "%s: RLIMIT_AS = %ld KiB at start + %ld KiB for %d threads of %zu KiB + %d "
                    "KiB; trainprof took %ld KiB; the job created %d of %d threads%s%s\n",
            traced ? "with trainprof and metrics" : "alone", v0, own_kb, NTHREADS, stack >> 10,
            ALLOWANCE_KB, v1 - v0, made, NTHREADS, err ? ": " : "", err ? strerror(err) : "");
    for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
    CHECK(made == NTHREADS);
    if (traced) tprof_shutdown();
}

static void run_job(int traced) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        job(traced);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_alone(void **state) {
    (void)state;
    run_job(0);
}

static void test_traced(void **state) {
    (void)state;
    run_job(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_traced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
