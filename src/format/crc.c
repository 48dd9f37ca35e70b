/*
 * crc.c — the checksum of rank-file chunks: zlib's CRC-32, shared by writer and reader.
 */
#include <zlib.h>

#include "format.h"

uint32_t tprof__crc32(uint32_t crc, const void *data, size_t len) {
    if (!len) return crc;
    /* zlib's crc32 takes uInt lengths; feed in pieces for very large buffers */
    const unsigned char *p = data;
    uLong c = crc;
    while (len) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

