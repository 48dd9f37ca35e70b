/*
 * report_spill.h — the rank sections of a report kept in a temporary file instead of the
 * document (report_spill.c; report.h, tp_report_make_spilled), read back one at a time.
 */
#ifndef TPROF_REPORT_SPILL_H
#define TPROF_REPORT_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

typedef struct tp_section_spill tp_section_spill;

/* A store of n sections (slots 0..n-1, in the document's "ranks" order), backed by an
 * unlinked file in $TMPDIR (else /tmp). NULL when out of memory. When no file can be made
 * the sections are held in memory, as the document would hold them: never an error. */
tp_section_spill *tp_spill_open(size_t n);

/* Takes section (owned; NULL: slot k stays empty, as a section never made) into slot k:
 * its strings made valid UTF-8 (tp_json_clean_utf8, as the whole document's are), coded and
 * written to the file, then freed; kept in memory when it cannot be written. Safe on several
 * threads at once for distinct k; each slot is put once. */
void tp_spill_put(tp_section_spill *s, size_t k, cJSON *section);

/* Slot k's section into *section (NULL: empty), the same nodes and values as were put, its
 * strings cleaned: decoded from the file into *owned (the caller's, cJSON_Delete) or held in
 * memory (*owned NULL; valid until tp_spill_free). Returns TPROF_OK, TPROF_ERR_NO_MEMORY, or
 * TPROF_ERR_IO when the file no longer gives it back whole. Not thread safe with put. */
int tp_spill_get(tp_section_spill *s, size_t k, const cJSON **section, cJSON **owned);

/* From now on each slot is given back once: tp_spill_get hands the section over (a held one
 * too: *owned is then the section) and gives the file's space for it back to the file system
 * (a hole punched, fallocate(2); where the file system has none, the space stays until
 * tp_spill_free); a slot asked for again is TPROF_ERR_IO. For the last writer that reads the
 * sections, whose output may go to $TMPDIR's file system: the sections there would otherwise
 * take the space the output needs. Not thread safe with put or get. */
void tp_spill_read_once(tp_section_spill *s);

/* Every slot given back at once, as if each had been read under tp_spill_read_once, and the
 * file closed. NULL-safe. */
void tp_spill_drop(tp_section_spill *s);

/* Slots of s (0 for NULL). */
size_t tp_spill_count(const tp_section_spill *s);

/* Closes the file and frees the store. NULL-safe. */
void tp_spill_free(tp_section_spill *s);

/* The temporary files of the analysis (these sections, a slim thread's packed counters,
 * counter_pack.h): an unlinked file of $TMPDIR (else /tmp), open for reading and writing,
 * close-on-exec, never descriptor 0, 1 or 2 (why: report_spill.c); -1 when none can be made
 * (the caller then keeps in memory what it would have written). The caller closes it. */
int tp_spill_tmpfile(void);

/* All n bytes of b written at off of fd (pwrite(2), EINTR retried): TPROF_OK, or
 * TPROF_ERR_IO with errno set (pwrite's, or EIO for a write of nothing: a full file system).
 * Thread safe. */
int tp_spill_pwrite_all(int fd, const void *b, size_t n, uint64_t off);

/* n bytes at off of fd read into b (pread(2), EINTR retried): TPROF_OK, or TPROF_ERR_IO (an
 * error, or the file ends first). Thread safe. */
int tp_spill_pread_all(int fd, void *b, size_t n, uint64_t off);

#endif /* TPROF_REPORT_SPILL_H */
