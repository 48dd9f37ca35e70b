/* top_parse.c — the Prometheus text format and HTTP/1.x response parsers of `trainprof top`
 * (top_parse.h). Every read is bounds-checked against the buffer's length. */
#define _POSIX_C_SOURCE 200809L
#include "top_parse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_ws(char c) { return c == ' ' || c == '\t'; }
static int is_alpha_(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static size_t skip_ws(const char *p, size_t n, size_t i) {
    while (i < n && is_ws(p[i])) i++;
    return i;
}

/* A value token: a decimal float, or +Inf/-Inf/Inf/NaN (any case). No hex, no "infinity". */
static int parse_value(const char *p, size_t n, double *out) {
    char tok[64];
    if (n == 0 || n >= sizeof tok) return -1;
    memcpy(tok, p, n);
    tok[n] = 0;
    const char *t = tok;
    int neg = 0;
    if (*t == '+' || *t == '-') neg = (*t++ == '-');
    if (!strcasecmp(t, "inf")) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (!strcasecmp(t, "nan") && t == tok) {
        *out = NAN;
        return 0;
    }
    int digits = 0;
    for (const char *c = t; *c; c++) {
        if (is_digit(*c)) digits++;
        else if (*c != '.' && *c != 'e' && *c != 'E' && *c != '+' && *c != '-') return -1;
    }
    if (!digits) return -1;
    char *end = NULL;
    double v = strtod(tok, &end);
    if (!end || *end) return -1;
    *out = v;
    return 0;
}

int tp_prom_parse_line(const char *p, size_t n, tp_prom_sample *out) {
    if (n && p[n - 1] == '\r') n--;
    for (size_t k = 0; k < n; k++)
        if (p[k] == '\0') return -1;
    size_t i = skip_ws(p, n, 0);
    if (i == n || p[i] == '#') return 0;
    memset(out, 0, sizeof *out);
    /* metric name */
    if (!is_alpha_(p[i]) && p[i] != ':') return -1;
    size_t ns = i;
    while (i < n && (is_alpha_(p[i]) || is_digit(p[i]) || p[i] == ':')) i++;
    if (i - ns >= TP_PROM_NAME_MAX) return -1;
    memcpy(out->name, p + ns, i - ns);
    out->name[i - ns] = 0;
    i = skip_ws(p, n, i);
    /* labels */
    if (i < n && p[i] == '{') {
        i++;
        for (;;) {
            i = skip_ws(p, n, i);
            if (i >= n) return -1;
            if (p[i] == '}') {
                i++;
                break;
            }
            if (out->nlabels >= TP_PROM_MAX_LABELS) return -1;
            tp_prom_label *l = &out->labels[out->nlabels];
            if (!is_alpha_(p[i])) return -1;
            size_t ls = i;
            while (i < n && (is_alpha_(p[i]) || is_digit(p[i]))) i++;
            if (i - ls >= TP_PROM_LNAME_MAX) return -1;
            memcpy(l->name, p + ls, i - ls);
            l->name[i - ls] = 0;
            i = skip_ws(p, n, i);
            if (i >= n || p[i] != '=') return -1;
            i = skip_ws(p, n, i + 1);
            if (i >= n || p[i] != '"') return -1;
            i++;
            size_t vl = 0;
            for (;;) {
                if (i >= n) return -1; /* unterminated value */
                char c = p[i++];
                if (c == '"') break;
                if (c == '\\') {
                    if (i >= n) return -1;
                    char e = p[i++];
                    c = e == 'n' ? '\n' : e; /* \\ \" \n; others kept as the escaped byte */
                }
                if (vl + 1 >= TP_PROM_LVALUE_MAX) return -1;
                l->value[vl++] = c;
            }
            l->value[vl] = 0;
            out->nlabels++;
            i = skip_ws(p, n, i);
            if (i < n && p[i] == ',') {
                i++;
                continue;
            }
            if (i < n && p[i] == '}') {
                i++;
                break;
            }
            return -1;
        }
    }
    /* value */
    i = skip_ws(p, n, i);
    size_t vs = i;
    if (!is_ws(p[vs - 1]) && p[vs - 1] != '}') return -1; /* name and value run together */
    while (i < n && !is_ws(p[i])) i++;
    if (parse_value(p + vs, i - vs, &out->value) != 0) return -1;
    /* optional timestamp (ms) */
    i = skip_ws(p, n, i);
    if (i < n) {
        size_t ts = i;
        if (p[i] == '-' || p[i] == '+') i++;
        size_t ds = i;
        while (i < n && is_digit(p[i])) i++;
        if (i == ds || i - ts > 19) return -1;
        char tb[24];
        memcpy(tb, p + ts, i - ts);
        tb[i - ts] = 0;
        out->timestamp = strtoll(tb, NULL, 10);
        out->has_timestamp = 1;
        i = skip_ws(p, n, i);
        if (i != n) return -1;
    }
    return 1;
}

void tp_prom_parse(const char *buf, size_t len, tp_prom_fn fn, void *arg, tp_prom_stats *st) {
    tp_prom_stats local = {0};
    tp_prom_sample *s = malloc(sizeof *s);
    if (!s) return;
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - buf) : len;
        const char *line = buf + i;
        size_t n = e - i;
        int blank = 1;
        for (size_t k = 0; k < n && blank; k++)
            if (!is_ws(line[k]) && line[k] != '\r') blank = 0;
        if (!blank) {
            local.lines++;
            int r = tp_prom_parse_line(line, n, s);
            if (r > 0) {
                local.samples++;
                if (fn) fn(s, arg);
            } else if (r < 0) {
                local.bad++;
            }
        }
        i = e + 1;
    }
    free(s);
    if (st) *st = local;
}

const char *tp_prom_get_label(const tp_prom_sample *s, const char *name) {
    for (int k = 0; k < s->nlabels && k < TP_PROM_MAX_LABELS; k++)
        if (!strcmp(s->labels[k].name, name)) return s->labels[k].value;
    return NULL;
}

/* ------------------------------------------------------------------ HTTP response */

static void seterr(char *err, size_t errlen, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

/* case-insensitive search for header `name` in the header block h[0..n): its value */
static int header_value(const char *h, size_t n, const char *name, const char **v, size_t *vl) {
    size_t nl = strlen(name);
    size_t i = 0;
    while (i < n) {
        const char *e = memchr(h + i, '\n', n - i);
        size_t le = e ? (size_t)(e - h) : n;
        if (le - i > nl && h[i + nl] == ':' && !strncasecmp(h + i, name, nl)) {
            size_t a = i + nl + 1, b = le;
            while (a < b && is_ws(h[a])) a++;
            while (b > a && (is_ws(h[b - 1]) || h[b - 1] == '\r')) b--;
            *v = h + a;
            *vl = b - a;
            return 1;
        }
        i = le + 1;
    }
    return 0;
}

static int parse_hex(const char *p, size_t n, size_t *out) {
    size_t v = 0;
    size_t i = 0, d = 0;
    for (; i < n; i++) {
        char c = p[i];
        int x;
        if (c >= '0' && c <= '9') x = c - '0';
        else if (c >= 'a' && c <= 'f') x = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x = c - 'A' + 10;
        else break;
        if (v > ((size_t)-1 >> 4)) return -1;
        v = v * 16 + (size_t)x;
        d++;
    }
    if (!d) return -1;
    /* chunk extensions (;...) and trailing blanks are allowed */
    for (; i < n; i++)
        if (p[i] == ';') break;
        else if (!is_ws(p[i]) && p[i] != '\r') return -1;
    *out = v;
    return 0;
}

int tp_http_parse(char *buf, size_t len, tp_http_resp *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0) {
        seterr(err, errlen, "not an HTTP response");
        return -1;
    }
    if (buf[8] != ' ' || !is_digit(buf[9]) || !is_digit(buf[10]) || !is_digit(buf[11])) {
        seterr(err, errlen, "malformed HTTP status line");
        return -1;
    }
    r->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    /* end of headers: \r\n\r\n or \n\n */
    size_t hend = 0, bstart = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n') {
            hend = i + 1;
            bstart = i + 2;
            break;
        }
        if (buf[i] == '\n' && buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n') {
            hend = i + 1;
            bstart = i + 3;
            break;
        }
    }
    if (!bstart) {
        seterr(err, errlen, "truncated HTTP response (no end of headers)");
        return -1;
    }
    const char *v;
    size_t vl;
    char *body = buf + bstart;
    size_t blen = len - bstart;
    if (header_value(buf, hend, "Transfer-Encoding", &v, &vl) && vl >= 7 &&
        !strncasecmp(v + vl - 7, "chunked", 7)) {
        size_t in = 0, out = 0;
        for (;;) {
            const char *e = in < blen ? memchr(body + in, '\n', blen - in) : NULL;
            if (!e) {
                seterr(err, errlen, "truncated chunked body");
                return -1;
            }
            size_t le = (size_t)(e - body);
            size_t csz;
            if (parse_hex(body + in, le - in, &csz) != 0) {
                seterr(err, errlen, "malformed chunk size");
                return -1;
            }
            in = le + 1;
            if (csz == 0) break;
            if (csz > blen - in) {
                seterr(err, errlen, "truncated chunked body");
                return -1;
            }
            memmove(body + out, body + in, csz);
            out += csz;
            in += csz;
            if (in < blen && body[in] == '\r') in++;
            if (in < blen && body[in] == '\n') in++;
        }
        blen = out;
    } else if (header_value(buf, hend, "Content-Length", &v, &vl)) {
        size_t cl = 0;
        if (vl == 0 || vl > 18) {
            seterr(err, errlen, "malformed Content-Length");
            return -1;
        }
        for (size_t k = 0; k < vl; k++) {
            if (!is_digit(v[k])) {
                seterr(err, errlen, "malformed Content-Length");
                return -1;
            }
            cl = cl * 10 + (size_t)(v[k] - '0');
        }
        if (cl > blen) {
            seterr(err, errlen, "truncated HTTP body (shorter than Content-Length)");
            return -1;
        }
        blen = cl;
    }
    r->body = body;
    r->body_len = blen;
    return 0;
}
