/*
 * nvtx_strings_prog.c — many NVTX registered strings, from a program that knows only the
 * NVTX3 headers (as nvtx_prog.c). `nvtx_strings_prog N` registers "reg_0" ... "reg_<N-1>" in
 * the domain "strings", registers "reg_0" once more (a tool deduplicates: the same handle,
 * else exit 1), then pushes and pops one range named by each handle, in order, on the main
 * thread, and `EXTRA` (4) more ranges named by the handle of reg_<N-1>. So a report holds
 * reg_0 ... reg_<N-2> once each and reg_<N-1> EXTRA + 1 times, and an attached tool sees
 * N + 1 registrations.
 *
 * `nvtx_strings_prog --fork K`: a thread registers new strings without pause while the main
 * thread forks K times; each child registers one string, pushes a range named by it and
 * exits 0. A child that has not exited within 10 s (a registration lock left held across
 * fork) is killed, and the program exits 3.
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXTRA 4

static void push_registered(nvtxDomainHandle_t d, nvtxStringHandle_t h) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = h;
    nvtxDomainRangePushEx(d, &a);
    nvtxDomainRangePop(d);
}

static atomic_int g_stop;

static void *registrar(void *arg) {
    nvtxDomainHandle_t d = arg;
    char name[32];
    for (long i = 0; !atomic_load(&g_stop); i++) {
        snprintf(name, sizeof name, "bg_%ld", i);
        nvtxDomainRegisterStringA(d, name);
    }
    return NULL;
}

static int fork_mode(int k) {
    nvtxDomainHandle_t d = nvtxDomainCreateA("strings");
    pthread_t t;
    if (pthread_create(&t, NULL, registrar, d) != 0) return 2;
    int rc = 0;
    for (int i = 0; i < k && !rc; i++) {
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
        pid_t pid = fork();
        if (pid == 0) {
            push_registered(d, nvtxDomainRegisterStringA(d, "in_child"));
            _exit(0);
        }
        int st = 0, waited = 0;
        for (int ms = 0; ms < 10000 && !waited; ms += 5) {
            waited = waitpid(pid, &st, WNOHANG) == pid;
            if (!waited) {
                struct timespec w = {0, 5000000};
                nanosleep(&w, NULL);
            }
        }
        if (!waited) {
            fprintf(stderr, "nvtx_strings_prog: child %d of %d hung after fork\n", i, k);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            rc = 3;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            rc = 4;
        }
    }
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--fork")) return fork_mode(atoi(argv[2]));
    long n = argc == 2 ? atol(argv[1]) : 0;
    if (n < 1) {
        fprintf(stderr, "usage: nvtx_strings_prog N (N >= 1)\n");
        return 2;
    }
    nvtxDomainHandle_t d = nvtxDomainCreateA("strings");
    nvtxStringHandle_t *h = malloc((size_t)n * sizeof *h);
    if (!h) return 2;
    char name[32];
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "reg_%ld", i);
        h[i] = nvtxDomainRegisterStringA(d, name);
    }
    snprintf(name, sizeof name, "reg_%d", 0);
    if (nvtxDomainRegisterStringA(d, name) != h[0]) {
        fprintf(stderr, "nvtx_strings_prog: reg_0 registered twice got two handles\n");
        return 1;
    }
    for (long i = 0; i < n; i++) push_registered(d, h[i]);
    for (int k = 0; k < EXTRA; k++) push_registered(d, h[n - 1]);
    free(h);
    return 0;
}
