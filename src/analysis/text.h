/*
 * text.h — UTF-8 text for the reports (text.c): every byte the text and JSON reports write
 * is valid UTF-8 whatever the names held, and a name cut to fit a column is cut between
 * characters and ends with a visible mark.
 *
 * Validity follows RFC 3629 §3-4 (no overlong forms, no surrogates, nothing above
 * U+10FFFF); an invalid byte becomes U+FFFD, the replacement character (Unicode §3.9, "U+FFFD
 * Substitution of Maximal Subparts", one per byte here). Columns follow UAX #11 (East Asian
 * Width): wide and fullwidth characters take two columns, combining marks none.
 *
 * None of these allocate except tp_json_clean_utf8 (which replaces strings in place) and
 * tp_utf8_write (a copy only where the input is invalid); none keep state: all are safe to
 * call from any thread on distinct arguments.
 */
#ifndef TPROF_TEXT_H
#define TPROF_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* The mark that ends a cut name: U+2026 HORIZONTAL ELLIPSIS (one column, 3 bytes). */
#define TP_TEXT_CUT "\xE2\x80\xA6"

/* Decodes the character at s (n > 0 bytes available): returns its length in bytes and its
 * code point in *cp; an invalid or truncated sequence counts as one byte with *cp = U+FFFD
 * and *bad = 1 (else 0). */
size_t tp_utf8_next(const char *s, size_t n, uint32_t *cp, int *bad);

/* Columns code point cp takes in a terminal (UAX #11): 0, 1 or 2. */
int tp_text_width(uint32_t cp);

/* Writes s to f as at most max_cols columns (max_cols < 0: no limit), valid UTF-8: invalid
 * bytes become U+FFFD, control characters (below 0x20, 0x7f) '?', so a name cannot disturb
 * the terminal. A string that does not fit is cut at a character boundary and ends with
 * TP_TEXT_CUT, within max_cols. Then pads with spaces up to `pad` columns. Returns the
 * columns written. NULL s writes nothing. */
int tp_text_put(FILE *f, const char *s, int max_cols, int pad);

/* The same as tp_text_put into buf (n >= 4 bytes), always NUL-terminated: cut with the mark
 * when it needs more than max_cols columns or more than n - 1 bytes. Returns buf. */
const char *tp_text_fit(char *buf, size_t n, const char *s, int max_cols);

/* Writes len bytes to f with every invalid byte replaced by U+FFFD (control characters are
 * kept: this guards whole documents, newlines and colour sequences included). Returns TPROF_OK
 * (0), or TPROF_ERR_IO when a write failed (errno says why; part may have been written). */
int tp_utf8_write(FILE *f, const char *buf, size_t len);

/* Runs fn(out, ctx) into memory, then writes what it printed to f through tp_utf8_write,
 * so that a whole text document is valid UTF-8 whatever its parts print; without memory for
 * the buffer, fn writes to f directly. Returns fn's result (TPROF_OK or an error
 * code), TPROF_ERR_NO_MEMORY when the buffer could not be completed, TPROF_ERR_IO when
 * writing f failed. f is flushed. */
int tp_utf8_render(FILE *f, int (*fn)(FILE *out, const void *ctx), const void *ctx);

/* The short form of a C++ kernel name, for a column of a table (CUPTI gives demangled names
 * hundreds of characters long, and PyTorch's elementwise kernels differ only deep inside
 * their template arguments): the return type ("void "), namespace qualifiers ("at::native::",
 * "(anonymous namespace)::") and a trailing parameter list are dropped into buf (n bytes,
 * always NUL-terminated; the name cut to n - 1 bytes when longer). */
const char *tp_kernel_simplify(char *buf, size_t n, const char *name);

/* Puts the simplified forms of n names (tp_kernel_simplify, each in a buffer of `size`
 * bytes of out, n x size bytes) so that rows that differ stay apart within `cols` columns:
 * a form that fits is whole; one that does not and whose first cols - 1 characters tell it
 * from every other row's is cut there (TP_TEXT_CUT); otherwise it keeps its start, then,
 * after a cut mark, the part around the first character where it differs from the row most
 * like it, and ends with a cut mark when more follows. Different names whose simplified forms
 * are equal (one kernel name in two namespaces, overloads) are not simplified, bar a leading
 * "void ", so that their rows stay apart; equal names stay equal. O(n log n) comparisons.
 * size >= 4 * cols + 1. */
void tp_kernel_short_names(const char *const *names, size_t n, int cols, char *out, size_t size);

/* Replaces, in place, every string value and key of the JSON tree that is not valid UTF-8 by
 * its cleaned form (invalid bytes as U+FFFD), so that cJSON never prints invalid UTF-8. */
void tp_json_clean_utf8(cJSON *root);

#endif /* TPROF_TEXT_H */
