/*
 * kineto_json.h — the streaming JSON scanner under kineto_load.c (private to it): one value's
 * text at a time out of a plain or gzip file, and exact microsecond timestamps. Not thread
 * safe per reader.
 */
#ifndef TP_KINETO_JSON_H
#define TP_KINETO_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#define KIN_BIAS ((uint64_t)1 << 61) /* ns of a "ts" of 0 while reading */
#define KIN_MAX_VALUE (64u << 20)    /* the largest single event or top-level value */

typedef struct kin {
    gzFile gz;
    const char *path;
    unsigned char buf[1 << 16];
    size_t pos, len;
    uint64_t off; /* decompressed bytes consumed */
    int end;
    char *v; /* the raw text of the value being read */
    size_t nv, cap_v;
    char *err;
    size_t errlen;
    int failed;
} kin;

/* Records the file's one error line ("PATH: message"; the first wins): TPROF_ERR_FORMAT. */
int tp_kin_fail(kin *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next byte without taking it: 0..255, -1 at the end, -2 after an error (reported). */
int tp_kin_peek(kin *k);
void tp_kin_take(kin *k);
/* Skips white space; the next byte as tp_kin_peek. */
int tp_kin_ws(kin *k);
/* Reads one JSON value's text into k->v (NUL-terminated), by brackets and strings only
 * (cJSON checks the rest): 0, TPROF_ERR_FORMAT or TPROF_ERR_NO_MEMORY. */
int tp_kin_scan(kin *k);
/* The raw text of top-level member `key` of the JSON object text o[0..n), or NULL. */
const char *tp_kin_raw_member(const char *o, size_t n, const char *key, size_t *len);
/* Microseconds as decimal text into exact ns (a fourth decimal rounds): 0, or TPROF_ERR_FORMAT for
 * a form it does not take (an exponent, |value| >= 2^61 ns); the caller reads the double then. */
int tp_kin_us_ns(const char *s, size_t n, int64_t *out);

/* The op of an NCCL kernel (enum tprof_comm_op) from its name, else from PyTorch's
 * "Collective name" (may be NULL); TPROF_COMM_UNKNOWN when neither says. */
uint32_t tp_kin_comm_op(const char *kernel, const char *coll);
/* PyTorch's dtype name (c10::toString of a ScalarType) as enum tprof_comm_dtype, its size in
 * *size (0 when unknown). */
uint32_t tp_kin_dtype(const char *t, unsigned *size);
/* Whether a kernel name is NCCL's (ncclDevKernel_*, ncclKernel_*). */
int tp_kin_is_nccl(const char *name);
/* The host in a tensorboard_trace_handler file name into host ("" when it has none). */
void tp_kin_host_from_name(const char *path, char *host, size_t n);
/* The rank in a Megatron-LM file name ("rank-<r>.json.gz"), or -1. */
int tp_kin_rank_from_name(const char *path);

#endif /* TP_KINETO_JSON_H */
