/*
 * comm_cal.h — the placement of NCCL's kernel-channel intervals against CUPTI's kernels
 * (comm_cal.c, whose head comment gives the rule and its measurements): from the pairs of
 * ops timed both ways, points of the placement error per device, and the error at any time.
 * Private to the analysis (comm.c). Pure functions over the caller's arrays; no allocation.
 */
#ifndef TPROF_ANALYSIS_COMM_CAL_H
#define TPROF_ANALYSIS_COMM_CAL_H

#include <stddef.h>
#include <stdint.h>

/* How far a kernel may sit from its op's channel interval once the placement was checked:
 * the spread of the error measured within a chunk (comm_cal.c). */
#define TP_CAL_SLACK_NS 10000

/* A pair (one op: its kernel's start, the difference of the channel interval's centre less
 * the kernel's, ns) or a point (a chunk: its middle pair's time, its median difference),
 * per device. */
typedef struct tp_cal_pair { uint32_t device; uint64_t t; int64_t d; } tp_cal_pair;
typedef tp_cal_pair tp_cal_point;

/* One device's points pts[a, b) and the drift used beyond them (ns per ns). */
typedef struct tp_cal_dev { uint32_t device; size_t a, b; double slope; } tp_cal_dev;

/* Sorts n pairs by device, then time, as tp_cal_points reads them. */
void tp_cal_sort(tp_cal_pair *v, size_t n);

/* The points of the n sorted pairs v into pts (room for n); returns how many. */
size_t tp_cal_points(const tp_cal_pair *v, size_t n, tp_cal_point *pts);

/* The devices of the np points pts (sorted as the pairs) into devs (room for np); returns
 * how many. */
size_t tp_cal_devices(const tp_cal_point *pts, size_t np, tp_cal_dev *devs);

/* The placement error (ns, channel centre less kernel centre) on `device` at time t:
 * interpolated between its points, extrapolated along its drift beyond them; 0 and
 * *known = 0 when the device has no point. O(nd + log np). */
int64_t tp_cal_at(const tp_cal_point *pts, const tp_cal_dev *devs, size_t nd, uint32_t device,
                  uint64_t t, int *known);

#endif
