/*
 * alloc_fail.c — an LD_PRELOAD library for the tests (cli_nomem.sh): the ALLOC_FAIL_AT-th
 * malloc, calloc or realloc of the process (counted over all threads from the first, glibc's
 * own and the libraries' included) returns NULL with errno ENOMEM, as when memory runs out;
 * the others are glibc's (__libc_malloc, ...: the same allocator, so free needs no wrapper).
 * Without ALLOC_FAIL_AT, or in a program other than ALLOC_FAIL_EXE's basename when set,
 * every allocation is glibc's. Not for sanitizer builds (their runtime owns malloc).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static atomic_long seen;
static long fail_at = -1; /* -1: not read yet; 0: none */

/* the refusal, for a debugger: `break alloc_fail_refused` */
__attribute__((noinline)) void alloc_fail_refused(void) {
    __asm__ volatile("" ::: "memory");
}

static int refused(void) {
    if (fail_at < 0) {
        /* getenv allocates nothing; program_invocation_name is glibc's, set before main (an
         * allocation before it is not counted, and the question asked again) */
        if (!program_invocation_name) return 0;
        const char *k = getenv("ALLOC_FAIL_AT"), *exe = getenv("ALLOC_FAIL_EXE");
        const char *me = strrchr(program_invocation_name, '/');
        me = me ? me + 1 : program_invocation_name;
        fail_at = k && (!exe || !strcmp(exe, me)) ? atol(k) : 0;
    }
    if (fail_at <= 0 || atomic_fetch_add(&seen, 1) + 1 != fail_at) return 0;
    alloc_fail_refused();
    return 1;
}

void *malloc(size_t n) {
    if (refused()) return errno = ENOMEM, NULL;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
    if (refused()) return errno = ENOMEM, NULL;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    if (refused()) return errno = ENOMEM, NULL;
    return __libc_realloc(p, n);
}
