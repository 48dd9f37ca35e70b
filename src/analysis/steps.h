/*
 * steps.h — the step rule of docs/design.md §4, the same for the report and for live use.
 *
 * Sources, in order: ranges whose name matches the step name the user gave (exact, or a glob
 * when it holds '*' or '?'): what the user asks for wins; explicit API steps
 * (tprof_step_begin/end), read as training iterations when trainprof.torch made them (below);
 * then, without a step name, PyTorch's "ProfilerStep#*" and the common names "train_step",
 * "training_step", "step", "iteration", "train_iter".
 *
 * Training iterations (TP_STEPS_ITERATION): trainprof.torch begins a step at the first data
 * fetch, forward or backward after an optimizer step and ends it when optimizer.step()
 * returns, and marks its process with metadata trainprof.torch.steps = "iteration". Such a
 * step is read as running to the next step's begin, so the work a training loop does after
 * its optimizer step (Megatron-LM: parameter copies, loss reduction, logging) is in its
 * iteration and the step time is the iteration period a framework logs (Megatron-LM's
 * "elapsed time per iteration", megatron/training/training.py); torch.profiler's
 * ProfilerStep#N ranges are delimited the same way, from one step() call to the next. The
 * last step, and a step followed by missing ones, end where the program ended them.
 *
 * The first thread of the process on which the chosen source appears defines the steps;
 * they are numbered from 0 in time order; the first `warmup` steps are warm-up.
 */
#ifndef TPROF_STEPS_H
#define TPROF_STEPS_H

#include "analysis/model.h"

typedef enum tp_step_source {
    TP_STEPS_NONE = 0,
    TP_STEPS_API,
    TP_STEPS_NAMED,       /* --step-name */
    TP_STEPS_PROFILER,    /* ProfilerStep#N */
    TP_STEPS_DEFAULT_NAME, /* one of the common names */
    TP_STEPS_ITERATION    /* API steps of trainprof.torch, boundary to boundary */
} tp_step_source;

typedef struct tp_step {
    uint64_t start, end; /* monotonic ns of the process */
    uint64_t app_step;   /* the program's own number (API), else the index */
    int warmup;
} tp_step;

typedef struct tp_steps {
    tp_step_source source;
    const char *name;     /* the range name or pattern matched, or "tprof_step_begin/end" */
    uint32_t thread;      /* index in process->threads */
    tp_step *steps;       /* NULL when packed */
    size_t nsteps;
    size_t nwarmup;
    /* The steps packed (step_pack.h: 4-8 bytes a step where steps holds 32) in place of
     * steps, by tp_steps_pack_in: the form a slim process keeps them in (steps_memo), since
     * the merge holds every rank's. nsteps still counts them; tp_find_steps gives them
     * unpacked. Owned; NULL when not packed. */
    uint8_t *packed;
    size_t packed_len;
    /* The packed steps written out to the temporary file in place of packed when long
     * (step_pack.h; packed_len bytes), owned; NULL when not. */
    struct tp_spill_block *spilled;
    /* API steps only: the program's step numbers with no whole step because events around
     * them were dropped by the thread's full ring (docs/report-json.md, steps.missing):
     * ascending, disjoint ranges [s, e] of numbers (tp_span reused: s and e are step
     * numbers, both included); nmissing_steps is the number of numbers they hold. */
    struct tp_span *missing;
    size_t nmissing;
    uint64_t nmissing_steps;
} tp_steps;

/* Finds the steps of process p. step_name may be NULL. Returns 0 or TPROF_ERR_NO_MEMORY;
 * out->source is TP_STEPS_NONE when nothing matched. The steps are sorted by start and do
 * not overlap (end >= start, each starts at or after the previous one's end): candidates
 * that would break this, which only damaged times produce, are left out. Free with
 * tp_steps_free. */
int tp_find_steps(const tp_process *p, const char *step_name, int warmup, tp_steps *out);
/* Whether a range named `name` could be a step of tp_find_steps with step_name (NULL or ""
 * for the default rule): it matches step_name, PyTorch's ProfilerStep#N or a common step
 * name (docs/design.md §4). Every step range tp_find_steps may take passes. */
int tp_step_name_candidate(const char *name, const char *step_name);
void tp_steps_free(tp_steps *s);
/* Packs s's steps in place (packed above; steps freed and NULL). Leaves them as they are
 * when there are none, when they are packed already, or when they cannot be (no memory, or
 * values step_pack.h refuses). */
void tp_steps_pack_in(tp_steps *s);
/* Keeps in slim process p (model.h) `found` (heap-allocated, owned by p from now on): the
 * steps tp_find_steps found with this step name and warm-up in p's file loaded whole.
 * tp_find_steps on p then answers from them for the same name and warm-up (a copy each
 * time). They are packed first (tp_steps_pack_in). step_name must outlive p (the report's
 * options). Writes p only. */
void tp_process_keep_steps(tp_process *p, tp_steps *found, const char *step_name, int warmup);

/* The measured steps of s (those after the warm-up), or NULL when there are none: a run
 * without steps has no array, and even adding 0 to a null pointer is undefined (C11
 * 6.5.6p8), so callers take this instead of s->steps + s->nwarmup. */
static inline const tp_step *tp_steps_measured(const tp_steps *s) {
    return s->nsteps > s->nwarmup ? s->steps + s->nwarmup : NULL;
}

/* An interval of monotonic ns. */
typedef struct tp_span {
    uint64_t s, e;
} tp_span;

/* Length of the union of the spans (sorted in place) inside the steps st[0..n), or in
 * total when st is NULL: time covered at least once, overlaps counted once. */
uint64_t tp_steps_union(tp_span *v, size_t nv, const tp_step *st, size_t n);

/* Sorts spans by start, in place; O(n) when they already are (GPU records are loaded in
 * start order, so most callers pay only the check). */
void tp_spans_sort(tp_span *v, size_t nv);

/* Per step: out[i] (set, not added to) = ns of step i covered at least once by the spans
 * (sorted in place). The spans are merged once, so this costs one sort for any number of
 * steps. st as for tp_steps_overlap. */
void tp_steps_union_each(tp_span *v, size_t nv, const tp_step *st, size_t n, uint64_t *out);

/* Nanoseconds of [s, e) inside the steps st[0..n) (sorted by start, not overlapping). */
uint64_t tp_steps_overlap(const tp_step *st, size_t n, uint64_t s, uint64_t e);
const char *tp_step_source_name(tp_step_source s);

#endif /* TPROF_STEPS_H */
