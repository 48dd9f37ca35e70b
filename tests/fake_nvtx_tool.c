/*
 * fake_nvtx_tool.c — a stand-in for Nsight Systems in the NVTX emission test: an NVTX tool
 * library (InitializeInjectionNvtx2) that fills the CORE and CORE2 slots it is given and
 * writes one line per call to the file named by $FAKE_NVTX_LOG.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/nvtx_abi.h"

static FILE *g_log;
static unsigned long long g_next_id = 1000;

static void say(const char *fmt, ...) {
    if (!g_log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_log, fmt, ap);
    va_end(ap);
    fputc('\n', g_log);
    fflush(g_log);
}

typedef struct fdomain { char name[64]; } fdomain;

static const char *msg(const tnvtx_attr *a) {
    return a && a->message_type == TNVTX_MSG_ASCII && a->message ? a->message : "?";
}

static int push_a(const char *m) { say("push %s", m); return 0; }
static int pop(void) { say("pop"); return 0; }
static unsigned long long start_a(const char *m) {
    say("start %s %llu", m, g_next_id);
    return g_next_id++;
}
static void end(unsigned long long id) { say("end %llu", id); }
static void mark_a(const char *m) { say("mark %s", m); }
static const void *dcreate(const char *n) {
    fdomain *d = calloc(1, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", n);
    say("dcreate %s", n);
    return d;
}
static void dcat(const fdomain *d, unsigned c, const char *n) {
    say("dcategory %s %u %s", d->name, c, n);
}
static int dpush(const fdomain *d, const tnvtx_attr *a) {
    say("dpush %s %s %u", d->name, msg(a), a->category);
    return 0;
}
static int dpop(const fdomain *d) { say("dpop %s", d->name); return 0; }
static unsigned long long dstart(const fdomain *d, const tnvtx_attr *a) {
    say("dstart %s %s %u %llu", d->name, msg(a), a->category, g_next_id);
    return g_next_id++;
}
static void dend(const fdomain *d, unsigned long long id) { say("dend %s %llu", d->name, id); }

static void fill(const tnvtx_callbacks *cb, int module, const unsigned *ids, tnvtx_fn *fns, int n) {
    tnvtx_table t;
    unsigned size;
    if (!cb->get_module_function_table(module, &t, &size)) return;
    for (int i = 0; i < n; i++)
        if (ids[i] < size && t[ids[i]]) *t[ids[i]] = fns[i];
}

#define FN(f) ((tnvtx_fn)(void (*)(void))(f))

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(tnvtx_get_export_table get);
int InitializeInjectionNvtx2(tnvtx_get_export_table get) {
    const char *path = getenv("FAKE_NVTX_LOG");
    g_log = path ? fopen(path, "a") : NULL;
    say("init");
    const tnvtx_callbacks *cb = get(TNVTX_ETID_CALLBACKS);
    if (!cb) return 0;
    unsigned core_ids[] = {TNVTX_CORE_RangePushA, TNVTX_CORE_RangePop, TNVTX_CORE_RangeStartA,
                           TNVTX_CORE_RangeEnd, TNVTX_CORE_MarkA};
    tnvtx_fn core_fns[] = {FN(push_a), FN(pop), FN(start_a), FN(end), FN(mark_a)};
    fill(cb, TNVTX_MODULE_CORE, core_ids, core_fns, 5);
    unsigned core2_ids[] = {TNVTX_CORE2_DomainCreateA, TNVTX_CORE2_DomainNameCategoryA,
                            TNVTX_CORE2_DomainRangePushEx, TNVTX_CORE2_DomainRangePop,
                            TNVTX_CORE2_DomainRangeStartEx, TNVTX_CORE2_DomainRangeEnd};
    tnvtx_fn core2_fns[] = {FN(dcreate), FN(dcat), FN(dpush), FN(dpop), FN(dstart), FN(dend)};
    fill(cb, TNVTX_MODULE_CORE2, core2_ids, core2_fns, 6);
    return 1;
}
