/*
 * memory_text.c — the memory section of the text report and the OOM's one-line summary
 * (memory.h), rendered from tp_memory_result (memory.c computes it).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/memory.h"
#include "analysis/text.h"

/* bytes as GiB, or MiB under one GiB */
static const char *human(double b, char *buf, size_t n) {
    if (fabs(b) >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    return buf;
}

static const char *peak_str(const tp_mem_peak *pk, char *buf, size_t n) {
    if (!pk->has || n < 8) return "-";
    const char *pre = pk->bound == TP_MEM_AT_MOST ? "≤ " : pk->bound == TP_MEM_AT_LEAST ? "≥ " : "";
    size_t l = strlen(pre);
    memcpy(buf, pre, l + 1);
    human(pk->bytes, buf + l, n - l);
    return buf;
}

void tp_memory_oom_line(const tp_mem_oom *o, char *buf, size_t n) {
    char a[32], b[32], c[32], d[32], e[32], f[32];
    size_t l = 0;
    buf[0] = 0;
#define PUT(...) (l < n ? (void)(l += (size_t)snprintf(buf + l, n - l, __VA_ARGS__)) : (void)0)
    if (o->has_step) PUT("step %.0f", o->step);
    if (o->phase) PUT("%s(%s%s%s)", l ? " " : "phase ", o->phase, o->module ? ", in " : "",
                      o->module ? o->module : "");
    else if (o->module) PUT("%s(in %s)", l ? " " : "", o->module);
    if (o->has_request) PUT("%srequest %s", l ? ": " : "", human(o->request_bytes, a, sizeof a));
    if (o->has_free) PUT("%s%s free", l ? ", " : "", human(o->free_bytes, b, sizeof b));
    if (o->has_total)
        PUT("%s%s", o->has_free ? " of " : l ? ", total " : "total ",
            human(o->total_bytes, c, sizeof c));
    if (o->has_allocated) PUT("; allocated %s", human(o->allocated_bytes, d, sizeof d));
    if (o->has_reserved) PUT(", reserved %s", human(o->reserved_bytes, e, sizeof e));
    if (o->has_largest_free)
        PUT(", largest free block %s", human(o->largest_free_block_bytes, f, sizeof f));
#undef PUT
}

static void oom_text(FILE *f, const tp_mem_oom *o) {
    char line[512];
    tp_memory_oom_line(o, line, sizeof line);
    if (o->recovered) {
        fputs("    a device allocation failed", f);
        if (o->has_time) fprintf(f, " at %.3f s", o->at_s);
        fputs(" (", f);
        tp_text_put(f, line, 400, 0);
        fprintf(f, ") and the program carried on for %zu more steps: not an out-of-memory end "
                "(a caching allocator frees its cache and retries)\n", o->steps_after);
        return;
    }
    fprintf(f, "    OUT OF MEMORY (%s", o->source ? o->source : "?");
    if (o->has_device) fprintf(f, ", device %.0f", o->device);
    if (o->has_time) fprintf(f, ", at %.3f s", o->at_s);
    fputs("): ", f);
    tp_text_put(f, line, 400, 0);
    fputc('\n', f);
    if (o->has_growth) {
        char g[32], a[32];
        fprintf(f, "    allocated %s%s since step %.0f began (%s then)\n",
                o->growth_bytes < 0 ? "-" : "+",
                human(fabs(o->growth_bytes), g, sizeof g), o->growth_step,
                human(o->growth_from_bytes, a, sizeof a));
    }
    if (o->has_count && o->count > 1)
        fprintf(f, "    %.0f OOMs in the process; the first\n", o->count);
    for (size_t i = 0; i < o->ntop; i++) {
        char h[32];
        if (!i) fputs("    largest live allocations:\n", f);
        fprintf(f, "      %10s  stream %-4.0f ", human(o->top[i].bytes, h, sizeof h),
                o->top[i].stream);
        /* with history on, no frames means no Python stack: autograd's engine threads
         * allocate a backward's tensors from C++ */
        tp_text_put(f,
                    *o->top[i].frames ? o->top[i].frames
                    : o->history      ? "(no Python stack: allocated from C++, as a backward's "
                                        "tensors by autograd's engine thread)"
                                      : "(no history recorded: TRAINPROF_MEMORY_HISTORY)",
                    160, 0);
        fputc('\n', f);
    }
    if (o->snapshot) {
        fputs("    snapshot (beside the rank file): ", f);
        tp_text_put(f, o->snapshot, 200, 0);
        fputs("; open: python -m torch.cuda._memory_viz trace_plot ", f);
        tp_text_put(f, o->snapshot, 200, 0);
        fputs(" -o out.html (or drop it on https://pytorch.org/memory_viz)\n", f);
    } else if (o->snapshot_unusable) {
        fputs("    snapshot: its name in the rank file is not a plain file name; not shown\n", f);
    }
}

void tp_memory_text(FILE *f, const tp_memory_result *m) {
    if (!m->present) return;
    char a[32], b[32], c[32];
    fprintf(f, "  memory (CUDA caching allocator");
    if (m->has_device) fprintf(f, ", device %u", m->device);
    fprintf(f, ", %zu samples", m->samples);
    if (m->has_capacity)
        fprintf(f, ", capacity %s from %s", human(m->capacity_bytes, a, sizeof a),
                m->capacity_source);
    fputs(")\n", f);
    if (m->oom.present) oom_text(f, &m->oom);
    if (m->peak_allocated.has || m->peak_reserved.has) {
        fprintf(f, "    peak allocated %s", peak_str(&m->peak_allocated, a, sizeof a));
        if (m->has_shares) fprintf(f, " (%.1f %% of capacity)", 100 * m->peak_allocated_share);
        fprintf(f, ", reserved %s", peak_str(&m->peak_reserved, b, sizeof b));
        if (m->has_shares)
            fprintf(f, " (%.1f %%), headroom %s", 100 * m->peak_reserved_share,
                    human(m->headroom_bytes, c, sizeof c));
        fputc('\n', f);
    }
    if (m->has_fragmentation) {
        fprintf(f, "    fragmentation at the sampled peak %.1f %% (allocated %s of %s reserved",
                100 * m->fragmentation, human(m->frag_allocated_bytes, a, sizeof a),
                human(m->frag_reserved_bytes, b, sizeof b));
        if (m->has_inactive_split)
            fprintf(f, "; inactive split %s", human(m->inactive_split_bytes, c, sizeof c));
        fputs(")\n", f);
    }
    if (m->has_alloc_retries || m->has_ooms) {
        fputs("   ", f);
        if (m->has_alloc_retries) fprintf(f, " allocation retries %.0f", m->alloc_retries);
        if (m->has_ooms) fprintf(f, "%s OOMs %.0f", m->has_alloc_retries ? ";" : "", m->ooms);
        fputc('\n', f);
    }
    if (!m->nsteps) return;
    /* the first and last steps: where growth shows */
    int modules = 0;
    for (size_t i = 0; i < m->nsteps; i++)
        modules |= m->steps[i].peak_module || m->steps[i].top_sample_module;
    fprintf(f, "    %8s  %14s %14s %14s %s\n", "step", "start alloc", "peak alloc", "peak reserved",
            modules ? "peak phase, module" : "peak phase");
    for (size_t i = 0; i < m->nsteps; i++) {
        if (m->nsteps > 12 && i == 5) fprintf(f, "    %8s (%zu steps)\n", "...", m->nsteps - 10);
        if (m->nsteps > 12 && i >= 5 && i < m->nsteps - 5) continue;
        const tp_mem_step_result *r = &m->steps[i];
        char d[32], e[32];
        /* "≤ " and "≥ " take 4 bytes for 2 columns: the width is in bytes */
        const char *pa = peak_str(&r->allocated, d, sizeof d);
        const char *pr = peak_str(&r->reserved, e, sizeof e);
        fprintf(f, "    %8.0f%s %14s %*s %*s %s", r->step, r->warmup ? "w" : " ",
                r->has_start ? human(r->start_allocated_bytes, a, sizeof a) : "-",
                r->allocated.has && r->allocated.bound != TP_MEM_EXACT ? 16 : 14, pa,
                r->reserved.has && r->reserved.bound != TP_MEM_EXACT ? 16 : 14, pr,
                r->peak_phase ? r->peak_phase : "-");
        if (r->peak_module) {
            fputs(", ", f);
            tp_text_put(f, r->peak_module, 60, 0);
        } else if (r->top_sample_module) {
            fprintf(f, "%s(largest sample %s in ", r->peak_phase ? ", " : " ",
                    human(r->top_sample_bytes, a, sizeof a));
            tp_text_put(f, r->top_sample_module, 60, 0);
            fputc(')', f);
        }
        fputc('\n', f);
    }
    fputs("    (≤: a bound, the allocator's peak did not change in the step; w: warm-up", f);
    if (modules)
        fputs(";\n     module: the model's innermost module around the peak, in the GPU capture "
              "plan's steps", f);
    fputs(")\n", f);
}
