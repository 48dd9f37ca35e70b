/*
 * pb.h — a small Protocol Buffers encoder (the wire format of
 * https://protobuf.dev/programming-guides/encoding/): varints, 64-bit fixed fields and
 * length-delimited fields, nested messages included, into one growable buffer. It writes
 * what the Perfetto exporter (perfetto.c) needs and nothing else: no schema, no decoding.
 *
 * A nested message is opened with tp_pb_begin and closed with tp_pb_end; its length is not
 * known before it ends, so tp_pb_end moves the message's bytes up by the size of the length
 * varint (the shortest encoding, as protoc writes it). Cost: each byte of a message is
 * moved once per message that encloses it (a TracePacket nests three deep).
 *
 * Errors are sticky: an allocation failure, nesting past TP_PB_MAX_DEPTH or an end without
 * a begin sets `err`, later calls do nothing, and the caller checks `err` once per message.
 * Memory: the buffer grows to the largest message built in it and is reused after
 * tp_pb_reset. Not thread safe (one buffer per writer); a zeroed tp_pb is an empty one.
 */
#ifndef TPROF_PB_H
#define TPROF_PB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TP_PB_MAX_DEPTH 8

typedef struct tp_pb {
    uint8_t *buf;
    size_t len, cap;
    size_t open[TP_PB_MAX_DEPTH]; /* offsets where each open message's payload starts */
    int depth;
    int err; /* sticky: out of memory, nested too deep, or an end without a begin */
} tp_pb;

/* The varint of v into out (at most 10 bytes); returns how many bytes. */
size_t tp_pb_varint(uint8_t out[10], uint64_t v);

/* Empties the buffer for the next message (keeps its memory; clears err). */
void tp_pb_reset(tp_pb *b);
/* Frees the buffer; b is then an empty tp_pb again. */
void tp_pb_free(tp_pb *b);

/* Field `field` (>= 1) of wire type 0: uint32/uint64/enum/bool as is, int32/int64 as their
 * 64-bit two's complement (a negative value takes 10 bytes, as the format says). */
void tp_pb_uint(tp_pb *b, uint32_t field, uint64_t v);
void tp_pb_int(tp_pb *b, uint32_t field, int64_t v);
/* Wire type 1, little-endian: fixed64, and double (IEEE 754 binary64). */
void tp_pb_fixed64(tp_pb *b, uint32_t field, uint64_t v);
void tp_pb_double(tp_pb *b, uint32_t field, double v);
/* Wire type 2: bytes, and a string (its bytes without the NUL; UTF-8 is the caller's). */
void tp_pb_bytes(tp_pb *b, uint32_t field, const void *p, size_t n);
void tp_pb_string(tp_pb *b, uint32_t field, const char *s);
/* A nested message as field `field`: its fields go between begin and end. */
void tp_pb_begin(tp_pb *b, uint32_t field);
void tp_pb_end(tp_pb *b);

/* Writes the buffer's bytes to f as length-delimited field `field` of an enclosing message
 * that is never held whole (a Perfetto Trace is the sequence of its packets, field 1).
 * Returns 0 (TPROF_OK), TPROF_ERR_INVALID_ARG when a message is still open or b->err is set
 * (nothing written), TPROF_ERR_IO when the write failed. */
int tp_pb_write_field(FILE *f, uint32_t field, const tp_pb *b);

#endif /* TPROF_PB_H */
