/*
 * test_idmap.c — ids numbered in the order they came (src/analysis/idmap.h): every id gets
 * the number of its first add and keeps it through the table's growth, an absent id is not
 * found, and ids crafted alike in their low bits (multiples of 2^32, of an odd constant's
 * inverse) are numbered as any others are.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "analysis/idmap.h"

/* n ids id(k), k < n, added twice over: numbered k, found, the absent ones not. */
static void numbered(uint64_t (*id)(uint64_t), uint64_t n) {
    tp_idmap m;
    tp_idmap_init(&m);
    assert_int_equal(tp_idmap_find(&m, id(0)), SIZE_MAX);
    int made;
    for (int round = 0; round < 2; round++)
        for (uint64_t k = 0; k < n; k++) {
            assert_int_equal(tp_idmap_add(&m, id(k), &made), k);
            assert_int_equal(made, round == 0);
        }
    assert_int_equal(m.n, n);
    for (uint64_t k = 0; k < n; k++) {
        assert_int_equal(tp_idmap_find(&m, id(k)), k);
        assert_true(m.ids[k] == id(k));
    }
    assert_int_equal(tp_idmap_find(&m, id(n)), SIZE_MAX);
    assert_true(2 * m.n <= m.cap); /* at most half full */
    tp_idmap_free(&m);
    assert_int_equal(m.n, 0);
    assert_int_equal(tp_idmap_find(&m, id(0)), SIZE_MAX);
}

static uint64_t plain(uint64_t k) { return k + 1; }
static uint64_t high(uint64_t k) { return (k + 1) << 32; }
static uint64_t inverse(uint64_t k) { return (k + 1) * 0x9e3779b97f4a7c15ull; }
static uint64_t zero_too(uint64_t k) { return k; } /* id 0 is an id like any other */

static void test_numbered(void **state) {
    (void)state;
    numbered(plain, 100000);
    numbered(high, 100000);
    numbered(inverse, 100000);
    numbered(zero_too, 1000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
