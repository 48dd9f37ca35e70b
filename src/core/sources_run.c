/*
 * sources_run.c — the session's loops over the capture sources' table (core/source.h).
 *
 * Core reaches a capture source only through these loops; which sources exist and in which
 * order they are called is src/capture/sources.c's table alone.
 */
#define _GNU_SOURCE
#include <string.h>

#include "internal.h"
#include "source.h"

void tprof__sources_start(const tprof_config *cfg) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++)
        if (tab[i]->start) tab[i]->start(cfg);
}

uint64_t tprof__sources_tick(int final) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    uint64_t due = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tab[i]->tick) continue;
        uint64_t d = tab[i]->tick(final);
        if (d && (!due || d < due)) due = d;
    }
    return due;
}

void tprof__sources_flush(void) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++)
        if (tab[i]->flush) tab[i]->flush();
}

void tprof__sources_after_fork(void) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++)
        if (tab[i]->after_fork) tab[i]->after_fork();
}

void tprof__sources_window(int on) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++)
        if (tab[i]->window) tab[i]->window(on);
}

void tprof__sources_capability(void) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++) {
        char line[400];
        if (tab[i]->capability && tab[i]->capability(line, sizeof line))
            tprof__capability(tab[i]->name, line);
    }
}

int tprof__source_active(const char *name) {
    size_t n;
    const tprof__source *const *tab = tprof__sources(&n);
    for (size_t i = 0; i < n; i++)
        if (tab[i]->active && !strcmp(tab[i]->name, name)) return tab[i]->active();
    return 0;
}
