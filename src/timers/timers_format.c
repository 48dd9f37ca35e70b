/*
 * timers_format.c — Megatron-LM's Timers text, shared by the library (tprof_timers_string) and
 * the report (the timers table rebuilt from the trace), so both print the same bytes. Rules
 * (Megatron-LM megatron/core/timers.py, Timers.log): header line; "    " + (name + " ")
 * left-justified with dots to 48 characters + ": " + values with two decimals, in ms per
 * normalizer unit; zeros left out of min/max and timers with no value left out; 'all' prints
 * "  name:" then "     rank NN: v" per rank with a value.
 */
#define _GNU_SOURCE
#include "timers_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) { b->oom = 1; return; }
        b->s = ns;
        b->cap = cap;
    }
}

/* Python's (name + ' ').ljust(48, '.'): padding counts characters, not bytes. */
static void sb_padded_name(sbuf *b, const char *name) {
    size_t chars = 1; /* the space */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        chars += (*p & 0xC0) != 0x80;
    sb_printf(b, "%s ", name);
    for (; chars < 48; chars++) sb_printf(b, ".");
}

int tprof__timers_minmax(const double *m, int world, size_t n, size_t i, double *mn,
                         double *mx) {
    int any = 0;
    for (int r = 0; r < world; r++) {
        double v = m[(size_t)r * n + i];
        if (v <= 0) continue;
        if (!any || v < *mn) *mn = v;
        if (!any || v > *mx) *mx = v;
        any = 1;
    }
    return any;
}

char *tprof__timers_format(int opt, const char *const *names, size_t n, const double *m,
                           int world, double normalizer) {
    double div = normalizer / 1000.0;
    sbuf b = {0};
    int any = 0;
    if (opt == 2) {
        sb_printf(&b, "times across ranks (ms):");
        for (size_t i = 0; i < n; i++) {
            int first = 1;
            for (int r = 0; r < world; r++) {
                double v = m[(size_t)r * n + i];
                if (v <= 0) continue;
                any = 1;
                if (first) sb_printf(&b, "\n  %s:", names[i]);
                first = 0;
                /* a float32 tensor element divided by a Python float stays float32 */
                float q = (float)v / (float)div;
                sb_printf(&b, "\n     rank %2d: %.2f", r, (double)q);
            }
        }
    } else {
        sb_printf(&b, opt == 0 ? "max time across ranks (ms):"
                                               : "(min, max) time across ranks (ms):");
        for (size_t i = 0; i < n; i++) {
            double mn = 0, mx = 0;
            if (!tprof__timers_minmax(m, world, n, i, &mn, &mx)) continue;
            any = 1;
            sb_printf(&b, "\n    ");
            sb_padded_name(&b, names[i]);
            if (opt == 0) sb_printf(&b, ": %.2f", mx / div);
            else sb_printf(&b, ": (%.2f, %.2f)", mn / div, mx / div);
        }
    }
    if (!any || b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

