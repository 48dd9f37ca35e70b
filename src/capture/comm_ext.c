/*
 * comm_ext.c — the exported bridge from capture libraries outside libtrainprof.so into its
 * rings (capture/comm_ext.h). Kept apart from any one capture mechanism: the PMPI wrappers
 * use it today; a future out-of-tree capture library (a UCX or Gloo shim) would use the same.
 */
#define _GNU_SOURCE /* clock_gettime in internal.h under -std=c11 */
#include "comm_ext.h"

#include "../core/internal.h"

int tprof__comm_record(const char *name, uint64_t start_ns, const tprof_pl_comm *pl) {
    if (!pl) return 0;
    tprof__thread *t = tprof__thread_get();
    if (!t) return 0; /* not recording, or a thread over the limit (counted there) */
    uint32_t size;
    tprof_pl_comm *dst = tprof__begin_named(t, TPROF_REC_COMM_OP, name ? name : "Unknown",
                                            sizeof *dst, start_ns, &size);
    if (!dst) return 0; /* ring full: counted as a drop by the reserve */
    *dst = *pl;
    if (dst->end_ns < start_ns) dst->end_ns = start_ns;
    tprof__commit(t, size);
    return 1;
}

void tprof__capability_ext(const char *name, const char *status) {
    if (name && status) tprof__capability(name, status);
}
