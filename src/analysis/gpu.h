/*
 * gpu.h — the GPU part of a rank's report (gpu.c).
 */
#ifndef TPROF_GPU_H
#define TPROF_GPU_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/steps.h"

/* Adds "gpu" to the rank's JSON (nothing when the process has no GPU records). st/nst: the
 * measured steps (NULL/0: the whole run); step_ns: their total length. */
void tp_gpu_section(cJSON *rank, const tp_process *p, const tp_step *st, size_t nst,
                    uint64_t step_ns, int top_n);

/* The class of a kernel name: "communication", "attention", "gemm", "elementwise/norm" or
 * "other" (one table, DESIGN §5). */
const char *tp_kernel_class(const char *name);

#endif
