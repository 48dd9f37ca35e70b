/*
 * kineto_json.c — the streaming JSON scanner of the Kineto trace loader (kineto_json.h): the
 * file through zlib's gzread (which passes an uncompressed file through unchanged) in 64 KiB
 * blocks, the extent of one value at a time, and exact timestamps; and what the names in a
 * trace say (an NCCL kernel's op, a dtype's size, a file name's host or rank).
 */
#define _GNU_SOURCE
#include "analysis/kineto_json.h"
#include "analysis/alloc.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "trainprof.h"


int tp_kin_fail(kin *k, const char *fmt, ...) {
    if (k->failed) return TPROF_ERR_FORMAT;
    k->failed = 1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the message quotes the file (a member name): control bytes shown as '?', so the error
     * stays one line on the terminal */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    snprintf(k->err, k->errlen, "%s: %s", k->path, msg);
    return TPROF_ERR_FORMAT;
}

/* Refills the block: 1 with data, 0 at the end of the text, -1 on a gzip error. */
static int fill(kin *k) {
    if (k->end) return 0;
    int n = gzread(k->gz, k->buf, sizeof k->buf);
    int e = Z_OK;
    const char *m = n <= 0 ? gzerror(k->gz, &e) : NULL;
    if (n < 0 || (n == 0 && e != Z_OK && e != Z_STREAM_END)) {
        /* gzerror puts the path first: the line names the file once */
        size_t pl = strlen(k->path);
        if (m && !strncmp(m, k->path, pl) && !strncmp(m + pl, ": ", 2)) m += pl + 2;
        /* zlib says Z_BUF_ERROR when the compressed stream stops before its end */
        if (e == Z_BUF_ERROR)
            tp_kin_fail(k, "truncated gzip data after %llu bytes of text (%s)",
                        (unsigned long long)k->off, m ? m : "");
        else
            tp_kin_fail(k, "damaged gzip data after %llu bytes of text (%s)",
                        (unsigned long long)k->off, m ? m : "");
        k->end = 1;
        return -1;
    }
    if (n == 0) {
        k->end = 1;
        return 0;
    }
    k->pos = 0;
    k->len = (size_t)n;
    return 1;
}

/* The next byte without taking it: 0..255, -1 at the end, -2 after an error. */
int tp_kin_peek(kin *k) {
    if (k->pos < k->len) return k->buf[k->pos];
    int r = fill(k);
    return r > 0 ? k->buf[k->pos] : r == 0 ? -1 : -2;
}

void tp_kin_take(kin *k) {
    k->pos++;
    k->off++;
}

int tp_kin_ws(kin *k) {
    int c;
    while ((c = tp_kin_peek(k)) == ' ' || c == '\t' || c == '\n' || c == '\r') tp_kin_take(k);
    return c;
}

static int keep(kin *k, int c) {
    if (k->nv + 2 > k->cap_v) {
        if (k->cap_v >= KIN_MAX_VALUE)
            return tp_kin_fail(k, "a value of more than %u MiB at byte %llu", KIN_MAX_VALUE >> 20,
                               (unsigned long long)k->off);
        size_t nc = k->cap_v ? k->cap_v * 2 : 4096;
        char *nb = tp_realloc(k->v, nc);
        if (!nb) return TPROF_ERR_NO_MEMORY;
        k->v = nb;
        k->cap_v = nc;
    }
    k->v[k->nv++] = (char)c;
    return 0;
}

/* Reads one JSON value's text into k->v (NUL-terminated): its extent only, by brackets and
 * strings; cJSON checks the rest. */
int tp_kin_scan(kin *k) {
    k->nv = 0;
    int c = tp_kin_ws(k), rc;
    if (c == -2) return TPROF_ERR_FORMAT;
    if (c < 0) return tp_kin_fail(k, "the text ends where a value should be: truncated?");
    if (c == '{' || c == '[' || c == '"') {
        int depth = 0, in_str = 0;
        do {
            c = tp_kin_peek(k);
            if (c == -2) return TPROF_ERR_FORMAT;
            if (c < 0)
                return tp_kin_fail(k, "the text ends inside a value after %llu bytes: truncated?",
                                   (unsigned long long)k->off);
            tp_kin_take(k);
            if ((rc = keep(k, c))) return rc;
            if (in_str) {
                if (c == '\\') {
                    int d = tp_kin_peek(k);
                    if (d < 0) continue; /* reported on the next turn */
                    tp_kin_take(k);
                    if ((rc = keep(k, d))) return rc;
                } else if (c == '"') {
                    in_str = 0;
                }
            } else if (c == '"') {
                in_str = 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth < 0)
                    return tp_kin_fail(k, "unbalanced '%c' at byte %llu", c,
                                       (unsigned long long)k->off);
            }
        } while (in_str || depth > 0);
    } else {
        while ((c = tp_kin_peek(k)) >= 0 && !strchr(",]} \t\r\n", c)) {
            tp_kin_take(k);
            if ((rc = keep(k, c))) return rc;
        }
        if (c == -2) return TPROF_ERR_FORMAT;
        if (!k->nv)
            return tp_kin_fail(k, "unexpected '%c' at byte %llu", c, (unsigned long long)k->off);
    }
    k->v[k->nv] = 0;
    return 0;
}

/* ------------------------------------------------------------------ numbers */

/* The raw text of top-level member `key` of the JSON object text o[0..n), or NULL. */
const char *tp_kin_raw_member(const char *o, size_t n, const char *key, size_t *len) {
    size_t kl = strlen(key), i = 1;
    int depth = 1, want_key = 1;
    while (i < n) {
        char c = o[i];
        if (c == '"') {
            size_t s = ++i;
            while (i < n && o[i] != '"') i += o[i] == '\\' ? 2 : 1;
            if (i >= n) return NULL;
            size_t e = i++;
            if (depth != 1 || !want_key) continue;
            want_key = 0;
            while (i < n && isspace((unsigned char)o[i])) i++;
            if (i < n && o[i] == ':') i++;
            while (i < n && isspace((unsigned char)o[i])) i++;
            if (e - s == kl && !memcmp(o + s, key, kl)) {
                size_t v = i;
                while (v < n && !strchr(",}] \t\r\n", o[v])) v++;
                *len = v - i;
                return o + i;
            }
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (c == ',' && depth == 1) want_key = 1;
        i++;
    }
    return NULL;
}

/* Microseconds written as decimal text into exact nanoseconds: "12.345" is 12345 ns, a
 * fourth decimal rounds. Returns 0, or TPROF_ERR_FORMAT for a form it does not take (an exponent),
 * which the caller reads through the double instead. |value| stays below 2^61 ns. */
int tp_kin_us_ns(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-') neg = 1, i++;
    uint64_t ip = 0;
    size_t d0 = i;
    while (i < n && isdigit((unsigned char)s[i])) {
        ip = ip * 10 + (uint64_t)(s[i++] - '0');
        if (ip > (KIN_BIAS - 1) / 1000) return TPROF_ERR_FORMAT;
    }
    if (i == d0) return TPROF_ERR_FORMAT;
    uint64_t frac = 0;
    int nf = 0, round = 0;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && isdigit((unsigned char)s[i])) {
            if (nf < 3) frac = frac * 10 + (uint64_t)(s[i] - '0'), nf++;
            else if (nf++ == 3) round = s[i] >= '5';
            i++;
        }
    }
    if (i != n) return TPROF_ERR_FORMAT;
    while (nf < 3) frac *= 10, nf++;
    uint64_t ns = ip * 1000 + frac + (uint64_t)round;
    if (ns >= KIN_BIAS) return TPROF_ERR_FORMAT;
    *out = neg ? -(int64_t)ns : (int64_t)ns;
    return 0;
}

/* ------------------------------------------------------------------ names */

/* The op of an NCCL kernel from the function its name carries (NCCL's device kernels are
 * named ncclDevKernel_<Func>_..., older ones ncclKernel_<Func>_...), else from the
 * collective PyTorch recorded ("Collective name": allreduce, _allgather_base, ...). */
uint32_t tp_kin_comm_op(const char *kernel, const char *coll) {
    static const struct {
        const char *tok;
        uint32_t op;
    } k[] = {{"AllReduce", TPROF_COMM_ALLREDUCE},
             {"AllGather", TPROF_COMM_ALLGATHER},
             {"ReduceScatter", TPROF_COMM_REDUCESCATTER},
             {"Broadcast", TPROF_COMM_BROADCAST},
             {"AllToAll", TPROF_COMM_ALLTOALL},
             {"AlltoAll", TPROF_COMM_ALLTOALL},
             {"Reduce", TPROF_COMM_REDUCE},
             {"SendRecv", TPROF_COMM_SEND},
             {"Send", TPROF_COMM_SEND},
             {"Recv", TPROF_COMM_RECV}};
    static const struct {
        const char *tok;
        uint32_t op;
    } c[] = {{"allreduce", TPROF_COMM_ALLREDUCE},
             {"all_reduce", TPROF_COMM_ALLREDUCE},
             {"allgather", TPROF_COMM_ALLGATHER},
             {"all_gather", TPROF_COMM_ALLGATHER},
             {"reduce_scatter", TPROF_COMM_REDUCESCATTER},
             {"reducescatter", TPROF_COMM_REDUCESCATTER},
             {"broadcast", TPROF_COMM_BROADCAST},
             {"all_to_all", TPROF_COMM_ALLTOALL},
             {"alltoall", TPROF_COMM_ALLTOALL},
             {"barrier", TPROF_COMM_BARRIER},
             {"reduce", TPROF_COMM_REDUCE},
             {"gather", TPROF_COMM_GATHER},
             {"scatter", TPROF_COMM_SCATTER},
             {"send", TPROF_COMM_SEND},
             {"recv", TPROF_COMM_RECV}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (strstr(kernel, k[i].tok)) return k[i].op;
    for (size_t i = 0; coll && i < sizeof c / sizeof *c; i++)
        if (strstr(coll, c[i].tok)) return c[i].op;
    return TPROF_COMM_UNKNOWN;
}

/* PyTorch's dtype names (c10::toString of the ScalarType) as the format's and their size. */
uint32_t tp_kin_dtype(const char *t, unsigned *size) {
    static const struct {
        const char *name;
        uint32_t d;
        unsigned size;
    } m[] = {{"Float", TPROF_DTYPE_FLOAT32, 4},
             {"Double", TPROF_DTYPE_FLOAT64, 8},
             {"Half", TPROF_DTYPE_FLOAT16, 2},
             {"BFloat16", TPROF_DTYPE_BFLOAT16, 2},
             {"Int", TPROF_DTYPE_INT32, 4},
             {"Long", TPROF_DTYPE_INT64, 8},
             {"Char", TPROF_DTYPE_INT8, 1},
             {"Byte", TPROF_DTYPE_UINT8, 1},
             {"Bool", TPROF_DTYPE_UINT8, 1},
             {"Short", TPROF_DTYPE_UNKNOWN, 2},
             {"Float8_e4m3fn", TPROF_DTYPE_FLOAT8E4M3, 1},
             {"Float8_e5m2", TPROF_DTYPE_FLOAT8E5M2, 1}};
    for (size_t i = 0; t && i < sizeof m / sizeof *m; i++)
        if (!strcmp(t, m[i].name)) {
            *size = m[i].size;
            return m[i].d;
        }
    *size = 0;
    return TPROF_DTYPE_UNKNOWN;
}

int tp_kin_is_nccl(const char *name) {
    return !strncmp(name, "ncclDevKernel", 13) || !strncmp(name, "ncclKernel", 10);
}

/* tensorboard_trace_handler names a file "<host>_<pid>.<time>.pt.trace.json": the host. */
void tp_kin_host_from_name(const char *path, char *host, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strchr(b, '.'), *us = NULL;
    for (const char *c = b; dot && c < dot; c++)
        if (*c == '_') us = c;
    host[0] = 0;
    if (!us || us == b || !strstr(b, ".pt.trace.json")) return;
    for (const char *c = us + 1; c < dot; c++)
        if (!isdigit((unsigned char)*c)) return;
    size_t len = (size_t)(us - b) < n - 1 ? (size_t)(us - b) : n - 1;
    memcpy(host, b, len);
    host[len] = 0;
}

/* Megatron-LM's --use-pytorch-profiler names a rank's file "rank-<r>.json.gz": the rank, for
 * traces without distributedInfo. -1 when the name says none. */
int tp_kin_rank_from_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *r = strstr(b, "rank");
    if (!r) return -1;
    r += 4;
    if (*r == '-' || *r == '_') r++;
    if (!isdigit((unsigned char)*r)) return -1;
    long v = strtol(r, NULL, 10);
    return v >= 0 && v < 1 << 24 ? (int)v : -1;
}
