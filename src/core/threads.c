/*
 * threads.c — the stack of the library's own threads (threads.h says why it is small and
 * explicit).
 */
#define _GNU_SOURCE
#include "threads.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TPROF__SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TPROF__SANITIZED 1
#endif
#endif

/* What our threads use of their stack, measured with tests/metrics_stack_depth.c (a
 * preloaded pthread_create that paints each stack and reports the deepest byte written),
 * the thread library's share (about 6 KiB of TLS and descriptor) excluded, in a plain build
 * (RelWithDebInfo, x86-64, glibc 2.36, GCC 12):
 *   the flusher: at most 20 KiB, in `trainprof serve` sampling the fake libnvidia-ml at
 *   50 Hz with the process and host samplers and the metrics feed, in a rank of char_lm
 *   under `trainprof run --metrics-port` (step scan, rank file, compression), and in that
 *   run's node sampler;
 *   libmicrohttpd's thread: at most 7 KiB under scrapes (text and OpenMetrics), malformed
 *   and oversized requests and 40 idle connections.
 * Our own code needs little; the flusher also calls vendor libraries (NVML, the CUDA driver's
 * device queries, CUPTI's flush), whose depth could not be measured without a GPU. 1 MiB
 * leaves room for them: it is a Java virtual machine's default thread stack on Linux x86-64
 * (-Xss, Oracle's `java` command reference), under which JNI bindings of native libraries,
 * CUDA's among them (JCuda), run; 50 times our code's deepest. The two threads then take
 * 2 MiB of the job's address space instead of 16 MiB. The metrics_stack test keeps every library
 * thread within half of its stack. Sanitizer builds have larger frames and run their own reporting
 * on the thread's stack: 4 MiB there, as those builds never run under a tight address-space limit
 * (their shadow memory needs terabytes of it). */
#ifdef TPROF__SANITIZED
#define TPROF__THREAD_STACK_NEED ((size_t)4 << 20)
#else
#define TPROF__THREAD_STACK_NEED ((size_t)1 << 20)
#endif

/* glibc's own minimum for a thread with these attributes: the static TLS of every loaded
 * library, the thread descriptor and the guard page, which it takes from the stack size it
 * is given. Exported (GLIBC_PRIVATE) for this use; looked up, so another libc works too. */
typedef size_t (*minstack_fn)(const pthread_attr_t *);

size_t tprof__thread_stack_size(void) {
    static _Atomic size_t cached;
    size_t s = atomic_load_explicit(&cached, memory_order_relaxed);
    if (s) return s;
    size_t min = 0;
    minstack_fn f;
    *(void **)&f = dlsym(RTLD_DEFAULT, "__pthread_get_minstack");
    pthread_attr_t a;
    if (f && pthread_attr_init(&a) == 0) {
        min = f(&a);
        pthread_attr_destroy(&a);
    }
    if (!min) min = (size_t)PTHREAD_STACK_MIN + ((size_t)64 << 10); /* TLS: a guess */
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    s = (TPROF__THREAD_STACK_NEED + min + page - 1) / page * page;
    atomic_store_explicit(&cached, s, memory_order_relaxed);
    return s;
}

int tprof__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    int rc = pthread_attr_init(&a);
    if (rc != 0) return rc;
    rc = pthread_attr_setstacksize(&a, tprof__thread_stack_size());
    if (rc == 0) rc = pthread_create(thread, &a, fn, arg);
    pthread_attr_destroy(&a);
    /* a size the thread library will not take (a TLS larger than it said): the default
     * stack, as before, rather than no thread */
    if (rc == EINVAL) rc = pthread_create(thread, NULL, fn, arg);
    return rc;
}
