/*
 * varint.h — the base-128 variable-length integer of Protocol Buffers
 * (protobuf.dev/programming-guides/encoding, "Base 128 Varints"): 7 bits a byte, the low
 * bits first, the high bit set on every byte but the last. Shared by the Perfetto export's
 * protobuf writer (src/export/pb.c) and the packed steps of the analysis
 * (src/analysis/step_pack.c).
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

#endif
