/*
 * capture.h — the steps in which GPU activity was recorded (capture.c).
 *
 * GPU activity (CUPTI) is not always recorded in every step: a kernel-capture window
 * (--kernel-steps, metadata kernel_steps.on_ns / kernel_steps.off_ns), the metrics endpoint's
 * detail on/off (capture.detail_on_ns / capture.detail_off_ns), pauses for another CUPTI
 * client such as torch.profiler (gpu_capture.pauses, gpu_capture.paused_since_ns), or GPU
 * records that stop while the steps go on (another client took the activity API without
 * trainprof knowing). A step in which nothing was recorded is not an idle GPU: every figure
 * derived from GPU records (the GPU section, the step breakdown's GPU parts, the exposure of
 * communication on the GPU basis, the rules over them, the headline, diff's kernel samples)
 * is over the captured steps only.
 *
 * A measured step is captured when it began while capture was on and no pause overlaps it.
 * Host-only figures (step time, phases, energy) keep every measured step.
 */
#ifndef TPROF_CAPTURE_H
#define TPROF_CAPTURE_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* The captured steps of process p among its steps s, into *out (results.h; zeroed first) and
 * *cap: a copy of s holding only the captured steps (the captured warm-up steps first,
 * cap->nwarmup of them; no missing list), freed with tp_steps_free. A process whose GPU
 * activity capture does not apply (no GPU records and no capture metadata) has every step
 * captured and out->present 0. Also the capture's cost (tp_capture_result). Returns TPROF_OK
 * or TPROF_ERR_NO_MEMORY (*cap then empty). Time O(steps + metadata + GPU records). */
int tp_capture_compute(tp_capture_result *out, tp_steps *cap, const tp_process *p,
                       const tp_steps *s);

/* The spans of [t0, t1) (monotonic ns) in which p's GPU activity was recorded: capture on by
 * the timeline tp_capture_compute reads (plan windows, the endpoint's switches) and no pause
 * overlapping, in time order, as windows in *out (app_step: their index; heap, the caller
 * frees it) and *n. For a run without steps, whose GPU figures are over the time captured.
 * A process whose capture does not apply (tp_capture_compute) has one span, the whole.
 * Returns TPROF_OK or TPROF_ERR_NO_MEMORY (*out NULL, *n 0). Time O(metadata log metadata). */
int tp_capture_spans(const tp_process *p, uint64_t t0, uint64_t t1, tp_step **out, size_t *n);

/* The same spans over all of p's time, not cut to a bounded load's span: when CUPTI recorded
 * (the plan's windows, the endpoint's switches, less the pauses), whatever the load held. The
 * communication analysis matches an op to a kernel of its own span (comm.c): a load bounded
 * in GPU records still reads every kernel of the communication class (model.h). Returns
 * TPROF_OK or TPROF_ERR_NO_MEMORY (*out NULL, *n 0). Time O(metadata log metadata). */
int tp_capture_timeline(const tp_process *p, tp_step **out, size_t *n);

/* The capture windows p's file could not list (the runtime counts those past its list,
 * metadata gpu_capture.windows_left_out): their steps count as not captured. 0 when none, or
 * when the count is damaged (not a number). */
size_t tp_capture_unlisted(const tp_process *p);

/* One entry of p's pause list (tp_capture_pause_list). */
typedef struct tp_capture_pause {
    uint64_t from_ns, to_ns; /* CLOCK_MONOTONIC; to_ns UINT64_MAX: never resumed */
    size_t at;               /* its place in the list, which numbers its reason */
    int open;                /* gpu_capture.paused_since_ns: never resumed */
} tp_capture_pause;

/* The pauses of p, the one reader of their metadata: each entry of gpu_capture.pauses
 * ("start-end,..." in ns) that reads as a span ending after it starts, in the list's order,
 * then one never resumed (gpu_capture.paused_since_ns, at: the list's length). An entry
 * that does not read so (damaged metadata) is no pause: it is skipped and keeps its place,
 * so that the entries after it keep their reasons. *v is malloc'd (the caller frees it;
 * NULL when *n is 0). Returns TPROF_OK or TPROF_ERR_NO_MEMORY (*v NULL, *n 0). Time
 * O(length of the list). */
int tp_capture_pause_list(const tp_process *p, tp_capture_pause **v, size_t *n);

/* The places of p's pause list (gpu_capture.pauses' entries, read or not, then one never
 * resumed): how many reasons tp_capture_pause_reasons can number. */
size_t tp_capture_npauses(const tp_process *p);
/* The reasons of p's pauses, numbered as above: for each i < n, r[i] (len[i] bytes, in p's
 * metadata, not NUL-terminated) the reason of pause i, NULL when none was named. Each pause's
 * own, from gpu_capture.pause_reasons (one comma-separated item per pause), page for page:
 * the items of reasons page k are those of pauses page k (docs/format.md), so that a page
 * whose reasons are fewer or more than its pauses (damage) moves no other page's; the pause
 * never resumed takes the item after the last page's, on the last reasons page. Files
 * written before it name one reason for every pause (gpu_capture.pause_reason, whose last
 * value wins). One pass over the lists: time O(their length + n). */
void tp_capture_pause_reasons(const tp_process *p, const char **r, size_t *len, size_t n);

/* Adds "gpu_capture" to the rank's JSON when some measured step was not captured
 * (docs/report-json.md). */
void tp_capture_json(cJSON *rank, const tp_capture_result *c);

/* The decimals that print a bounded load's span (bound_from_s, bound_to_s) in seconds with
 * its two ends apart: 3 (milliseconds), or 6 for a span under 10 ms (a bound of a few
 * thousand records over dense kernels), which milliseconds would print as one instant. */
int tp_capture_span_decimals(const tp_capture_result *c);

/* "GPU activity recorded in steps 30-34 (5 of 50 measured steps)" into buf (n bytes), for the
 * text, the HTML and the findings; "" when every measured step was captured. Returns buf. */
const char *tp_capture_words(const tp_capture_result *c, char *buf, size_t n);

/* The rank's capture lines for the text report (two-space indent): which steps, and the
 * capture's cost. Nothing when every measured step was captured. */
void tp_capture_text(FILE *f, const tp_capture_result *c);

#endif
