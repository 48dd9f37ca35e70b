/*
 * metrics_check.h — what the live-metrics tests (test_metrics_registry.c,
 * test_metrics_endpoint.c) share. Single-threaded: called from a test or from the forked
 * child of an endpoint case, never from two threads at once.
 */
#ifndef TPROF_TESTS_METRICS_CHECK_H
#define TPROF_TESTS_METRICS_CHECK_H

#include <stdio.h>
#include <unistd.h>

#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);   \
            _exit(1);                                                               \
        }                                                                           \
    } while (0)

/* U+FFFD, what an invalid byte of a label value becomes */
#define FFFD "\xEF\xBF\xBD"

/* The test's scratch directory, made by fresh_dir: $TPROF_TEST_TMP (else /tmp)
 * /metrics-TAG-XXXXXX. */
extern char g_dir[512];
void fresh_dir(const char *tag);

/* The value of the sample line starting with `prefix` (name{labels} up to the space); NAN
 * without one. */
double sample(const char *text, const char *prefix);

/* Checks `text` against the Prometheus text format 0.0.4 (and OpenMetrics' `# EOF`): NULL,
 * or a message naming the first bad line (a static buffer). */
const char *exposition_error(const char *text);

/* exposition_error, then `promtool check metrics` when promtool is installed (the scrape is
 * written to g_dir/scrape.txt); a failure ends the process with CHECK. */
void promtool_check(const char *text);

#endif
