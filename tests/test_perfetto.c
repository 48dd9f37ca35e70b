/*
 * test_perfetto.c — the Perfetto protobuf export (src/export/perfetto.c) and its encoder
 * (src/export/pb.c).
 *
 * - The encoder against bytes worked out by hand from the wire format
 *   (https://protobuf.dev/programming-guides/encoding/): varint edge cases, negative int64,
 *   doubles, nested lengths that need a second byte, a timestamp past 2^32.
 * - A synthetic two-host run (rank 1's realtime clock 250 ms ahead, found through matched
 *   barriers) exported both ways: a small decoder here reads the protobuf (interned names,
 *   tracks, BEGIN/END matched on each track's stack) and the slices (name, start, end in
 *   absolute ns), counters and instants must equal those of the Chrome JSON of the same run
 *   (baseTimeNanoseconds + ts), with the counts and times known from the run's construction,
 *   also under --steps and --ranks.
 * - `test_perfetto --protoc PROTO`: protoc decodes the file against the subset of Perfetto's
 *   published protos in PROTO; exit 77 (skipped) without protoc.
 * - `test_perfetto --python SCRIPT`: the `perfetto` Python package's copy of Perfetto's full
 *   trace proto parses the file with no unknown field and the same event counts, and so does
 *   its trace processor where it can start (SCRIPT exits 77 without the package).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "analysis/model.h"
#include "export/chrome.h"
#include "export/pb.h"
#include "export/perfetto.h"
#include "format/format.h"
#include "export_same.h"
#include "synth.h"
#include "trainprof.h"
/* header-only, after the headers it names */
#include "chrome_out.h"

#define RT0 1700000000000000000ull
#define MONO0 5000000000ull
#define MONO1 9000000000ull
#define MSEC 1000000ull
#define SKEW (250 * MSEC)  /* hostB's realtime clock runs this far ahead */
#define B_START (3 * MSEC) /* hostB's rank starts this long after hostA's, in true time */

/* ------------------------------------------------------------------ the encoder */

static void assert_bytes(const tp_pb *b, const char *hex) {
    size_t n = strlen(hex) / 2;
    assert_int_equal(b->err, 0);
    assert_int_equal(b->depth, 0);
    if (b->len != n) fail_msg("length %zu, want %zu", b->len, n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        if (b->buf[i] != v) fail_msg("byte %zu is %02x, want %02x", i, b->buf[i], v);
    }
}

static void test_varint(void **state) {
    (void)state;
    static const struct {
        uint64_t v;
        size_t n;
        uint8_t b[10];
    } cases[] = {
        {0, 1, {0x00}},
        {1, 1, {0x01}},
        {127, 1, {0x7f}},
        {128, 2, {0x80, 0x01}},
        {300, 2, {0xac, 0x02}},
        {16383, 2, {0xff, 0x7f}},
        {16384, 3, {0x80, 0x80, 0x01}},
        {4294967295ull, 5, {0xff, 0xff, 0xff, 0xff, 0x0f}},
        {4294967296ull, 5, {0x80, 0x80, 0x80, 0x80, 0x10}},
        {UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t out[10];
        assert_int_equal(tp_pb_varint(out, cases[i].v), cases[i].n);
        assert_memory_equal(out, cases[i].b, cases[i].n);
    }
}

static void test_fields(void **state) {
    (void)state;
    tp_pb b = {0};
    /* TracePacket.timestamp (8, varint) = 2^32 + 1: tag 0x40 */
    tp_pb_uint(&b, 8, 4294967297ull);
    assert_bytes(&b, "408180808010");
    tp_pb_reset(&b);
    /* int64 -1 (TrackEvent.counter_value, 30): tag 30<<3 = 240 = f0 01, ten bytes */
    tp_pb_int(&b, 30, -1);
    assert_bytes(&b, "f001ffffffffffffffffff01");
    tp_pb_reset(&b);
    /* double 1.5 (44, wire type 1): tag 44<<3|1 = 353 = e1 02; 0x3ff8000000000000 LE */
    tp_pb_double(&b, 44, 1.5);
    assert_bytes(&b, "e102000000000000f83f");
    tp_pb_reset(&b);
    /* fixed64 (47): tag 47<<3|1 = 377 = f9 02 */
    tp_pb_fixed64(&b, 47, 0x0102030405060708ull);
    assert_bytes(&b, "f9020807060504030201");
    tp_pb_reset(&b);
    /* string (23): tag 23<<3|2 = 186 = ba 01; empty string: length 0 */
    tp_pb_string(&b, 23, "ab");
    tp_pb_string(&b, 23, "");
    assert_bytes(&b, "ba01026162ba0100");
    tp_pb_free(&b);
}

static void test_nested(void **state) {
    (void)state;
    tp_pb b = {0};
    /* an empty message, and one of one byte inside another */
    tp_pb_begin(&b, 1);
    tp_pb_end(&b);
    tp_pb_begin(&b, 60);
    tp_pb_begin(&b, 3);
    tp_pb_uint(&b, 1, 7);
    tp_pb_end(&b);
    tp_pb_end(&b);
    /* 0a 00 | e2 03 (60<<3|2 = 482) len 4 | 1a 02 08 07 */
    assert_bytes(&b, "0a00e203041a020807");
    tp_pb_reset(&b);

    /* lengths of two bytes at two depths: 130 bytes of string in field 2 of a message in
     * field 1 of a message in field 3. Inner: 12 82 01 + 130 = 133 bytes (85 01); middle:
     * 0a 85 01 + 133 = 136 bytes (88 01); outer: 1a 88 01. */
    char s[131];
    memset(s, 'x', 130);
    s[130] = 0;
    tp_pb_begin(&b, 3);
    tp_pb_begin(&b, 1);
    tp_pb_string(&b, 2, s);
    tp_pb_end(&b);
    tp_pb_end(&b);
    assert_int_equal(b.len, 3 + 3 + 3 + 130);
    static const uint8_t head[] = {0x1a, 0x88, 0x01, 0x0a, 0x85, 0x01, 0x12, 0x82, 0x01};
    assert_memory_equal(b.buf, head, sizeof head);
    for (size_t i = sizeof head; i < b.len; i++) assert_int_equal(b.buf[i], 'x');

    /* written as Trace.packet (1) to a stream: 0a, the length, the bytes */
    tp_pb_reset(&b);
    tp_pb_uint(&b, 8, 4294967297ull);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tp_pb_write_field(f, 1, &b), TPROF_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(len, 8);
    assert_memory_equal(text, "\x0a\x06\x40\x81\x80\x80\x80\x10", 8);
    free(text);

    /* misuse is an error, not bytes: an end without a begin, a message left open */
    tp_pb_reset(&b);
    tp_pb_end(&b);
    assert_int_equal(b.err, 1);
    tp_pb_reset(&b);
    tp_pb_begin(&b, 1);
    f = fopen("/dev/null", "w");
    assert_non_null(f);
    assert_int_equal(tp_pb_write_field(f, 1, &b), TPROF_ERR_INVALID_ARG);
    fclose(f);
    tp_pb_free(&b);
}

/* ------------------------------------------------------------------ the run */

static void barrier(synth_file *f, uint32_t seq, uint32_t rank, uint64_t start, uint64_t end) {
    synth_mpi_barrier(f, 1, 0xb0, seq, rank, 2, start, end);
}

/* Times are true ns after RT0 (hostA's clock). Rank 0: steps 1-3 at [10k+3, 10k+8] ms,
 * "fwd" [13.5, 15] holding "attn" [14, 14.5], kernels gemm [13.6, 14.2] and relu
 * [14.3, 14.4] on GPU 0 stream 7 and sgemm2 [36, 37] on stream 8, "produce" [20, 20.5],
 * ranges A [34, 36] and B [35, 37] of two NVTX domains (B crosses A: async), a start/end
 * range "io" [40, 45] (async), a mark at 16 ms, "loss" 0.5 at 17 ms, NaN at 18 ms (not
 * exported), 0.25 at 19 ms. Rank 1 (hostB): "consume" [20.6, 21]. Barrier k (1..5) ends at
 * 10k + 2 ms on both ranks. */
static void write_run(const char *dir) {
    synth_file *a = synth_open(dir, "hostA", 100, RT0, MONO0);
    synth_file *b = synth_open(dir, "hostB", 200, RT0 + B_START + SKEW, MONO1);
    assert_non_null(a);
    assert_non_null(b);
    synth_rank(a, 0, 2);
    synth_rank(b, 1, 2);
    synth_domain(a, 1, "dA");
    synth_domain(a, 2, "dB");
    synth_thread(a, 1, 100);
    synth_thread(b, 1, 200);
    synth_thread_name(a, 1, MONO0, 100, "main");
#define TA(t) (MONO0 + (t))
#define TB(t) (MONO1 + (t) - B_START)
    for (uint32_t k = 1; k <= 5; k++) {
        uint64_t e = 10 * MSEC * k + 2 * MSEC;
        barrier(a, k, 0, TA(10 * MSEC * k), TA(e));
        barrier(b, k, 1, TB(10 * MSEC * k + MSEC), TB(e));
    }
    for (uint64_t k = 1; k <= 3; k++) {
        synth_step_begin(a, 1, TA(10 * MSEC * k + 3 * MSEC), k);
        synth_step_end(a, 1, TA(10 * MSEC * k + 8 * MSEC), k);
    }
    synth_push(a, 1, TA(13500000), "fwd", 0, 0);
    synth_push(a, 1, TA(14 * MSEC), "attn", 0, 0);
    synth_pop(a, 1, TA(14500000), 0);
    synth_pop(a, 1, TA(15 * MSEC), 0);
    synth_kernel(a, 1, TA(13600000), TA(14200000), 0, 7, 1, "gemm");
    synth_kernel(a, 1, TA(14300000), TA(14400000), 0, 7, 2, "relu");
    synth_kernel(a, 1, TA(36 * MSEC), TA(37 * MSEC), 0, 8, 3, "sgemm2");
    synth_mark(a, 1, TA(16 * MSEC), "ckpt", 0, 0);
    synth_counter(a, 1, TA(17 * MSEC), "loss", 0.5);
    synth_counter(a, 1, TA(18 * MSEC), "loss", NAN);
    synth_counter(a, 1, TA(19 * MSEC), "loss", 0.25);
    synth_push(a, 1, TA(20 * MSEC), "produce", 0, 0);
    synth_pop(a, 1, TA(20500000), 0);
    synth_push(a, 1, TA(34 * MSEC), "A", 1, 0);
    synth_push(a, 1, TA(35 * MSEC), "B", 2, 0);
    synth_pop(a, 1, TA(36 * MSEC), 1);
    synth_pop(a, 1, TA(37 * MSEC), 2);
    synth_start(a, 1, TA(40 * MSEC), 9, "io", 0, 0);
    synth_end(a, 1, TA(45 * MSEC), 9);
    synth_push(b, 1, TB(20600000), "consume", 0, 0);
    synth_pop(b, 1, TB(21 * MSEC), 0);
    synth_end_of_file(a, TA(60 * MSEC), 0);
    synth_end_of_file(b, TB(60 * MSEC), 0);
#undef TA
#undef TB
    assert_int_equal(synth_close(a), 0);
    assert_int_equal(synth_close(b), 0);
}

/* ------------------------------------------------------------------ events of both files */

typedef struct slice {
    char name[64];
    uint64_t start, end; /* absolute ns */
} slice;

typedef struct events {
    slice sl[256], ct[64], in[64]; /* slices; counters (end: the value * 1e6); instants */
    size_t nsl, nct, nin;
    size_t clears; /* packets that cleared the interned state (the first, and any after the
                    * name table reached its cap) */
} events;

static int cmp_slice(const void *a, const void *b) {
    const slice *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void add(slice *arr, size_t *n, size_t cap, const char *name, uint64_t s, uint64_t e) {
    assert_true(*n < cap);
    snprintf(arr[*n].name, sizeof arr[*n].name, "%s", name);
    arr[*n].start = s;
    arr[*n].end = e;
    (*n)++;
}

static void sort_events(events *ev) {
    qsort(ev->sl, ev->nsl, sizeof *ev->sl, cmp_slice);
    qsort(ev->ct, ev->nct, sizeof *ev->ct, cmp_slice);
    qsort(ev->in, ev->nin, sizeof *ev->in, cmp_slice);
}

/* The Chrome JSON's events on the absolute clock: baseTimeNanoseconds + ts (µs, three
 * decimals: exact ns). */
static void chrome_events(const chrome_out *o, events *ev) {
    memset(ev, 0, sizeof *ev);
    const char *bp = strstr(o->text, "\"baseTimeNanoseconds\": ");
    assert_non_null(bp);
    uint64_t base = strtoull(bp + strlen("\"baseTimeNanoseconds\": "), NULL, 10);
    const cJSON *e, *list = o->events;
    cJSON_ArrayForEach(e, list) {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        double ts = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "ts"));
        uint64_t t = base + (uint64_t)llround(ts * 1000.0);
        if (!strcmp(ph, "X")) {
            double dur = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "dur"));
            add(ev->sl, &ev->nsl, 256, name, t, t + (uint64_t)llround(dur * 1000.0));
        } else if (!strcmp(ph, "b")) { /* its e: the same id */
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *f;
            uint64_t end = 0;
            cJSON_ArrayForEach(f, list) {
                const char *fp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "ph"));
                const cJSON *fid = cJSON_GetObjectItemCaseSensitive(f, "id");
                if (strcmp(fp, "e") || strcmp(cJSON_GetStringValue(fid), cJSON_GetStringValue(id)))
                    continue;
                double fts = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "ts"));
                end = base + (uint64_t)llround(fts * 1000.0);
            }
            assert_true(end >= t);
            add(ev->sl, &ev->nsl, 256, name, t, end);
        } else if (!strcmp(ph, "C")) {
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            double v = cJSON_GetNumberValue(args->child);
            add(ev->ct, &ev->nct, 64, name, t, (uint64_t)llround(v * 1e6));
        } else if (!strcmp(ph, "i")) {
            add(ev->in, &ev->nin, 64, name, t, t);
        }
    }
    sort_events(ev);
}

/* A reader of the wire format: the fields of one message. */
typedef struct rd {
    const uint8_t *p, *e;
} rd;

static uint64_t rd_varint(rd *r) {
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        assert_true(r->p < r->e);
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return v;
    }
    fail_msg("varint longer than 10 bytes");
    return 0;
}

/* The next field: its number, and its value (varint, fixed64) or bytes (length-delimited). */
static int rd_next(rd *r, uint32_t *field, uint64_t *v, rd *sub) {
    if (r->p >= r->e) return 0;
    uint64_t tag = rd_varint(r);
    *field = (uint32_t)(tag >> 3);
    switch (tag & 7) {
    case 0: *v = rd_varint(r); break;
    case 1:
        assert_true(r->e - r->p >= 8);
        *v = 0;
        for (int i = 0; i < 8; i++) *v |= (uint64_t)r->p[i] << (8 * i);
        r->p += 8;
        break;
    case 2: {
        uint64_t n = rd_varint(r);
        assert_true(n <= (uint64_t)(r->e - r->p));
        *sub = (rd){r->p, r->p + n};
        r->p += n;
        break;
    }
    default: fail_msg("wire type %u", (unsigned)(tag & 7));
    }
    return 1;
}

#define MAXT 256
typedef struct track {
    int used, counter;
    char name[64];
    slice open[16]; /* open slices, innermost last */
    size_t sp;
    uint64_t last_ts;
} track;

static void str_of(const rd *s, char *out, size_t n) {
    size_t k = (size_t)(s->e - s->p) < n - 1 ? (size_t)(s->e - s->p) : n - 1;
    memcpy(out, s->p, k);
    out[k] = 0;
}

/* The protobuf's events, checked as a reader needs them: one sequence whose first packet
 * clears the incremental state, interned names defined before use and never redefined,
 * tracks described before use, each track's BEGIN/END in time order and matched. */
static void perfetto_events(const uint8_t *buf, size_t len, events *ev) {
    memset(ev, 0, sizeof *ev);
    static char names[512][64];
    static track tr[MAXT];
    memset(names, 0, sizeof names);
    memset(tr, 0, sizeof tr);
    rd t = {buf, buf + len}, pk;
    uint32_t f;
    uint64_t v;
    size_t npk = 0;
    while (rd_next(&t, &f, &v, &pk)) {
        assert_int_equal(f, 1);
        uint64_t ts = 0, seq = 0, flags = 0;
        rd te = {0}, id = {0}, td = {0}, s;
        while (rd_next(&pk, &f, &v, &s)) {
            if (f == 8) ts = v;
            else if (f == 10) seq = v;
            else if (f == 13) flags = v;
            else if (f == 11) te = s;
            else if (f == 12) id = s;
            else if (f == 60) td = s;
            else fail_msg("packet field %u", f);
        }
        assert_int_equal(seq, 1);
        if (npk++ == 0) assert_int_equal(flags, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
        if (flags & 1) { /* names defined before are gone: iids start again */
            memset(names, 0, sizeof names);
            ev->clears++;
        }
        rd e;
        while (id.p && rd_next(&id, &f, &v, &e)) {
            if (f != 2) continue; /* categories: checked by protoc's test */
            uint64_t iid = 0;
            char nm[64] = "";
            rd x;
            while (rd_next(&e, &f, &v, &x)) {
                if (f == 1) iid = v;
                else if (f == 2) str_of(&x, nm, sizeof nm);
            }
            assert_true(iid > 0 && iid < 512);
            assert_int_equal(names[iid][0], 0); /* never redefined */
            snprintf(names[iid], sizeof names[iid], "%s", nm);
        }
        if (td.p) {
            uint64_t uuid = 0;
            int counter = 0;
            char nm[64] = "";
            rd x;
            while (rd_next(&td, &f, &v, &x)) {
                if (f == 1) uuid = v;
                else if (f == 2) str_of(&x, nm, sizeof nm);
                else if (f == 8) counter = 1;
            }
            assert_true(uuid > 0 && uuid < MAXT);
            assert_int_equal(tr[uuid].used, 0);
            tr[uuid].used = 1;
            tr[uuid].counter = counter;
            snprintf(tr[uuid].name, sizeof tr[uuid].name, "%s", nm);
        }
        if (te.p) {
            assert_int_equal(flags, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
            uint64_t type = 0, uuid = 0, iid = 0;
            double dv = NAN;
            rd x;
            while (rd_next(&te, &f, &v, &x)) {
                if (f == 9) type = v;
                else if (f == 11) uuid = v;
                else if (f == 10) iid = v;
                else if (f == 44) memcpy(&dv, &v, sizeof dv);
                else if (f == 30) dv = (double)(int64_t)v;
            }
            assert_true(uuid > 0 && uuid < MAXT && tr[uuid].used);
            track *k = &tr[uuid];
            const char *nm = iid ? names[iid] : "";
            if (iid) assert_true(nm[0]);
            if (type == 1 || type == 2) { /* slices: in time order on their track */
                assert_true(ts >= k->last_ts);
                k->last_ts = ts;
            }
            if (type == 1) {
                assert_true(k->sp < 16);
                snprintf(k->open[k->sp].name, sizeof k->open[k->sp].name, "%s", nm);
                k->open[k->sp++].start = ts;
            } else if (type == 2) {
                assert_true(k->sp > 0);
                k->sp--;
                add(ev->sl, &ev->nsl, 256, k->open[k->sp].name, k->open[k->sp].start, ts);
            } else if (type == 3) {
                add(ev->in, &ev->nin, 64, nm, ts, ts);
            } else if (type == 4) {
                assert_true(k->counter);
                add(ev->ct, &ev->nct, 64, k->name, ts, (uint64_t)llround(dv * 1e6));
            } else {
                fail_msg("event type %llu", (unsigned long long)type);
            }
        }
    }
    for (size_t i = 0; i < MAXT; i++) assert_int_equal(tr[i].sp, 0); /* every slice ended */
    sort_events(ev);
}

static void same_events(const events *a, const events *b) {
    assert_int_equal(a->nsl, b->nsl);
    assert_int_equal(a->nct, b->nct);
    assert_int_equal(a->nin, b->nin);
    for (size_t i = 0; i < a->nsl; i++) {
        assert_string_equal(a->sl[i].name, b->sl[i].name);
        assert_int_equal(a->sl[i].start, b->sl[i].start);
        assert_int_equal(a->sl[i].end, b->sl[i].end);
    }
    for (size_t i = 0; i < a->nct; i++) {
        assert_string_equal(a->ct[i].name, b->ct[i].name);
        assert_int_equal(a->ct[i].start, b->ct[i].start);
        assert_int_equal(a->ct[i].end, b->ct[i].end);
    }
    for (size_t i = 0; i < a->nin; i++) {
        assert_string_equal(a->in[i].name, b->in[i].name);
        assert_int_equal(a->in[i].start, b->in[i].start);
    }
}

static const slice *find(const events *e, const char *name) {
    for (size_t i = 0; i < e->nsl; i++)
        if (!strcmp(e->sl[i].name, name)) return &e->sl[i];
    fail_msg("no slice %s", name);
    return NULL;
}

/* Both exports of the run under opts; the protobuf's events in *pf. */
static void export_both(const tp_run *run, const tp_export_opts *opts, events *pf,
                        tp_perfetto_counts *cnt) {
    chrome_out co = export_run(run, -1, opts);
    char *bin = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&bin, &blen);
    assert_non_null(f);
    assert_int_equal(tp_export_perfetto(run, f, opts, cnt), TPROF_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(cnt->bytes, blen);
    static events ch;
    chrome_events(&co, &ch);
    perfetto_events((const uint8_t *)bin, blen, pf);
    same_events(&ch, pf);
    assert_int_equal(cnt->slices, pf->nsl);
    assert_int_equal(cnt->counters, pf->nct);
    assert_int_equal(cnt->instants, pf->nin);
    out_free(&co);
    free(bin);
}

static ssize_t failing_write(void *c, const char *buf, size_t n) {
    (void)c;
    (void)buf;
    (void)n;
    return -1;
}

static void test_same_as_chrome(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "perfetto-run"), 0);
    write_run(dir);
    tp_run run;
    load(dir, &run);
    static events pf;
    tp_perfetto_counts c;

    /* everything: rank 0 has 3 steps, fwd, attn, produce, A, B, io, 3 kernels and 5
     * barriers (17 slices); rank 1 consume and 5 barriers; counters loss 0.5 and 0.25
     * (not the NaN); instants ckpt and Record Window End */
    export_both(&run, NULL, &pf, &c);
#ifdef TP_PERFETTO_NAMES_MAX_BYTES
    /* built with a name table of a few names (test_perfetto_names_cap): the interned state
     * is cleared again and again, and every event still reads its name */
    assert_true(pf.clears > 5);
#else
    assert_int_equal(pf.clears, 1);
#endif
    assert_int_equal(pf.nsl, 23);
    assert_int_equal(pf.nct, 2);
    assert_int_equal(pf.nin, 2);
    /* on hostA's clock, and hostB moved by the offset the barriers give */
    assert_int_equal(find(&pf, "fwd")->start, RT0 + 13500000);
    assert_int_equal(find(&pf, "attn")->end, RT0 + 14500000);
    assert_int_equal(find(&pf, "B")->start, RT0 + 35 * MSEC);
    assert_int_equal(find(&pf, "B")->end, RT0 + 37 * MSEC);
    assert_int_equal(find(&pf, "io")->end, RT0 + 45 * MSEC);
    assert_int_equal(find(&pf, "sgemm2")->start, RT0 + 36 * MSEC);
    assert_int_equal(find(&pf, "ProfilerStep#2")->start, RT0 + 23 * MSEC);
    assert_int_equal(find(&pf, "consume")->start, RT0 + 20600000);
    assert_int_equal(find(&pf, "consume")->end, RT0 + 21 * MSEC);
    assert_string_equal(pf.ct[0].name, "loss");
    assert_int_equal(pf.ct[0].start, RT0 + 17 * MSEC);
    assert_int_equal(pf.ct[0].end, 500000);
    assert_int_equal(pf.ct[1].end, 250000);
    assert_string_equal(pf.in[0].name, "Record Window End");
    assert_string_equal(pf.in[1].name, "ckpt");
    assert_int_equal(pf.in[1].start, RT0 + 16 * MSEC);
    /* tracks: 2 processes, 2 threads, GPU 0 and its 2 streams, 2 communicators, the loss
     * counter, B and io (async) */
    assert_int_equal(c.tracks, 12);

    /* steps 1-2 of rank 0: [13, 28) ms: steps 1 and 2, fwd, attn, gemm, relu, produce,
     * barrier 2 of both ranks, consume; both counters; ckpt and the window's end */
    tp_export_opts o = {NULL, 1, NULL, NULL, 0, 1, 0, 1, 2, 0, 0};
    export_both(&run, &o, &pf, &c);
    assert_int_equal(pf.nsl, 10);
    assert_int_equal(pf.nct, 2);
    assert_int_equal(pf.nin, 2);

    /* rank 1 only */
    int r1 = 1;
    tp_export_opts o1 = {NULL, 1, NULL, &r1, 1, 0, 0, 0, 0, 0, 0};
    export_both(&run, &o1, &pf, &c);
    assert_int_equal(pf.nsl, 6);
    assert_int_equal(pf.nct, 0);
    assert_int_equal(pf.nin, 1);
    assert_int_equal(find(&pf, "consume")->start, RT0 + 20600000);

    /* a write that fails is TPROF_ERR_IO, as the Chrome export's */
    cookie_io_functions_t io = {NULL, failing_write, NULL, NULL};
    FILE *bad = fopencookie(NULL, "w", io);
    assert_non_null(bad);
    assert_int_equal(tp_export_perfetto(&run, bad, NULL, NULL), TPROF_ERR_IO);
    fclose(bad);

    /* a selection that matches nothing is the Chrome export's error */
    int r9 = 9;
    tp_export_opts o9 = {NULL, 1, NULL, &r9, 1, 0, 0, 0, 0, 0, 0};
    FILE *f = fopen("/dev/null", "w");
    assert_int_equal(tp_export_perfetto(&run, f, &o9, NULL), TPROF_ERR_NOT_FOUND);
    fclose(f);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ external readers */

/* The run's trace into dir/trace.pftrace; 0 or -1. */
static int write_trace(char *dir, size_t n, char *file, size_t fn) {
    if (synth_tmpdir(dir, n, "perfetto-ext")) return -1;
    write_run(dir);
    tp_run run;
    char err[256];
    if (tp_run_load(dir, &run, err, sizeof err)) return -1;
    snprintf(file, fn, "%s/trace.pftrace", dir);
    FILE *f = fopen(file, "wb");
    int rc = f ? tp_export_perfetto(&run, f, NULL, NULL) : -1;
    if (f && fclose(f)) rc = -1;
    tp_run_free(&run);
    return rc ? -1 : 0;
}

static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* protoc decodes the file against the subset of Perfetto's protos; no field is unknown. */
static int run_protoc(const char *proto) {
    if (system("command -v protoc >/dev/null 2>&1") != 0) {
        printf("protoc not found (Debian: protobuf-compiler): skipped\n");
        return 77;
    }
    char dir[512], file[700], txt[700], inc[600], cmd[3000];
    if (write_trace(dir, sizeof dir, file, sizeof file)) return 1;
    snprintf(txt, sizeof txt, "%s/trace.txt", dir);
    snprintf(inc, sizeof inc, "%s", proto);
    char *slash = strrchr(inc, '/');
    if (slash) *slash = 0;
    snprintf(cmd, sizeof cmd, "protoc --decode=perfetto.protos.Trace -I'%s' '%s' < '%s' > '%s'",
             slash ? inc : ".", proto, file, txt);
    if (system(cmd) != 0) {
        printf("FAIL: %s\n", cmd);
        return 1;
    }
    struct {
        const char *what;
        int want;
    } checks[] = {
        {"type: TYPE_SLICE_BEGIN", 23},
        {"type: TYPE_SLICE_END", 23},
        {"type: TYPE_COUNTER", 2},
        {"type: TYPE_INSTANT", 2},
        {"track_descriptor {", 12},
        {"process_name: \"rank 0 (hostA:100)\"", 1},
        {"process_name: \"rank 1 (hostB:200)\"", 1},
        {"thread_name: \"main\"", 1},
        {"name: \"GPU 0 stream 7\"", 1},
        {"name: \"comm 0x00000000000000b0 (2 ranks, rank 0)\"", 1},
        {"sequence_flags: 1", 1},
        {"trusted_packet_sequence_id: 1", -1}, /* on every packet: checked below */
        {"unit: UNIT_SIZE_BYTES", 0},
    };
    int bad = 0, packets = count_lines(txt, "packet {");
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        int n = count_lines(txt, checks[i].what);
        int want = checks[i].want < 0 ? packets : checks[i].want;
        if (n != want) {
            printf("FAIL: %d lines with '%s', want %d\n", n, checks[i].what, want);
            bad = 1;
        }
    }
    /* a field the subset does not name shows as a bare number: none may */
    snprintf(cmd, sizeof cmd, "grep -Eq '^ *[0-9]+[:{ ]' '%s'", txt);
    if (system(cmd) == 0) {
        printf("FAIL: fields protoc does not know in %s\n", txt);
        bad = 1;
    }
    if (!bad) synth_rmtree(dir);
    printf("%s: %d packets decoded\n", bad ? "FAIL" : "ok", packets);
    return bad;
}

/* The perfetto package on the file (the script skips with 77 without it). */
static int run_python(const char *script) {
    char dir[512], file[700], cmd[2000];
    if (write_trace(dir, sizeof dir, file, sizeof file)) return 1;
    /* 23 slices, 2 counters, 2 instants */
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' 23 2 2", script, file);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    synth_rmtree(dir);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--protoc")) return run_protoc(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--python")) return run_python(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_same_as_chrome),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
