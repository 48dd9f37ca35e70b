/*
 * synth.h — a synthetic .tprof rank-file writer for tests.
 *
 * Tests need runs whose timelines they know to the nanosecond, and damaged files whose
 * damage they placed themselves; the real library can give neither. This writer produces
 * files exactly as src/format/format.h lays them out (file header with its crc, chunks of
 * 8-byte-aligned records with a zlib crc32 of the payload), so the real reader and model
 * load them. It knows nothing of rings or clocks: every timestamp is given explicitly.
 *
 * Usage:
 *
 *     synth_file *f = synth_open(dir, "node0", 1234, RT0, MONO0);
 *     synth_rank(f, 0, 2);                       // metadata rank / world_size
 *     synth_thread(f, 1, 1234);                  // thread serial 1 is os tid 1234
 *     synth_thread_name(f, 1, MONO0, 1234, "main");
 *     synth_push(f, 1, MONO0 + 1000000, "fwd", 0, 0);
 *     synth_pop(f, 1, MONO0 + 3500500, 0);
 *     synth_end_of_file(f, MONO0 + 9000000, 0);
 *     assert(synth_close(f) == 0);
 *
 * Records are buffered per thread serial; synth_flush() (or synth_close()) writes one chunk
 * per thread that has pending records, in the order the serials were first used. Call
 * synth_flush_thread() to control chunk order (e.g. an async END flushed before its START).
 * Serial 0 is the process stream (metadata, domains, categories, clock, end of file); its
 * chunks carry os tid = pid.
 *
 * Errors (allocation, I/O, a record too large) are sticky: the record functions return
 * nothing and synth_close() returns -1 and prints the first reason on stderr.
 * Timestamps are CLOCK_MONOTONIC ns as the library would record them (absolute, not
 * relative to the start pair). Not thread safe.
 */
#ifndef TPROF_TESTS_SYNTH_H
#define TPROF_TESTS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct synth_file synth_file;

/* Everything the file header holds. Unset strings become "" ; file_name NULL gives the
 * library's name, "<host>-<pid>.tprof". */
typedef struct synth_header {
    const char *host;
    int32_t pid, ppid;
    uint64_t start_realtime_ns, start_mono_ns;
    const char *run_id, *build;
    const char *file_name;
} synth_header;

/* Creates <dir>/<host>-<pid>.tprof (replacing any) and writes its header. NULL on failure
 * (reason on stderr). */
synth_file *synth_open(const char *dir, const char *host, int32_t pid,
                       uint64_t start_realtime_ns, uint64_t start_mono_ns);
synth_file *synth_open_ex(const char *dir, const synth_header *h);

/* Path of the file being written; valid until synth_close. */
const char *synth_path(const synth_file *f);

/* Bytes written to the file so far (header plus flushed chunks): the offset at which the
 * next flushed chunk will start. For placing damage. */
uint64_t synth_offset(const synth_file *f);

/* Declares that thread `serial` (>= 1) has os tid `os_tid`. A serial used without this
 * gets os tid pid + serial. */
void synth_thread(synth_file *f, uint32_t serial, uint32_t os_tid);

/* The cumulative drop count the next chunks of `serial` report. */
void synth_set_dropped(synth_file *f, uint32_t serial, uint64_t dropped);

/* --- thread records (serial >= 1). Names are written inline unless a _sid variant is
 * used; names longer than TPROF_MAX_INLINE are truncated as the library does. */
void synth_string(synth_file *f, uint32_t serial, uint32_t id, const char *s);
void synth_push(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                uint32_t domain, uint32_t category);
void synth_push_sid(synth_file *f, uint32_t serial, uint64_t ts, uint32_t string_id,
                    uint32_t domain, uint32_t category);
void synth_pop(synth_file *f, uint32_t serial, uint64_t ts, uint32_t domain);
void synth_start(synth_file *f, uint32_t serial, uint64_t ts, uint64_t id, const char *name,
                 uint32_t domain, uint32_t category);
void synth_end(synth_file *f, uint32_t serial, uint64_t ts, uint64_t id);
void synth_mark(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                uint32_t domain, uint32_t category);
void synth_counter(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                   double value);
void synth_step_begin(synth_file *f, uint32_t serial, uint64_t ts, uint64_t step);
void synth_step_end(synth_file *f, uint32_t serial, uint64_t ts, uint64_t step);
/* Names thread `named_tid` (usually the recording thread's own os tid). */
void synth_thread_name(synth_file *f, uint32_t serial, uint64_t ts, uint64_t named_tid,
                       const char *name);

/* A CUPTI kernel record (kind GPU_KERNEL) as the library writes it from CUPTI's buffers:
 * start and end on CLOCK_MONOTONIC, device, stream, correlation id, name inline. */
void synth_kernel(synth_file *f, uint32_t serial, uint64_t start, uint64_t end, uint32_t device,
                  uint32_t stream, uint32_t correlation, const char *name);

/* A CUPTI API record (kind GPU_API): the runtime or driver function `name` called by
 * thread `os_tid` over [start, end], with its CUPTI callback id and correlation id. */
void synth_api(synth_file *f, uint32_t serial, uint64_t start, uint64_t end, uint32_t os_tid,
               uint32_t cbid, uint32_t correlation, const char *name);

/* A COMM_OP record starting at `start` with the payload as given (format.h's tprof_pl_comm;
 * its end_ns, gpu_start_ns/gpu_end_ns and flags too). name NULL: the op's own name
 * (tprof__comm_op_name). */
struct tprof_pl_comm;
void synth_comm(synth_file *f, uint32_t serial, uint64_t start, const struct tprof_pl_comm *pl,
                const char *name);
/* An MPI barrier (host-timed, so its end counts for clock alignment) of rank `rank` of
 * `nranks` on communicator `comm`, sequence number `seq`, entered at `start` and left at
 * `end` (monotonic of its file), on thread `serial`. */
void synth_mpi_barrier(synth_file *f, uint32_t serial, uint64_t comm, uint32_t seq,
                       uint32_t rank, uint32_t nranks, uint64_t start, uint64_t end);

/* --- process-stream records (serial 0) */
void synth_meta(synth_file *f, const char *key, const char *value);
void synth_rank(synth_file *f, int rank, int world_size); /* meta rank, world_size */
void synth_domain(synth_file *f, uint32_t id, const char *name);
void synth_category(synth_file *f, uint32_t domain, uint32_t id, const char *name);
void synth_clock(synth_file *f, uint64_t ts, uint64_t realtime_ns, uint64_t mono_ns);
/* END_OF_FILE at monotonic `mono_ns` (its realtime follows from the start pair). */
void synth_end_of_file(synth_file *f, uint64_t mono_ns, uint64_t dropped_total);

/* Any record: kind, arg, ts, then `pl_len` payload bytes and `tail_len` tail bytes (give
 * the NULs of strings explicitly), zero-padded to 8. For kinds without a helper, unknown
 * kinds, or deliberately malformed payloads. */
void synth_raw(synth_file *f, uint32_t serial, uint16_t kind, uint32_t arg, uint64_t ts,
               const void *pl, size_t pl_len, const void *tail, size_t tail_len);

/* Writes pending records as chunks: all threads, or one. */
void synth_flush(synth_file *f);
void synth_flush_thread(synth_file *f, uint32_t serial);

/* Flushes, closes and frees. 0, or -1 when any earlier call failed. */
int synth_close(synth_file *f);

/* --- damage, for reliability tests. Offsets may be negative: counted from the end. */
int synth_truncate(const char *path, int64_t offset);
int synth_flip_byte(const char *path, int64_t offset, uint8_t xor_mask);
int64_t synth_file_size(const char *path);

/* --- scratch directories. synth_tmpdir makes a fresh directory under $TPROF_TEST_TMP
 * (else /tmp) named after `tag`; synth_rmtree removes a tree. Both return 0 or -1. */
int synth_tmpdir(char *out, size_t n, const char *tag);
int synth_rmtree(const char *dir);

#endif /* TPROF_TESTS_SYNTH_H */
