/*
 * writer.h — the rank file's writer and the library's private descriptors (core/writer.c).
 *
 * The writer belongs to the flusher thread: it is called from that thread only (and from a
 * forked child's single thread in tprof__writer_after_fork), so it keeps its state without a
 * lock, and no thread that records ever waits for its I/O. What it guarantees:
 *
 *  - It never writes to, nor closes, a descriptor that is not its own. Before each write it
 *    compares the descriptor's device and inode (fstat) with the file it created; a program
 *    that closed the descriptor, and perhaps got the number back for a pipe or socket of its
 *    own, is left alone: the writer reopens its file by path (O_APPEND, never truncating)
 *    and counts the event (metadata rank_file.reopened).
 *  - The file always ends with a whole chunk. A write that fails (ENOSPC, EDQUOT, EFBIG, EIO,
 *    ...) or stops short is cut back (ftruncate) to the last whole chunk, so a reader never
 *    stops at a half chunk in the middle of the file; the chunk is dropped and counted
 *    (chunks, records, payload bytes, first errno: metadata write_errors.*, docs/format.md),
 *    one line goes to the log, and writing is tried again later (50 ms, doubling up to 2 s;
 *    at once for an explicit flush), so writing resumes when space returns.
 *  - Chunks are compressed here, on the flusher, never on a thread that records: zstd at
 *    TRAINPROF_COMPRESS (default 1; 0 plain), one context and one output buffer reused for
 *    every chunk (about 0.6 MiB and 4 MiB at level 1: format/zchunk.h), each chunk a frame of
 *    its own (docs/format.md, "Compressed chunks"). A chunk that does not shrink, or any
 *    chunk when libzstd.so.1 cannot be loaded, is written plain (capability `compression`
 *    says which). The write_errors.* byte counts are of records, uncompressed.
 */
#ifndef TPROF_WRITER_H
#define TPROF_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct tprof__thread;

/* ------------------------------------------------------------ private descriptors */

/* Descriptors the library keeps are close-on-exec and live in a reserved range at the top of
 * the table: from top - 64 upwards, where top is the soft RLIMIT_NOFILE capped at 4096 (the
 * kernel sizes a process's descriptor table to its highest descriptor; 4096 entries cost
 * 32 KiB). A program's own descriptors come from the lowest free numbers (POSIX open(2)), so
 * one that closes its descriptors and opens new ones does not get ours back unless it fills
 * its table; the identity check of the writer covers that case too.
 *
 * tprof__fd_private moves fd into the range (F_DUPFD_CLOEXEC, then closes fd) and returns the
 * new number; when the range is full or above the limit it returns fd itself, made
 * close-on-exec. -1 stays -1 (errno untouched). tprof__open_private is open(2) with O_CLOEXEC
 * followed by that move. Any thread; a few system calls. */
int tprof__fd_private(int fd);
int tprof__open_private(const char *path, int flags, unsigned mode);
/* The first descriptor of the reserved range under the current limit. */
int tprof__fd_reserved_base(void);
/* Whether fd still names the plain file we opened there (device dev, inode ino): the program
 * may have closed our descriptor and opened something else under its number. Its size in
 * *size when size is not NULL. One fstat: async-signal-safe. */
int tprof__fd_is(int fd, uint64_t dev, uint64_t ino, uint64_t *size);

/* ------------------------------------------------------------------- the writer */

/* What the rank file's header says and where it goes: called when a session starts, before
 * the flusher runs. no_file: a session without a rank file (chunks are accepted and dropped,
 * not counted). */
void tprof__writer_setup(const char *dir, const char *run_id, uint64_t start_realtime_ns,
                         uint64_t start_mono_ns, int no_file);

/* Appends one chunk (header, then len bytes of whole records) of thread `serial`. Creates the
 * file on first use. Returns 0 when the chunk is in the file, TPROF_ERR_IO when not: then,
 * unless `keep` (the caller keeps the data and offers it again, as the flusher does for the
 * process stream), its records are counted as lost to write errors. */
int tprof__writer_chunk(uint32_t serial, uint32_t os_tid, uint64_t dropped, const void *data,
                        size_t len, int keep);

/* A chunk of thread t's records, as tprof__writer_chunk (never kept). The name definitions
 * of a chunk that cannot be written (STRING and THREAD_NAME records) are not lost: they are
 * kept in t->w_defs and written as a chunk of their own ahead of t's next chunk, so that
 * the records written later still have names; they are not counted as lost. */
int tprof__writer_thread_chunk(struct tprof__thread *t, uint64_t dropped, const void *data,
                               size_t len);

/* A thread about to be freed: definitions still kept are counted as lost. */
void tprof__writer_thread_gone(struct tprof__thread *t);

/* The next chunk is tried even while writing is backing off after an error (an explicit
 * flush, the final pass). */
void tprof__writer_retry_now(void);

/* Writes the write_errors.* / rank_file.reopened metadata if it changed since last written
 * (it is also written after each successful chunk that follows a change). */
void tprof__writer_status(void);

/* The last word on the file, after its end record: the counts are written, and when they do
 * not fit (the disk stayed full), whole chunks are cut off the end (ftruncate, on our own
 * descriptor only), newest first, and counted as lost too, until they do. A process that
 * never managed to create its file leaves a marker instead (a symbolic link
 * <dir>/<host>-<pid>.tprof-create-failed whose target is the reason; docs/format.md), which
 * takes no descriptor. Flusher only; storage calls are bracketed for the shutdown wait. */
void tprof__writer_final(void);

/* fsync of the file, if it is still ours. */
void tprof__writer_sync(void);

/* Closes the file if the descriptor is still ours. */
void tprof__writer_close(void);

/* In a forked child: closes the child's copy of the parent's file (if ours) and forgets it;
 * the child's session creates its own. */
void tprof__writer_after_fork(void);

/* Appends `n` bytes (a whole chunk) to the rank file from a signal handler, when the flusher
 * itself faulted and its state cannot be trusted: fstat and write only (async-signal-safe),
 * no lock, no bookkeeping; nothing is written when the descriptor is not the file this
 * writer created. */
void tprof__writer_emergency(const void *buf, size_t n);

/* The rank file's path once it was created, else NULL. Any thread. */
const char *tprof__writer_path(void);

/* Nonzero when the last attempt to write failed or the file could not be created. Any
 * thread. */
int tprof__writer_failing(void);

/* Totals, for tests and the log: chunks, records and payload bytes not written, the first
 * write error's errno (0: none), and how often the descriptor was found not ours. */
typedef struct tprof__writer_stats {
    uint64_t lost_chunks, lost_records, lost_bytes;
    int first_errno;
    uint64_t reopened;
} tprof__writer_stats;
void tprof__writer_get_stats(tprof__writer_stats *out);

/* Implemented by flusher.c: called by the writer around each system call that may block on
 * storage (write, ftruncate, fsync), so that the flusher holds none of the session's locks
 * there (fork() waits for a flusher that is between such calls, never inside one). */
void tprof__flusher_io_begin(void);
void tprof__flusher_io_end(void);

#endif /* TPROF_WRITER_H */
