/*
 * report_spill.c — the rank sections of report.json kept out of memory while the report is
 * held (report.h, tp_report_make_spilled): each section is coded as a summary codes it
 * (summary_codec.c: every node with its type and exact value) into an unlinked temporary
 * file as its job ends, and read back one at a time by the writers that print it (report.json,
 * the HTML's ranks in detail). The sections are the only part of the document that grows
 * with the ranks and is only ever written out, in rank order: no analysis reads them
 * (docs/design.md §5.1), so holding them as cJSON trees for the whole merge (about 25 kB a
 * rank of 1000 steps) bought nothing.
 */
#define _GNU_SOURCE
#include "analysis/report_spill.h"
#include "analysis/alloc.h"
#include "analysis/report.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/summary.h"
#include "analysis/text.h"
#include "trainprof.h"

/* A section: where its bytes lie in the file, or (when it could not be written there) the
 * tree itself, or nothing (the section was never made: out of memory). */
typedef struct spill_slot {
    uint64_t off, len; /* len 0: not in the file */
    cJSON *kept;       /* owned; the file could not take it */
    int gone;          /* given back under tp_spill_read_once */
} spill_slot;

struct tp_section_spill {
    int fd; /* the temporary file, unlinked; -1 when none could be made (first: the test
             * cuts the file short through it, test_report_spill.c) */
    pthread_mutex_t lock;
    uint64_t end;      /* the file's next free byte (under lock) */
    uint64_t align;    /* each section starts at a multiple: its blocks are its own, so that
                        * they can be given back (tp_spill_read_once) */
    int once;          /* tp_spill_read_once */
    size_t n;
    spill_slot *slot;
};

/* An unlinked file in $TMPDIR (else /tmp), so that nothing is left behind whatever ends the
 * process; -1 when none can be made (the sections are then kept in memory). A file without a
 * name (O_TMPFILE, open(2)) where the file system has them: a named one is there until its
 * unlink, and a signal in between (or an unlink that fails) would leave every rank's section
 * in $TMPDIR for good; a named one whose name cannot be removed is not used. Never descriptor
 * 0, 1 or 2: with one of those closed (`trainprof report >&-`) the file would take its number,
 * and what is printed to that stream would go into the file, over the sections, instead of
 * failing (EBADF) as it does without the file. */
int tp_spill_tmpfile(void) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char path[4096];
    if (snprintf(path, sizeof path, "%s/trainprof-sections-XXXXXX", dir) >= (int)sizeof path)
        return -1;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { /* not a directory, or a file system without O_TMPFILE: a named file */
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0 && unlink(path) != 0) {
            close(fd);
            return -1; /* left empty: nothing of the report in it */
        }
    }
    if (fd >= 0 && fd <= 2) { /* moved above the standard three; that one is closed again */
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = high;
    }
    return fd;
}

tp_section_spill *tp_spill_open(size_t n) {
    /* not counted (alloc.h): without a spill the report holds its sections, the same report */
    tp_section_spill *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->slot = calloc(n ? n : 1, sizeof *s->slot);
    if (!s->slot || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s->slot);
        free(s);
        return NULL;
    }
    s->n = n;
    s->fd = tp_spill_tmpfile();
    /* the file system's block (a power of two, within reason), else a page */
    struct stat st;
    s->align = 4096;
    if (s->fd >= 0 && fstat(s->fd, &st) == 0 && st.st_blksize >= 512 &&
        st.st_blksize <= (1 << 20) && !(st.st_blksize & (st.st_blksize - 1)))
        s->align = (uint64_t)st.st_blksize;
    return s;
}

int tp_spill_pwrite_all(int fd, const void *b, size_t n, uint64_t off) {
    const unsigned char *q = b;
    while (n) {
        ssize_t w = pwrite(fd, q, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!w) errno = EIO; /* nothing written, no error said: a full file system */
            return TPROF_ERR_IO;
        }
        q += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return TPROF_OK;
}

int tp_spill_pread_all(int fd, void *b, size_t n, uint64_t off) {
    unsigned char *q = b;
    while (n) {
        ssize_t r = pread(fd, q, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return TPROF_ERR_IO;
        q += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return TPROF_OK;
}

void tp_spill_put(tp_section_spill *s, size_t k, cJSON *section) {
    if (!section || k >= s->n) {
        cJSON_Delete(section);
        return;
    }
    /* the document's strings are made valid UTF-8 as a whole at its end (tp_report_make);
     * a section leaving it is cleaned now, node by node the same */
    tp_json_clean_utf8(section);
    tp_sum_buf c = {0};
    tp_sum_json_put(&c, section);
    int stored = 0;
    if (!c.bad && c.len && s->fd >= 0) {
        pthread_mutex_lock(&s->lock);
        /* the gap before it lies in the last block of the section before: no space of its own */
        uint64_t off = (s->end + s->align - 1) / s->align * s->align;
        s->end = off + c.len;
        pthread_mutex_unlock(&s->lock);
        /* a region of its own: the writes of several jobs do not overlap */
        if (tp_spill_pwrite_all(s->fd, c.b, c.len, off) == 0) {
            s->slot[k].off = off;
            s->slot[k].len = c.len;
            stored = 1;
        }
    }
    free(c.b);
    if (stored) cJSON_Delete(section);
    else s->slot[k].kept = section; /* no file, a full disk, out of memory: held as before */
}

int tp_spill_get(tp_section_spill *s, size_t k, const cJSON **section, cJSON **owned) {
    *section = NULL;
    *owned = NULL;
    if (k >= s->n) return TPROF_OK;
    spill_slot *sl = &s->slot[k];
    if (sl->gone) return TPROF_ERR_IO;
    sl->gone = s->once;
    if (sl->kept || !sl->len) {
        *section = sl->kept;
        if (s->once) { /* handed over */
            *owned = sl->kept;
            sl->kept = NULL;
        }
        return TPROF_OK;
    }
    tp_sum_buf c = {.len = (size_t)sl->len};
    c.b = sl->len == (uint64_t)c.len ? tp_malloc(c.len) : NULL;
    if (!c.b) return TPROF_ERR_NO_MEMORY;
    cJSON *j = tp_spill_pread_all(s->fd, c.b, c.len, sl->off) == TPROF_OK ? tp_sum_json_get(&c)
                                                                           : NULL;
    free(c.b);
    /* its blocks, whole from its start (aligned) to the next section's: a failure (a file
     * system without holes) leaves them until the file is closed */
    if (s->once)
        (void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)sl->off,
                        (off_t)((sl->len + s->align - 1) / s->align * s->align));
    if (!j || c.bad || c.at != c.len) {
        cJSON_Delete(j);
        return TPROF_ERR_IO;
    }
    *section = *owned = j;
    return TPROF_OK;
}

void tp_spill_read_once(tp_section_spill *s) {
    if (s) s->once = 1;
}

void tp_spill_drop(tp_section_spill *s) {
    if (!s) return;
    s->once = 1;
    for (size_t k = 0; k < s->n; k++) {
        cJSON_Delete(s->slot[k].kept);
        s->slot[k].kept = NULL;
        s->slot[k].gone = 1;
    }
    if (s->fd < 0) return;
    /* the blocks now, should the file outlive its descriptor (none here does: it has no
     * name, and its descriptor is not inherited) */
    if (s->end)
        (void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                        (off_t)((s->end + s->align - 1) / s->align * s->align));
    close(s->fd);
    s->fd = -1;
}

size_t tp_spill_count(const tp_section_spill *s) { return s ? s->n : 0; }

void tp_spill_free(tp_section_spill *s) {
    if (!s) return;
    for (size_t k = 0; k < s->n; k++) cJSON_Delete(s->slot[k].kept);
    if (s->fd >= 0) close(s->fd);
    pthread_mutex_destroy(&s->lock);
    free(s->slot);
    free(s);
}

/* ------------------------------------------------------------------ the report's sections */

size_t tp_report_nsections(const tp_report *r) {
    if (r->spill) return tp_spill_count(r->spill);
    return (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r->doc, "ranks"));
}

void tp_report_sections_once(tp_report *r) {
    if (r->spill) tp_spill_read_once(r->spill);
}

void tp_report_sections_drop(tp_report *r) {
    if (r->spill) tp_spill_drop(r->spill);
}

int tp_report_section(const tp_report *r, size_t k, const cJSON **section, cJSON **owned) {
    if (r->spill) return tp_spill_get(r->spill, k, section, owned);
    *owned = NULL;
    *section = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->doc, "ranks"), (int)k);
    return TPROF_OK;
}

/* Section s printed as cJSON_Print prints it at its place in the document, into f: an
 * element of the top-level "ranks" array is printed at depth 3 (the document's object, the
 * array, its own), so it is printed inside a document of that shape alone and cut out of it.
 * 0, or an error. */
static int write_section(FILE *f, const cJSON *s) {
    static const char head[] = "{\n\t\"ranks\":\t[", tail[] = "]\n}";
    cJSON *wrap = cJSON_CreateObject();
    cJSON *arr = wrap ? cJSON_AddArrayToObject(wrap, "ranks") : NULL;
    /* a section is an object: a reference to its members prints it without owning or
     * copying it (anything else, which no section is, is printed from a copy) */
    cJSON *ref = !arr                ? NULL
                 : cJSON_IsObject(s) ? cJSON_CreateObjectReference(s->child)
                                     : cJSON_Duplicate(s, 1);
    int added = ref && cJSON_AddItemToArray(arr, ref);
    if (ref && !added) cJSON_Delete(ref);
    char *t = added ? cJSON_Print(wrap) : NULL;
    cJSON_Delete(wrap);
    if (!t) return TPROF_ERR_NO_MEMORY;
    size_t n = strlen(t), hn = sizeof head - 1, tn = sizeof tail - 1;
    int ok = n >= hn + tn && !memcmp(t, head, hn) && !memcmp(t + n - tn, tail, tn);
    if (ok) fwrite(t + hn, 1, n - hn - tn, f);
    cJSON_free(t);
    return ok ? TPROF_OK : TPROF_ERR_IO;
}

int tp_report_write_doc(const tp_report *r, FILE *f) {
    if (!r->spill) return tp_report_write_json(r->doc, f);
    /* the document, its "ranks" empty, printed whole; the sections then go between its
     * brackets one at a time, as cJSON separates an array's elements */
    char *t = cJSON_Print(r->doc);
    if (!t) return TPROF_ERR_NO_MEMORY;
    static const char key[] = "\n\t\"ranks\":\t[]";
    char *at = strstr(t, key); /* one tab: the top level's key, no deeper one */
    if (!at) {
        cJSON_free(t);
        return TPROF_ERR_IO;
    }
    size_t open = (size_t)(at - t) + sizeof key - 2; /* up to and with the '[' */
    fwrite(t, 1, open, f);
    int rc = TPROF_OK;
    size_t n = tp_report_nsections(r), written = 0;
    for (size_t k = 0; k < n && rc == TPROF_OK; k++) {
        const cJSON *s;
        cJSON *owned;
        rc = tp_report_section(r, k, &s, &owned);
        if (rc == TPROF_OK && s) {
            if (written++) fputs(", ", f);
            rc = write_section(f, s);
        }
        cJSON_Delete(owned);
    }
    fputs(t + open, f);
    fputc('\n', f);
    cJSON_free(t);
    fflush(f);
    if (rc != TPROF_OK) return rc;
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}
