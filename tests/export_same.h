/*
 * export_same.h — the check that a run's exports read slim (tp_run_load_slim, memos filled by
 * tp_export_fill_memos, each rank file read again whole while it is written) are those of
 * the run loaded whole, byte for byte: the merged Chrome trace, each rank's file and the
 * Perfetto trace, with no selection and with --ranks, --steps and --time selections. For the
 * tests of the exporters, on each run they build (cmocka asserts; a difference is printed).
 */
#ifndef TPROF_TESTS_EXPORT_SAME_H
#define TPROF_TESTS_EXPORT_SAME_H

#include <stddef.h>

/* Exports the run of `ops` (as tp_run_load_list takes them) both ways under each selection
 * and asserts equal bytes and return codes. step_name: the exports' --step-name (NULL: the
 * default rule). Returns how many exports were compared (0 when the run cannot be read). */
size_t export_same(const char *const *ops, size_t nops, const char *step_name);

#endif
