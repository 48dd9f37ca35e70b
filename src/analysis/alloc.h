/*
 * alloc.h — the analyses' allocations, counted when they are refused. An analysis that runs
 * out of memory keeps what it computed and goes on (a report is still made), so a figure may
 * be missing or made of part of the records; the report must say so rather than print it as a
 * result (docs/design.md §6). Every allocation of src/analysis and of the HTML report goes
 * through these, which count a refusal per thread and per process: a rank section, computed on
 * one thread, compares its thread's count before and after (report.c), the run-level analyses
 * theirs, and the command the process's (cli/common.c).
 *
 * Same contracts as malloc, calloc, realloc and strdup (the C standard, POSIX), errno ENOMEM
 * on a refusal; a request of 0 bytes that gets NULL is not counted. Thread safe. Cost: a
 * relaxed load of a variable only tests write (tp_alloc_fail_at) and a predictable branch on
 * the returned pointer; a refusal adds a thread-local and a relaxed atomic increment.
 */
#ifndef TPROF_ANALYSIS_ALLOC_H
#define TPROF_ANALYSIS_ALLOC_H

#include <stddef.h>

void *tp_malloc(size_t n);
void *tp_calloc(size_t n, size_t size);
void *tp_realloc(void *p, size_t n);
char *tp_strdup(const char *s);

/* Allocations refused to the calling thread since it started. */
unsigned long tp_nomem_thread(void);
/* Counts a refusal that code outside these functions met (the rank-file reader's, a
 * formatter's), as if one of these had been refused. */
void tp_nomem_note(void);
/* Sets the calling thread's count back to n (a value tp_nomem_thread gave): a job run on a
 * caller's thread that says its own refusals hides them from the caller's count. */
void tp_nomem_thread_set(unsigned long n);
/* Allocations refused to any thread of the process since it started. */
unsigned long tp_nomem_process(void);

/* The note of a rank whose section ran out of memory (tp_rank_result.no_memory), and of the
 * run whose load or run-level analyses did (tp_run_results.no_memory, "run"."note"). */
#define TP_SECTION_NO_MEMORY                                                                 \
    "memory ran out while this rank's section was computed: a figure of it may be missing, " \
    "zero or made of part of the records (run the report where more memory is free)"
#define TP_RUN_NO_MEMORY                                                                     \
    "memory ran out while the run was loaded or compared across ranks: a figure or finding "  \
    "may be missing, zero or made of part of the records (run the report where more "         \
    "memory is free)"

/* cJSON_AddItemToObject and cJSON_AddItemToArray for the report's nodes. cJSON's leave an
 * item it could not add (no memory for its key) with the caller, and every maker of a node
 * fills it after adding it: freeing it there would be a use after free, and the caller
 * holds no other reference to free it with. These add it, or else keep it on a list of the
 * process's until the process ends (linking it there allocates nothing), and return whether
 * it was added. Thread safe. NULL item: 0, nothing kept. */
struct cJSON;
int tp_json_item_to_object(struct cJSON *o, const char *key, struct cJSON *item);
int tp_json_item_to_array(struct cJSON *a, struct cJSON *item);

/* cJSON's allocations (the report document, its sections) counted as these are: sets
 * cJSON_InitHooks, which is process-wide in libcjson, so only a program that owns all of its
 * cJSON use calls it (the trainprof command, the tests). */
void tp_alloc_json_hooks(void);

/* Tests only: the k-th allocation counted from now (k >= 1; over all threads, in the order
 * they come: deterministic where one thread allocates at a time, as a report made with one
 * section thread) is refused, as if memory had run out; k = 0 refuses none. Returns the
 * allocations counted since the previous call (counted only while k != 0: arm with ULONG_MAX
 * to size a sweep). Production code never calls it. */
unsigned long tp_alloc_fail_at(unsigned long k);

#endif
