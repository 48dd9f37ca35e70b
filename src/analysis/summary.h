/*
 * summary.h — a rank file's summary: what the report's load keeps of the file (its slim
 * process, summary_slim.c) and, for a rank, what the report's rank section computes from the
 * file (report.c, section_job), kept in a file beside it (`<rank file>.sum`, docs/format.md
 * "Summary files") so that a later report takes both from it and decodes no rank file.
 * Written by `trainprof summarize` (tp_report_summarize), on threads and, under a launcher,
 * by every task for its share of the files; read by tp_run_load_slim (the slim process),
 * tp_report_make and tp_run_fill_memos (the section and memos).
 *
 * A summary holds the section's part of report.json (the cJSON fragment, every node with its
 * type and exact value), its typed results (tp_rank_result, field by field: summary_codec.c),
 * the rank's steps memo and communication memo (model.h), and what makes it valid: a key
 * that must equal, byte for byte, the one computed when it is read: the summary format, the
 * trainprof build, the rank file's size, modification and status-change times and header (the slim
 * load's fields, tp_process_load_whole), the bytes the slim load read of it and the damage it
 * found there, what the run decided of the process (rank, role, label), the identity of the
 * process whose NVML samples its section reads (tp_gpu_samples_for), and every report option
 * a section reads (step name, warm-up, data-loading names, top rows). A summary whose key
 * differs, or whose body fails its CRC or its decoding, is never trusted: the section is
 * computed again from the rank file.
 *
 * Strings of the results are interned into the reading run's pool (tp_intern); those that
 * point into the rank's own capture result are pointed there again. Not for torch.profiler
 * traces (read whole, never slim); a process other than a rank has no section, and its
 * summary holds its slim process alone. The slim process has a key of its own (the file
 * alone: tp_sum_slim_key), since the load needs it before the run decides any role.
 */
#ifndef TPROF_SUMMARY_H
#define TPROF_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

struct tp_report_opts;

/* The summary file's name suffix: "host-pid.tprof" -> "host-pid.tprof.sum". */
#define TP_SUMMARY_SUFFIX ".sum"

/* Bumped whenever the layout of a summary changes (summary.c, summary_codec.c), or what a
 * rank section computes from the same file (an older summary would then be taken as current
 * and give figures the rank file no longer gives), or what a slim process holds of it (an
 * older summary would hold what the merge no longer needs: before 12, every value a
 * metadata key was ever given). 13: the GPU result counts the pauses past those it lists.
 * 15: a rank's communication says when its rows were lost to memory. 16: a rank says when
 * its section ran out of memory. */
#define TP_SUMMARY_VERSION 16

/* What one summary holds: the rank section's outputs (report.c's rank_job). The section and
 * the memos are owned by whoever holds them: tp_summary_read hands them to the caller. */
typedef struct tp_summary_parts {
    cJSON *section;       /* the "ranks[]" entry of report.json; NULL for memos only */
    tp_rank_result *res;  /* the typed results; NULL for memos only */
    tp_steps *steps;      /* the steps memo (heap), or NULL when none was found */
    tp_comm_time *comm;   /* the comm memo, p->ncomm entries (heap), or NULL */
} tp_summary_parts;

/* The summary path of rank file p into buf (n bytes): its file's path as opened plus
 * TP_SUMMARY_SUFFIX. 0, or -1 when it does not fit. */
int tp_summary_path(const tp_process *p, char *buf, size_t n);

/* Whether slim rank p has a summary whose key is the one computed now from the run, p's file
 * and the options o: 1 (its body is still to be checked by tp_summary_read), 0 when there is
 * no summary file, -1 when there is one that is not valid (stale or damaged). Reads the
 * summary's head only. Safe on several threads at once for distinct processes. */
int tp_summary_check(const tp_run *run, const tp_process *p, const struct tp_report_opts *o);

/* Reads slim rank p's summary into *out: with memos_only, only the steps and comm memos
 * (section and res left NULL), else all four, out->res filled in place (the caller gives the
 * tp_rank_result, zeroed or not; on failure it is left empty, freeable by
 * tp_rank_result_free). Strings are interned into run's pool (locks). Returns 1 when read,
 * 0 when there is no summary, -1 when it is stale or damaged (nothing kept). Safe on several
 * threads at once for distinct processes. */
int tp_summary_read(tp_run *run, const tp_process *p, const struct tp_report_opts *o,
                    int memos_only, tp_summary_parts *out);

/* The section block's body (n bytes at b, its key and CRC already found valid) decoded into
 * *out as tp_summary_read does it: p is the slim process the section is of (its ncomm sizes
 * the comm memo, its header's host becomes out->res->host), memos_only and out->res as
 * there. The bytes are outside input: any content is a decoded value or a clean failure.
 * 1 when decoded (out's parts are the caller's), 0 when not (nothing kept: out->res left
 * empty). Reads b only; strings interned into run's pool (locks). */
int tp_summary_section_decode(tp_run *run, const tp_process *p, const void *b, size_t n,
                              int memos_only, tp_summary_parts *out);

/* Writes slim process p's summary: its slim process (p must be as tp_run_load_slim left it,
 * its file unchanged since: else -1, "the rank file changed since it was read"), and for a
 * rank its section's outputs (in: section and res required; steps and comm may be NULL; in
 * NULL: no section, for a process other than a rank), atomically: a temporary file beside
 * it renamed into place, so a reader sees the old summary or the new one, never a part.
 * Never touches the rank file.
 * Returns 0, or -1 with why (n bytes) filled. Safe on several threads at once for distinct
 * processes. */
int tp_summary_write(const tp_run *run, const tp_process *p, const struct tp_report_opts *o,
                     const tp_summary_parts *in, char *why, size_t n);

/* Removes the temporary files of the summaries being written (tp_summary_write, on any
 * thread), and makes every later write wait forever: for a process about to die of a signal
 * (a launcher's SIGTERM), which would leave them beside the rank files. Not async-signal-safe
 * (it takes a lock): called on a thread that took the signal with sigwait, which then ends
 * the process. */
void tp_summary_abandon(void);

/* The codec (summary_codec.c): the rank result and the section's cJSON, appended to or read
 * from a byte buffer, or streamed through a file (tp_sum_stream_read, tp_sum_stream_write):
 * the slim block, which holds a node sampler's packed GPU samples (about 260 MB a day of an
 * 8-GPU node), was otherwise held twice, as the process's and as the body's bytes. */
typedef struct tp_sum_buf {
    unsigned char *b;
    size_t len, cap, at; /* at: the reader's next byte */
    int bad;             /* writing: out of memory or a failed write; reading: past the end,
                            a bad value or a failed read */
    tp_run *run;         /* reading: the pool strings are interned into */
    tp_rank_result *rr;  /* the rank result being coded (its own capture texts) */
    /* Streamed: b is a window of cap bytes. Reading f, it holds the body's bytes [base,
     * base + wlen), len being the body's length; writing fd, the wlen bytes not yet written,
     * len counting all. crc: the CRC-32 (zlib) of the bytes read from f or written so far;
     * err: the errno of a failed read or write, else 0. */
    FILE *f;
    int fd;              /* writing streamed */
    int stream;          /* 1 reading f, 2 writing fd, 0 in memory */
    size_t base, wlen;
    uint32_t crc;
    int err;
    /* Reading f in place: the file offset of the body's byte 0, where a thread's long packed
     * counters are left to be read from (counter_pack.h, tp_cpack_refer) rather than copied;
     * in_place 0 when they are copied (a summary read from memory, or a caller's choice). */
    int in_place;
    uint64_t src_off;
} tp_sum_buf;

/* A reader of the len bytes at f's position, through a window of `window` bytes (at least 1;
 * a read of more than that goes straight into its destination).
 * A text read from it (a string, an owned string) is valid until its next read, which the
 * slim block's reader (interning or copying each at once) allows; the section's parts, which
 * keep several, are read from memory. The bytes are read once, in order, each into the CRC;
 * tp_sum_stream_end reads what the decoding left (damage) and says the CRC of all. c's
 * window is freed by the caller (free(c->b)). 0, or TPROF_ERR_NO_MEMORY. */
int tp_sum_stream_read(tp_sum_buf *c, FILE *f, size_t len, size_t window);
/* A writer to fd through a window of `window` bytes: 0, or TPROF_ERR_NO_MEMORY. */
int tp_sum_stream_write(tp_sum_buf *c, int fd, size_t window);
/* The CRC-32 (zlib's) of crc's bytes followed by the n at p (crc 0 for none before: the start
 * of a CRC); n may pass the 4 GiB - 1 zlib takes a call. */
uint32_t tp_sum_crc(uint32_t crc, const void *p, size_t n);
/* n bytes to fd (EINTR retried): 0, or TPROF_ERR_IO (errno set; EIO when nothing could be
 * written). */
int tp_sum_write_all(int fd, const void *b, size_t n);
/* Reading: the rest of the body read, c->bad set when it cannot be. Writing: the window
 * written out. Either way, the CRC-32 of every byte (meaningful when !c->bad). */
uint32_t tp_sum_stream_end(tp_sum_buf *c);

void tp_sum_put(tp_sum_buf *c, const void *p, size_t n);
void tp_sum_get(tp_sum_buf *c, void *p, size_t n);
/* One value either way (reading: from c, else into it) of n bytes; a size_t as 8 bytes; a
 * string (NULL, a text interned into c->run's pool on reading, or a tag for one of c->rr's
 * capture texts); an owned string (strdup'd on reading); whether an owned array of n
 * elements is allocated (reading: calloc'd, n bounded by the bytes left), 1 when it is. */
void tp_sum_raw(tp_sum_buf *c, int reading, void *p, size_t n);
void tp_sum_size(tp_sum_buf *c, int reading, size_t *v);
void tp_sum_str(tp_sum_buf *c, int reading, const char **s);
void tp_sum_owned(tp_sum_buf *c, int reading, char **s);
int tp_sum_array(tp_sum_buf *c, int reading, void *arrp, size_t n, size_t elem);
/* rr into / out of c (out: every array allocated as tp_rank_result_free frees it). */
void tp_sum_rank_result(tp_sum_buf *c, tp_rank_result *rr, int reading);
void tp_sum_json_put(tp_sum_buf *c, const cJSON *j);
cJSON *tp_sum_json_get(tp_sum_buf *c);
/* The memos (model.h): the steps (NULL: none) and the comm memo of n entries (NULL: none). */
void tp_sum_steps(tp_sum_buf *c, tp_steps **s, int reading);
void tp_sum_comm(tp_sum_buf *c, tp_comm_time **t, size_t n, int reading);

/* The slim process (summary_slim.c): what tp_run_load_slim keeps of a rank file (model.h,
 * tp_process_slim), every field but those the run decides (rank, role and the rest, which
 * the loader sets again: tp_summary_slim_load) and the path, which is the one opened now.
 * Writing, p must be slim (no GPU record, API call, allocation or mark: else c->bad). */
void tp_sum_slim(tp_sum_buf *c, tp_process *p, int reading);
/* The slim block's key of rank file `file` into k: the machine kind, the trainprof build,
 * the file's size, modification and status-change times and its header's bytes now (stat and
 * the header alone). 0, or -1 when the file cannot be looked at or is shorter than a header.
 * *size gets the file's size. */
int tp_sum_slim_key(const char *file, tp_sum_buf *k, uint64_t *size);

/* Rank file `path`'s slim process from its summary, into *p (zeroed first), as
 * tp_run_load_slim's own read would leave it before the run decides roles: its path and
 * file are `path`, its strings interned into run's pool. Only when the summary holds a slim
 * block whose key is the file's now (tp_sum_slim_key) and whose body passes its CRC and
 * decodes whole. 1 when loaded; 0 when there is no summary, -1 when it is not valid (p is
 * left zeroed either way: the caller decodes the file). Not thread safe for one p. */
int tp_summary_slim_load(tp_run *run, const char *path, tp_process *p);

/* Whether rank file `path` has a summary whose slim block's key is the file's now (the head
 * and key alone: its body is checked when it is loaded). 1 or 0. Thread safe. */
int tp_summary_slim_ready(const char *path);

/* Whether no task can ever write a slim block for rank file `path`, whatever it waits: the
 * file cannot be opened or is no regular file, it does not start with a rank file's whole
 * header as the reader checks it (format/reader.c: size, magic, version, header length and
 * CRC), its summary's name is taken by something other than a regular file (the rename into
 * place fails on it), or its directory cannot be written. A task waiting for the others'
 * summaries (cmd_summarize.c) stops waiting for such a file, whose owner fails it as it
 * would. Maps the file and reads its header alone; never blocks (a FIFO under the name is
 * opened non-blocking and is no regular file). 1 or 0. Thread safe. */
int tp_summary_slim_hopeless(const char *path);

/* The first half of `trainprof summarize` under a launcher, for one rank file: its summary
 * with its slim process alone (no section), read slim from the file, unless its summary
 * already holds a slim block the report's load takes (tp_summary_slim_load: its key the
 * file's now, its body's CRC right, decoded and standing for the file), which is left as it
 * is, section and all. Every file is some task's: the other tasks then take its
 * slim process from the summary (tp_summary_slim_ready) instead of decoding it too. 1 when
 * left, 0 when written, -1 when the file cannot be read or the summary written (why, n
 * bytes). Allocates a run of its own; safe on several threads at once for distinct files. */
int tp_summary_write_slim(const char *path, char *why, size_t n);

/* The slim block's body (n bytes at b, its key and CRC already found valid) decoded into *p
 * (zeroed first) as tp_summary_slim_load does it, before the loader sets what it sets itself
 * (path, file, rank and the rest). The bytes are outside input: any content is a decoded
 * process or a clean failure. 1 when decoded (free p with tp_process_free), 0 when not (p
 * left zeroed). Reads b only; strings interned into run's pool (locks). */
int tp_summary_slim_decode(tp_run *run, const void *b, size_t n, tp_process *p);
/* The same of the n bytes at f's position, read as they are decoded through a window of
 * `window` bytes (tp_sum_stream_read), as tp_summary_slim_load reads them: the body is not
 * held beside the process it decodes to. 1 when decoded, 0 when not (p left zeroed); *crc
 * the CRC-32 (zlib) of the n bytes when they could all be read (f is then past them), for
 * the caller to check. in_place: f is a regular file (seekable) whose threads' packed
 * counters of more than the spill threshold (counter_pack.h) are read from it later,
 * through a descriptor of their own, as long as it is not changed, rather than copied into
 * the temporary file (a summary is never written in place: tp_summary_write renames a new
 * one over it); 0: copied. */
int tp_summary_slim_decode_file(tp_run *run, FILE *f, int in_place, size_t n, size_t window,
                                uint32_t *crc, tp_process *p);

/* Whether slim process p's summary is whole and current for `trainprof summarize` to leave
 * as it is: its slim block's key and CRC valid and its body decoded, and for a rank, its
 * section's key (tp_summary_check) valid and its body decoded too (what the report's reading
 * would refuse is written again), for any other process its empty section block ending the
 * file (docs/format.md). 1 or 0. Reads the whole summary; strings are interned into
 * run's pool (locks). */
int tp_summary_current(const tp_run *run, const tp_process *p, const struct tp_report_opts *o);

/* Removes the temporary files of the summaries of run's slim processes with want[i] set
 * (NULL: all) that writers of this host left when they died (`<summary>.tmp.<host>.<pid>.
 * <tid>`, its pid no longer alive: SIGKILL, the OOM killer, a crash), reading each directory
 * once whatever the number of its summaries; tp_report_summarize calls it before it writes
 * any. Files of a live pid, of another host, or of a summary not named stay. Without memory
 * some are not swept. Not thread safe with a write of the same summaries. */
void tp_summary_sweep_run(const tp_run *run, const unsigned char *want);

/* `trainprof summarize`'s count of what it did (tp_report_summarize). */
typedef struct tp_summarize_stats {
    size_t files;    /* rank files given */
    size_t ranks;    /* of them, the ranks' (their summaries hold a section too) */
    size_t written;  /* summaries written */
    size_t current;  /* summaries already valid, left as they were */
    size_t failed;   /* files without a summary: errors[] says why */
    char **errors;   /* owned: one line per failed file */
    size_t nerrors;
} tp_summarize_stats;

/* Writes the summary of every slim process of `run` with want[i] set (indexed as run->procs;
 * NULL: every slim process): a rank's with its section, computed by o->threads threads under
 * the sections' memory budget (report.c), the others' with their slim process alone; a file
 * whose summary is already whole and valid (tp_summary_current) is left as it is, the
 * temporary files dead writers left beside it removed (tp_summary_sweep_run). A file
 * that cannot be read again, or whose summary cannot be written, gets none and one line in
 * st->errors. Returns TPROF_OK, or TPROF_ERR_NO_MEMORY. Writes run's pool; not thread safe.
 * Implemented in report.c, beside the sections it computes. */
int tp_report_summarize(tp_run *run, const struct tp_report_opts *o, const unsigned char *want,
                        tp_summarize_stats *st);
void tp_summarize_stats_free(tp_summarize_stats *st);

/* tp_report_summarize's part for the slim processes that are not ranks (with want[i] set;
 * NULL: all): their summaries hold the slim process alone, no section to compute. Each is
 * counted in st (files, current, written, errors); a current one is left as it is. What
 * dead writers left is not swept here: tp_report_summarize sweeps first (tp_summary_sweep_run).
 * TPROF_OK or TPROF_ERR_NO_MEMORY. */
int tp_summarize_others(tp_run *run, const struct tp_report_opts *o, const unsigned char *want,
                        tp_summarize_stats *st);

#endif /* TPROF_SUMMARY_H */
