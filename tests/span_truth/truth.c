/*
 * truth.c DIR BOUND — for each rank of DIR whose bounded load holds a span, the GPU figures of
 * the records that began in the span, from a whole load of the file (bound 0), as JSON on
 * stdout: what the bounded report's "per": "span" figures should be (tests/span_truth.cmake).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/capture.h"
#include "analysis/model.h"

int tp_is_blocking_sync(const char *n);

typedef struct { uint64_t s, e; } iv;
static int by_s(const void *a, const void *b) {
    const iv *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}
static uint64_t unite(iv *v, size_t n) {
    qsort(v, n, sizeof *v, by_s);
    uint64_t busy = 0, cs = 0, ce = 0;
    for (size_t k = 0; k < n; k++) {
        if (v[k].s > ce) { busy += ce - cs; cs = v[k].s; ce = v[k].e; }
        else if (v[k].e > ce) ce = v[k].e;
    }
    return busy + ce - cs;
}
static int in(uint64_t t, uint64_t a, uint64_t b) { return t >= a && t < b; }
/* the busy share of the intervals v (clipped to the span) over the span's captured parts */
static double busy_share(iv *v, size_t n, const tp_step *sp, size_t ns) {
    iv *c = malloc((n + 1) * sizeof *c);
    uint64_t busy = 0, len = 0;
    for (size_t j = 0; j < ns; j++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t s = v[k].s > sp[j].start ? v[k].s : sp[j].start;
            uint64_t e = v[k].e < sp[j].end ? v[k].e : sp[j].end;
            if (e > s) c[m++] = (iv){s, e};
        }
        busy += m ? unite(c, m) : 0;
        len += sp[j].end - sp[j].start;
    }
    free(c);
    return len ? (double)busy / (double)len : 0;
}
static int graph_launch(const char *n) {
    return n && (!strncmp(n, "cudaGraphLaunch", 15) || !strncmp(n, "cuGraphLaunch", 13));
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR BOUND\n", argv[0]);
        return 2;
    }
    tp_run run;
    char err[256];
    const char *ops[] = {argv[1]};
    size_t bound = strtoull(argv[2], 0, 10);
    if (tp_run_load_slim(ops, 1, &run, err, sizeof err)) { puts(err); return 1; }
    printf("{");
    int firstr = 1;
    for (size_t i = 0; i < run.nprocs; i++) {
        tp_process w, b;
        tp_gpu_bound gb0 = {0, 0}, gb = {bound, 0};
        if (tp_process_load_bounded(&run, &run.procs[i], &w, NULL, &gb0)) continue;
        if (tp_process_load_bounded(&run, &run.procs[i], &b, NULL, &gb)) continue;
        if (!b.gpu_window_to) { tp_process_free(&w); tp_process_free(&b); continue; }
        uint64_t from = b.gpu_window_from, to = b.gpu_window_to, t0 = w.hdr.start_mono_ns;
        printf("%s\"%d\": {\"from_s\": %.9f, \"to_s\": %.9f, \"devices\": {", firstr ? "" : ",",
               w.rank, (double)(from - t0) / 1e9, (double)(to - t0) / 1e9);
        firstr = 0;
        iv *v = malloc((w.ngpu + 1) * sizeof *v), *vh = malloc((b.ngpu + 1) * sizeof *v);
        tp_step *sp = NULL; /* the span's parts in which GPU activity was recorded */
        size_t ns = 0;
        if (tp_capture_spans(&w, from, to, &sp, &ns)) return 1;
        for (uint32_t d = 0; d < 64; d++) {
            size_t nk = 0, nv = 0, nvh = 0, any = 0;
            double kns = 0, cns = 0, h2d = 0;
            for (size_t k = 0; k < w.ngpu; k++) {
                const tp_gpu_op *o = &w.gpu[k];
                if (o->device != d || o->type == TPROF_REC_GPU_SYNC) continue;
                any = 1;
                if (in(o->start, from, to)) {
                    if (o->type == TPROF_REC_GPU_KERNEL) {
                        nk++;
                        kns += (double)(o->end - o->start);
                    }
                    else cns += (double)(o->end - o->start);
                    if (o->type == TPROF_REC_GPU_MEMCPY && o->kind == 1) h2d += (double)o->bytes;
                }
                uint64_t s = o->start > from ? o->start : from, e = o->end < to ? o->end : to;
                if (e > s) v[nv++] = (iv){s, e};
            }
            for (size_t k = 0; k < b.ngpu; k++) {
                const tp_gpu_op *o = &b.gpu[k];
                if (o->device != d || o->type == TPROF_REC_GPU_SYNC) continue;
                uint64_t s = o->start > from ? o->start : from, e = o->end < to ? o->end : to;
                if (e > s) vh[nvh++] = (iv){s, e};
            }
            if (!any) continue;
            printf("%s\"%u\": {\"kernels\": %zu, \"kernel_ms\": %.6f, \"memcpy_memset_ms\": %.6f, "
                   "\"h2d_bytes\": %.0f, \"busy_share_all\": %.6f, \"busy_share_held\": %.6f}",
                   d ? "," : "", d, nk, kns / 1e6, cns / 1e6, h2d,
                   busy_share(v, nv, sp, ns), busy_share(vh, nvh, sp, ns));
        }
        free(v);
        free(vh);
        free(sp);
        size_t nsync = 0, gl = 0, gk = 0, novh = 0, novh_ov = 0;
        double blocked = 0, blocked_clip = 0, ovh = 0, ovh_clip = 0;
        for (size_t k = 0; k < w.napi; k++) {
            const tp_gpu_op *a = &w.api[k];
            if (!in(a->start, from, to)) continue;
            if (tp_is_blocking_sync(a->name)) {
                nsync++;
                blocked += (double)(a->end - a->start);
                blocked_clip += (double)((a->end < to ? a->end : to) - a->start);
            }
            gl += graph_launch(a->name);
        }
        for (size_t k = 0; k < w.ngpu; k++)
            gk += w.gpu[k].type == TPROF_REC_GPU_KERNEL && w.gpu[k].graph &&
                  in(w.gpu[k].start, from, to);
        for (size_t k = 0; k < w.novh; k++) {
            const tp_gpu_op *o = &w.ovh[k];
            uint64_t s = o->start > from ? o->start : from, e = o->end < to ? o->end : to;
            if (in(o->start, from, to)) { novh++; ovh += (double)(o->end - o->start); }
            if (e > s) { novh_ov++; ovh_clip += (double)(e - s); }
        }
        printf("}, \"host_syncs\": %zu, \"host_sync_blocked_ms\": %.6f, "
               "\"host_sync_blocked_clipped_ms\": %.6f, \"graph_launches\": %zu, "
               "\"graph_kernels\": %zu, \"overhead_records_began\": %zu, "
               "\"overhead_ms_began\": %.6f, \"overhead_records_overlap\": %zu, "
               "\"overhead_ms_overlap\": %.6f, \"top\": {",
               nsync, blocked / 1e6, blocked_clip / 1e6, gl, gk, novh, ovh / 1e6, novh_ov,
               ovh_clip / 1e6);
        /* kernel counts by name (interned) */
        const char *names[256];
        size_t cnt[256], nn = 0;
        for (size_t k = 0; k < w.ngpu; k++) {
            const tp_gpu_op *o = &w.gpu[k];
            if (o->type != TPROF_REC_GPU_KERNEL || !in(o->start, from, to)) continue;
            size_t q = 0;
            while (q < nn && strcmp(names[q], o->name)) q++;
            if (q == nn) { if (nn == 256) continue; names[nn] = o->name; cnt[nn++] = 0; }
            cnt[q]++;
        }
        for (size_t q = 0; q < nn; q++) printf("%s\"%s\": %zu", q ? "," : "", names[q], cnt[q]);
        printf("}}");
        tp_process_free(&w);
        tp_process_free(&b);
    }
    printf("}\n");
    tp_run_free(&run);
    return 0;
}
