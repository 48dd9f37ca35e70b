/*
 * pb.c — the Protocol Buffers encoder of pb.h (wire format:
 * https://protobuf.dev/programming-guides/encoding/).
 */
#include "export/pb.h"

#include <stdlib.h>
#include <string.h>

#include "common/varint.h"
#include "trainprof.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

size_t tp_pb_varint(uint8_t out[10], uint64_t v) { return tp_varint_put(out, v); }

void tp_pb_reset(tp_pb *b) {
    b->len = 0;
    b->depth = 0;
    b->err = 0;
}

void tp_pb_free(tp_pb *b) {
    free(b->buf);
    memset(b, 0, sizeof *b);
}

/* Room for `n` more bytes; 0, or -1 with err set. */
static int reserve(tp_pb *b, size_t n) {
    if (b->err) return -1;
    if (b->len + n <= b->cap) return 0;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->len + n) nc *= 2;
    uint8_t *nb = realloc(b->buf, nc);
    if (!nb) {
        b->err = 1;
        return -1;
    }
    b->buf = nb;
    b->cap = nc;
    return 0;
}

static void put_varint(tp_pb *b, uint64_t v) {
    if (reserve(b, 10)) return;
    b->len += tp_pb_varint(b->buf + b->len, v);
}

static void put_tag(tp_pb *b, uint32_t field, unsigned wt) {
    put_varint(b, (uint64_t)field << 3 | wt);
}

void tp_pb_uint(tp_pb *b, uint32_t field, uint64_t v) {
    put_tag(b, field, WT_VARINT);
    put_varint(b, v);
}

void tp_pb_int(tp_pb *b, uint32_t field, int64_t v) { tp_pb_uint(b, field, (uint64_t)v); }

void tp_pb_fixed64(tp_pb *b, uint32_t field, uint64_t v) {
    put_tag(b, field, WT_I64);
    if (reserve(b, 8)) return;
    for (int i = 0; i < 8; i++) b->buf[b->len++] = (uint8_t)(v >> (8 * i));
}

void tp_pb_double(tp_pb *b, uint32_t field, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u); /* binary64 on every platform this builds for */
    tp_pb_fixed64(b, field, u);
}

void tp_pb_bytes(tp_pb *b, uint32_t field, const void *p, size_t n) {
    put_tag(b, field, WT_LEN);
    put_varint(b, n);
    if (!n || reserve(b, n)) return;
    memcpy(b->buf + b->len, p, n);
    b->len += n;
}

void tp_pb_string(tp_pb *b, uint32_t field, const char *s) { tp_pb_bytes(b, field, s, strlen(s)); }

void tp_pb_begin(tp_pb *b, uint32_t field) {
    put_tag(b, field, WT_LEN);
    if (b->err) return;
    if (b->depth == TP_PB_MAX_DEPTH) {
        b->err = 1;
        return;
    }
    b->open[b->depth++] = b->len;
}

void tp_pb_end(tp_pb *b) {
    if (b->err) return;
    if (!b->depth) {
        b->err = 1;
        return;
    }
    size_t start = b->open[--b->depth], n = b->len - start;
    uint8_t v[10];
    size_t k = tp_pb_varint(v, n);
    if (reserve(b, k)) return;
    memmove(b->buf + start + k, b->buf + start, n);
    memcpy(b->buf + start, v, k);
    b->len += k;
}

int tp_pb_write_field(FILE *f, uint32_t field, const tp_pb *b) {
    if (b->err || b->depth) return TPROF_ERR_INVALID_ARG;
    uint8_t h[20];
    size_t n = tp_pb_varint(h, (uint64_t)field << 3 | WT_LEN);
    n += tp_pb_varint(h + n, b->len);
    if (fwrite(h, 1, n, f) != n) return TPROF_ERR_IO;
    if (b->len && fwrite(b->buf, 1, b->len, f) != b->len) return TPROF_ERR_IO;
    return TPROF_OK;
}
