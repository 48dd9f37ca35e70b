/*
 * timers.c — Megatron-LM-compatible Timers (Megatron-LM megatron/core/timers.py).
 *
 * Same registry rules (levels 0..2 fixed at first lookup, a shared dummy above the level,
 * elapsed() safe while running, active time kept across resets), same cross-rank step (an
 * all-gather of a [world x timers] matrix of float32 seconds; zeros ignored by min/max) and
 * the same text, character for character, including where float32 rounding happens:
 * min/max are float32 values divided in double; the per-rank values of the 'all' option
 * are divided in float32, as the torch tensor arithmetic does. Host time is CLOCK_MONOTONIC
 * and nothing synchronizes a device. Each interval is also a trace range (domain
 * "trainprof", category "timers") when a session records.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "cuda_events.h"
#include "timers_format.h"

#undef tprof_timer_start
#undef tprof_timer_stop

#define TPROF__TIMERS_CATEGORY 1u
#define TPROF__MAX_PENDING 32u /* intervals per timer awaiting their device time */

struct tprof_timer {
    int live; /* first: read inline by the header's macros */
    int level;
    char *name;
    double elapsed_s, active_s;
    int started;
    int warned;
    uint64_t start_ns;
    uint64_t range_id; /* our trace range, while running */
    uint64_t emit_id;  /* the attached NVTX tool's range, while running */
    tprof_timers *owner;
    void *ev_start;    /* CUDA event of the running interval's start, or NULL */
    struct tprof__pending {
        void *start, *end;
        double host_s;
    } pend[TPROF__MAX_PENDING]; /* stopped intervals not yet read from the device */
    unsigned npend;
};

struct tprof_timers {
    int log_level;
    tprof_timers_option option;
    tprof_timing timing;
    void *stream;             /* set_timing's, when stream_fn is NULL */
    tprof_stream_fn stream_fn; /* asked at each edge (set_stream_source) */
    void *stream_ctx;
    uint32_t domain;
    pthread_mutex_t lock;
    tprof_timer **v; /* creation order */
    size_t n, cap;
};

static tprof_timer g_dummy = {.live = 0, .name = "dummy timer"};

static const char *option_name(tprof_timers_option o) {
    return o == TPROF_TIMERS_MAX ? "max" : o == TPROF_TIMERS_ALL ? "all" : "minmax";
}

int tprof_timers_create(int log_level, tprof_timers_option option, tprof_timers **out) {
    if (!out) return TPROF_ERR_INVALID_ARG;
    *out = NULL;
    if (log_level < 0 || log_level > 2 || option < TPROF_TIMERS_MAX || option > TPROF_TIMERS_ALL)
        return TPROF_ERR_INVALID_ARG;
    tprof_timers *t = calloc(1, sizeof *t);
    if (!t) return TPROF_ERR_NO_MEMORY;
    t->log_level = log_level;
    t->option = option;
    pthread_mutex_init(&t->lock, NULL);
    /* the trace's names for timer ranges, registered once (they survive session restarts) */
    t->domain = tprof__domain_id("trainprof");
    tprof__name_category(t->domain, TPROF__TIMERS_CATEGORY, "timers");
    *out = t;
    return TPROF_OK;
}

void tprof_timers_destroy(tprof_timers *t) {
    if (!t) return;
    /* the intervals still running are thrown away: no synchronize, no event, no stream
     * source asked for them */
    t->timing = TPROF_TIMING_HOST;
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i]->started) tprof_timer_stop(t->v[i], 0); /* end its trace range */
        tprof_timer_reset(t->v[i]); /* releases CUDA events */
        free(t->v[i]->name);
        free(t->v[i]);
    }
    free(t->v);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int tprof_timers_lookup(tprof_timers *t, const char *name, int log_level, tprof_timer **out) {
    if (out) *out = &g_dummy;
    if (!t || !name || !*name || !out || log_level > 2) return TPROF_ERR_INVALID_ARG;
    pthread_mutex_lock(&t->lock);
    int rc = TPROF_OK;
    tprof_timer *found = NULL;
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i]->name, name)) found = t->v[i];
    if (found) {
        if (log_level >= 0 && log_level != found->level) rc = TPROF_ERR_INVALID_ARG;
        else *out = found;
    } else {
        int level = log_level < 0 ? 2 : log_level;
        if (level <= t->log_level) {
            tprof_timer *tm = calloc(1, sizeof *tm);
            char *copy = strdup(name);
            if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 16;
                tprof_timer **nv = realloc(t->v, cap * sizeof *nv);
                if (nv) {
                    t->v = nv;
                    t->cap = cap;
                }
            }
            if (!tm || !copy || t->n == t->cap) {
                free(tm);
                free(copy);
                rc = TPROF_ERR_NO_MEMORY;
            } else {
                tm->live = 1;
                tm->level = level;
                tm->name = copy;
                tm->owner = t;
                t->v[t->n++] = tm;
                *out = tm;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

tprof_timer *tprof_timer_get(tprof_timers *t, const char *name, int log_level) {
    tprof_timer *tm;
    int rc = tprof_timers_lookup(t, name, log_level, &tm);
    if (rc != TPROF_OK) {
        static _Atomic int warned; /* the first ten misuses, then quiet */
        if (atomic_fetch_add(&warned, 1) < 10)
            tprof__log(TPROF_LOG_WARN, "timer '%s' (log level %d): %s; using a dummy timer",
                       name ? name : "(null)", log_level,
                       rc == TPROF_ERR_INVALID_ARG ? "invalid name or level (a timer's level is "
                                                     "fixed at its first use)"
                                                   : tprof_strerror(rc));
    }
    return tm;
}

static void barrier_if(int barrier) {
    if (!barrier) return;
    tprof_collectives c;
    tprof_get_collectives(&c);
    if (c.barrier && c.barrier(c.ctx) != 0)
        tprof__log(TPROF_LOG_WARN, "timer barrier failed in the collectives hook");
}

static void misuse(tprof_timer *tm, const char *what) {
    if (tm->warned) return;
    tm->warned = 1;
    tprof__log(TPROF_LOG_WARN, "timer '%s' %s; ignored", tm->name, what);
}

/* ------------------------------------------------------------------ device timing */

/* An interval measured with CUDA events: recorded at stop, resolved when read. */
static void resolve_pending(tprof_timer *tm) {
    for (unsigned i = 0; i < tm->npend; i++) {
        double dt = tprof__cuda_elapsed_s(tm->pend[i].start, tm->pend[i].end);
        if (dt < 0) dt = tm->pend[i].host_s; /* the device failed us: the host's view */
        tm->elapsed_s += dt;
        tm->active_s += dt;
        tprof__cuda_event_destroy(tm->pend[i].start);
        tprof__cuda_event_destroy(tm->pend[i].end);
    }
    tm->npend = 0;
}

/* An event on the registry's stream now: the source's answer, else set_timing's stream. */
static void *record_event(tprof_timers *t) {
    return tprof__cuda_event_record(t->stream_fn ? t->stream_fn(t->stream_ctx) : t->stream);
}

/* The edges of an interval: the clock (and, by mode, a device synchronize first or an
 * event recorded on the registry's stream). */
static uint64_t edge(tprof_timer *tm, void **event) {
    tprof_timers *t = tm->owner;
    if (t->timing == TPROF_TIMING_CUDA_SYNC) tprof__cuda_synchronize();
    uint64_t now = tprof__now();
    if (event) *event = t->timing == TPROF_TIMING_CUDA_EVENTS ? record_event(t) : NULL;
    return now;
}

/* Ends the running interval at `now` (end event `ev` when measured on the device). */
static void close_interval(tprof_timer *tm, uint64_t now, void *ev) {
    double host_s = (double)(now - tm->start_ns) * 1e-9;
    if (tm->ev_start && ev) {
        if (tm->npend == TPROF__MAX_PENDING) resolve_pending(tm); /* bounded: read the oldest */
        tm->pend[tm->npend++] = (struct tprof__pending){tm->ev_start, ev, host_s};
    } else {
        tprof__cuda_event_destroy(tm->ev_start);
        tprof__cuda_event_destroy(ev);
        tm->elapsed_s += host_s;
        tm->active_s += host_s;
    }
    tm->ev_start = NULL;
}

int tprof_timers_set_timing(tprof_timers *t, tprof_timing timing, void *cuda_stream) {
    if (!t || timing < TPROF_TIMING_HOST || timing > TPROF_TIMING_CUDA_SYNC)
        return TPROF_ERR_INVALID_ARG;
    if (timing != TPROF_TIMING_HOST && !tprof__cuda_available()) return TPROF_ERR_UNAVAILABLE;
    t->timing = timing;
    t->stream = cuda_stream;
    return TPROF_OK;
}

int tprof_timers_set_stream_source(tprof_timers *t, tprof_stream_fn fn, void *ctx) {
    if (!t) return TPROF_ERR_INVALID_ARG;
    t->stream_fn = fn;
    t->stream_ctx = ctx;
    return TPROF_OK;
}

/* ------------------------------------------------------------------ start, stop, read */

void tprof_timer_start(tprof_timer *tm, int barrier) {
    if (!tm || !tm->live) return;
    if (tm->started) {
        misuse(tm, "started while running");
        return;
    }
    barrier_if(barrier);
    uint64_t now = edge(tm, &tm->ev_start);
    tm->start_ns = now;
    tm->started = 1;
    tm->range_id = 0;
    tprof__thread *t = TPROF__ON() ? tprof__thread_get() : NULL;
    if (t)
        tm->range_id = tprof__range_start_ts(t, tm->owner->domain, tm->name,
                                             TPROF__TIMERS_CATEGORY, now);
    else if (tprof__emit_on)
        tm->emit_id = tprof__emit_start(tm->owner->domain, tm->name, TPROF__TIMERS_CATEGORY);
}

void tprof_timer_stop(tprof_timer *tm, int barrier) {
    if (!tm || !tm->live) return;
    if (!tm->started) {
        misuse(tm, "stopped while not running");
        return;
    }
    barrier_if(barrier);
    void *ev = NULL;
    uint64_t now = edge(tm, tm->ev_start ? &ev : NULL);
    close_interval(tm, now, ev);
    tm->started = 0;
    if (tm->range_id) {
        tprof__thread *t = TPROF__ON() ? tprof__thread_get() : NULL;
        if (t) tprof__range_end_ts(t, tm->range_id, now);
        tm->range_id = 0;
    }
    if (tm->emit_id) {
        tprof__emit_end(tm->owner->domain, tm->emit_id);
        tm->emit_id = 0;
    }
}

void tprof_timer_reset(tprof_timer *tm) {
    if (!tm || !tm->live) return;
    for (unsigned i = 0; i < tm->npend; i++) { /* abandoned intervals */
        tprof__cuda_event_destroy(tm->pend[i].start);
        tprof__cuda_event_destroy(tm->pend[i].end);
    }
    tm->npend = 0;
    tprof__cuda_event_destroy(tm->ev_start);
    tm->ev_start = NULL;
    tm->elapsed_s = 0;
    tm->started = 0;
    if (tm->range_id) { /* close the trace range of an interval that reset abandons */
        tprof__thread *t = TPROF__ON() ? tprof__thread_get() : NULL;
        if (t) tprof__range_end_ts(t, tm->range_id, tprof__now());
        tm->range_id = 0;
    }
    if (tm->emit_id) {
        tprof__emit_end(tm->owner->domain, tm->emit_id);
        tm->emit_id = 0;
    }
}

double tprof_timer_elapsed(tprof_timer *tm, int reset, int barrier) {
    if (!tm || !tm->live) return 0.0;
    if (tm->started) {
        /* Running: Megatron stops, reads and restarts. The same here, without ending the
         * interval's trace range (the timer never stopped from the program's view). */
        barrier_if(barrier);
        void *ev = NULL;
        uint64_t now = edge(tm, tm->ev_start ? &ev : NULL);
        close_interval(tm, now, ev);
        tm->start_ns = now;
        if (tm->owner->timing == TPROF_TIMING_CUDA_EVENTS) tm->ev_start = record_event(tm->owner);
    }
    resolve_pending(tm); /* waits for the device only here, when the value is asked for */
    double e = tm->elapsed_s;
    if (reset) tm->elapsed_s = 0;
    return e;
}

double tprof_timer_active_time(tprof_timer *tm) {
    return tm && tm->live ? tm->active_s : 0.0;
}

int tprof_timer_set_elapsed(tprof_timer *tm, double seconds) {
    if (!tm || !tm->live || !(seconds >= 0)) return TPROF_ERR_INVALID_ARG;
    tm->elapsed_s = seconds;
    return TPROF_OK;
}

const char *tprof_timer_name(const tprof_timer *tm) { return tm ? tm->name : "dummy timer"; }

/* ------------------------------------------------------------------ gathering */

/* Names to log: the given ones, or every registered timer in creation order (copied under
 * the lock into a malloc'ed array of borrowed pointers). */
static int resolve_names(tprof_timers *t, const char *const *names, size_t n,
                         const char ***out, size_t *nout) {
    if (names) {
        *out = malloc((n ? n : 1) * sizeof **out);
        if (!*out) return TPROF_ERR_NO_MEMORY;
        memcpy(*out, names, n * sizeof *names);
        *nout = n;
        return TPROF_OK;
    }
    pthread_mutex_lock(&t->lock);
    *out = malloc((t->n ? t->n : 1) * sizeof **out);
    if (*out)
        for (size_t i = 0; i < t->n; i++) (*out)[i] = t->v[i]->name;
    *nout = t->n;
    pthread_mutex_unlock(&t->lock);
    return *out ? TPROF_OK : TPROF_ERR_NO_MEMORY;
}

static tprof_timer *find(tprof_timers *t, const char *name) {
    pthread_mutex_lock(&t->lock);
    tprof_timer *f = NULL;
    for (size_t i = 0; i < t->n && !f; i++)
        if (!strcmp(t->v[i]->name, name)) f = t->v[i];
    pthread_mutex_unlock(&t->lock);
    return f;
}

/* The gather proper, on resolved names. */
static int gather(tprof_timers *t, const char *const *names, size_t n, int reset, int barrier,
                  double **out, int *world) {
    tprof_collectives c;
    tprof_get_collectives(&c);
    *world = c.world_size;
    *out = calloc((size_t)c.world_size * (n ? n : 1), sizeof **out);
    double *row = calloc(n ? n : 1, sizeof *row);
    if (!*out || !row) {
        free(*out);
        free(row);
        *out = NULL;
        return TPROF_ERR_NO_MEMORY;
    }
    if (barrier && c.barrier) c.barrier(c.ctx);
    for (size_t i = 0; i < n; i++) {
        tprof_timer *tm = names[i] ? find(t, names[i]) : NULL;
        /* Megatron's matrix is float32: round the same way */
        if (tm) row[i] = (double)(float)tprof_timer_elapsed(tm, reset, 0);
    }
    tprof__metrics_timers(names, row, n); /* the live metrics, when on */
    int rc = TPROF_OK;
    if (!c.all_gather || c.all_gather(c.ctx, row, n * sizeof *row, *out) != 0) {
        memset(*out, 0, (size_t)c.world_size * n * sizeof **out);
        memcpy(*out + (size_t)c.rank * n, row, n * sizeof *row);
        rc = TPROF_ERR_UNAVAILABLE;
    }
    free(row);
    return rc;
}

/* Names resolved and gathered: *nm (free it) and *m (free it, NULL on failure). */
static int resolve_and_gather(tprof_timers *t, const char *const *names, size_t nnames,
                              int reset, int barrier, const char ***nm, size_t *n, double **m,
                              int *world) {
    *m = NULL;
    int rc = resolve_names(t, names, nnames, nm, n);
    if (rc != TPROF_OK) return rc;
    return gather(t, *nm, *n, reset, barrier, m, world);
}

int tprof_timers_gather(tprof_timers *t, const char *const *names, size_t nnames, int reset,
                        int barrier, double **out, int *world, size_t *nout) {
    if (!t || !out || !world) return TPROF_ERR_INVALID_ARG;
    const char **nm = NULL;
    size_t n = 0;
    int rc = resolve_and_gather(t, names, nnames, reset, barrier, &nm, &n, out, world);
    if (nout) *nout = n;
    free(nm);
    return rc;
}

/* ------------------------------------------------------------------ formatting */

int tprof_timers_string(tprof_timers *t, const char *const *names, size_t nnames,
                        double normalizer, int reset, int barrier, char **text) {
    if (text) *text = NULL;
    if (!t || !text || !(normalizer > 0)) return TPROF_ERR_INVALID_ARG;
    const char **nm = NULL;
    size_t n = 0;
    double *m;
    int world;
    int rc = resolve_and_gather(t, names, nnames, reset, barrier, &nm, &n, &m, &world);
    if (m) *text = tprof__timers_format((int)t->option, nm, n, m, world, normalizer);
    free(m);
    free(nm);
    return rc;
}

int tprof_timers_json(tprof_timers *t, const char *const *names, size_t nnames,
                      double normalizer, int reset, int barrier, char **json) {
    if (json) *json = NULL;
    if (!t || !json || !(normalizer > 0)) return TPROF_ERR_INVALID_ARG;
    const char **nm = NULL;
    size_t n = 0;
    double *m;
    int world;
    int rc = resolve_and_gather(t, names, nnames, reset, barrier, &nm, &n, &m, &world);
    if (!m) {
        free(nm);
        return rc;
    }
    double div = normalizer / 1000.0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "option", option_name(t->option));
    cJSON_AddStringToObject(o, "unit", "ms");
    cJSON_AddNumberToObject(o, "normalizer", normalizer);
    cJSON_AddNumberToObject(o, "world_size", world);
    cJSON *arr = cJSON_AddArrayToObject(o, "timers");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", nm[i]);
        double mn = 0, mx = 0;
        if (tprof__timers_minmax(m, world, n, i, &mn, &mx)) {
            cJSON_AddNumberToObject(e, "min", mn / div);
            cJSON_AddNumberToObject(e, "max", mx / div);
        } else {
            cJSON_AddNullToObject(e, "min");
            cJSON_AddNullToObject(e, "max");
        }
        cJSON *ranks = cJSON_AddArrayToObject(e, "ranks");
        for (int r = 0; r < world; r++)
            cJSON_AddItemToArray(ranks, cJSON_CreateNumber(m[(size_t)r * n + i] / div));
        cJSON_AddItemToArray(arr, e);
    }
    *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(m);
    free(nm);
    if (!*json) return TPROF_ERR_NO_MEMORY;
    return rc;
}

int tprof_timers_log(tprof_timers *t, const char *const *names, size_t nnames, double normalizer,
                     int reset, int barrier, int rank, FILE *f) {
    tprof_collectives c;
    tprof_get_collectives(&c);
    if (rank >= c.world_size) return TPROF_ERR_INVALID_ARG;
    char *text;
    int rc = tprof_timers_string(t, names, nnames, normalizer, reset, barrier, &text);
    if (!text) return rc;
    if (rank < 0) rank = c.world_size - 1;
    if (rank == c.rank) {
        FILE *out = f ? f : stdout;
        fprintf(out, "%s\n", text);
        fflush(out);
    }
    free(text);
    return rc;
}
