/*
 * test_config.c — the one table of TRAINPROF_* variables (src/core/config.h): docs/cli.md
 * shows exactly the table's rows, the documented defaults are tprof_config_init's, and
 * tprof_config_from_env parses and clamps as the rows say.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/per_step.h"
#include "trainprof.h"
#include "slurp.h"

/* The rows between the markers of docs/cli.md are the table's, byte for byte. */
static void test_docs_match_table(void **state) {
    (void)state;
    char *doc = slurp(TPROF_SOURCE_DIR "/docs/cli.md");
    assert_non_null(doc);
    const char *begin = strstr(doc, "<!-- BEGIN library variables");
    const char *end = strstr(doc, "<!-- END library variables -->");
    assert_non_null(begin);
    assert_non_null(end);
    begin = strchr(begin, '\n') + 1;
    char *want = NULL;
    size_t want_len = 0;
    FILE *m = open_memstream(&want, &want_len);
    tprof__config_print_markdown(m);
    fclose(m);
    size_t have_len = (size_t)(end - begin);
    if (have_len != want_len || memcmp(begin, want, want_len) != 0)
        fprintf(stderr, "docs/cli.md's table differs from src/core/config.h; it should read:\n"
                        "%s", want);
    assert_int_equal(have_len, want_len);
    assert_memory_equal(begin, want, want_len);
    free(want);
    free(doc);
}

/* Names are unique TRAINPROF_* names; the per-step rows are per_step.h's variables. */
static void test_rows_well_formed(void **state) {
    (void)state;
    for (int i = 0; i < TPROF__OPT_COUNT; i++) {
        const tprof__option *o = tprof__option_row((tprof__opt)i);
        assert_int_equal(strncmp(o->name, "TRAINPROF_", 10), 0);
        assert_true(strlen(o->doc) > 0);
        if (o->max) assert_true(o->min <= o->max);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(o->name, tprof__option_row((tprof__opt)j)->name);
    }
    for (int k = 0; k < TPROF_PER_STEP_N; k++)
        assert_string_equal(tprof__option_row(tprof__per_step_opt(k))->name,
                            tprof__per_step_env(k));
    assert_string_equal(tprof__option_row(TPROF__OPT_SAMPLE_HZ)->name, "TRAINPROF_SAMPLE_HZ");
}

/* The defaults the table documents are the ones a configuration starts from. */
static void test_defaults_documented(void **state) {
    (void)state;
    tprof_config c;
    assert_int_equal(tprof_config_init(&c), TPROF_OK);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_RING_KB)->def, NULL, 10) * 1024,
                     c.ring_bytes);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_MAX_THREADS)->def, NULL, 10),
                     c.max_threads);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_FLUSH_MS)->def, NULL, 10),
                     c.flush_interval_ms);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_MAX_STRINGS)->def, NULL, 10),
                     c.max_strings);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_SAMPLE_HZ)->def, NULL, 10),
                     c.sample_hz);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_NVML_HZ)->def, NULL, 10), c.nvml_hz);
    assert_int_equal(strtoull(tprof__option_row(TPROF__OPT_ENABLE)->def, NULL, 10), c.enabled);
    assert_int_equal(c.log_level, TPROF_LOG_WARN);
    assert_string_equal(tprof__option_row(TPROF__OPT_LOG)->def, "warn");
}

/* Values parsed as the rows say: clamped to the maximum, junk ignored (the default stays). */
static void test_from_env(void **state) {
    (void)state;
    setenv("TRAINPROF_SAMPLE_HZ", "5000", 1);
    setenv("TRAINPROF_NVML_HZ", "250", 1);
    setenv("TRAINPROF_RING_KB", "128", 1);
    setenv("TRAINPROF_MAX_STRINGS", "99999999", 1);
    setenv("TRAINPROF_FLUSH_MS", "-3", 1);
    setenv("TRAINPROF_MAX_THREADS", "12x", 1);
    setenv("TRAINPROF_LOG", "debug", 1);
    setenv("TRAINPROF_ENABLE", "0", 1);
    setenv("TRAINPROF_DIR", "/some/dir", 1);
    setenv("TRAINPROF_RUN_ID", "", 1);
    tprof_config c;
    tprof_config_init(&c);
    assert_int_equal(tprof_config_from_env(&c), TPROF_OK);
    assert_int_equal(c.sample_hz, 1000);
    assert_int_equal(c.nvml_hz, 100);
    assert_int_equal(c.ring_bytes, 131072);
    assert_int_equal(c.max_strings, 16777216);
    assert_int_equal(c.flush_interval_ms, 50);
    assert_int_equal(c.max_threads, 1024);
    assert_int_equal(c.log_level, TPROF_LOG_DEBUG);
    assert_int_equal(c.enabled, 0);
    assert_string_equal(c.output_dir, "/some/dir");
    assert_null(c.run_id);
    setenv("TRAINPROF_LOG", "loud", 1);
    setenv("TRAINPROF_SAMPLE_HZ", "7", 1);
    tprof_config_init(&c);
    tprof_config_from_env(&c);
    assert_int_equal(c.log_level, TPROF_LOG_WARN);
    assert_int_equal(c.sample_hz, 7);
    setenv("TRAINPROF_NO_SIGNALS", "", 1);
    assert_non_null(tprof__env(TPROF__OPT_NO_SIGNALS));
    assert_null(tprof__env_nonempty(TPROF__OPT_NO_SIGNALS));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_match_table),
        cmocka_unit_test(test_rows_well_formed),
        cmocka_unit_test(test_defaults_documented),
        cmocka_unit_test(test_from_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
