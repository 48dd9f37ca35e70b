/*
 * kineto.h — reading torch.profiler / Kineto traces (Chrome Trace Event JSON as
 * torch.profiler's export_chrome_trace and tensorboard_trace_handler write them, plain or
 * gzip-compressed; pytorch/kineto libkineto/src/output_json.cpp) into the run model of
 * model.h, one tp_process per file, so that `trainprof report` and `diff` analyse them as
 * they do rank files (docs/cli.md, "torch.profiler traces").
 *
 * What a trace holds becomes what a rank file would: cpu_op, user_annotation and
 * python_function events (and trainprof's own async ranges) are ranges on their threads
 * (ProfilerStep#N among them, so the steps come from the usual rule), kernels, copies and
 * memsets are GPU records with their device, stream and correlation id, cuda_runtime and
 * cuda_driver events are the runtime calls that launched them, NCCL kernels are also
 * communication ops (bytes from the collective's arguments when the trace has them), and
 * distributedInfo gives the rank and world size. Times: the trace's microseconds (with their
 * nanosecond fraction, parsed exactly) become nanoseconds on one clock per file whose origin
 * is the file's earliest event; baseTimeNanoseconds (when present) maps it to wall time.
 *
 * Memory: the file is read in one pass through zlib (which also reads uncompressed files),
 * one event at a time, so the loader holds the model and one event, never the document.
 * Not thread safe per run (the run's string pool); independent runs may load in parallel.
 */
#ifndef TP_KINETO_H
#define TP_KINETO_H

#include <stddef.h>

#include "analysis/model.h"

/* Whether `path` looks like a Kineto trace: a gzip file, or a JSON object whose first MiB
 * (decompressed) names "traceEvents". Reads at most that much; 0 when it cannot be read. */
int tp_kineto_sniff(const char *path);

/* Loads the trace at `path` into *p (zeroed first; its strings in run's pool). Returns
 * TPROF_OK, TPROF_ERR_NO_MEMORY, TPROF_ERR_IO (cannot open) or TPROF_ERR_FORMAT (malformed,
 * truncated, no "traceEvents" array, a value of the wrong type): then `err` holds one line,
 * "PATH: what is wrong" (with the byte offset in the decompressed text where one is known),
 * and *p holds nothing to free. On success free *p with the run (tp_run_free). */
int tp_kineto_load(tp_run *run, const char *path, tp_process *p, char *err, size_t errlen);

#endif /* TP_KINETO_H */
