/*
 * metrics_stack_depth.c — how deep a process's threads go into their stacks: preloaded
 * (LD_PRELOAD), its pthread_create gives every new thread a painted stack of 8 MiB instead of
 * the size asked for, and when the thread ends (or the process exits) reports the deepest
 * byte written, minus what the thread library itself put at the top (static TLS, the thread
 * descriptor: measured from the first frame of the thread). One line per thread on stderr,
 * or appended to $STACK_DEPTH_OUT:
 *
 *   stack_depth name=trainprof-flush asked_kib=276 used_kib=23 tls_kib=6
 *
 * asked_kib is the size the creator asked for (0: none, the default); used_kib excludes
 * tls_kib. This is how src/core/threads.c's stack size was chosen, and the `metrics_stack`
 * test keeps every library thread within half of it. A measurement tool: never in the
 * library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STACK (8u << 20)
#define PAINT 0xA5
#define MAX_THREADS 256

typedef struct rec {
    void *(*fn)(void *);
    void *arg;
    unsigned char *mem;
    size_t asked;
    uintptr_t first_frame;
    char name[16];
    int reported;
} rec;

static rec g_rec[MAX_THREADS];
static int g_n;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void report(rec *r) {
    if (r->reported) return;
    r->reported = 1;
    size_t low = 0;
    while (low < STACK && r->mem[low] == PAINT) low++;
    uintptr_t top = (uintptr_t)(r->mem + STACK);
    size_t tls = r->first_frame ? (size_t)(top - r->first_frame) : 0;
    size_t used = STACK - low;
    used = used > tls ? used - tls : 0;
    char line[160];
    int n = snprintf(
        line, sizeof line, "stack_depth name=%s asked_kib=%zu used_kib=%zu tls_kib=%zu\n",
        r->name[0] ? r->name : "?", r->asked >> 10, (used + 1023) >> 10, (tls + 1023) >> 10);
    const char *out = getenv("STACK_DEPTH_OUT");
    FILE *f = out && *out ? fopen(out, "a") : NULL;
    if (f) {
        fwrite(line, 1, (size_t)n, f);
        fclose(f);
    } else if (write(2, line, (size_t)n) < 0) {
    }
}

static void *trampoline(void *p) {
    rec *r = p;
    volatile char here = 0;
    r->first_frame = (uintptr_t)&here;
    void *ret = r->fn(r->arg);
    pthread_getname_np(pthread_self(), r->name, sizeof r->name);
    pthread_mutex_lock(&g_mu);
    report(r);
    pthread_mutex_unlock(&g_mu);
    return ret;
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    pthread_mutex_lock(&g_mu);
    rec *r = g_n < MAX_THREADS ? &g_rec[g_n++] : NULL;
    pthread_mutex_unlock(&g_mu);
    if (!r) return real(t, attr, fn, arg);
    unsigned char *mem =
        mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return real(t, attr, fn, arg);
    memset(mem, PAINT, STACK);
    r->fn = fn;
    r->arg = arg;
    r->mem = mem;
    size_t asked = 0;
    int detach = PTHREAD_CREATE_JOINABLE;
    if (attr) {
        pthread_attr_getstacksize(attr, &asked);
        pthread_attr_getdetachstate(attr, &detach);
    }
    r->asked = attr ? asked : 0;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, mem, STACK);
    pthread_attr_setdetachstate(&a, detach);
    int rc = real(t, &a, trampoline, r);
    pthread_attr_destroy(&a);
    return rc;
}

/* threads still running at exit: their depth so far */
__attribute__((destructor)) static void at_exit(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++)
        if (g_rec[i].mem && !g_rec[i].reported) {
            snprintf(g_rec[i].name, sizeof g_rec[i].name, "running");
            report(&g_rec[i]);
        }
    pthread_mutex_unlock(&g_mu);
}
