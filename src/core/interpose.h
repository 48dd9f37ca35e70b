/*
 * interpose.h — finding the definition that a function of libtrainprof.so interposes on.
 *
 * The library defines a few libc functions of its own (signals.c: sigaction and its relatives,
 * so that the job's handlers keep their exact flags; metrics_http.c: socket, accept, eventfd,
 * pipe and epoll_create for libmicrohttpd, so that the endpoint's descriptors stay out of the
 * job's range) and must call the definition it hides.
 */
#ifndef TPROF_CORE_INTERPOSE_H
#define TPROF_CORE_INTERPOSE_H

/* The next definition of `name` after libtrainprof.so in the search order (dlsym
 * RTLD_NEXT), else libc's own (libc.so.6, when it is loaded): a library loaded at start-up
 * after libc (the dependency of a preloaded library) has nothing after it, and a
 * sanitizer's runtime loaded before it resolves its own "real" functions to ours. NULL when
 * neither has it. Not async-signal-safe (dlsym): callers resolve their functions in a
 * constructor and keep the pointers. Thread-safe. */
void *tprof__next_symbol(const char *name);

/* tprof__next_symbol(name), looked up once and kept in *slot (atomically: a racing second
 * lookup finds the same answer). Thread-safe; async-signal-safe once *slot is filled, so
 * callers fill their slots from a constructor. */
void *tprof__next_symbol_cached(void **slot, const char *name);

#endif
