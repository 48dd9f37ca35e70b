/*
 * test_zchunks.c — compressed chunks (TPROF_CHUNK_F_ZSTD, docs/format.md) as the reader
 * takes them: a run rewritten with every chunk compressed reads and reports exactly as the
 * same run plain; a compressed chunk whose prefix or frame lies (with a checksum that
 * matches, as only a hostile file has) is one damaged chunk, skipped, and a claimed size
 * past TPROF_CHUNK_RAW_MAX is refused before anything is allocated.
 *
 * Built twice (tests/zchunks.cmake): test_zchunks, with the analysis library's reader (and
 * libzstd), and test_zchunks_nozstd (TPROF_TEST_NOZSTD), whose reader is compiled without
 * libzstd: there a compressed chunk is skipped and counted, not damage. Both compress with
 * format/zchunk.c, the writer's own packer, which loads libzstd.so.1 at run time.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "format/reader.h"
#include "format/zchunk.h"
#include "synth.h"
#include "trainprof.h"
#ifndef TPROF_TEST_NOZSTD
#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/report.h"
#endif

static const uint64_t RT0 = 1700000000000000000ull, T0 = 1000000000ull, US = 1000ull;

/* What a tamper function may do to a compressed payload (prefix, frame, padding) before
 * the chunk's checksum is computed over it. */
typedef void (*tamper_fn)(uint8_t *payload, size_t n);

/* Copies rank file src to dst chunk by chunk: chunk k (0-based, in file order) is written
 * compressed when bit k of zmask is set (all chunks when zmask is ~0), else plain, and the
 * compressed chunk `tamper_at` (-1: none) goes through tamper first. Returns the chunks
 * written compressed; *offsets (when non-NULL, 64 entries) gets each chunk's offset. */
static int rewrite(const char *src, const char *dst, uint64_t zmask, int tamper_at,
                   tamper_fn tamper, uint64_t *offsets) {
    static tprof__zc zc;
    char why[200];
    if (tprof__zc_open(&zc, 1, why, sizeof why) != TPROF_OK) fail_msg("libzstd: %s", why);
    tprof_reader *r;
    char err[200];
    assert_int_equal(TPROF_OK, tprof__reader_open(src, &r, err, sizeof err));
    tprof_file_header h = *tprof__reader_header(r);
    h.version = TPROF_FORMAT_VERSION;
    h.header_crc = tprof__crc32(0, &h, offsetof(tprof_file_header, header_crc));
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(1, fwrite(&h, sizeof h, 1, f));
    tprof_chunk c;
    int k = 0, nz = 0;
    while (tprof__reader_next(r, &c)) {
        tprof_chunk_header ch = {
            TPROF_CHUNK_MAGIC, (uint32_t)c.len, 0, c.thread_serial, c.os_tid, 0, c.dropped};
        const void *out = c.data;
        uint8_t *zb = NULL;
        if (k < 64 && ((zmask >> k) & 1)) {
            size_t cap = tprof__zc_bound(c.len);
            zb = malloc(cap);
            assert_non_null(zb);
            size_t n = tprof__zc_pack(&zc, c.data, c.len, zb, cap);
            if (n) { /* else it would not shrink: plain, as the writer does */
                if (k == tamper_at) tamper(zb, n);
                ch.payload_bytes = (uint32_t)n;
                ch.flags = TPROF_CHUNK_F_ZSTD;
                out = zb;
                nz++;
            }
        }
        ch.crc32 = tprof__crc32(0, out, ch.payload_bytes);
        if (offsets && k < 64) offsets[k] = (uint64_t)ftell(f);
        assert_int_equal(1, fwrite(&ch, sizeof ch, 1, f));
        assert_int_equal(1, fwrite(out, ch.payload_bytes, 1, f));
        free(zb);
        k++;
    }
    assert_int_equal(0, tprof__reader_damage_count(r));
    tprof__reader_close(r);
    assert_int_equal(0, fclose(f));
    return nz;
}

/* Steps 0-2 on thread 1, each with 40 kernels on thread 2 (names from 8), flushed step by
 * step: chunks in file order are thread 2's 40 kernels (1 968 bytes, the only chunks that
 * shrink), thread 1's step begin and end, three times, then the process stream (rank,
 * world size, end of file). */
static void three_chunk_file(const char *dir, char *path, size_t n) {
    synth_file *f = synth_open(dir, "h", 4242, RT0, T0);
    assert_non_null(f);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 4243);
    uint64_t t = T0 + 1000 * US;
    for (uint64_t s = 0; s < 3; s++) {
        synth_step_begin(f, 1, t, s);
        for (uint32_t k = 0; k < 40; k++) {
            static const char *const kn[8] = {"ampere_sgemm_128x64_nn", "vectorized_elementwise",
                                              "layer_norm_fwd",         "softmax_warp_fwd",
                                              "ampere_sgemm_64x64_tn",  "reduce_kernel",
                                              "flash_fwd_kernel",       "adam_apply"};
            synth_kernel(f, 2, t + k * 10 * US, t + k * 10 * US + 7 * US, 0, 7,
                         (uint32_t)(s * 40 + k + 1), kn[k % 8]);
        }
        synth_step_end(f, 1, t + 500 * US, s);
        t += 1000 * US;
        synth_flush_thread(f, 2);
        synth_flush_thread(f, 1);
    }
    synth_end_of_file(f, t, 0);
    snprintf(path, n, "%s", synth_path(f));
    assert_int_equal(0, synth_close(f));
}

/* The chunks of `path` as the reader hands them out: count, records, damage, skipped. */
typedef struct read_sum {
    int chunks, compressed;
    size_t records, damage, skipped;
    char first_damage[120];
    uint64_t first_damage_at;
} read_sum;

static read_sum read_all(const char *path) {
    read_sum s;
    memset(&s, 0, sizeof s);
    tprof_reader *r;
    char err[200];
    assert_int_equal(TPROF_OK, tprof__reader_open(path, &r, err, sizeof err));
    tprof_chunk c;
    while (tprof__reader_next(r, &c)) {
        s.chunks++;
        s.compressed += c.compressed;
        size_t pos = 0;
        int bad = 0;
        while (tprof__chunk_next_rec(&c, &pos, &bad)) s.records++;
        assert_int_equal(0, bad);
    }
    s.damage = tprof__reader_damage_count(r);
    if (s.damage) {
        snprintf(s.first_damage, sizeof s.first_damage, "%s", tprof__reader_damage(r, 0)->what);
        s.first_damage_at = tprof__reader_damage(r, 0)->offset;
    }
    s.skipped = tprof__reader_zstd_skipped(r);
    tprof__reader_close(r);
    return s;
}

#ifndef TPROF_TEST_NOZSTD

/* Every chunk compressed: the same chunks and records, no damage, and the same report JSON
 * to the byte as the plain file; the compressed file is smaller. */
static void test_same_report(void **state) {
    (void)state;
    char pdir[512], zdir[512], plain[1024], z[1024];
    assert_int_equal(0, synth_tmpdir(pdir, sizeof pdir, "zc-plain"));
    assert_int_equal(0, synth_tmpdir(zdir, sizeof zdir, "zc-zstd_"));
    three_chunk_file(pdir, plain, sizeof plain);
    snprintf(z, sizeof z, "%s/h-4242.tprof", zdir);
    int nz = rewrite(plain, z, ~0ull, -1, NULL, NULL);
    read_sum p = read_all(plain), c = read_all(z);
    assert_int_equal(3, nz); /* the kernel chunks */
    assert_int_equal(7, p.chunks);
    assert_int_equal(p.chunks, c.chunks);
    assert_int_equal(0, p.compressed);
    assert_int_equal(3, c.compressed);
    /* 3 steps x (begin + 40 kernels + end) on the threads, rank, world_size, end of file */
    assert_int_equal(3 * 42 + 3, p.records);
    assert_int_equal(p.records, c.records);
    assert_int_equal(0, c.damage);
    assert_true(synth_file_size(z) < synth_file_size(plain));

    tp_run rp, rz;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(pdir, &rp, err, sizeof err));
    assert_int_equal(TPROF_OK, tp_run_load(zdir, &rz, err, sizeof err));
    assert_int_equal(1, rz.nprocs);
    assert_int_equal(0, rz.procs[0].ndamage);
    assert_int_equal(120, rz.procs[0].ngpu);
    cJSON *jp = tp_report_build(&rp, NULL), *jz = tp_report_build(&rz, NULL);
    assert_non_null(jp);
    assert_non_null(jz);
    /* the run directory is the only thing that differs (names of the same length) */
    char *sp = cJSON_PrintUnformatted(jp), *sz = cJSON_PrintUnformatted(jz);
    assert_non_null(sp);
    assert_non_null(sz);
    assert_int_equal(strlen(pdir), strlen(zdir));
    char *q;
    while ((q = strstr(sp, pdir)) != NULL) memcpy(q, zdir, strlen(zdir));
    assert_string_equal(sp, sz);
    free(sp);
    free(sz);
    cJSON_Delete(jp);
    cJSON_Delete(jz);
    tp_run_free(&rp);
    tp_run_free(&rz);
    synth_rmtree(pdir);
    synth_rmtree(zdir);
}

static void raw_too_big(uint8_t *p, size_t n) {
    (void)n;
    uint32_t v = 0xFFFFFFF8u; /* 4 GiB: past TPROF_CHUNK_RAW_MAX */
    memcpy(p + offsetof(tprof_zchunk, raw_bytes), &v, 4);
}
static void raw_off_by_8(uint8_t *p, size_t n) {
    (void)n;
    uint32_t v;
    memcpy(&v, p, 4);
    v += 8; /* within the bound, but not the frame's content size */
    memcpy(p, &v, 4);
}
static void frame_cut(uint8_t *p, size_t n) {
    (void)n;
    uint32_t v;
    memcpy(&v, p + 4, 4);
    v -= 16; /* the frame loses its last 16 bytes */
    memcpy(p + 4, &v, 4);
}
static void frame_past_payload(uint8_t *p, size_t n) {
    uint32_t v = (uint32_t)n; /* the frame claims more than the payload holds */
    memcpy(p + 4, &v, 4);
}

/* Chunk 0 (thread 2's first 40 kernels) is compressed and tampered with, its checksum
 * made to match: that chunk is damage at its own offset with the reason given, every other
 * chunk reads as before. */
static void tampered(tamper_fn fn, const char *reason) {
    char dir[512], plain[1024], z[1024];
    assert_int_equal(0, synth_tmpdir(dir, sizeof dir, "zc-tamper"));
    three_chunk_file(dir, plain, sizeof plain);
    snprintf(z, sizeof z, "%s/tampered.tprof", dir);
    uint64_t off[64];
    assert_int_equal(1, rewrite(plain, z, 1, 0, fn, off));
    read_sum p = read_all(plain), t = read_all(z);
    assert_int_equal(p.chunks - 1, t.chunks);
    assert_int_equal(p.records - 40, t.records); /* chunk 0: thread 2's 40 kernels */
    assert_int_equal(1, t.damage);
    assert_int_equal(off[0], t.first_damage_at);
    if (!strstr(t.first_damage, reason))
        fail_msg("damage '%s', expected '%s'", t.first_damage, reason);
    assert_int_equal(0, t.skipped);
    synth_rmtree(dir);
}

static void test_claimed_size_past_bound(void **state) {
    (void)state;
    tampered(raw_too_big, "compressed chunk claims 4294967288 bytes");
}
static void test_claimed_size_not_frame(void **state) {
    (void)state;
    tampered(raw_off_by_8, "frame content size differs");
}
static void test_frame_cut(void **state) {
    (void)state;
    tampered(frame_cut, "does not decompress");
}
static void test_frame_past_payload(void **state) {
    (void)state;
    tampered(frame_past_payload, "compressed chunk claims");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_report),
        cmocka_unit_test(test_claimed_size_past_bound),
        cmocka_unit_test(test_claimed_size_not_frame),
        cmocka_unit_test(test_frame_cut),
        cmocka_unit_test(test_frame_past_payload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* TPROF_TEST_NOZSTD */

/* A reader built without libzstd: the compressed chunk is skipped and counted, not damage;
 * the plain chunks around it read in full. */
static void test_skipped_not_damage(void **state) {
    (void)state;
    char dir[512], plain[1024], z[1024];
    assert_int_equal(0, synth_tmpdir(dir, sizeof dir, "zc-nozstd"));
    three_chunk_file(dir, plain, sizeof plain);
    snprintf(z, sizeof z, "%s/one-compressed.tprof", dir);
    assert_int_equal(1, rewrite(plain, z, 1, -1, NULL, NULL));
    read_sum p = read_all(plain), s = read_all(z);
    assert_int_equal(p.chunks - 1, s.chunks);
    assert_int_equal(p.records - 40, s.records);
    assert_int_equal(0, s.damage);
    assert_int_equal(1, s.skipped);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skipped_not_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
