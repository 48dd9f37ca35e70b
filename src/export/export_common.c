/*
 * export_common.c — what the trace exporters (chrome.c: Chrome JSON; perfetto.c: Perfetto
 * protobuf) share, so that both formats hold the same events at the same times: which
 * processes a merged trace takes and their pids, the run's aligned clock and the trace's
 * base, the selected window, each thread track's sweep (which ranges nest and which become
 * async), the order of GPU work on its streams, and the counters a file takes.
 */
#define _GNU_SOURCE
#include "export/chrome_cw.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/gpu.h"
#include "analysis/report.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "format/format.h"
#include "trainprof.h"

/* Whether an event over [ts, te] (ns after the base) is in the selected window [lo, hi):
 * an interval that overlaps it (touching an end is not overlapping: the step before a
 * selected one ends where it begins), an instant inside it. */
int tp_cw_in_win(const cw *w, int64_t ts, int64_t te) {
    if (!w->win) return 1;
    if (te <= ts) return ts >= w->win_lo && ts < w->win_hi;
    return te > w->win_lo && ts < w->win_hi;
}

int tp_cw_counter_wanted(const cw *w, const char *name, int64_t ts) {
    unsigned long idx;
    int nvml = tp_gpu_counter(name, &idx) != NULL;
    if (w->gpu_only && (ts < 0 || ts > w->gpu_until || !nvml)) return 0;
    if (!nvml || !w->gpu_filter) return 1;
    for (size_t i = 0; i < w->ngpu_allow; i++)
        if (w->gpu_allow[i] == idx) return 1;
    return 0;
}

int64_t tp_cw_rel_ns(const cw *w, const tp_process *p, uint64_t mono) {
    size_t i = p == w->cur ? w->cur_idx : (size_t)(p - w->run->procs);
    /* unsigned wrap-around gives the right signed difference for events before the base */
    return (int64_t)((uint64_t)tp_clocks_aligned(w->ck, p, i, mono) - w->base_rt);
}

const tp_process *tp_cw_acquire(cw *w, size_t i, tp_process *whole, int *rc) {
    const tp_process *p = &w->run->procs[i];
    *rc = TPROF_OK;
    if (!p->slim) return p;
    /* the pool is the run's store of strings: the file's strings are interned there */
    *rc = tp_process_load_whole((tp_run *)w->run, p, whole);
    if (*rc != TPROF_OK) return NULL;
    w->cur = whole;
    w->cur_idx = i;
    return whole;
}

void tp_cw_release(cw *w, const tp_process *p, tp_process *whole) {
    if (p != whole) return;
    tp_process_free(whole);
    w->cur = NULL;
}

void tp_cw_note_time(cw *w, int64_t rel) {
    if (!w->have_last || rel > w->last_rel) w->last_rel = rel;
    w->have_last = 1;
}

char *tp_cw_process_name(const tp_process *p) {
    char label[96];
    tp_process_label(p, label, sizeof label);
    size_t n = strlen(label) + strlen(p->hdr.host) + 32;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s (%s:%d)", label, p->hdr.host, (int)p->hdr.pid);
    return s;
}

int64_t tp_cw_sort_index(const tp_process *p) {
    if (p->role == TP_ROLE_RANK) return p->rank;
    if (p->helper_of >= 0) return p->helper_of; /* next to its rank; ties go by pid */
    return TP_CW_SYNTH_PID_BASE;                /* unattached helpers last */
}

/* ------------------------------------------------------------------ a thread track's sweep */

enum { IT_STEP = 0, IT_RANGE = 1 }; /* steps first among equals: they are kept by force */

static int cmp_item(const void *a, const void *b) {
    const tp_cw_item *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* parents before children */
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Would [s, e] cross a kept step that starts inside it? Kept steps are disjoint and sorted,
 * so only the last one starting before e can end after e. (A step that started earlier is
 * already on the sweep's stack and is checked there.) */
static int crosses_step(const tp_cw_item *fixed, size_t n, uint64_t s, uint64_t e) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fixed[mid].start < e) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && fixed[lo - 1].start > s && fixed[lo - 1].end > e;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    void *na = realloc(*arr, nc * elem);
    if (!na) return TPROF_ERR_NO_MEMORY;
    *arr = na;
    *cap = nc;
    return 0;
}

void tp_cw_scratch_free(tp_cw_scratch *sc) {
    free(sc->items);
    free(sc->stack);
    free(sc->fixed);
    memset(sc, 0, sizeof *sc);
}

static void step_slice(tp_cw_slice *sl, char *name, size_t n, const tp_step *s, int nested) {
    snprintf(name, n, "ProfilerStep#%" PRIu64, s->app_step);
    *sl = (tp_cw_slice){name, s->start, s->end, NULL, s, 0, nested};
}

int tp_cw_sweep(const tp_process *p, uint32_t tid, const tp_steps *steps, tp_cw_scratch *sc,
                tp_cw_slice_fn fn, void *ctx) {
    size_t n = 0, nsteps = steps ? steps->nsteps : 0;
    for (size_t t = 0; t < p->nthreads; t++) {
        if (p->threads[t].os_tid != tid) continue;
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            n += !(p->threads[t].ranges[k].flags & TP_R_ASYNC);
    }
    n += nsteps;
    if (grow((void **)&sc->items, &sc->cap, n, sizeof *sc->items) ||
        grow((void **)&sc->fixed, &sc->cap_fixed, nsteps, sizeof *sc->fixed))
        return TPROF_ERR_NO_MEMORY;
    uint64_t *stack = realloc(sc->stack, (n ? n : 1) * sizeof *stack);
    if (!stack) return TPROF_ERR_NO_MEMORY;
    sc->stack = stack;

    /* API steps first: they do not overlap one another in practice; any that would is
     * demoted like a range. The kept ones are forced nested slices, so HTA sees every
     * step. */
    size_t ni = 0, nfixed = 0;
    char name[48];
    tp_cw_slice sl;
    int rc = TPROF_OK;
    for (size_t k = 0; k < nsteps && rc == TPROF_OK; k++) {
        const tp_step *s = &steps->steps[k];
        if (nfixed && s->start < sc->fixed[nfixed - 1].end) {
            step_slice(&sl, name, sizeof name, s, 0);
            rc = fn(ctx, &sl);
            continue;
        }
        tp_cw_item it = {s->start, s->end, k, 0, IT_STEP};
        sc->fixed[nfixed++] = it;
        sc->items[ni++] = it;
    }
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        if (th->os_tid != tid) continue;
        for (size_t k = 0; k < th->nranges; k++) {
            if (th->ranges[k].flags & TP_R_ASYNC) continue;
            sc->items[ni++] = (tp_cw_item){th->ranges[k].start, th->ranges[k].end, k,
                                           (uint32_t)t, IT_RANGE};
        }
    }
    if (ni > 1) qsort(sc->items, ni, sizeof *sc->items, cmp_item); /* items is NULL when 0 */

    /* The sweep: the stack holds the ends of the kept events still open at this start. */
    size_t sp = 0;
    for (size_t i = 0; i < ni && rc == TPROF_OK; i++) {
        const tp_cw_item *it = &sc->items[i];
        while (sp && stack[sp - 1] <= it->start) sp--;
        int keep = it->kind == IT_STEP ||
                   ((!sp || it->end <= stack[sp - 1]) &&
                    !crosses_step(sc->fixed, nfixed, it->start, it->end));
        if (it->kind == IT_STEP) {
            step_slice(&sl, name, sizeof name, &steps->steps[it->idx], 1);
        } else {
            const tp_range *r = &p->threads[it->thread].ranges[it->idx];
            sl = (tp_cw_slice){r->name, r->start, r->end, r, NULL, it->thread, keep};
        }
        rc = fn(ctx, &sl);
        if (keep) stack[sp++] = it->end;
    }
    return rc;
}

/* ------------------------------------------------------------------ GPU work */

uint32_t tp_cw_gpu_tid(uint32_t device, uint32_t stream) {
    return 0x40000000u | ((device & 0x3fffu) << 16) | (stream & 0xffffu);
}

static int cmp_op_track(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    uint32_t tx = tp_cw_gpu_tid(x->device, x->stream), ty = tp_cw_gpu_tid(y->device, y->stream);
    if (tx != ty) return tx < ty ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

const tp_gpu_op **tp_cw_gpu_ops(const tp_process *p, size_t *n) {
    const tp_gpu_op **ops = malloc((p->ngpu ? p->ngpu : 1) * sizeof *ops);
    *n = 0;
    if (!ops) return NULL;
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].type != TPROF_REC_GPU_SYNC) ops[(*n)++] = &p->gpu[i];
    if (*n > 1) qsort(ops, *n, sizeof *ops, cmp_op_track);
    return ops;
}

uint64_t tp_cw_gpu_end(const tp_gpu_op *const *ops, size_t n, size_t i) {
    const tp_gpu_op *o = ops[i];
    uint64_t end = o->end;
    if (i + 1 < n &&
        tp_cw_gpu_tid(ops[i + 1]->device, ops[i + 1]->stream) ==
            tp_cw_gpu_tid(o->device, o->stream) &&
        ops[i + 1]->start < end)
        end = ops[i + 1]->start > o->start ? ops[i + 1]->start : o->start;
    return end;
}

int tp_cw_cmp_api_corr(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

const tp_gpu_op *tp_cw_launch_of(const tp_gpu_op *const *apis, size_t n, const tp_gpu_op *o) {
    if (!n || !o->correlation) return NULL;
    const tp_gpu_op *const *hit = bsearch(&o, apis, n, sizeof *apis, tp_cw_cmp_api_corr);
    return hit ? *hit : NULL;
}

int tp_cw_first_of_tid(const tp_process *p, size_t t) {
    for (size_t u = 0; u < t; u++)
        if (p->threads[u].os_tid == p->threads[t].os_tid) return 0;
    return 1;
}

const char *tp_cw_thread_name(const tp_process *p, size_t t) {
    for (size_t u = t; u < p->nthreads; u++)
        if (p->threads[u].os_tid == p->threads[t].os_tid && p->threads[u].name)
            return p->threads[u].name;
    return NULL;
}

int tp_cw_cmp_api_thread(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    if (x->os_tid != y->os_tid) return x->os_tid < y->os_tid ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* enclosing first */
    return x < y ? -1 : x > y;
}

const char *tp_cw_gpu_cat(const tp_gpu_op *o) {
    return o->type == TPROF_REC_GPU_KERNEL   ? "kernel"
           : o->type == TPROF_REC_GPU_MEMCPY ? "gpu_memcpy"
           : o->type == TPROF_REC_GPU_MEMSET ? "gpu_memset"
                                             : "cuda_sync";
}

const char *tp_cw_gpu_name(const tp_gpu_op *o, char *buf, size_t n) {
    static const char *const copy_kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                             "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    if (o->type == TPROF_REC_GPU_KERNEL) return o->name ? o->name : "(kernel)";
    if (o->type == TPROF_REC_GPU_MEMCPY) {
        snprintf(buf, n, "Memcpy %s", o->kind < 11 ? copy_kinds[o->kind] : "?");
        return buf;
    }
    return o->type == TPROF_REC_GPU_MEMSET ? "Memset" : "Synchronization";
}

/* ------------------------------------------------------------------ processes and clock */

typedef struct pid_claim {
    int64_t want;
    int prio; /* 0 for ranks: they keep their number */
    size_t order;
} pid_claim;

static int cmp_claim(const void *a, const void *b) {
    const pid_claim *x = a, *y = b;
    if (x->want != y->want) return x->want < y->want ? -1 : 1;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int tp_cw_assign_pids(const tp_run *run, const size_t *sel, size_t nsel, int merged,
                      int64_t *pids) {
    pid_claim *c = malloc((nsel ? nsel : 1) * sizeof *c);
    if (!c) return TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        int rank = merged && p->role == TP_ROLE_RANK;
        c[i] = (pid_claim){rank ? p->rank : p->hdr.pid, !rank, i};
    }
    qsort(c, nsel, sizeof *c, cmp_claim);
    for (size_t i = 0; i < nsel; i++)
        pids[c[i].order] = i && c[i].want == c[i - 1].want
                               ? TP_CW_SYNTH_PID_BASE + (int64_t)c[i].order
                               : c[i].want;
    free(c);
    return TPROF_OK;
}

/* Seconds of --time in ns; past 2^63 ns (about 292 years), where the conversion would
 * overflow, the trace's end. */
static int64_t window_ns(double s) { return s * 1e9 < 9.2e18 ? (int64_t)(s * 1e9) : INT64_MAX; }

/* The window of opts (tp_export_opts) into w, once the base is known: steps of the lowest
 * selected rank that has them, and seconds from the base. TPROF_ERR_NOT_FOUND when steps are
 * asked for and no selected rank has one of them (within the seconds, when both are asked
 * for), or, for the merged trace, seconds in
 * which no selected process ran (a trace of metadata alone would read as an export that
 * worked). */
static int select_window(cw *w, const tp_run *run, const size_t *sel, size_t nsel,
                         const tp_export_opts *opts, int merged) {
    w->win = opts->has_steps || opts->has_time;
    w->win_lo = INT64_MIN;
    w->win_hi = INT64_MAX;
    if (opts->has_time) {
        w->win_lo = window_ns(opts->t_lo);
        w->win_hi = window_ns(opts->t_hi);
    }
    /* the seconds' bounds, for the steps' window to meet (a lower rank found after another
     * replaces that rank's window, not the seconds) */
    const int64_t t_lo = w->win_lo, t_hi = w->win_hi;
    if (!opts->has_steps) {
        /* the merged trace only: a rank file of --per-rank whose rank ended before the
         * seconds asked for is written empty, the others' still written */
        if (!opts->has_time || !merged || !nsel) return TPROF_OK;
        for (size_t i = 0; i < nsel; i++) {
            const tp_process *p = &run->procs[sel[i]];
            if (tp_cw_rel_ns(w, p, p->hdr.start_mono_ns) <= w->win_hi &&
                tp_cw_rel_ns(w, p, p->end_mono) >= w->win_lo)
                return TPROF_OK;
        }
        return TPROF_ERR_NOT_FOUND;
    }
    const tp_process *ref = NULL;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        if (p->role != TP_ROLE_RANK || (ref && ref->rank <= p->rank)) continue;
        /* a rank's file (sel[0] its rank): its own steps, not those of the host's rank
         * whose NVML counters come with it */
        if (!merged && i) continue;
        tp_steps st;
        if (tp_find_steps(p, opts->step_name, opts->warmup, &st) != TPROF_OK) continue;
        int found = 0;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t k = 0; k < st.nsteps; k++) {
            const tp_step *x = &st.steps[k];
            if (x->app_step < opts->step_lo || x->app_step > opts->step_hi) continue;
            found = 1;
            if (x->start < lo) lo = x->start;
            if (x->end > hi) hi = x->end;
        }
        tp_steps_free(&st);
        if (!found) continue;
        ref = p;
        int64_t a = tp_cw_rel_ns(w, p, lo), b = tp_cw_rel_ns(w, p, hi);
        w->win_lo = t_lo > a ? t_lo : a;
        w->win_hi = t_hi < b ? t_hi : b;
    }
    /* steps and seconds that do not overlap select nothing, as steps missing do */
    return ref && w->win_lo <= w->win_hi ? TPROF_OK : TPROF_ERR_NOT_FOUND;
}

int tp_cw_setup(cw *w, const tp_run *run, const size_t *sel, size_t nsel, int merged,
                const tp_export_opts *opts, tp_clocks_result *own) {
    memset(own, 0, sizeof *own);
    /* the same alignment as the report's: borrowed, else computed here as it does */
    const tp_clocks_result *ck = opts->clocks;
    if (!ck || ck->nprocs != run->nprocs) {
        int rc = tp_clocks_compute(run, own);
        if (rc != TPROF_OK) return rc;
        ck = own;
    }
    w->run = run;
    w->ck = ck;
    /* the base: the earliest start among the processes (aligned; a process whose start pair
     * is unusable starts at its first event), but in one rank's file not that of the process
     * whose NVML samples come with it (the rank's own start stays the base, as Kineto's
     * traces have it) */
    const tp_process *rp = nsel ? &run->procs[sel[0]] : NULL;
    const tp_process *src = merged || !rp ? NULL : tp_gpu_samples_for(run, rp);
    int have_base = 0;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        if (!merged && p == src && src != rp) continue;
        uint64_t first = ck->proc_pair_ok[sel[i]] || !p->first_ts ? p->hdr.start_mono_ns
                                                                  : p->first_ts;
        uint64_t s = (uint64_t)tp_clocks_aligned(ck, p, sel[i], first);
        if (!have_base || s < w->base_rt) w->base_rt = s;
        have_base = 1;
    }
    return select_window(w, run, sel, nsel, opts, merged);
}

int64_t tp_cw_end_time(const cw *w, const size_t *sel, size_t nsel) {
    if (w->have_last) return w->last_rel;
    int64_t last = 0;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &w->run->procs[sel[i]];
        int64_t e = tp_cw_rel_ns(w, p, p->end_mono);
        if (e > last) last = e;
    }
    return last;
}

int tp_export_rank_selected(const tp_export_opts *opts, int rank) {
    if (!opts || !opts->ranks) return 1;
    for (size_t i = 0; i < opts->n_ranks; i++)
        if (opts->ranks[i] == rank) return 1;
    return 0;
}

int tp_cw_select_merged(const tp_run *run, const tp_export_opts *opts, size_t **sel_out,
                        size_t *n_out) {
    size_t *sel = malloc((run->nprocs ? run->nprocs : 1) * sizeof *sel);
    *sel_out = NULL;
    *n_out = 0;
    if (!sel) return TPROF_ERR_NO_MEMORY;
    /* ranks in rank order first, then helpers in file order: a stable, readable file */
    size_t n = 0;
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK && tp_export_rank_selected(opts, run->procs[i].rank))
            sel[n++] = i;
    if (!n && opts && opts->ranks) {
        free(sel);
        return TPROF_ERR_NOT_FOUND;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: few ranks out of order, if any */
        for (size_t k = i; k > 0 && run->procs[sel[k]].rank < run->procs[sel[k - 1]].rank; k--) {
            size_t t = sel[k];
            sel[k] = sel[k - 1];
            sel[k - 1] = t;
        }
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_RANK) continue;
        /* a helper with the rank it serves; the rest (node samplers, ...) with every rank */
        if (opts && opts->ranks &&
            (p->role != TP_ROLE_HELPER || !tp_export_rank_selected(opts, p->helper_of)))
            continue;
        sel[n++] = i;
    }
    *sel_out = sel;
    *n_out = n;
    return TPROF_OK;
}

void tp_cw_gpu_mem_walk(const cw *w, const tp_process *p,
                        int (*fn)(void *ctx, uint32_t device, int64_t rel_ns, int64_t bytes),
                        void *ctx) {
    uint32_t devs[64];
    int64_t cur[64];
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngmem; i++) {
        const tp_gpu_mem *m = &p->gmem[i];
        if (m->memory_kind != 3) continue; /* device memory */
        size_t d = 0;
        while (d < ndev && devs[d] != m->device) d++;
        if (d == ndev) {
            if (ndev == 64) continue;
            devs[ndev] = m->device;
            cur[ndev++] = 0;
        }
        cur[d] = tp_mem_step(cur[d], m->bytes, m->op == 1); /* over every record */
        int64_t mt = tp_cw_rel_ns(w, p, m->ts);
        if (!tp_cw_in_win(w, mt, mt)) continue;
        if (fn(ctx, m->device, mt, cur[d])) return;
    }
}

int tp_export_fill_memos(tp_run *run, const tp_export_opts *opts) {
    static const tp_export_opts no_opts = {NULL, 1};
    if (!run) return TPROF_ERR_INVALID_ARG;
    if (!opts) opts = &no_opts;
    unsigned char *want = calloc(run->nprocs ? run->nprocs : 1, 1);
    if (!want) return TPROF_ERR_NO_MEMORY;
    /* a rank's communication times for the clock alignment (every rank's collectives are
     * matched); its steps for the --steps window (the lowest selected rank's) */
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        want[i] = p->role == TP_ROLE_RANK &&
                  (p->ncomm || (opts->has_steps && tp_export_rank_selected(opts, p->rank)));
    }
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.step_name = opts->step_name;
    o.warmup = opts->warmup;
    o.threads = 1; /* one file's model in memory at a time */
    int rc = tp_run_fill_memos(run, &o, want);
    free(want);
    return rc;
}
