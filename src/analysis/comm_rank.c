/*
 * comm_rank.c — the communication of one rank (comm.h, part 2 and 3 of comm.c's rules): its
 * ops summed per communicator and op with count, bytes, time and bandwidth, and its exposed
 * and overlapped communication per step. rank_compute fills the typed result
 * (tp_comm_result, results.h); rank_json writes the document's "communication" from it.
 */
#define _GNU_SOURCE
#include "analysis/comm.h"
#include "analysis/alloc.h"
#include "analysis/comm_acc.h"

#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/capture.h"
#include "analysis/gpu.h"
#include "analysis/span_store.h"
#include "analysis/spans.h"
#include "analysis/stats.h"
#include "format/format.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ per-rank table */

typedef tp_comm_row_result row;

typedef struct cref { size_t a, b; double time_ns; uint64_t hash; } cref;

static int cmp_cref(const void *a, const void *b) {
    const cref *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? 1 : -1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static cJSON *row_json(const row *r, size_t nst) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "op", r->name);
    cJSON_AddNumberToObject(e, "count", (double)r->count);
    cJSON_AddNumberToObject(e, "bytes", (double)r->bytes);
    if (r->dtypes) /* the element type, when the source said (NCCL does) */
        cJSON_AddStringToObject(e, "datatype",
                                r->dtypes & (r->dtypes - 1)
                                    ? "mixed"
                                    : tprof__comm_dtype_name((uint32_t)__builtin_ctz(r->dtypes)));
    cJSON_AddNumberToObject(e, "timed", (double)r->timed);
    cJSON_AddNumberToObject(e, "time_ms", (double)r->time_ns / 1e6);
    if (r->timed)
        cJSON_AddNumberToObject(e, "mean_us", (double)r->time_ns / 1e3 / (double)r->timed);
    double factor = tp_comm_bus_factor(r->op, r->nranks);
    cJSON_AddNumberToObject(e, "bus_factor", factor);
    double algbw, bw_ms;
    if (tp_comm_row_bw(r, &algbw, &bw_ms)) {
        cJSON_AddNumberToObject(e, "algbw_gbs", algbw);
        cJSON_AddNumberToObject(e, "busbw_gbs", algbw * factor);
        cJSON_AddNumberToObject(e, "bw_ops", (double)r->bw_ops);
        cJSON_AddNumberToObject(e, "bw_time_ms", bw_ms);
    }
    const double src[3] = {(double)r->src[0], (double)r->src[1], (double)r->src[2]};
    cJSON_AddStringToObject(e, "time_source", tp_comm_time_source(src));
    cJSON *s = cJSON_AddObjectToObject(e, "time_sources");
    for (int k = 2; k >= 0; k--)
        cJSON_AddNumberToObject(s, tp_comm_src_name((tp_comm_src)k), (double)r->src[k]);
    if (r->enqueue_only) cJSON_AddNumberToObject(e, "enqueue_only", (double)r->enqueue_only);
    if (r->unfinished) cJSON_AddNumberToObject(e, "unfinished", (double)r->unfinished);
    if (nst) {
        cJSON_AddNumberToObject(e, "count_per_step", (double)r->in_steps / (double)nst);
        cJSON_AddNumberToObject(e, "bytes_per_step", (double)r->bytes_in_steps / (double)nst);
    }
    return e;
}
/* ------------------------------------------------------------------ exposure */

/* The devices the rank's kernels ran on (x->devices, at most 64) and what the exposure can be
 * measured against (x->basis, x->note): "gpu" with kernel records, "host" for a CPU job's
 * MPI or torch.distributed calls, else "none". Returns the number of devices. */
static size_t exposure_basis(tp_comm_exposure_result *x, const tp_process *p,
                             const comm_acc *a) {
    uint32_t *devs = x->devices;
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].type != TPROF_REC_GPU_KERNEL) continue;
        size_t k = 0;
        while (k < ndev && devs[k] != p->gpu[i].device) k++;
        if (k == ndev && ndev < 64) devs[ndev++] = p->gpu[i].device;
    }
    size_t nmpi = a->host_timed, ngpu_time = a->gpu_timed;
    int comm_kernels = 0;
    for (size_t i = 0; i < p->ngpu && !comm_kernels; i++)
        comm_kernels = tp_comm_is_kernel(&p->gpu[i]);
    const char *basis, *note;
    if (ndev && !comm_kernels && !ngpu_time && !nmpi) {
        basis = "none";
        note = "NCCL ops with only host enqueue times and no NCCL kernel in the CUPTI records: "
               "the time on the GPU is unknown";
    } else if (ndev) {
        basis = "gpu";
        note = nmpi ? "communication = NCCL kernels (CUPTI; the ops' GPU intervals on a device "
                      "without them), and the MPI calls and torch.distributed's host-side "
                      "ones (gloo, ...: the host is blocked in them); compute = every other "
                      "kernel on the device"
                    : "communication = NCCL kernels (CUPTI; the ops' GPU intervals on a device "
                      "without them); compute = every other kernel on the device";
    } else if (nmpi) {
        basis = "host";
        note = "no GPU records: a CPU job; communication = the MPI and torch.distributed calls "
               "(gloo, mpi, ...) with nonblocking ones from issue to observed completion; "
               "exposed = the time the host was blocked in a call or a wait, overlapped = the "
               "rest, when it was free to compute";
    } else {
        basis = "none";
        note = ngpu_time ? "NCCL GPU intervals but no CUPTI kernel records: what ran beside them "
                           "is unknown, so no split is made"
                         : "only the host enqueue times of NCCL ops (no GPU interval, no CUPTI "
                           "kernels): the time on the GPU is unknown";
    }
    x->basis = basis;
    x->note = note;
    return ndev;
}

/* The exposure figures of x from the per-window exposed (ex), overlapped (ov) and
 * communication (cm) ns of the nw windows win; tmp: room for nw doubles. */
static void exposure_figures(tp_comm_exposure_result *x, const tp_step *win, size_t nw,
                             const uint64_t *ex, const uint64_t *ov, const uint64_t *cm,
                             double *tmp, const tp_step *st, size_t nst) {
    uint64_t tot_w = 0, tot_e = 0, tot_o = 0;
    size_t worst = 0;
    double worst_share = -1;
    for (size_t w = 0; w < nw; w++) {
        uint64_t len = win[w].end - win[w].start;
        tot_w += len;
        tot_e += ex[w];
        tot_o += ov[w];
        double sh = len ? (double)ex[w] / (double)len : 0;
        if (sh > worst_share) {
            worst_share = sh;
            worst = w;
        }
    }
    x->has_figures = 1;
    x->windows = nw;
    x->window_ms = (double)tot_w / 1e6 / (double)nw;
    const struct { tp_stat5 *out; const uint64_t *v; } series[3] = {
        {&x->comm_ms, cm}, {&x->exposed_ms, ex}, {&x->overlapped_ms, ov}};
    for (int s = 0; s < 3; s++) {
        for (size_t w = 0; w < nw; w++) tmp[w] = (double)series[s].v[w] / 1e6;
        *series[s].out = tp_stat5_of(tmp, nw);
    }
    x->exposed_share = tot_w ? (double)tot_e / (double)tot_w : 0;
    x->overlapped_share = tot_w ? (double)tot_o / (double)tot_w : 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t len = win[w].end - win[w].start;
        tmp[w] = len ? (double)ex[w] / (double)len : 0;
    }
    x->exposed_share_per_window = tp_stat5_of(tmp, nw);
    x->has_worst_step = nst > 0;
    if (nst) x->worst_step = (double)st[worst].app_step;
}

/* The nw windows win (a bounded stepless rank's captured parts of its span) as one: their
 * figures added into the first of ex, ov and cm, *one as long as all of them. Returns 1. */
static size_t span_in_one(tp_step *one, const tp_step *win, size_t nw, uint64_t *ex,
                          uint64_t *ov, uint64_t *cm) {
    uint64_t len = 0;
    for (size_t w = 0; w < nw; w++) {
        len += win[w].end - win[w].start;
        if (!w) continue;
        ex[0] += ex[w];
        ov[0] += ov[w];
        cm[0] += cm[w];
    }
    *one = (tp_step){0, len, 0, 0};
    return 1;
}

const char *tp_comm_exposure_per(const tp_comm_exposure_result *x) {
    return x->per_step ? "step" : x->in_span ? "span" : "run";
}

/* A compute kernel (not communication) of the device *arg. */
static int compute_kernel(const tp_gpu_op *o, const void *arg) {
    return o->device == *(const uint32_t *)arg && o->type == TPROF_REC_GPU_KERNEL &&
           !tp_comm_is_kernel(o);
}

/* Exposed and overlapped communication per window (measured step, or the whole run) into *x. */
static void exposure_compute(tp_comm_exposure_result *x, const tp_process *p,
                             const tp_comm_time *tm, const comm_acc *a, const tp_step *st,
                             size_t nst, const tp_step *cst, size_t ncst) {
    x->present = 1;
    x->per_step = nst > 0;
    size_t ndev = exposure_basis(x, p, a);
    const uint32_t *devs = x->devices;
    const char *basis = x->basis;
    /* on the GPU basis compute is the kernels: only the steps in which GPU activity was
     * recorded (capture.h) have them, the others would read as all exposed */
    if (!strcmp(basis, "gpu") && nst) {
        st = cst;
        nst = ncst;
        if (!nst) {
            x->note = "no measured step was captured (GPU activity not recorded): the exposure "
                      "on the GPU is not known";
            return;
        }
    }
    tp_step whole = {p->first_ts, p->end_mono, 0, 0};
    /* no step and a load bounded in GPU records: the compute kernels are the span's alone
     * (model.h, tp_process_load_bounded), so on the GPU basis the window is the span: the
     * parts of it in which GPU activity was recorded (a pause for another CUPTI client is
     * no exposed time), as the step breakdown's, added up into one at the end */
    x->in_span = !nst && !strcmp(basis, "gpu") && p->gpu_window_to > p->gpu_window_from;
    tp_step *parts = NULL;
    size_t nparts = 0;
    if (x->in_span &&
        tp_capture_spans(p, p->gpu_window_from, p->gpu_window_to, &parts, &nparts) != TPROF_OK)
        return;
    const tp_step *win = nst ? st : x->in_span ? parts : &whole;
    size_t nw = nst ? nst : x->in_span ? nparts : (p->end_mono > p->first_ts ? 1 : 0);
    if (!strcmp(basis, "none") || !nw) {
        free(parts);
        return;
    }
    x->ndevices = ndev;

    size_t nd = ndev ? ndev : 1; /* host basis: one "device", the process */
    uint64_t *cw = tp_calloc(nw * 3, sizeof *cw);     /* per window: comm, compute, union */
    uint64_t *ex = tp_calloc(nw, sizeof *ex), *ov = tp_calloc(nw, sizeof *ov),
             *cm = tp_calloc(nw, sizeof *cm);
    double *tmp = tp_malloc(nw * sizeof *tmp);
    tp_span *sc = NULL, *su = NULL;
    size_t nsc = 0, csc = 0, nsu = 0, csu = 0;
    int oom = !cw || !ex || !ov || !cm || !tmp;
    int first = 1;
    for (size_t d = 0; d < nd && !oom; d++) {
        nsc = nsu = 0;
        oom |= tp_comm_device_spans(p, tm, ndev > 0, ndev ? devs[d] : 0, &sc, &nsc, &csc);
        if (oom) break;
        if (!ndev) {
            /* Host basis: the process is blocked in the blocking calls and the waits (sc:
             * exposed); the nonblocking ops in flight (an MPI I* op, an async torch
             * collective, DDP's bucket all-reduces: call to observed completion) are
             * communication too, but the host was free to compute meanwhile: overlapped,
             * except where it also waited: all communication is the union of the two sets
             * (su: the nonblocking ones), each sorted, walked together rather than copied
             * into one (a CPU job's millions of calls). */
            for (size_t i = 0; i < p->ncomm && !oom; i++)
                if (tp_comm_host_span(&p->comm[i]) == 1)
                    oom |= tp_comm_push_span(&su, &nsu, &csu, p->comm[i].start, p->comm[i].end);
            /* and those of the ops read apart (tp_comm_stream_host), walked where they lie */
            tp_span_walk *hb = oom ? NULL : tp_span_walk_open(tp_comm_stream_host(p, 0));
            tp_span_walk *hb2 = hb ? tp_span_walk_open(tp_comm_stream_host(p, 0)) : NULL;
            tp_span_walk *hn = hb2 ? tp_span_walk_open(tp_comm_stream_host(p, 1)) : NULL;
            oom |= !hn;
            if (!oom) {
                tp_spans_sort(sc, nsc);
                tp_spans_sort(su, nsu);
                tp_span_array sa = {sc, nsc, 0}, sa2 = sa, ua = {su, nsu, 0};
                tp_union blk, all;
                tp_union_init(&blk);
                tp_union_add(&blk, tp_span_array_next, &sa);
                tp_union_add(&blk, tp_span_walk_next, hb);
                tp_union_steps_each(&blk, win, nw, ex);
                tp_union_init(&all);
                tp_union_add(&all, tp_span_array_next, &sa2);
                tp_union_add(&all, tp_span_walk_next, hb2);
                tp_union_add(&all, tp_span_array_next, &ua);
                tp_union_add(&all, tp_span_walk_next, hn);
                tp_union_steps_each(&all, win, nw, cm);
                for (size_t w = 0; w < nw; w++) ov[w] = cm[w] > ex[w] ? cm[w] - ex[w] : 0;
            }
            tp_span_walk_close(hb);
            tp_span_walk_close(hb2);
            tp_span_walk_close(hn);
            break;
        }
        /* GPU basis: communication C (a few spans per op, sorted here), compute kernels K
         * (walked from the records, which are in start order: a rank's kernels are millions
         * of spans) and their union, each per window */
        tp_spans_sort(sc, nsc);
        tp_span_array ca = {sc, nsc, 0}, cb = {sc, nsc, 0};
        tp_gpu_walk ka = {p, compute_kernel, &devs[d], 0}, kb = ka;
        /* the blocking calls of the host-timed ops read apart are C's too */
        tp_span_walk *ha = tp_span_walk_open(tp_comm_stream_host(p, 0));
        tp_span_walk *hc = ha ? tp_span_walk_open(tp_comm_stream_host(p, 0)) : NULL;
        if (!hc) {
            tp_span_walk_close(ha);
            oom = 1;
            break;
        }
        tp_union uc, uk, uu;
        tp_union_init(&uc);
        tp_union_add(&uc, tp_span_array_next, &ca);
        tp_union_add(&uc, tp_span_walk_next, ha);
        tp_union_steps_each(&uc, win, nw, cw);
        tp_union_init(&uk);
        tp_union_add(&uk, tp_gpu_walk_next, &ka);
        tp_union_steps_each(&uk, win, nw, cw + nw);
        tp_union_init(&uu);
        tp_union_add(&uu, tp_span_array_next, &cb);
        tp_union_add(&uu, tp_gpu_walk_next, &kb);
        tp_union_add(&uu, tp_span_walk_next, hc);
        tp_union_steps_each(&uu, win, nw, cw + 2 * nw);
        tp_span_walk_close(ha);
        tp_span_walk_close(hc);
        for (size_t w = 0; w < nw; w++) {
            uint64_t e = cw[2 * nw + w] - cw[nw + w]; /* |C ∪ K| - |K| = |C \ K| */
            uint64_t o = cw[w] - e;                  /* |C ∩ K| */
            if (first || e > ex[w]) {
                ex[w] = e;
                ov[w] = o;
                cm[w] = cw[w];
            }
        }
        first = 0;
    }
    tp_step one;
    if (!oom && x->in_span) nw = span_in_one(&one, win, nw, ex, ov, cm), win = &one;
    if (!oom) exposure_figures(x, win, nw, ex, ov, cm, tmp, st, nst);
    else x->note = TP_EXPOSURE_NO_MEMORY;
    free(parts);
    free(cw);
    free(ex);
    free(ov);
    free(cm);
    free(tmp);
    free(sc);
    free(su);
}

/* {"mean","p50","max"} of a per-window series */
static cJSON *stats_json(const tp_stat5 *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "p50", s->p50);
    cJSON_AddNumberToObject(o, "max", s->max);
    return o;
}

static void exposure_json(cJSON *c, const tp_comm_exposure_result *x) {
    cJSON *j = cJSON_AddObjectToObject(c, "exposure");
    cJSON_AddStringToObject(j, "per", tp_comm_exposure_per(x));
    cJSON_AddStringToObject(j, "basis", x->basis);
    cJSON_AddStringToObject(j, "note", x->note);
    if (x->ndevices) {
        cJSON *jd = cJSON_AddArrayToObject(j, "devices");
        for (size_t d = 0; d < x->ndevices; d++)
            tp_json_item_to_array(jd, cJSON_CreateNumber(x->devices[d]));
    }
    if (!x->has_figures) return;
    cJSON_AddNumberToObject(j, "windows", (double)x->windows);
    cJSON_AddNumberToObject(j, "window_ms", x->window_ms);
    tp_json_item_to_object(j, "comm_ms", stats_json(&x->comm_ms));
    tp_json_item_to_object(j, "exposed_ms", stats_json(&x->exposed_ms));
    tp_json_item_to_object(j, "overlapped_ms", stats_json(&x->overlapped_ms));
    cJSON_AddNumberToObject(j, "exposed_share", x->exposed_share);
    cJSON_AddNumberToObject(j, "overlapped_share", x->overlapped_share);
    tp_json_item_to_object(j, "exposed_share_per_window", stats_json(&x->exposed_share_per_window));
    if (x->has_worst_step) cJSON_AddNumberToObject(j, "worst_step", x->worst_step);
}

/* The torch.distributed process group a communicator serves (docs/python.md, "NCCL and
 * torch records"): trainprof.torch writes `torch.pg.<id>` = "backend=B size=N ranks=..."
 * for each group it saw, id = the hash its own records carry. A torch-recorded communicator
 * has that id. An NCCL communicator (whose ops torch does not record, so nothing counts
 * twice) gets the one NCCL group of its size, when exactly one has that size. */
static const char *torch_group(const tp_process *p, uint64_t hash, uint32_t size, int nccl) {
    char key[40];
    snprintf(key, sizeof key, "torch.pg.%016llx", (unsigned long long)hash);
    const char *d = tp_meta(p, key);
    if (!d && nccl) {
        /* the process's groups with an NCCL backend ("nccl", or "cpu:gloo,cuda:nccl" for a
         * default group) of this size */
        char want[32];
        snprintf(want, sizeof want, " size=%u ", size);
        size_t hits = 0;
        for (size_t i = 0; i < p->nmeta; i++) {
            const tp_kv *kv = &p->meta[i];
            if (strncmp(kv->key, "torch.pg.", 9) || !tp_comm_nccl_backend(kv->value)) continue;
            if (strncmp(strchr(kv->value, ' '), want, strlen(want))) continue;
            if (d && !strcmp(d, kv->value)) continue; /* the same group written again */
            d = kv->value;
            hits++;
        }
        if (hits != 1) d = NULL;
    }
    return d;
}

/* How far the kernel-channel intervals moved to agree with CUPTI (tp_comm_resolve): the
 * median, least and most shift over the ops checked, in us; nothing when none was. The
 * median is selected in passes (tp_kth) over the n ops' times tm, or over a stream's file
 * (comm_stream.c), which holds nothing a checked op (before: a sorted copy, 8 bytes each);
 * a's count and range come from its one reading of the ops. Nothing without memory for the
 * selection, or when a stream's file could not be read again. */
static void placement(tp_comm_result *c, const comm_acc *a, const tp_process *p,
                      const tp_comm_time *tm) {
    if (!a->nshift) return;
    tp_kth q;
    tp_kth_init(&q, tp_pct_index(a->nshift, 0.5));
    if (p->comm_stream) {
        if (tp_comm_stream_kth(p, &q) != TPROF_OK) return;
    } else {
        while (tp_kth_pass(&q))
            for (size_t i = 0; i < p->ncomm; i++)
                if (tm[i].checked) tp_kth_see(&q, tp_comm_shift_key(tm[i].shift_ns));
    }
    if (q.oom) return;
    c->has_placement = 1;
    c->placement_ops = (double)a->nshift;
    c->shift_us_p50 = (double)(int64_t)tp_comm_shift_key((int64_t)q.value) / 1e3;
    c->shift_us_min = (double)a->shift_min / 1e3;
    c->shift_us_max = (double)a->shift_max / 1e3;
}

/* The communicators of the rank from its rows (sorted by communicator), most time first;
 * a: the rows' first ops. */
static void communicators(tp_comm_result *c, const tp_process *p, const comm_acc *a) {
    const row *rows = c->rows;
    size_t nrows = c->nrows;
    cref *cs = tp_malloc((nrows ? nrows : 1) * sizeof *cs);
    if (!cs) return;
    size_t ncs = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (!i || rows[i].hash != rows[i - 1].hash) {
            if (ncs) cs[ncs - 1].b = i;
            cs[ncs++] = (cref){i, nrows, 0, rows[i].hash};
        }
        cs[ncs - 1].time_ns += (double)rows[i].time_ns;
    }
    if (ncs > 1) qsort(cs, ncs, sizeof *cs, cmp_cref); /* most time first */
    c->comms = tp_calloc(ncs ? ncs : 1, sizeof *c->comms);
    if (!c->comms) {
        free(cs);
        return;
    }
    c->ncomms = ncs;
    for (size_t k = 0; k < ncs; k++) {
        tp_comm_communicator_result *e = &c->comms[k];
        e->hash = cs[k].hash;
        snprintf(e->id, sizeof e->id, "0x%016" PRIx64, cs[k].hash);
        for (size_t i = cs[k].a; i < cs[k].b; i++)
            if (rows[i].nranks > e->size) e->size = rows[i].nranks;
        e->rank = rows[cs[k].a].rank;
        /* NCCL's init told the node count and the name (when one was given) */
        char key[40];
        snprintf(key, sizeof key, "nccl.comm.%016llx", (unsigned long long)cs[k].hash);
        const char *desc = tp_meta(p, key);
        unsigned nn = 0;
        const char *nm = desc ? strstr(desc, "nnodes=") : NULL;
        if (nm && sscanf(nm, "nnodes=%u", &nn) == 1 && nn) e->nodes = nn;
        const char *na = desc ? strstr(desc, " name=") : NULL;
        if (na && strcmp(na + 6, "-")) e->name = na + 6;
        e->torch_group = torch_group(p, cs[k].hash, e->size, 1);
        /* who recorded it, and the backend that carried it (gloo, nccl, mpi, ...) */
        const tp_comm_key *k0 = tp_comm_acc_first(a, nrows, rows[cs[k].a].op0);
        e->source = tp_comm_source_name(k0->source);
        tp_comm_backend(p, k0, e->backend, sizeof e->backend);
        e->rows = &rows[cs[k].a];
        e->nrows = cs[k].b - cs[k].a;
    }
    free(cs);
}

/* The rank's figures: see tp_comm_rank_section. */
static void rank_compute(tp_comm_result *c, const tp_process *p, const tp_step *st, size_t nst,
                         const tp_step *cst, size_t ncst) {
    memset(c, 0, sizeof *c);
    c->present = 1;
    int any_comm_kernel = 0;
    for (size_t i = 0; i < p->ngpu && !any_comm_kernel; i++)
        any_comm_kernel = tp_comm_is_kernel(&p->gpu[i]);
    /* without ops (their kernels alone), an array of none; NULL without memory (the ops'
     * counts alone) */
    tp_comm_time *own = NULL;
    const tp_comm_time *tm = p->ncomm || any_comm_kernel ? tp_comm_times(p, &own) : NULL;
    comm_acc a;
    tp_comm_acc_init(&a, c, p, st, nst);
    int fed = TPROF_OK;
    if (p->comm_stream && tm) /* every op, read apart from the file (comm_stream.c) */
        fed = tp_comm_stream_feed(p, &a);
    else
        for (size_t i = 0; i < p->ncomm; i++)
            tp_comm_acc_op(&a, &p->comm[i], i, tm ? &tm[i] : NULL);
    c->nccl_ops = c->ops - c->mpi_ops - c->torch_ops;
    /* NCCL events refused because the plugin's pool was full (at least this many) */
    const char *drops = tp_meta(p, "nccl.pool_drops");
    if (drops && strtod(drops, NULL) > 0) {
        c->has_not_recorded = 1;
        c->nccl_ops_not_recorded = strtod(drops, NULL);
    }
    if (!c->ops && !any_comm_kernel) c->nothing = 1;
    /* a stream whose file could not be read again: counts of a part of its ops, no more */
    if (tm && !c->nothing && fed == TPROF_OK) {
        c->resolved = 1;
        placement(c, &a, p, tm);
        tp_comm_acc_rows(&a);
        if (c->rows) communicators(c, p, &a);
        exposure_compute(&c->exposure, p, tm, &a, st, nst, cst, ncst);
    }
    tp_comm_acc_free(&a);
    free(own);
}

/* The document's "communication" of the rank, from its figures. */
static void rank_json(cJSON *rs, const tp_comm_result *c, size_t nst) {
    cJSON *j = cJSON_AddObjectToObject(rs, "communication");
    cJSON_AddNumberToObject(j, "ops", (double)c->ops);
    cJSON_AddNumberToObject(j, "nccl_ops", (double)c->nccl_ops);
    cJSON_AddNumberToObject(j, "mpi_ops", (double)c->mpi_ops);
    if (c->torch_ops) {
        cJSON_AddNumberToObject(j, "torch_ops", (double)c->torch_ops);
        cJSON *tb = cJSON_AddArrayToObject(j, "torch_backends");
        for (size_t i = 0; i < c->ntorch_backends; i++)
            tp_json_item_to_array(tb, cJSON_CreateString(c->torch_backends[i]));
    }
    if (c->has_not_recorded)
        cJSON_AddNumberToObject(j, "nccl_ops_not_recorded", c->nccl_ops_not_recorded);
    cJSON *jc = cJSON_AddArrayToObject(j, "communicators");
    if (c->nothing) {
        cJSON_AddStringToObject(j, "note", "no communication recorded");
        return;
    }
    if (c->rows_no_memory) cJSON_AddStringToObject(j, "note", TP_COMM_ROWS_NO_MEMORY);
    if (!c->resolved) return;
    if (c->has_placement) {
        cJSON *x = cJSON_AddObjectToObject(j, "channel_placement");
        cJSON_AddNumberToObject(x, "ops", c->placement_ops);
        cJSON_AddNumberToObject(x, "shift_us_p50", c->shift_us_p50);
        cJSON_AddNumberToObject(x, "shift_us_min", c->shift_us_min);
        cJSON_AddNumberToObject(x, "shift_us_max", c->shift_us_max);
    }
    for (size_t k = 0; k < c->ncomms; k++) {
        const tp_comm_communicator_result *x = &c->comms[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", x->id);
        cJSON_AddNumberToObject(e, "size", x->size);
        cJSON_AddNumberToObject(e, "rank", x->rank);
        if (x->nodes) cJSON_AddNumberToObject(e, "nodes", x->nodes);
        if (x->name) cJSON_AddStringToObject(e, "name", x->name);
        if (x->torch_group) cJSON_AddStringToObject(e, "torch_group", x->torch_group);
        cJSON_AddStringToObject(e, "source", x->source);
        cJSON_AddStringToObject(e, "backend", x->backend);
        cJSON *jo = cJSON_AddArrayToObject(e, "ops");
        for (size_t i = 0; i < x->nrows; i++) tp_json_item_to_array(jo, row_json(&x->rows[i], nst));
        tp_json_item_to_array(jc, e);
    }
    exposure_json(j, &c->exposure);
}

void tp_comm_rank_section(cJSON *rs, tp_comm_result *out, const tp_process *p, const tp_step *st,
                          size_t nst, const tp_step *cst, size_t ncst) {
    rank_compute(out, p, st, nst, cst, ncst);
    out->nsteps = nst;
    rank_json(rs, out, nst);
}
