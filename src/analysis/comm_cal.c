/*
 * comm_cal.c — the placement of NCCL's kernel-channel intervals checked against CUPTI's
 * kernels (comm_cal.h), for comm.c's resolution of each op's time.
 *
 * Placement of the kernel-channel intervals, checked against CUPTI. The plugin maps NCCL's
 * GPU timer to host time by the smallest host-minus-GPU difference it saw; CUPTI places the
 * kernel of the same op on the host clock by its own means. Where ops have both (a matched
 * kernel that runs the op alone, and channel events), the difference of the two intervals'
 * centres is the plugin's placement error. Measured on H200s: 26-31 us in an all-reduce
 * loop, every op within 1.5 us of its neighbours, and 19-87 us over a DDP run on another
 * host, where it drifted by 12-14 us per second (12-14 ppm: the GPU timer and
 * CLOCK_MONOTONIC run at slightly different rates; 0.2-1 ppm on the loop's hosts). So the
 * differences are taken per device in time order, in chunks of CAL_CHUNK pairs at most and
 * CAL_CHUNK_NS at most (so the drift inside one stays under 3 us); a chunk of 3 pairs or
 * more whose median has at least half its pairs within TP_CAL_SLACK_NS of it gives a point
 * (its middle pair's time, its median) if it follows on from its neighbours (tp_cal_points),
 * and each op's channel interval moves by the value interpolated between the points around
 * it (beyond the ends, extrapolated along the device's drift: tp_cal_devices). A kernel then
 * counts as holding its op's interval within TP_CAL_SLACK_NS.
 */
#define _GNU_SOURCE
#include "analysis/comm_cal.h"
#include "analysis/alloc.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CAL_CHUNK 32
#define CAL_CHUNK_NS 200000000ull
/* the fastest drift a point may follow on with, 50 us per second: common crystal oscillators
 * are rated +-20-50 ppm, and H200 hosts measured 12-14 ppm (below) */
#define CAL_DRIFT_RATE 50e-6

static int cmp_cal_pair(const void *a, const void *b) {
    const tp_cal_pair *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

void tp_cal_sort(tp_cal_pair *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_cal_pair);
}

static int follows(const tp_cal_point *last, const tp_cal_point *c) {
    uint64_t dt = c->t > last->t ? c->t - last->t : last->t - c->t;
    return (double)llabs(c->d - last->d) <= TP_CAL_SLACK_NS + CAL_DRIFT_RATE * (double)dt;
}

/* The points of the pairs v[0..n) (sorted by device, then time) into pts; returns how many
 * (0 when out of memory: no placement check, KCH_SLACK_NS applies). A stretch of wrong
 * matches (each op given its successor's kernel, as after CUPTI lost a record) with evenly
 * spaced kernels looks like a steady placement error too, off by the spacing: so the points
 * must also follow on from each other. The walk starts at the point nearest the median of
 * all the device's pairs (most matches are right) and goes both ways, keeping a point only
 * when it is within TP_CAL_SLACK_NS plus CAL_DRIFT_RATE times the time between them of the
 * last one kept. */
size_t tp_cal_points(const tp_cal_pair *v, size_t n, tp_cal_point *pts) {
    size_t np = 0;
    int64_t *tmp = tp_malloc((n ? n : 1) * sizeof *tmp);
    tp_cal_point *cand = tp_malloc((n ? n : 1) * sizeof *cand);
    if (!tmp || !cand) {
        free(tmp);
        free(cand);
        return 0;
    }
    for (size_t a = 0; a < n;) {
        size_t e = a, nc = 0;
        while (e < n && v[e].device == v[a].device) e++;
        for (size_t c0 = a, c1; c0 < e; c0 = c1) {
            c1 = c0 + 1;
            while (c1 < e && c1 - c0 < CAL_CHUNK && v[c1].t - v[c0].t <= CAL_CHUNK_NS) c1++;
            size_t m = c1 - c0;
            if (m < 3) continue;
            for (size_t i = 0; i < m; i++) tmp[i] = v[c0 + i].d;
            qsort(tmp, m, sizeof *tmp, tp_cmp_i64);
            int64_t med = tmp[m / 2];
            size_t near = 0;
            for (size_t i = 0; i < m; i++) near += llabs(tmp[i] - med) <= TP_CAL_SLACK_NS;
            if (2 * near >= m) cand[nc++] = (tp_cal_point){v[a].device, v[c0 + m / 2].t, med};
        }
        if (nc) {
            const size_t len = e - a;
            for (size_t i = 0; i < len; i++) tmp[i] = v[a + i].d;
            qsort(tmp, len, sizeof *tmp, tp_cmp_i64);
            const int64_t all = tmp[len / 2];
            size_t anchor = 0;
            for (size_t c = 1; c < nc; c++)
                if (llabs(cand[c].d - all) < llabs(cand[anchor].d - all)) anchor = c;
            uint8_t *keep = (uint8_t *)tmp; /* tmp is free again, and n >= nc bytes */
            memset(keep, 0, nc);
            keep[anchor] = 1;
            const tp_cal_point *last = &cand[anchor];
            for (size_t c = anchor + 1; c < nc; c++)
                if (follows(last, &cand[c])) keep[c] = 1, last = &cand[c];
            last = &cand[anchor];
            for (size_t c = anchor; c-- > 0;)
                if (follows(last, &cand[c])) keep[c] = 1, last = &cand[c];
            for (size_t c = 0; c < nc; c++)
                if (keep[c]) pts[np++] = cand[c];
        }
        a = e;
    }
    free(tmp);
    free(cand);
    return np;
}

/* One device's points: pts[a, b) in time order, and the least-squares slope of the error
 * against time over them, used beyond the ends (0 when the points span under CAL_SPAN_NS or
 * the slope is beyond CAL_MAX_RATE: no clock pair drifts that fast). A DDP run on two H200s
 * drifted by 12 and 14 us per second (12-14 ppm) on its two ranks, steadily: with the
 * points of the run's first half, the slope's line met the second half's errors within
 * 1.3 us, where the last point's value was 15-17 us off by the end. */
#define CAL_SPAN_NS 500000000ull
#define CAL_MAX_RATE 1e-4

size_t tp_cal_devices(const tp_cal_point *pts, size_t np, tp_cal_dev *devs) {
    size_t nd = 0;
    for (size_t a = 0; a < np;) {
        size_t b = a;
        while (b < np && pts[b].device == pts[a].device) b++;
        double slope = 0;
        if (b - a >= 2 && pts[b - 1].t - pts[a].t >= CAL_SPAN_NS) {
            double mt = 0, md = 0, stt = 0, std = 0;
            for (size_t i = a; i < b; i++) {
                mt += (double)(pts[i].t - pts[a].t);
                md += (double)pts[i].d;
            }
            mt /= (double)(b - a);
            md /= (double)(b - a);
            for (size_t i = a; i < b; i++) {
                double x = (double)(pts[i].t - pts[a].t) - mt;
                stt += x * x;
                std += x * ((double)pts[i].d - md);
            }
            slope = stt > 0 ? std / stt : 0;
            if (fabs(slope) > CAL_MAX_RATE) slope = 0;
        }
        devs[nd++] = (tp_cal_dev){pts[a].device, a, b, slope};
        a = b;
    }
    return nd;
}

/* The placement error at time t on a device: interpolated between the points around t,
 * extrapolated along the device's slope beyond them (0 and *known = 0 when the device has
 * no point). O(log n). */
int64_t tp_cal_at(const tp_cal_point *pts, const tp_cal_dev *devs, size_t nd, uint32_t device,
                      uint64_t t, int *known) {
    const tp_cal_dev *dv = NULL;
    for (size_t i = 0; i < nd && !dv; i++)
        if (devs[i].device == device) dv = &devs[i];
    *known = dv != NULL;
    if (!dv) return 0;
    size_t lo = dv->a, hi = dv->b; /* the first point after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pts[mid].t <= t) lo = mid + 1;
        else hi = mid;
    }
    const tp_cal_point *first = &pts[dv->a], *last = &pts[dv->b - 1];
    if (lo == dv->a) return first->d - (int64_t)llround(dv->slope * (double)(first->t - t));
    if (lo == dv->b) return last->d + (int64_t)llround(dv->slope * (double)(t - last->t));
    const tp_cal_point *p0 = &pts[lo - 1], *p1 = &pts[lo];
    double f = (double)(t - p0->t) / (double)(p1->t - p0->t);
    return p0->d + (int64_t)llround(f * (double)(p1->d - p0->d));
}

