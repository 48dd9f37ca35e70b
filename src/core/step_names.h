/*
 * step_names.h — the range names that mark a training step when the user names none
 * (docs/design.md §4): shared by the report's step rule (analysis/steps.c) and the
 * kernel-capture window, which counts steps while the job runs (core/kwindow.c), so both number
 * the same steps.
 */
#ifndef TPROF_STEP_NAMES_H
#define TPROF_STEP_NAMES_H

/* PyTorch profiler's per-step ranges, as a glob */
#define TPROF_PROFILER_STEP_GLOB "ProfilerStep#*"

/* common names, in the order the report tries them */
#define TPROF_DEFAULT_STEP_NAMES "train_step", "training_step", "step", "iteration", "train_iter"

#include <fnmatch.h>
#include <string.h>

/* A range name against a step pattern: a glob when it holds *, ? or [, else exact. */
static inline int tprof__step_name_matches(const char *name, const char *pat) {
    if (strpbrk(pat, "*?[")) return fnmatch(pat, name, 0) == 0;
    return strcmp(name, pat) == 0;
}

#endif /* TPROF_STEP_NAMES_H */
