/*
 * cupti_test.h — what the scenarios of GPU activity capture against the scripted libcupti
 * (fake_cupti.c) share: tests/test_cupti.c and tests/test_cupti_foreign.c. Include it first
 * (it defines _GNU_SOURCE); it includes cmocka, the loader, CUPTI's header and child.h.
 *
 *   g_t0            the first delivered kernel's start (CLOCK_MONOTONIC ns), set by a test
 *   mono_ns()       CLOCK_MONOTONIC now, ns
 *   one_step()      step 1 begins and ends
 *   status_of(run)  the capability line capability.cupti of the run's process ("" if none)
 *   fake_fn(h, name) a control of the fake (int (void)) found in the copy h
 */
#ifndef TPROF_TEST_CUPTI_TEST_H
#define TPROF_TEST_CUPTI_TEST_H

#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "analysis/capture.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "capture/comm_ext.h"
#include "trainprof.h"

#ifndef CHILD_PREFIX
#define CHILD_PREFIX "cupti"
#endif
#include "child.h"

#ifndef FAKE_CUDA_PATH
#error "FAKE_CUDA_PATH must name the fake libcuda (tests/cupti.cmake)"
#endif
#ifndef FAKE_CUPTI_PATH
#error "FAKE_CUPTI_PATH must name the fake libcupti (tests/cupti.cmake)"
#endif

int InitializeInjection(void); /* libtrainprof's, called by the CUDA driver */

static uint64_t g_t0; /* the first delivered kernel's start (CLOCK_MONOTONIC ns) */

static CHILD_UNUSED uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static CHILD_UNUSED void one_step(void) {
    tprof_step_begin(1);
    tprof_step_end(1);
}

static CHILD_UNUSED const char *status_of(const tp_run *run) {
    const char *s = tp_meta(&run->procs[0], "capability.cupti");
    return s ? s : "";
}

typedef int (*fake_int_fn)(void);
/* The correlation ids of p's kernels in start order, the first `max` of them into out;
 * returns how many kernels p has. */
static CHILD_UNUSED size_t kernel_corrs(const tp_process *p, uint32_t *out, size_t max) {
    size_t n = 0;
    for (size_t k = 0; k < p->ngpu; k++)
        if (p->gpu[k].type == TPROF_REC_GPU_KERNEL) {
            if (n < max) out[n] = p->gpu[k].correlation;
            n++;
        }
    return n;
}

static CHILD_UNUSED fake_int_fn fake_fn(void *h, const char *name) {
    fake_int_fn f;
    *(void **)&f = dlsym(h, name);
    return f;
}

#endif /* TPROF_TEST_CUPTI_TEST_H */
