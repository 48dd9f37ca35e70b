/*
 * processes.c — the run's processes (processes.h): what each file holds, its damage, lost
 * records and range mistakes, computed once and written by one writer.
 */
#include "analysis/processes.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "trainprof.h"

/* The figures of process p; its pops array is allocated here. */
static int process_compute(tp_process_result *r, const tp_process *p) {
    memset(r, 0, sizeof *r);
    tp_process_label(p, r->label, sizeof r->label);
    r->role = p->role == TP_ROLE_RANK ? "rank" : p->role == TP_ROLE_SAMPLER ? "node-sampler"
                                                                            : "helper";
    r->rank = p->rank;
    r->rank_implied = p->rank_implied != 0;
    r->world_size = p->world_size;
    r->host = p->hdr.host;
    r->pid = p->hdr.pid;
    r->ppid = p->hdr.ppid;
    r->cmdline = tp_meta(p, "cmdline");
    r->file = p->path;
    r->threads = (double)p->nthreads;
    r->events = (double)p->events;
    r->events_dropped = (double)p->dropped;
    r->duration_s = p->end_mono > p->hdr.start_mono_ns
                        ? (double)(p->end_mono - p->hdr.start_mono_ns) / 1e9 : 0;
    r->complete = p->complete != 0;
    const char *wr = tp_meta(p, "write_errors.records"), *v;
    if (wr) {
        r->has_write_errors = 1;
        r->records_lost = atof(wr);
        r->chunks_lost = (v = tp_meta(p, "write_errors.chunks")) ? atof(v) : 0;
        r->bytes_lost = (v = tp_meta(p, "write_errors.bytes")) ? atof(v) : 0;
        r->first_errno = (v = tp_meta(p, "write_errors.first_errno")) ? v : "";
        r->first_error = (v = tp_meta(p, "write_errors.first_error")) ? v : "";
    }
    const char *ro = tp_meta(p, "rank_file.reopened");
    if (ro) {
        r->has_reopened = 1;
        r->rank_file_reopened = atof(ro);
    }
    r->unmatched_range_ends = (double)p->unknown_ends;
    uint64_t pops = 0, pops_dropped = 0;
    size_t nt = 0;
    for (size_t k = 0; k < p->nthreads; k++) {
        pops += p->threads[k].unmatched_pops;
        pops_dropped += p->threads[k].unmatched_pops_after_drops;
        nt += p->threads[k].unmatched_pops != 0;
    }
    r->unmatched_pops = (double)pops;
    r->unmatched_pops_after_drops = (double)pops_dropped;
    r->damage = p->damage;
    r->ndamage = p->ndamage;
    if (!nt) return TPROF_OK;
    r->pops = tp_calloc(nt, sizeof *r->pops);
    if (!r->pops) return TPROF_ERR_NO_MEMORY;
    for (size_t k = 0; k < p->nthreads; k++) {
        const tp_thread *t = &p->threads[k];
        if (!t->unmatched_pops) continue;
        tp_pops_thread *e = &r->pops[r->npops++];
        e->tid = t->os_tid;
        e->thread = t->name;
        e->count = (double)t->unmatched_pops;
        e->after_drops = (double)t->unmatched_pops_after_drops;
        e->first_s = t->first_unmatched_pop_ts > p->hdr.start_mono_ns
                         ? (double)(t->first_unmatched_pop_ts - p->hdr.start_mono_ns) / 1e9
                         : 0;
    }
    return TPROF_OK;
}

int tp_processes_compute(tp_run_results *out, const tp_run *run) {
    out->nprocs = 0;
    out->procs = run->nprocs ? tp_calloc(run->nprocs, sizeof *out->procs) : NULL;
    if (run->nprocs && !out->procs) return TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < run->nprocs; i++) {
        int rc = process_compute(&out->procs[out->nprocs++], &run->procs[i]);
        if (rc != TPROF_OK) return rc;
    }
    return TPROF_OK;
}

cJSON *tp_process_json(const tp_process_result *p) {
    cJSON *jp = cJSON_CreateObject();
    if (!jp) return NULL;
    cJSON_AddStringToObject(jp, "label", p->label);
    cJSON_AddStringToObject(jp, "role", p->role);
    cJSON_AddNumberToObject(jp, "rank", p->rank);
    if (p->rank_implied) cJSON_AddBoolToObject(jp, "rank_implied", 1);
    cJSON_AddNumberToObject(jp, "world_size", p->world_size);
    cJSON_AddStringToObject(jp, "host", p->host);
    cJSON_AddNumberToObject(jp, "pid", p->pid);
    cJSON_AddNumberToObject(jp, "ppid", p->ppid);
    if (p->cmdline) cJSON_AddStringToObject(jp, "cmdline", p->cmdline);
    cJSON_AddStringToObject(jp, "file", p->file);
    cJSON_AddNumberToObject(jp, "threads", p->threads);
    cJSON_AddNumberToObject(jp, "events", p->events);
    cJSON_AddNumberToObject(jp, "events_dropped", p->events_dropped);
    cJSON_AddNumberToObject(jp, "duration_s", p->duration_s);
    cJSON_AddBoolToObject(jp, "complete", p->complete);
    if (p->has_write_errors) {
        cJSON *we = cJSON_AddObjectToObject(jp, "write_errors");
        cJSON_AddNumberToObject(we, "records_lost", p->records_lost);
        cJSON_AddNumberToObject(we, "chunks_lost", p->chunks_lost);
        cJSON_AddNumberToObject(we, "bytes_lost", p->bytes_lost);
        cJSON_AddStringToObject(we, "first_errno", p->first_errno);
        cJSON_AddStringToObject(we, "first_error", p->first_error);
    }
    if (p->has_reopened) cJSON_AddNumberToObject(jp, "rank_file_reopened", p->rank_file_reopened);
    if (p->unmatched_range_ends > 0)
        cJSON_AddNumberToObject(jp, "unmatched_range_ends", p->unmatched_range_ends);
    if (p->unmatched_pops > 0) {
        /* NVTX keeps a stack per thread (and domain), so a pop with nothing open is a
         * mistake of one thread: say which; or, after the thread's full ring dropped
         * events, most likely a push that was dropped: say how many */
        cJSON_AddNumberToObject(jp, "unmatched_pops", p->unmatched_pops);
        if (p->unmatched_pops_after_drops > 0)
            cJSON_AddNumberToObject(jp, "unmatched_pops_after_drops",
                                    p->unmatched_pops_after_drops);
        cJSON *pt = cJSON_AddArrayToObject(jp, "unmatched_pops_by_thread");
        for (size_t k = 0; k < p->npops; k++) {
            const tp_pops_thread *t = &p->pops[k];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "tid", t->tid);
            if (t->thread) cJSON_AddStringToObject(e, "thread", t->thread);
            cJSON_AddNumberToObject(e, "count", t->count);
            if (t->after_drops > 0) cJSON_AddNumberToObject(e, "after_drops", t->after_drops);
            cJSON_AddNumberToObject(e, "first_s", t->first_s);
            tp_json_item_to_array(pt, e);
        }
    }
    cJSON *dmg = cJSON_AddArrayToObject(jp, "damage");
    for (size_t k = 0; k < p->ndamage; k++)
        tp_json_item_to_array(dmg, cJSON_CreateString(p->damage[k]));
    return jp;
}

int tp_processes_label_cols(const tp_run_results *res, int min) {
    int w = min;
    for (size_t i = 0; i < res->nprocs; i++) {
        int n = (int)strlen(res->procs[i].label); /* ASCII: rank numbers and fixed words */
        if (n > w) w = n;
    }
    return w;
}
