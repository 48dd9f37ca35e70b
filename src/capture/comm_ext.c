/*
 * comm_ext.c — the exported bridge from capture libraries outside libtrainprof.so into its
 * rings (capture/comm_ext.h). Kept apart from any one capture mechanism: the PMPI wrappers
 * use it today; a future out-of-tree capture library (a UCX or Gloo shim) would use the same.
 */
#define _GNU_SOURCE /* clock_gettime in internal.h under -std=c11 */
#include "comm_ext.h"

#include <stdatomic.h>

#include "../core/config.h"
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

static _Atomic unsigned g_ooms;    /* OOMs of this process, either source */
static _Atomic int g_oom_torch;    /* trainprof.torch's allocator observer is attached */

unsigned tprof__oom_begin(void) { return atomic_fetch_add(&g_ooms, 1u) + 1u; }

void tprof__oom_torch_observes(void) { atomic_store(&g_oom_torch, 1); }

int tprof__oom_torch(void) { return atomic_load(&g_oom_torch); }

void tprof__memory_options(int *on, uint64_t *history) {
    uint64_t x;
    if (on) *on = tprof__env_uint(TPROF__OPT_MEMORY, &x) ? x != 0 : 1;
    if (history) *history = tprof__env_uint(TPROF__OPT_MEMORY_HISTORY, &x) ? x : 0;
}
