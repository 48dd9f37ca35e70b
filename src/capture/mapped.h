/*
 * mapped.h — the shared objects this process already has mapped whose file name starts with a
 * prefix ("libcuda.so", "libcupti.so", "libmpi.so"): what the program loaded itself, under any
 * version suffix, read from the loader's list (dl_iterate_phdr) with no dlopen, whose failure
 * would leave a per-thread error message allocated. Header-only, so that libtrainprof and
 * libtrainprof_mpi (which shares no internal symbol with it) both use it. Needs _GNU_SOURCE
 * before the first system header.
 */
#ifndef TPROF_MAPPED_H
#define TPROF_MAPPED_H

#include <link.h>
#include <stdio.h>
#include <string.h>

/* ThreadSanitizer cannot see the loader's own lock, which dlopen holds while it writes a new
 * object's name and dl_iterate_phdr holds while the callback reads it. Its dl_iterate_phdr
 * interceptor resets the name's bytes to hide that, but not the terminating NUL, which
 * strrchr and strncmp read: a dlopen on another thread (Open MPI loading its components) is
 * then reported as a race. Reads inside the walk are not checked; nothing else is hidden. */
#if defined(__SANITIZE_THREAD__)
#define TPROF__MAPPED_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPROF__MAPPED_TSAN 1
#endif
#endif
#ifdef TPROF__MAPPED_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define TPROF__MAPPED_WALK_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define TPROF__MAPPED_WALK_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define TPROF__MAPPED_WALK_BEGIN() ((void)0)
#define TPROF__MAPPED_WALK_END() ((void)0)
#endif

typedef struct {
    const char *prefix;
    char *paths;
    size_t path_bytes;
    int max, n;
} tprof__mapped_query;

static inline int tprof__mapped_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    tprof__mapped_query *q = arg;
    const char *path = info->dlpi_name, *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (base && !strncmp(base, q->prefix, strlen(q->prefix)))
        snprintf(q->paths + (size_t)q->n++ * q->path_bytes, q->path_bytes, "%s", path);
    return q->n >= q->max; /* full: stop the walk */
}

/* The paths of the first `max` (> 0) such objects, in load order, into `paths` (max slots of
 * `path_bytes` each; a longer path is cut). Returns how many were found. */
static inline int tprof__mapped(const char *prefix, char *paths, size_t path_bytes, int max) {
    tprof__mapped_query q = {prefix, paths, path_bytes, max, 0};
    TPROF__MAPPED_WALK_BEGIN();
    dl_iterate_phdr(tprof__mapped_cb, &q);
    TPROF__MAPPED_WALK_END();
    return q.n;
}

#endif /* TPROF_MAPPED_H */
