/*
 * test_report_stream.c — a rank section whose ranges are streamed from its file (model.h,
 * tp_range_stream; report_ranges.c) reads the same figures as one read whole: the report's
 * JSON, text and HTML byte for byte, streamed (compacting from 4096 ranges a thread, and
 * from 16) against not streamed, and the sweep's nesting (child_ns, recursion) range by
 * range against the whole load's; the sweep's time on a stack thousands of ranges deep.
 * Inputs: synthetic single-rank runs of deep random nesting on three threads (recursion,
 * zero-length ranges, pushes at one time, a second domain, module ranges, Megatron timers,
 * start/end ranges ended on another thread or never, data loading on two threads, ranges
 * across step boundaries), with named steps, API steps, steps at depth 1, no steps, drops
 * and unmatched pops, a killed rank with ranges left open, damaged and cut files; files the
 * sweep cannot take (crossing domains, time running backwards) that fall back to the whole
 * read; recursion 40000 deep and 40000 pushes never popped; flat loops (steps holding
 * hundreds of ranges side by side, top-level loops without steps on three threads, API steps,
 * the phases with GPU kernels, a range around the run ended or not), whose kept model must
 * stay a few ranges a step and whose CPU basis streams; the four-rank run of slim_runs.h, the
 * diagnosis scenarios and every rank file of the fuzz corpus (the report_pin inputs among
 * them). Every report is also made with the CPU basis's stream failing (stream_sections 3).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/report_ranges.h"
#include "diag_scen.h"
#include "export/html.h"
#include "format/format.h"
#include "slim_runs.h"
#include "synth.h"

/* The JSON, text and HTML of the slim report of `ops`, its sections streamed as `stream`
 * says (tp_report_opts.stream_sections; 9: the run loaded whole), into one string (owned). */
static char *render(const char *const *ops, size_t nops, int stream, const char *step_name) {
    tp_run run;
    char err[512];
    int rc = stream == 9 ? tp_run_load_list(ops, nops, &run, err, sizeof err)
                         : tp_run_load_slim(ops, nops, &run, err, sizeof err);
    if (rc != 0) return strdup(err);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = 2;
    o.stream_sections = stream == 9 ? 0 : stream;
    o.step_name = step_name;
    char *buf = slim_render_str(&run, &o);
    tp_run_free(&run);
    return buf;
}

static void same_text(const char *what, const char *a, const char *b, const char *label) {
    slim_same(what, label, "read whole", a, "streamed  ", b);
}

static void same_reports_named(const char *const *ops, size_t nops, const char *step_name) {
    char *ref = render(ops, nops, -1, step_name);
    char *whole = render(ops, nops, 9, step_name);
    same_text(ops[0], ref, whole, "whole load");
    free(whole);
    for (int stream = 1; stream <= 3; stream++) {
        static const char *const how[] = {"", "streamed", "streamed, compacting from 16",
                                          "streamed, the CPU basis read from the model"};
        char *got = render(ops, nops, stream, step_name);
        same_text(ops[0], ref, got, how[stream]);
        free(got);
    }
    free(ref);
}

static void same_reports(const char *const *ops, size_t nops) {
    same_reports_named(ops, nops, NULL);
}

/* ------------------------------------------------------------------ synthetic runs */

enum {
    V_NAMED = 0,    /* "train_step" ranges at depth 0 */
    V_API = 1,      /* tprof_step_begin/end */
    V_MAIN = 2,     /* "train_step" inside "main": the steps at depth 1 */
    V_NOSTEPS = 3,  /* no step source */
    V_KILLED = 4,   /* no end record, ranges left open on every thread */
    V_DROPS = 8,    /* the rings dropped events, with pops left unmatched */
};

static uint64_t rnd_state;
static uint64_t rnd(uint64_t n) {
    rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (rnd_state >> 33) % n : 0;
}

static size_t nest_budget; /* ranges nest() may write in all, cumulated in its *n */
static const char *const op_names[] = {"op_a", "op_b", "layer", "op_a", "attn", "data"};

/* Children of [a, b) on thread `serial` down to `depth` levels: sequential spans, some of no
 * length, some starting where the one before ended, some in domain 2, some module ranges;
 * *n counts the ranges written. */
static void nest(synth_file *f, uint32_t serial, uint64_t a, uint64_t b, int depth, size_t *n) {
    uint64_t t = a;
    while (depth > 0 && t < b && *n < nest_budget) {
        uint64_t left = b - t;
        uint64_t gap = rnd(4) == 0 ? 0 : rnd(left / 8 + 1);
        uint64_t s = t + gap, len = rnd(5) == 0 ? 0 : rnd(b - s + 1);
        if (s > b) break;
        uint64_t e = s + len;
        uint32_t dom = rnd(9) == 0 ? 2 : 0;
        const char *name = rnd(11) == 0 ? "nn.Module: enc" : op_names[rnd(6)];
        synth_push(f, serial, s, name, dom, 0);
        (*n)++;
        if (len > 4) nest(f, serial, s + (rnd(3) ? 1 : 0), e - 1, depth - 1, n);
        synth_pop(f, serial, e, dom);
        t = e + (rnd(3) == 0 ? 0 : 1);
        if (rnd(50) == 0) synth_flush_thread(f, serial);
    }
}

/* One rank of `variant` (V_*, V_DROPS or'ed in) into dir; its file's path into path. */
static void write_nested(const char *dir, int variant, char *path, size_t n) {
    rnd_state = 12345u + (uint64_t)variant;
    synth_file *f = synth_open(dir, "s0", 500 + variant, RT0, T0);
    synth_rank(f, 0, 1);
    synth_domain(f, 1, "trainprof");
    synth_category(f, 1, 1, "timers");
    synth_domain(f, 2, "other");
    synth_thread(f, 1, 501);
    synth_thread(f, 2, 502);
    synth_thread(f, 3, 503);
    int base = variant & 7;
    size_t count = 0;
    const int steps = 12;
    const uint64_t step_ns = 10 * MS;
    if (base == V_MAIN) synth_push(f, 1, T0, "main", 0, 0);
    for (int s = 0; s < steps; s++) {
        uint64_t b = T0 + MS + (uint64_t)s * step_ns;
        if (base == V_API) synth_step_begin(f, 1, b, (uint64_t)s);
        if (base == V_NAMED || base == V_MAIN || base == V_KILLED)
            synth_push(f, 1, b, "train_step", 0, 0);
        synth_push(f, 1, b, "forward-backward", 1, 1); /* a timer, at the step's own time */
        synth_push(f, 1, b + 10 * US, "data", 0, 0);
        synth_pop(f, 1, b + 300 * US, 0);
        synth_push(f, 1, b + 300 * US, "forward", 0, 0);
        nest_budget = count + 500;
        nest(f, 1, b + 301 * US, b + 4 * MS, 7, &count);
        synth_pop(f, 1, b + 4 * MS, 0);
        synth_start(f, 3, b + 4 * MS, 1000 + (uint64_t)s, "nccl:all_reduce", 0, 0);
        synth_push(f, 1, b + 4 * MS, "backward", 0, 0);
        nest_budget = count + 400;
        nest(f, 1, b + 4 * MS + 1, b + 8 * MS, 6, &count);
        synth_pop(f, 1, b + 8 * MS, 0);
        synth_end(f, 1, b + 8 * MS + 500, 1000 + (uint64_t)s);
        /* the loader thread: data ahead of the step, across its start */
        synth_push(f, 2, b - MS / 2, "data", 0, 0);
        nest_budget = count + 100;
        nest(f, 2, b - MS / 2 + 1, b + MS, 3, &count);
        synth_pop(f, 2, b + MS, 0);
        if ((variant & V_DROPS) && s == 5) {
            synth_set_dropped(f, 1, 40);
            synth_pop(f, 1, b + 8 * MS + 700, 2); /* its push was dropped */
        }
        if (base == V_KILLED && s == steps - 1) {
            synth_push(f, 2, b + 8 * MS + 900, "op_b", 0, 0);
            synth_start(f, 3, b + 8 * MS, 9999, "never_ended", 0, 0);
            synth_flush(f);
            break; /* killed inside "train_step" and its timer */
        }
        synth_pop(f, 1, b + 9 * MS, 1);
        if (base == V_API) synth_step_end(f, 1, b + 9 * MS, (uint64_t)s);
        if (base == V_NAMED || base == V_MAIN) synth_pop(f, 1, b + 9 * MS, 0);
        synth_flush(f);
    }
    if (base == V_MAIN) synth_pop(f, 1, T0 + MS + steps * step_ns, 0);
    if (base != V_KILLED) synth_end_of_file(f, T0 + 2 * MS + steps * step_ns, 0);
    snprintf(path, n, "%s", synth_path(f));
    assert_int_equal(synth_close(f), 0);
    assert_true(count > 4096); /* the arrays are compacted with the default minimum too */
}

/* A rank whose thread ranges of two domains cross (one ends while one opened inside it is
 * open), or whose times run backwards: the sweep cannot take it. */
static void write_unsweepable(const char *dir, int backwards, char *path, size_t n) {
    synth_file *f = synth_open(dir, "s1", 600 + backwards, RT0, T0);
    synth_rank(f, 0, 1);
    synth_domain(f, 2, "other");
    synth_thread(f, 1, 601);
    for (int s = 0; s < 5; s++) {
        uint64_t b = T0 + MS + (uint64_t)s * 10 * MS;
        synth_push(f, 1, b, "train_step", 0, 0);
        synth_push(f, 1, b + MS, "x", 0, 0);
        synth_push(f, 1, b + 2 * MS, "y", 2, 0);
        if (backwards && s == 3) {
            synth_pop(f, 1, b + 4 * MS, 2);
            synth_push(f, 1, b + 3 * MS, "z", 0, 0); /* before the pop above */
            synth_pop(f, 1, b + 5 * MS, 0);
            synth_pop(f, 1, b + 6 * MS, 0);
        } else if (!backwards && s == 3) {
            synth_pop(f, 1, b + 3 * MS, 0); /* x ends inside y */
            synth_pop(f, 1, b + 4 * MS, 2);
        } else {
            synth_pop(f, 1, b + 3 * MS, 2);
            synth_pop(f, 1, b + 4 * MS, 0);
        }
        synth_pop(f, 1, b + 9 * MS, 0);
    }
    synth_end_of_file(f, T0 + 100 * MS, 0);
    snprintf(path, n, "%s", synth_path(f));
    assert_int_equal(synth_close(f), 0);
}

/* ------------------------------------------------------------------ the sweep, range by range */

typedef struct seen {
    size_t thread;
    const char *name;
    uint32_t domain;
    uint16_t flags;
    uint64_t start, end, child;
    size_t ord; /* its place in the list: the whole load's order, or the hand-over's */
} seen;

typedef struct seen_list {
    seen *v;
    size_t n, cap;
} seen_list;

static void seen_add(seen_list *l, size_t thread, const tp_range *r) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    /* a range of no length adds nothing anywhere: the sweep need not place it as the whole
     * load's sort does (model_stream.c) */
    uint16_t mask = TP_R_ASYNC | TP_R_UNCLOSED | (r->end > r->start ? TP_R_NESTED_SAME : 0);
    l->v[l->n] = (seen){thread, r->name, r->domain, (uint16_t)(r->flags & mask), r->start,
                        r->end, r->child_ns, l->n};
    l->n++;
}

static void take_seen(void *ctx, size_t thread, const tp_range *r) { seen_add(ctx, thread, r); }

/* By row (thread, name, domain), each row in its list's order: the tables add a row's times
 * in that order, which must be the whole load's (the thread's). */
static int by_row(const void *a, const void *b) {
    const seen *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    if (x->domain != y->domain) return x->domain < y->domain ? -1 : 1;
    return x->ord < y->ord ? -1 : x->ord > y->ord;
}

static int same_seen(const seen *x, const seen *y) {
    return x->thread == y->thread && !strcmp(x->name, y->name) && x->domain == y->domain &&
           x->flags == y->flags && x->start == y->start && x->end == y->end &&
           x->child == y->child;
}

/* Every range of the rank file at path, as the whole load holds it and as take mode hands
 * it over: the same ranges with the same nesting figures. Returns whether the sweep took it. */
static int sweep_matches(const char *path) {
    const char *ops[] = {path};
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    assert_int_equal(run.nprocs, 1);
    tp_process whole;
    assert_int_equal(tp_process_load_whole(&run, &run.procs[0], &whole), 0);
    seen_list want = {0}, got = {0};
    for (size_t t = 0; t < whole.nthreads; t++)
        for (size_t k = 0; k < whole.threads[t].nranges; k++)
            seen_add(&want, t, &whole.threads[t].ranges[k]);
    tp_process_free(&whole);
    int took = 0;
    for (size_t min = 16; min <= 4096; min *= 256) {
        tp_range_stream st = {NULL, take_seen, &got, 0, min};
        tp_process tmp;
        got.n = 0;
        assert_int_equal(tp_process_load_streamed(&run, &run.procs[0], &tmp, &st), 0);
        for (size_t t = 0; t < tmp.nthreads; t++) assert_int_equal(tmp.threads[t].nranges, 0);
        tp_process_free(&tmp);
        if (st.failed) continue;
        took = 1;
        assert_int_equal(got.n, want.n);
        qsort(want.v, want.n, sizeof *want.v, by_row);
        qsort(got.v, got.n, sizeof *got.v, by_row);
        for (size_t i = 0; i < want.n; i++) {
            if (!same_seen(&want.v[i], &got.v[i]))
                fprintf(stderr, "range %zu: %s [%llu, %llu] child %llu flags %u, streamed %s "
                        "[%llu, %llu] child %llu flags %u\n", i, want.v[i].name,
                        (unsigned long long)want.v[i].start, (unsigned long long)want.v[i].end,
                        (unsigned long long)want.v[i].child, want.v[i].flags, got.v[i].name,
                        (unsigned long long)got.v[i].start, (unsigned long long)got.v[i].end,
                        (unsigned long long)got.v[i].child, got.v[i].flags);
            assert_true(same_seen(&want.v[i], &got.v[i]));
        }
    }
    free(want.v);
    free(got.v);
    tp_run_free(&run);
    return took;
}

/* ------------------------------------------------------------------ flat loops */

enum {
    F_STEPS = 0,   /* "train_step" ranges holding hundreds of ranges side by side at depth 1 */
    F_NOSTEPS = 1, /* top-level loops on three threads, no step source */
    F_API = 2,     /* API steps over a top-level loop, ranges across the steps' ends */
    F_PHASES = 3,  /* API steps with GPU kernels: the phases, some held by a "step" range */
    F_EPOCH = 4,   /* named steps inside an "epoch" range never ended (killed) */
    F_AROUND = 5,  /* named steps inside an "epoch" range that ends: it owns them all */
};

/* A loop of `n` ranges side by side on thread `serial` from *t at `depth` (0: top level):
 * names of four kinds, some of no length, some in domain 2, some module ranges, every 40th
 * with a short range inside; *t moves past them. */
static void flat_loop(synth_file *f, uint32_t serial, uint64_t *t, size_t n, size_t *count) {
    static const char *const names[] = {"op_a", "op_b", "attn", "layer"};
    for (size_t k = 0; k < n; k++) {
        uint64_t len = rnd(7) == 0 ? 0 : 200 + rnd(600);
        uint32_t dom = rnd(13) == 0 ? 2 : 0;
        const char *name = rnd(300) == 0 ? "nn.Module: enc" : names[rnd(4)];
        synth_push(f, serial, *t, name, dom, 0);
        if (k % 40 == 0 && len > 100) {
            synth_push(f, serial, *t + 10, "inner", 0, 0);
            synth_pop(f, serial, *t + 60, 0);
            (*count)++;
        }
        synth_pop(f, serial, *t + len, dom);
        *t += len + (rnd(3) == 0 ? 0 : 50);
        (*count)++;
    }
}

/* One rank of `variant` (F_*) into dir, its file's path into path: thread 1 the loop of the
 * view (the steps' thread), thread 2 another loop (with F_NOSTEPS the longest: the view),
 * thread 3 ending the process ranges thread 1 starts. */
static void write_flat(const char *dir, int variant, char *path, size_t n) {
    rnd_state = 777u + (uint64_t)variant;
    synth_file *f = synth_open(dir, "fl", 800 + variant, RT0, T0);
    synth_rank(f, 0, 1);
    synth_domain(f, 2, "other");
    synth_thread(f, 1, 801);
    synth_thread(f, 2, 802);
    synth_thread(f, 3, 803);
    size_t count = 0;
    const int steps = 30;
    uint64_t t = T0 + MS, t2 = T0 + MS;
    int epoch = variant == F_EPOCH || variant == F_AROUND, named = variant == F_STEPS || epoch;
    if (epoch) synth_push(f, 1, T0 + MS / 2, "epoch", 0, 0);
    for (int s = 0; s < steps; s++) {
        uint64_t b = t;
        if (variant == F_API || variant == F_PHASES) synth_step_begin(f, 1, b, (uint64_t)s);
        if (named) synth_push(f, 1, b, "train_step", 0, 0);
        synth_start(f, 1, b + 20 * US, 2000 + (uint64_t)s, "nccl:all_reduce", 0, 0);
        t += 10;
        if (variant == F_PHASES) {
            static const char *const phases[] = {"data", "forward", "backward", "optimizer"};
            int held = s % 3 == 0; /* the program's own step range around the phases */
            if (held) synth_push(f, 1, t, "step", 0, 0);
            for (int ph = 0; ph < 4; ph++) {
                synth_push(f, 1, t += 5, phases[ph], 0, 0);
                flat_loop(f, 1, &t, 150, &count);
                synth_pop(f, 1, t += 5, 0);
            }
            if (held) synth_pop(f, 1, t += 5, 0);
            synth_kernel(f, 1, b + 50 * US, b + 300 * US, 0, 7, (uint32_t)s + 1, "gemm");
        } else {
            flat_loop(f, 1, &t, 600, &count);
        }
        synth_end(f, 3, t + (s % 2 ? 100 * US : 0), 2000 + (uint64_t)s);
        if (named) synth_pop(f, 1, t += 100, 0);
        if (variant == F_API || variant == F_PHASES) synth_step_end(f, 1, t + 100, (uint64_t)s);
        /* a range between the steps (API steps: across a step's end) */
        synth_push(f, 1, t + 50, "between", 0, 0);
        synth_pop(f, 1, t += 400, 0);
        flat_loop(f, 2, &t2, variant == F_NOSTEPS ? 900 : 300, &count);
        synth_flush(f);
    }
    if (variant == F_EPOCH) {
        synth_push(f, 2, t2, "op_b", 0, 0); /* killed: no end record, ranges left open */
        synth_flush(f);
    } else {
        if (epoch) synth_pop(f, 1, t += 100, 0);
        synth_end_of_file(f, (t > t2 ? t : t2) + MS, 0);
    }
    snprintf(path, n, "%s", synth_path(f));
    assert_int_equal(synth_close(f), 0);
    assert_true(count > 10000);
}

/* The rank file at path read as a streamed section is (report_ranges.h): its model kept in
 * the first read holds at most `most` thread ranges, and its CPU basis is streamed in the
 * second (cpu 1: made and not failed; 0: none to make; -1: failed, read from the model), and
 * with at most 8 thread ranges held at once as cpu8 says (the ranges of one top-level range
 * are held: a step's children, and none of what a range that owns it all holds). */
static void flat_stream(const char *path, size_t most, int small, int cpu) {
    const char *ops[] = {path};
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    /* compacting from 16 ranges: what is left is what is kept; 3: 8 held at most */
    o.stream_sections = small ? 3 : 2;
    tp_rkeep *k = malloc(sizeof *k);
    assert_non_null(k);
    tp_range_stream ks;
    tp_rscan_keep(&ks, k, &o, 0);
    tp_process kept;
    assert_int_equal(tp_process_load_streamed(&run, &run.procs[0], &kept, &ks), 0);
    size_t held = 0;
    for (size_t i = 0; i < kept.nthreads; i++) held += kept.threads[i].nranges;
    if (held > most) {
        fprintf(stderr, "%s: %zu ranges kept\n", path, held);
        for (size_t i = 0; i < kept.nthreads; i++)
            for (size_t j = 0; j < kept.threads[i].nranges && j < 40; j++)
                fprintf(stderr, "  %zu %s depth %u\n", i, kept.threads[i].ranges[j].name,
                        kept.threads[i].ranges[j].depth);
    }
    assert_true(held <= most);
    assert_true(run.procs[0].nrec_ranges > 25 * most);
    tp_steps s;
    assert_int_equal(tp_find_steps(&kept, NULL, o.warmup, &s), 0);
    size_t nm = s.nsteps - s.nwarmup;
    tp_rscan sc;
    int rc = tp_rscan_streamed(&sc, &run, &run.procs[0], &kept, k, &o, &s,
                               nm ? tp_steps_measured(&s) : NULL, nm);
    assert_int_equal(rc, cpu < 0 ? 2 : 0);
    assert_int_equal(sc.cpu != NULL, cpu != 0);
    tp_rscan_free(&sc);
    tp_steps_free(&s);
    tp_process_free(&kept);
    tp_rkeep_free(k);
    free(k);
    tp_run_free(&run);
}

static void flat_streams(const char *path, size_t most, int cpu, int cpu8) {
    flat_stream(path, most, 0, cpu);
    flat_stream(path, most, 1, cpu8);
}

/* Flat loops: the model kept holds a few ranges a step, not the loops', and the CPU basis
 * (the breakdown's rows, or the phases) streamed gives the whole read's report. */
static void flat_runs(void **state) {
    (void)state;
    static const struct { int variant; size_t most; int cpu, cpu8; } v[] = {
        {F_STEPS, 600, 1, -1}, {F_NOSTEPS, 600, 1, 1}, {F_API, 600, 1, 1},
        {F_PHASES, 800, 1, -1}, {F_EPOCH, 600, -1, -1}, {F_AROUND, 600, 1, 1}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char dir[512], path[1024];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-flat"), 0);
        write_flat(dir, v[i].variant, path, sizeof path);
        assert_true(sweep_matches(path));
        flat_streams(path, v[i].most, v[i].cpu, v[i].cpu8);
        const char *ops[] = {dir};
        same_reports(ops, 1);
        if (v[i].variant == F_STEPS) same_reports_named(ops, 1, "op_a");
        synth_rmtree(dir);
    }
}

static void nested_runs(void **state) {
    (void)state;
    static const int variants[] = {V_NAMED, V_API, V_MAIN, V_NOSTEPS, V_KILLED,
                                   V_NAMED | V_DROPS, V_API | V_DROPS};
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        char dir[512], path[1024];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream"), 0);
        write_nested(dir, variants[i], path, sizeof path);
        assert_true(sweep_matches(path));
        const char *ops[] = {dir};
        same_reports(ops, 1);
        if (variants[i] == V_NAMED) same_reports_named(ops, 1, "forward");
        if (variants[i] == V_MAIN) same_reports_named(ops, 1, "train_*");
        synth_rmtree(dir);
    }
}

/* Damage: a byte flipped in the middle of a chunk, and the file cut in the middle. */
static void damaged_runs(void **state) {
    (void)state;
    for (int cut = 0; cut < 2; cut++) {
        char dir[512], path[1024];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-bad"), 0);
        write_nested(dir, V_NAMED, path, sizeof path);
        int64_t size = synth_file_size(path);
        if (cut) assert_int_equal(synth_truncate(path, size / 2 + 3), 0);
        else assert_int_equal(synth_flip_byte(path, size / 3, 0x5a), 0);
        (void)sweep_matches(path);
        const char *ops[] = {dir};
        same_reports(ops, 1);
        synth_rmtree(dir);
    }
}

/* Files the sweep cannot take are read whole: the same report. */
static void unsweepable_runs(void **state) {
    (void)state;
    for (int backwards = 0; backwards < 2; backwards++) {
        char dir[512], path[1024];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-x"), 0);
        write_unsweepable(dir, backwards, path, sizeof path);
        assert_false(sweep_matches(path));
        const char *ops[] = {dir};
        same_reports(ops, 1);
        synth_rmtree(dir);
    }
}

/* A rank whose stack runs deep: recursion `depth` levels down and back inside a step, then
 * as many pushes never popped (a pop skipped on every iteration of a loop) with a short range
 * inside each. */
static void write_deep(const char *dir, size_t depth, char *path, size_t n) {
    synth_file *f = synth_open(dir, "s2", 700, RT0, T0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 701);
    uint64_t t = T0 + MS;
    for (int s = 0; s < 2; s++) {
        synth_push(f, 1, t, "train_step", 0, 0);
        for (size_t k = 0; k < depth; k++)
            synth_push(f, 1, t += 3, k & 1 ? "rec_a" : "rec_b", 0, 0);
        for (size_t k = 0; k < depth; k++) synth_pop(f, 1, t += 3, 0);
        synth_pop(f, 1, t += 3, 0);
        synth_flush(f);
    }
    for (size_t k = 0; k < depth; k++) {
        synth_push(f, 1, t += 3, "loop", 0, 0);
        synth_push(f, 1, t += 3, "op_a", 0, 0);
        synth_pop(f, 1, t += 3, 0);
        if (k % 1000 == 999) synth_flush(f);
    }
    synth_end_of_file(f, t + MS, 0);
    snprintf(path, n, "%s", synth_path(f));
    assert_int_equal(synth_close(f), 0);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A deep stack costs the sweep a step per push and pop, as it costs the whole load's sort:
 * the streamed read of a file 40000 levels deep takes about the whole read's time, not the
 * square of its depth (which took minutes), and gives the same figures. */
static void deep_stacks(void **state) {
    (void)state;
    char dir[512], path[1024];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-deep"), 0);
    write_deep(dir, 40000, path, sizeof path);
    const char *ops[] = {path};
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_process whole, tmp;
    double t0 = cpu_seconds();
    assert_int_equal(tp_process_load_whole(&run, &run.procs[0], &whole), 0);
    double t_whole = cpu_seconds() - t0;
    tp_process_free(&whole);
    seen_list got = {0};
    tp_range_stream st = {NULL, take_seen, &got, 0, 0};
    t0 = cpu_seconds();
    assert_int_equal(tp_process_load_streamed(&run, &run.procs[0], &tmp, &st), 0);
    double t_stream = cpu_seconds() - t0;
    tp_process_free(&tmp);
    free(got.v);
    tp_run_free(&run);
    assert_false(st.failed);
    /* CPU time, so a loaded machine moves both sides; the bound is far from both a linear pass
     * (about 1x) and the quadratic one it guards against (80x here: 8.2 s against 0.1 s) */
    if (t_stream > 10 * t_whole + 1.0)
        fprintf(stderr, "streamed %.2f s against %.2f s read whole\n", t_stream, t_whole);
    assert_true(t_stream <= 10 * t_whole + 1.0);
    assert_true(sweep_matches(path));
    same_reports(ops, 1);
    synth_rmtree(dir);
}

static void four_ranks(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-4"), 0);
    for (int r = 0; r < 4; r++) four_ranks_write(dir, r);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    same_reports_named(ops, 1, "train_step");
    synth_rmtree(dir);
}

static void scenarios(void **state) {
    (void)state;
    scen v[4];
    for (int i = 0; i < 4; i++) v[i] = scen_base();
    v[1].nranks = 4, v[1].hosts = 2, v[1].lag_rank = 2, v[1].lag = 2 * MS;
    v[2].data = 2 * MS, v[2].buckets = 3;
    v[3].alloc_share = 0.95, v[3].mem_share = 0.97;
    for (int i = 0; i < 4; i++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-stream-scen"), 0);
        for (int r = 0; r < v[i].nranks; r++) scen_write_rank(dir, &v[i], r);
        const char *ops[] = {dir};
        same_reports(ops, 1);
        synth_rmtree(dir);
    }
}

static void reports_same(const char *const *ops, size_t n, int must_compare) {
    (void)must_compare;
    same_reports(ops, n);
}

static void corpus(void **state) {
    (void)state;
    slim_corpus(reports_same);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nested_runs),     cmocka_unit_test(damaged_runs),
        cmocka_unit_test(unsweepable_runs), cmocka_unit_test(four_ranks),
        cmocka_unit_test(scenarios),       cmocka_unit_test(corpus),
        cmocka_unit_test(deep_stacks),     cmocka_unit_test(flat_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
