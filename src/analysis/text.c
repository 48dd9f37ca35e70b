/*
 * text.c — valid UTF-8 and column cuts for the reports (text.h has the rules and sources).
 *
 * A report prints names that come from the program (ranges, threads, hosts, communicators)
 * in fixed-width columns. Cutting them by bytes can split a character, and a terminal, a log
 * collector or a JSON parser downstream then sees invalid UTF-8; cutting silently hides that
 * the name is longer. Everything here works per character, never per byte.
 */
#define _GNU_SOURCE
#include "analysis/text.h"
#include "analysis/alloc.h"

#include "trainprof.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

size_t tp_utf8_next(const char *str, size_t n, uint32_t *cp, int *bad) {
    const unsigned char *p = (const unsigned char *)str;
    unsigned c = p[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    int ok = len > 0 && len <= n;
    for (size_t k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
    /* RFC 3629 §4: the shortest form only, no surrogates, nothing above U+10FFFF */
    if (ok && len == 2 && c < 0xC2) ok = 0;
    if (ok && len == 3 && c == 0xE0 && p[1] < 0xA0) ok = 0;
    if (ok && len == 3 && c == 0xED && p[1] >= 0xA0) ok = 0;
    if (ok && len == 4 && c == 0xF0 && p[1] < 0x90) ok = 0;
    if (ok && len == 4 && (c > 0xF4 || (c == 0xF4 && p[1] >= 0x90))) ok = 0;
    if (!ok) {
        *cp = 0xFFFD;
        *bad = 1;
        return 1;
    }
    *bad = 0;
    switch (len) {
    case 1: *cp = c; break;
    case 2: *cp = (c & 0x1Fu) << 6 | (p[1] & 0x3Fu); break;
    case 3: *cp = (c & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu); break;
    default:
        *cp = (c & 0x07u) << 18 | (p[1] & 0x3Fu) << 12 | (p[2] & 0x3Fu) << 6 | (p[3] & 0x3Fu);
    }
    return len;
}

/* UAX #11's principal East Asian Wide and Fullwidth blocks (and emoji with a wide default
 * presentation), and the combining blocks that take no column of their own. */
static const struct { uint32_t lo, hi; } wide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x2E80, 0x303E},
    {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
    {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},
    {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4},
    {0x17000, 0x18AFF}, {0x1B000, 0x1B2FF}, {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF},
    {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};
static const struct { uint32_t lo, hi; } zero[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},
    {0x200B, 0x200F}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xE0100, 0xE01EF},
};

int tp_text_width(uint32_t cp) {
    if (cp < 0x300) return 1;
    for (size_t i = 0; i < sizeof zero / sizeof *zero; i++)
        if (cp >= zero[i].lo && cp <= zero[i].hi) return 0;
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        if (cp >= wide[i].lo && cp <= wide[i].hi) return 2;
    return 1;
}

/* One character as shown: its bytes (the replacement or '?' when it is not shown as is) and
 * its columns. */
typedef struct shown {
    const char *bytes;
    size_t len;
    int cols;
} shown;

static shown show(const char *s, size_t n, size_t *adv) {
    uint32_t cp;
    int bad;
    size_t k = tp_utf8_next(s, n, &cp, &bad);
    *adv = k;
    if (bad) return (shown){REPLACEMENT, 3, 1};
    if (cp < 0x20 || cp == 0x7f) return (shown){"?", 1, 1};
    return (shown){s, k, tp_text_width(cp)};
}

/* Columns and bytes of s as shown, whole. */
static void measure(const char *s, size_t n, int *cols, size_t *bytes) {
    *cols = 0;
    *bytes = 0;
    for (size_t i = 0, adv; i < n; i += adv) {
        shown c = show(s + i, n - i, &adv);
        *cols += c.cols;
        *bytes += c.len;
    }
}

/* Writes into out (or counts when out is NULL) the prefix of s that fits max_cols columns
 * and room bytes, with the mark when cut. Returns the bytes and sets *cols. */
static size_t render(char *out, const char *s, int max_cols, size_t room, int *cols) {
    size_t n = strlen(s), bytes;
    int total;
    measure(s, n, &total, &bytes);
    int cut = (max_cols >= 0 && total > max_cols) || bytes > room;
    /* the mark takes one column and its 3 bytes: leave room for it when cutting */
    int col_room = max_cols < 0 ? total : cut ? max_cols - 1 : max_cols;
    size_t byte_room = cut ? (room >= 3 ? room - 3 : 0) : room;
    size_t o = 0;
    int c = 0;
    for (size_t i = 0, adv; i < n; i += adv) {
        shown ch = show(s + i, n - i, &adv);
        if (c + ch.cols > col_room || o + ch.len > byte_room) break;
        if (out) memcpy(out + o, ch.bytes, ch.len);
        o += ch.len;
        c += ch.cols;
    }
    if (cut && col_room >= 0 && room >= 3 && (max_cols < 0 || max_cols >= 1)) {
        if (out) memcpy(out + o, TP_TEXT_CUT, 3);
        o += 3;
        c += 1;
    }
    *cols = c;
    return o;
}

int tp_text_put(FILE *f, const char *s, int max_cols, int pad) {
    int cols = 0;
    if (s) {
        size_t n = strlen(s), room = (n + 1) * 3; /* every byte may become U+FFFD */
        char stack[512];
        char *buf = room <= sizeof stack ? stack : tp_malloc(room);
        if (buf) {
            size_t len = render(buf, s, max_cols, room, &cols);
            fwrite(buf, 1, len, f);
            if (buf != stack) free(buf);
        }
    }
    for (int c = cols; c < pad; c++) fputc(' ', f);
    return cols;
}

const char *tp_text_fit(char *buf, size_t n, const char *s, int max_cols) {
    int cols;
    size_t len = render(buf, s ? s : "", max_cols, n - 1, &cols);
    buf[len] = 0;
    return buf;
}

int tp_utf8_write(FILE *f, const char *buf, size_t len) {
    size_t run = 0; /* start of the valid bytes not yet written */
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int bad;
        size_t k = tp_utf8_next(buf + i, len - i, &cp, &bad);
        if (bad) {
            if (i > run && fwrite(buf + run, 1, i - run, f) != i - run) return TPROF_ERR_IO;
            if (fwrite(REPLACEMENT, 1, 3, f) != 3) return TPROF_ERR_IO;
            run = i + 1;
        }
        i += k;
    }
    if (len > run && fwrite(buf + run, 1, len - run, f) != len - run) return TPROF_ERR_IO;
    return TPROF_OK;
}

/* The rendering's bytes, grown with tp_realloc: open_memstream's growth is glibc's own, whose
 * failure is neither counted nor, at its close, reported (the text then came out empty or
 * cut without an error). */
typedef struct membuf {
    char *b;
    size_t n, cap;
} membuf;

static ssize_t mem_write(void *c, const char *s, size_t n) {
    membuf *m = c;
    if (n > m->cap - m->n) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap - m->n < n) cap *= 2;
        char *g = tp_realloc(m->b, cap);
        if (!g) return -1; /* the stream's error: the rendering is not written */
        m->b = g;
        m->cap = cap;
    }
    memcpy(m->b + m->n, s, n);
    m->n += n;
    return (ssize_t)n;
}

int tp_utf8_render(FILE *f, int (*fn)(FILE *out, const void *ctx), const void *ctx) {
    membuf m = {0};
    FILE *mf = fopencookie(&m, "w", (cookie_io_functions_t){NULL, mem_write, NULL, NULL});
    if (!mf) return fn(f, ctx); /* no memory: unguarded, still cut right */
    int rc = fn(mf, ctx);
    if ((fflush(mf) != 0 || ferror(mf)) && rc == TPROF_OK) rc = TPROF_ERR_NO_MEMORY;
    fclose(mf);
    if (rc == TPROF_OK && m.b && tp_utf8_write(f, m.b, m.n) != TPROF_OK) rc = TPROF_ERR_IO;
    free(m.b);
    fflush(f);
    if (ferror(f)) rc = TPROF_ERR_IO;
    return rc;
}

static int valid(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad;
        i += tp_utf8_next(s + i, n - i, &cp, &bad);
        if (bad) return 0;
    }
    return 1;
}

/* s with invalid bytes as U+FFFD, in memory from cJSON's allocator; NULL when out of memory */
static char *cleaned(const char *s) {
    size_t n = strlen(s), o = 0;
    char *d = cJSON_malloc(3 * n + 1);
    if (!d) return NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad;
        size_t k = tp_utf8_next(s + i, n - i, &cp, &bad);
        memcpy(d + o, bad ? REPLACEMENT : s + i, bad ? 3 : k);
        o += bad ? 3 : k;
        i += k;
    }
    d[o] = 0;
    return d;
}

static void clean_item(cJSON *it) {
    if (it->string && !(it->type & cJSON_StringIsConst) && !valid(it->string)) {
        char *k = cleaned(it->string);
        if (k) {
            cJSON_free(it->string);
            it->string = k;
        }
    }
    if (cJSON_IsString(it) && it->valuestring && !(it->type & cJSON_IsReference) &&
        !valid(it->valuestring)) {
        char *v = cleaned(it->valuestring);
        if (v) {
            cJSON_free(it->valuestring);
            it->valuestring = v;
        }
    }
    if (!(it->type & cJSON_IsReference))
        for (cJSON *c = it->child; c; c = c->next) clean_item(c);
}

void tp_json_clean_utf8(cJSON *root) {
    if (root) clean_item(root);
}

const char *tp_kernel_simplify(char *buf, size_t n, const char *name) {
    if (!n) return buf;
    size_t o = 0;
    const char *s = name ? name : "";
    if (!strncmp(s, "void ", 5)) s += 5;
    while (*s && o + 1 < n) {
        if (!strncmp(s, "(anonymous namespace)::", 23)) {
            s += 23;
            continue;
        }
        /* an identifier followed by "::" is a qualifier: skip both */
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *e = s;
            while (isalnum((unsigned char)*e) || *e == '_') e++;
            if (e[0] == ':' && e[1] == ':' && (o == 0 || !isalnum((unsigned char)buf[o - 1]))) {
                s = e + 2;
                continue;
            }
            while (s < e && o + 1 < n) buf[o++] = *s++;
            continue;
        }
        buf[o++] = *s++;
    }
    buf[o] = 0;
    /* a trailing parameter list "(...)" at the top level (not inside <>) */
    if (o && buf[o - 1] == ')') {
        int depth = 0, angle = 0;
        for (size_t i = o; i-- > 0;) {
            char c = buf[i];
            if (c == ')') depth++;
            else if (c == '(' && --depth == 0) {
                for (size_t k = 0; k < i; k++) angle += buf[k] == '<' ? 1 : buf[k] == '>' ? -1 : 0;
                if (angle == 0 && i > 0) buf[i] = 0;
                break;
            }
        }
    }
    return buf;
}

/* columns of the first `bytes` bytes of s (UTF-8) */
static int cols_of(const char *s, size_t bytes) {
    int c = 0;
    for (size_t i = 0; i < bytes;) {
        uint32_t cp;
        int bad;
        i += tp_utf8_next(s + i, bytes - i, &cp, &bad);
        c += bad ? 1 : tp_text_width(cp);
    }
    return c;
}

/* the byte offset of the character at or before `at` in s (never inside a sequence) */
static size_t char_start(const char *s, size_t at) {
    while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80) at--;
    return at;
}

typedef struct {
    const char *s; /* the row's form in out */
    size_t i;      /* the row */
} srow;

static int by_form(const void *a, const void *b) {
    return strcmp(((const srow *)a)->s, ((const srow *)b)->s);
}

static const char *raw_name(const char *const *names, size_t i) {
    return names[i] ? names[i] : "";
}

static size_t shared_prefix(const char *a, const char *b) {
    size_t c = 0;
    while (a[c] && a[c] == b[c]) c++;
    return c;
}

/* r: the n rows sorted by form. The rows of [a, b) have one form; the end of that run. */
static size_t run_end(const srow *r, size_t n, size_t a) {
    size_t b = a + 1;
    while (b < n && !strcmp(r[b].s, r[a].s)) b++;
    return b;
}

void tp_kernel_short_names(const char *const *names, size_t n, int cols, char *out, size_t size) {
    if (!out || !n || !size) return; /* nothing to name (and gcc -O3 then sees out non-null) */
    if (cols < 8) cols = 8;
    for (size_t i = 0; i < n; i++) tp_kernel_simplify(out + i * size, size, names[i]);
    /* the longest prefix each shares with another, different row: before any is shortened */
    size_t *common = tp_calloc(n ? n : 1, sizeof *common);
    srow *r = tp_malloc((n ? n : 1) * sizeof *r);
    if (!common || !r) {
        free(common);
        free(r);
        for (size_t i = 0; i < n; i++) {
            char buf[1024];
            tp_text_fit(buf, sizeof buf, out + i * size, cols);
            snprintf(out + i * size, size, "%s", buf);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) r[i] = (srow){out + i * size, i};
    qsort(r, n, sizeof *r, by_form);
    /* different kernels that simplify alike (the same name in two namespaces, overloads that
     * differ in their parameters only) keep their whole names, bar "void ", so that their
     * rows stay apart */
    int undone = 0;
    for (size_t a = 0; a < n;) {
        size_t b = run_end(r, n, a);
        int differ = 0;
        for (size_t k = a + 1; k < b && !differ; k++)
            differ = strcmp(raw_name(names, r[k].i), raw_name(names, r[a].i)) != 0;
        for (size_t k = a; differ && k < b; k++) {
            const char *raw = raw_name(names, r[k].i);
            snprintf(out + r[k].i * size, size, "%s", strncmp(raw, "void ", 5) ? raw : raw + 5);
            undone = 1;
        }
        a = b;
    }
    if (undone) qsort(r, n, sizeof *r, by_form);
    /* in sorted order the different row most like a row is the nearest one of another form,
     * before or after its run: n log n, not n^2, for thousands of rows alike in their start */
    for (size_t a = 0; a < n;) {
        size_t b = run_end(r, n, a), c = 0;
        if (a > 0) c = shared_prefix(r[a].s, r[a - 1].s);
        if (b < n) {
            size_t d = shared_prefix(r[a].s, r[b].s);
            if (d > c) c = d;
        }
        for (size_t k = a; k < b; k++) common[r[k].i] = c;
        a = b;
    }
    free(r);
    for (size_t i = 0; i < n; i++) {
        char *s = out + i * size;
        size_t len = strlen(s);
        if (cols_of(s, len) <= cols) continue;
        char buf[1024];
        if (cols_of(s, common[i]) < cols - 1) {
            tp_text_fit(buf, sizeof buf, s, cols);
        } else {
            /* the start (the kernel and its first arguments), then from a little before the
             * first difference */
            size_t head = char_start(s, 28 < len ? 28 : len);
            size_t from = char_start(s, common[i] > 12 ? common[i] - 12 : 0);
            if (from < head) from = head;
            int room = cols - cols_of(s, head) - 1;
            memcpy(buf, s, head);
            memcpy(buf + head, TP_TEXT_CUT, sizeof TP_TEXT_CUT - 1);
            size_t at = head + sizeof TP_TEXT_CUT - 1;
            tp_text_fit(buf + at, sizeof buf - at, s + from, room);
        }
        snprintf(s, size, "%s", buf);
    }
    free(common);
}
