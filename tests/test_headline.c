/*
 * test_headline.c — the report's headline (src/analysis/findings.c, tp_headline): for each
 * diagnosis rule, a synthetic job where it fires leads the text (the line after "trainprof
 * report"), the JSON (its first key, "headline") and the HTML (before the findings) with that
 * rule, its share of the step and the first thing to try; a job with no finding says "no
 * bottleneck found" with its figures, and that a rank was not judged when memory ran out.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/findings.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "diag_scen.h"
#include "export/html.h"
#include "synth.h"

#define NEAR(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) < (eps))

/* The report of sc: its text (line 2 returned in line2, the line after "trainprof report"),
 * its JSON document and its HTML; asserts that the three lead with the same headline and
 * that the JSON's first key is "headline". Returns the document (cJSON_Delete). */
static cJSON *headline_of(const scen *sc, const char *tag, const tp_report_opts *o,
                          char *line2, size_t n) {
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, tag), 0);
    for (int r = 0; r < sc->nranks; r++) scen_write_rank(dir, sc, r);
    tp_run run;
    char err[256] = "";
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    tp_report tr;
    assert_int_equal(tp_report_make(&run, o, &tr), 0);
    char *txt = NULL, *html = NULL;
    size_t len = 0, hlen = 0;
    FILE *mf = open_memstream(&txt, &len);
    assert_int_equal(tp_report_write_text(&tr, mf, 0), 0);
    fclose(mf);
    mf = open_memstream(&html, &hlen);
    assert_int_equal(tp_html_write(&tr, o, mf), 0);
    fclose(mf);
    cJSON *rep = tr.doc;
    tr.doc = NULL;
    tp_report_free(&tr);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* text: "trainprof report DIR", then the headline */
    assert_true(!strncmp(txt, "trainprof report ", 17));
    const char *l2 = strchr(txt, '\n');
    assert_non_null(l2);
    l2++;
    const char *e = strchr(l2, '\n');
    assert_non_null(e);
    assert_true((size_t)(e - l2) < n);
    memcpy(line2, l2, (size_t)(e - l2));
    line2[e - l2] = 0;
    /* JSON: "headline" is the first key, its first line the text's */
    assert_non_null(rep->child);
    assert_string_equal(rep->child->string, "headline");
    const cJSON *lines = J(J(rep, "headline"), "lines");
    assert_true(cJSON_GetArraySize(lines) >= 1 && cJSON_GetArraySize(lines) <= 3);
    assert_string_equal(cJSON_GetArrayItem(lines, 0)->valuestring, line2);
    /* HTML: the headline block comes before the findings */
    const char *hb = strstr(html, "<div id=\"headline\"");
    const char *fb = strstr(html, "<h2 id=\"findings\">");
    assert_non_null(hb);
    assert_non_null(fb);
    assert_true(hb < fb);
    free(txt);
    free(html);
    return rep;
}

/* The headline leads with finding `id`: the text's second line names it, the JSON's
 * "finding" is it; returns the headline's step_share. */
static double leads_with(const scen *sc, const char *tag, const tp_report_opts *o,
                         const char *id, const char *title) {
    char l2[1024], want[160];
    cJSON *rep = headline_of(sc, tag, o, l2, sizeof l2);
    snprintf(want, sizeof want, "bottleneck: %s (", title);
    if (strncmp(l2, want, strlen(want))) fail_msg("headline \"%s\" does not lead with %s", l2, id);
    snprintf(want, sizeof want, ", %s): ", id);
    assert_non_null(strstr(l2, want));
    const cJSON *h = J(rep, "headline");
    assert_string_equal(J(h, "finding")->valuestring, id);
    assert_non_null(finding(rep, id));
    /* the second line is the first thing to try: the recommendation's start */
    const char *rec = J(finding(rep, id), "recommendation")->valuestring;
    const char *l = cJSON_GetArrayItem(J(h, "lines"), 1)->valuestring;
    assert_true(!strncmp(l, "first try: ", 11));
    assert_true(!strncmp(l + 11, rec, strlen(l + 11)));
    double share = N(h, "step_share");
    cJSON_Delete(rep);
    return share;
}

static void headline_data_loading(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.data = 3 * MS; /* 30 % of the step; the GPU's other idle (the 10 % tail) is less */
    NEAR(leads_with(&sc, "hl-data", NULL, "data_loading", "data loading"), 0.3, 1e-9);
}

static void headline_exposed_comm(void **st) {
    (void)st;
    scen sc = scen_base(); /* comm [5,9) beside compute [1,8.5): 0.5 ms = 5 % exposed */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.comm_warn_share = 0.04;
    NEAR(leads_with(&sc, "hl-exp", &o, "exposed_communication", "exposed communication"), 0.05,
         1e-9);
}

static void headline_launch_bound(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.short_kernels = 1;
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.launch_idle_share = 0.18; /* the short gaps (25 %) are past it by its band */
    double s = leads_with(&sc, "hl-launch", &o, "launch_bound", "kernel launch overhead");
    assert_true(s > 0.18 * 1.25);
}

static void headline_host_sync(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.sync = 1; /* the 1 ms idle tail: 10 % of the step */
    NEAR(leads_with(&sc, "hl-sync", NULL, "host_sync", "host synchronisation"), 0.1, 1e-9);
}

static void headline_memory_peak(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.mem_share = 0.95;
    NEAR(leads_with(&sc, "hl-mem", NULL, "memory_peak", "GPU memory"), 0, 1e-12);
}

static void headline_straggler(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    sc.lag_rank = 2;
    sc.lag = 1500 * US; /* 15 % of the step late at every collective */
    double s = leads_with(&sc, "hl-strag", NULL, "straggler", "a straggler rank");
    NEAR(s, 0.15, 0.01);
}

static void headline_throttling(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.throttle = 1;
    NEAR(leads_with(&sc, "hl-thr", NULL, "throttling", "GPU throttling"), 0, 1e-12);
}

static void headline_gpu_busy(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.end_frac = 0.6; /* 40 % idle at the end of each step, no data loading or sync */
    NEAR(leads_with(&sc, "hl-busy", NULL, "gpu_busy", "GPU idle"), 0.4, 1e-9);
}

/* No finding: "no bottleneck found" with the run's figures: step 10 ms, GPU busy 90 % (work
 * ends at 0.9 of the step), exposed communication 0 % (comm [5,9) under compute to 8.5,
 * 0.5 ms: base's 5 % is under the 10 % warning) on the least/most rank. */
static void headline_none(void **st) {
    (void)st;
    scen sc = scen_base();
    char l2[1024];
    cJSON *rep = headline_of(&sc, "hl-none", NULL, l2, sizeof l2);
    assert_int_equal(count_findings(rep), 0);
    const cJSON *h = J(rep, "headline");
    assert_true(cJSON_IsNull(J(h, "finding")));
    const cJSON *fig = J(h, "figures");
    NEAR(N(fig, "step_ms"), 10, 1e-9);
    NEAR(N(fig, "gpu_busy_share"), 0.9, 1e-9);
    NEAR(N(fig, "exposed_comm_share"), 0.05, 1e-9);
    char want[512];
    snprintf(want, sizeof want, "no bottleneck found: step 10.00 ms, GPU busy 90.0 %% of the step "
                                "(rank %.0f, the least), exposed communication 5.0 %% (rank %.0f, "
                                "the most)",
             N(fig, "gpu_busy_rank"), N(fig, "exposed_comm_rank"));
    assert_string_equal(l2, want);
    cJSON_Delete(rep);
}

/* A rank whose exposure could not be computed (memory ran out: TP_EXPOSURE_NO_MEMORY), or the
 * clocks (TP_CLOCKS_NO_MEMORY), and no finding: the headline says no bottleneck was found,
 * and what was not judged. */
static void headline_unjudged(void **st) {
    (void)st;
    tp_rank_result r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        r[i].rank = i;
        r[i].steps.measured = 4;
        r[i].steps.mean_ms = 10;
        r[i].comm.present = 1;
        r[i].comm.exposure.present = 1;
        r[i].comm.exposure.note = i ? TP_EXPOSURE_NO_MEMORY : "no GPU records: a CPU job";
    }
    tp_run_results res;
    memset(&res, 0, sizeof res);
    res.nranks = 2;
    res.ranks = r;
    tp_headline_build(&res);
    assert_int_equal(res.headline.nlines, 2);
    assert_string_equal(res.headline.lines[0], "no bottleneck found: step 10.00 ms");
    assert_string_equal(res.headline.lines[1], "not judged: exposed communication of rank 1 and "
                                               "maybe others (memory ran out while the report "
                                               "computed it)");
    res.clocks.no_memory = 1; /* nor the clocks, so the stragglers */
    tp_headline_build(&res);
    assert_string_equal(res.headline.lines[1], "not judged: exposed communication of rank 1 and "
                                               "maybe others, stragglers (memory ran out while "
                                               "the report computed them)");
    r[1].comm.exposure.note = "no GPU records: a CPU job"; /* computed */
    tp_headline_build(&res);
    assert_string_equal(res.headline.lines[1], "not judged: stragglers (memory ran out while the "
                                               "report computed it)");
    res.clocks.no_memory = 0;
    tp_headline_build(&res);
    assert_int_equal(res.headline.nlines, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(headline_data_loading),
        cmocka_unit_test(headline_exposed_comm),
        cmocka_unit_test(headline_launch_bound),
        cmocka_unit_test(headline_host_sync),
        cmocka_unit_test(headline_memory_peak),
        cmocka_unit_test(headline_straggler),
        cmocka_unit_test(headline_throttling),
        cmocka_unit_test(headline_gpu_busy),
        cmocka_unit_test(headline_none),
        cmocka_unit_test(headline_unjudged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
