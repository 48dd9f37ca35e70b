/*
 * export_same.c — the exports of a run loaded whole against those of it loaded slim
 * (export_same.h).
 */
#define _GNU_SOURCE
#include "export_same.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/model.h"
#include "export/chrome.h"
#include "export/perfetto.h"
#include "trainprof.h"

enum { FMT_MERGED, FMT_PERFETTO, FMT_RANK };

/* The selections compared: none; one rank (the second lowest); steps 1 to 2 of the lowest
 * selected rank; a time window; and steps within a time window, of one rank. */
#define NSEL 5
static void selection(tp_export_opts *eo, int k, const int *rank1, const char *step_name) {
    memset(eo, 0, sizeof *eo);
    eo->step_name = step_name;
    eo->warmup = 1;
    if (k == 1 || k == 4) {
        eo->ranks = rank1;
        eo->n_ranks = 1;
    }
    if (k == 2 || k == 4) {
        eo->has_steps = 1;
        eo->step_lo = 1;
        eo->step_hi = 2;
    }
    if (k == 3 || k == 4) {
        eo->has_time = 1;
        eo->t_lo = 0.002;
        eo->t_hi = k == 4 ? 1000.0 : 0.02;
    }
}

/* One export into a buffer (owned, *len bytes), its return code in *rc. The clock alignment
 * is computed first, as the command does (after the memos). */
static char *render(const tp_run *run, int fmt, int rank, const tp_export_opts *eo,
                    size_t *len, int *rc) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    tp_clocks_result ck;
    tp_export_opts o = *eo;
    if (tp_clocks_compute(run, &ck) == TPROF_OK) o.clocks = &ck;
    *rc = fmt == FMT_MERGED     ? tp_export_chrome(run, f, &o)
          : fmt == FMT_PERFETTO ? tp_export_perfetto(run, f, &o, NULL)
                                : tp_export_chrome_rank(run, rank, f, &o);
    fclose(f);
    tp_clocks_result_free(&ck);
    return buf;
}

/* Asserts the same bytes, printing where they part. */
static void compare(const char *what, const char *whole, size_t nwhole, const char *slim,
                    size_t nslim) {
    if (nwhole == nslim && !memcmp(whole, slim, nwhole)) return;
    size_t i = 0;
    while (i < nwhole && i < nslim && whole[i] == slim[i]) i++;
    size_t from = i > 200 ? i - 200 : 0;
    fprintf(stderr, "%s: differs at byte %zu (%zu and %zu bytes):\nwhole: %.400s\nslim:  %.400s\n",
            what, i, nwhole, nslim, whole + from, slim + from);
    fail();
}

/* One export both ways. */
static void same_export(const tp_run *whole, const tp_run *slim, int fmt, int rank,
                        const tp_export_opts *eo, const char *what) {
    size_t na, nb;
    int ra, rb;
    char *a = render(whole, fmt, rank, eo, &na, &ra);
    char *b = render(slim, fmt, rank, eo, &nb, &rb);
    if (ra != rb) fprintf(stderr, "%s: returns %d whole, %d slim\n", what, ra, rb);
    assert_int_equal(ra, rb);
    compare(what, a, na, b, nb);
    free(a);
    free(b);
}

size_t export_same(const char *const *ops, size_t nops, const char *step_name) {
    tp_run whole, slim;
    char err[512];
    if (tp_run_load_list(ops, nops, &whole, err, sizeof err) != TPROF_OK) return 0;
    /* the second lowest rank, else the lowest */
    int lo = -1, lo2 = -1;
    for (size_t i = 0; i < whole.nprocs; i++) {
        int r = whole.procs[i].role == TP_ROLE_RANK ? whole.procs[i].rank : -1;
        if (r < 0 || r == lo || r == lo2) continue;
        if (lo < 0 || r < lo) {
            lo2 = lo;
            lo = r;
        } else if (lo2 < 0 || r < lo2) {
            lo2 = r;
        }
    }
    int rank1 = lo2 >= 0 ? lo2 : lo;
    size_t n = 0;
    for (int k = 0; k < NSEL; k++) {
        tp_export_opts eo;
        selection(&eo, k, &rank1, step_name);
        /* a fresh slim run per selection, its memos filled as the command fills them */
        assert_int_equal(tp_run_load_slim(ops, nops, &slim, err, sizeof err), TPROF_OK);
        assert_int_equal(slim.nprocs, whole.nprocs);
        assert_int_equal(tp_export_fill_memos(&slim, &eo), TPROF_OK);
        char what[512];
        snprintf(what, sizeof what, "%s: merged, selection %d", ops[0], k);
        same_export(&whole, &slim, FMT_MERGED, -1, &eo, what);
        snprintf(what, sizeof what, "%s: perfetto, selection %d", ops[0], k);
        same_export(&whole, &slim, FMT_PERFETTO, -1, &eo, what);
        n += 2;
        for (size_t i = 0; i < whole.nprocs; i++) {
            const tp_process *p = &whole.procs[i];
            if (p->role != TP_ROLE_RANK || !tp_export_rank_selected(&eo, p->rank)) continue;
            snprintf(what, sizeof what, "%s: rank %d, selection %d", ops[0], p->rank, k);
            same_export(&whole, &slim, FMT_RANK, p->rank, &eo, what);
            n++;
        }
        tp_run_free(&slim);
    }
    tp_run_free(&whole);
    return n;
}
