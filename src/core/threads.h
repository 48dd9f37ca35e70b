/*
 * threads.h — how the library starts a thread of its own (the flusher, which also runs the
 * samplers; libmicrohttpd's server thread is given the same size): with a small explicit
 * stack, never the default.
 *
 * Why: glibc gives a thread created without a stack size a stack of RLIMIT_STACK's soft
 * limit (8 MiB on most systems; glibc nptl/nptl-stack.c, __pthread_initialize_minimal), and
 * all of it is address space. Under RLIMIT_AS (`ulimit -v`, batch schedulers' memory
 * limits) a job sized for its own threads then found its own pthread_create failing once
 * trainprof's two threads had taken 16 MiB of its limit. A profiler must not spend the
 * job's address space that way.
 *
 * The size: TPROF__THREAD_STACK_NEED is what the deepest path of our threads' own code and
 * the vendor libraries they call needs, measured (tests/metrics_stack_depth.c; the numbers
 * are beside the definition in threads.c) with a margin; the thread library's own share of
 * the stack (the static TLS of every loaded library, its thread descriptor, the guard page)
 * comes on top, as glibc reports it, so that a job with a large TLS does not eat into ours.
 */
#ifndef TPROF_THREADS_H
#define TPROF_THREADS_H

#include <pthread.h>
#include <stddef.h>

/* The stack size, in bytes, every library thread gets: the measured need plus the thread
 * library's minimum (TLS, descriptor, guard), rounded to pages. Computed once; any thread. */
size_t tprof__thread_stack_size(void);

/* pthread_create with that stack size (and default attributes otherwise). Returns 0 or
 * pthread_create's error; when the thread library refuses the size itself (EINVAL), the
 * thread is started with the default stack rather than not at all. Not for a hot path. */
int tprof__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif /* TPROF_THREADS_H */
