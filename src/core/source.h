/*
 * source.h — what a capture source offers the session, and how the session finds them.
 *
 * A capture source (src/capture/, docs/design.md §1.1) fills in one tprof__source in its own
 * file; src/capture/sources.c lists them in one table, which core receives through
 * tprof__sources(). Core calls sources only through the tprof__sources_* loops below, so
 * core names no source and a new source needs no edit in core. A source that is not built
 * (CUPTI without its headers) is simply not in the table.
 *
 * Every member but `name` may be NULL (the source has nothing to do at that moment). The
 * loops call the sources in table order; that order is part of the contract (sources.c says
 * why it is what it is).
 */
#ifndef TPROF_SOURCE_H
#define TPROF_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "trainprof.h"

typedef struct tprof__source {
    /* The source's name, as its capability key ("cupti", "nvml", ...). */
    const char *name;
    /* On the flusher thread as it begins (a new session, or a forked child's first), before
     * its first tick: the source takes what it needs of the configuration (cfg stays valid
     * while the session lives) and resets per-session state. */
    void (*start)(const tprof_config *cfg);
    /* Once per flusher pass, before the rings are drained; `final` on the last pass of a
     * shutdown (never on a signal's). Returns the CLOCK_MONOTONIC time in ns at which the
     * source wants the next pass, or 0 when the flush interval suits it. Flusher thread. */
    uint64_t (*tick)(int final);
    /* Records the source still holds (a vendor's buffers, operations waiting to complete)
     * pushed into the rings now: at shutdown and when a signal sent from outside ends the
     * process, before the last flush. Any thread; may block on the vendor library. */
    void (*flush)(void);
    /* In a forked child (the only thread left): forget what belonged to the parent's file. */
    void (*after_fork)(void);
    /* Nonzero while the source delivers records (or is about to): other sources defer to
     * it (tprof__source_active). Any thread; a few atomic loads. */
    int (*active)(void);
    /* Detailed capture on (1) or off (0): the kernel-capture window opened or closed, or
     * the metrics endpoint asked (core/kwindow.c). A thread that begins a step. */
    void (*window)(int on);
    /* The source's capability line, when it knows one as the session starts: writes it
     * into line[n] (e.g. "off: ...") and returns 1; returns 0 when it has nothing to say
     * yet (it reports later with tprof__capability, when it knows). The thread that
     * started the session. */
    int (*capability)(char *line, size_t n);
} tprof__source;

/* The table of the sources built in, in call order; *n gets its length. Static storage,
 * never changes. Defined by src/capture/sources.c. */
const tprof__source *const *tprof__sources(size_t *n);

/* The loops core runs over the table (core/sources_run.c). */
void tprof__sources_start(const tprof_config *cfg);
/* The earliest wake-up the sources asked for (CLOCK_MONOTONIC ns), 0 when none did. */
uint64_t tprof__sources_tick(int final);
void tprof__sources_flush(void);
void tprof__sources_after_fork(void);
void tprof__sources_window(int on);
void tprof__sources_capability(void);
/* Nonzero when the source called `name` is built in and active. */
int tprof__source_active(const char *name);

#endif /* TPROF_SOURCE_H */
