/*
 * varint.h — the base-128 variable-length integer of Protocol Buffers
 * (protobuf.dev/programming-guides/encoding, "Base 128 Varints"): 7 bits a byte, the low
 * bits first, the high bit set on every byte but the last. Shared by the Perfetto export's
 * protobuf writer (src/export/pb.c) and the packed steps and counters of the analysis
 * (src/analysis/step_pack.c, counter_pack.c), which also zigzag-map signed differences (same
 * document, "Signed Integers").
 */
#ifndef TPROF_COMMON_VARINT_H
#define TPROF_COMMON_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Writes v into out (room for 10 bytes); returns the bytes written, 1 to 10. */
static inline size_t tp_varint_put(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* Reads the varint at *p (before end) into *v and moves *p past it. 0; -1 when it runs past
 * end or past 10 bytes (*p is then somewhere before end, *v unchanged). */
static inline int tp_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* A difference modulo 2^64 taken as a signed one, zigzag-mapped so that a small negative one
 * is small too: 0, -1, 1, -2 ... -> 0, 1, 2, 3; and back. */
static inline uint64_t tp_zigzag(uint64_t d) { return (d << 1) ^ (0 - (d >> 63)); }
static inline uint64_t tp_unzigzag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

#endif
