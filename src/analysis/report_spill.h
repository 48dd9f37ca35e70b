/*
 * report_spill.h — the rank sections of a report kept in a temporary file instead of the
 * document (report_spill.c; report.h, tp_report_make_spilled), read back one at a time.
 */
#ifndef TPROF_REPORT_SPILL_H
#define TPROF_REPORT_SPILL_H

#include <stddef.h>

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

#endif /* TPROF_REPORT_SPILL_H */
