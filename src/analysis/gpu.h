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
 * "other" (one table, DESIGN §5). The loader stores each kernel's class id in its
 * tp_gpu_op (cls), matched once per distinct name: use tp_kernel_class_name(op->cls) on
 * loaded ops rather than matching the name again. */
const char *tp_kernel_class(const char *name);
int tp_kernel_class_id(const char *name);     /* TP_KC_* */
const char *tp_kernel_class_name(int id);     /* "other" for an id out of range */

#endif
