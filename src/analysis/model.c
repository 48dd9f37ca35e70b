/*
 * model.c — loads rank files into the in-memory model of model.h.
 *
 * Records of one thread arrive in order across that thread's chunks, so push/pop nesting is
 * rebuilt per (thread, domain) stack while reading. Async range ends may precede their
 * starts in the file (threads are flushed in any order), so they are matched after the
 * whole file is read. Strings are interned once per run, as valid UTF-8.
 *
 * This file reads each file and assembles the run (nesting, async ends, devices, roles);
 * model_records.c turns each record into the model; model_query.c answers questions of it.
 */
#define _GNU_SOURCE
#include "analysis/model.h"
#include "analysis/alloc.h"
#include "analysis/gpu.h"
#include "analysis/counter_pack.h"
#include "analysis/text.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "analysis/comm.h"
#include "analysis/kineto.h"
#include "analysis/model_load.h"
#include "analysis/summary.h"
#include "analysis/step_pack.h"
#include "analysis/steps.h"
#include "trainprof.h"

static int cmp_end(const void *a, const void *b) {
    const pending_end *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Containment on one thread, across domains: each synchronous range's direct children
 * (child_ns, for exclusive time) and whether a range of the same name and domain encloses
 * it (recursion, TP_R_NESTED_SAME). One sweep in start order with a stack of enclosing
 * ranges and a count per name on that stack; a range that only overlaps the top (ranges of
 * two domains that do not nest) closes it. */
typedef struct nest_key {
    const char *name;
    uint32_t domain;
    uint32_t count;
} nest_key;

static int cmp_by_start(const void *a, const void *b, void *ctx) {
    const tp_range *r = ctx;
    const tp_range *x = &r[*(const uint32_t *)a], *y = &r[*(const uint32_t *)b];
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* the enclosing one first */
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static nest_key *nest_slot(nest_key *tab, size_t mask, const char *name, uint32_t domain) {
    size_t h = (((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull + domain) & mask;
    while (tab[h].name && (tab[h].name != name || tab[h].domain != domain)) h = (h + 1) & mask;
    return &tab[h];
}

static int nesting(tp_thread *t) {
    size_t n = 0;
    for (size_t k = 0; k < t->nranges; k++) {
        t->ranges[k].child_ns = 0;
        n += !(t->ranges[k].flags & TP_R_ASYNC);
    }
    if (!n) return 0;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *idx = tp_malloc(n * sizeof *idx), *stk = tp_malloc(n * sizeof *stk);
    nest_key *tab = tp_calloc(cap, sizeof *tab);
    if (!idx || !stk || !tab) {
        free(idx);
        free(stk);
        free(tab);
        return TPROF_ERR_NO_MEMORY;
    }
    size_t m = 0, sp = 0;
    for (size_t k = 0; k < t->nranges; k++)
        if (!(t->ranges[k].flags & TP_R_ASYNC)) idx[m++] = (uint32_t)k;
    qsort_r(idx, n, sizeof *idx, cmp_by_start, t->ranges);
    for (size_t i = 0; i < n; i++) {
        tp_range *r = &t->ranges[idx[i]];
        if (tp_module_range(r->name)) continue; /* transparent: model.h */
        while (sp && t->ranges[stk[sp - 1]].end < r->end) {
            const tp_range *top = &t->ranges[stk[--sp]];
            nest_slot(tab, cap - 1, top->name, top->domain)->count--;
        }
        if (sp) t->ranges[stk[sp - 1]].child_ns += r->end - r->start;
        nest_key *k = nest_slot(tab, cap - 1, r->name, r->domain);
        if (k->count) r->flags |= TP_R_NESTED_SAME;
        k->name = r->name;
        k->domain = r->domain;
        k->count++;
        stk[sp++] = idx[i];
    }
    free(idx);
    free(stk);
    free(tab);
    return 0;
}

/* CUPTI's synchronization records name a context and a stream but no device: the capture
 * writes the device its kernels and copies showed for that context, or TPROF_DEVICE_UNKNOWN
 * when none had been seen yet (files before 2026-11 always wrote 0, which put a phantom GPU 0
 * in the report of every rank on another GPU). Each gets the device of the kernels, copies
 * and memsets on the same stream (CUPTI's stream ids are unique in a process), else the
 * device the capture wrote when the process has other work on it and the file says its
 * capture wrote the context's device (metadata cupti.sync_device=context), else the
 * process's only device when it used one; otherwise it stays unknown and counts for no
 * device (the host-synchronisation figures do not need one). */
static void sync_devices(tp_process *p) {
    struct smap { uint32_t stream, device; } map[256];
    size_t nmap = 0;
    uint32_t devs[64]; /* the devices with work */
    size_t ndev = 0;
    uint32_t last_stream = 0, have_last = 0;
    /* files whose capture wrote the context's device say so; older ones wrote 0 */
    const char *how = tp_meta(p, "cupti.sync_device");
    const int trusted = how && !strcmp(how, "context");
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type == TPROF_REC_GPU_SYNC || o->device == TPROF_DEVICE_UNKNOWN) continue;
        size_t d = 0;
        while (d < ndev && devs[d] != o->device) d++;
        if (d == ndev && ndev < 64) devs[ndev++] = o->device;
        if (have_last && o->stream == last_stream) continue;
        last_stream = o->stream;
        have_last = 1;
        size_t k = 0;
        while (k < nmap && map[k].stream != o->stream) k++;
        if (k == nmap && nmap < 256) map[nmap++] = (struct smap){o->stream, o->device};
    }
    for (size_t i = 0; i < p->ngpu; i++) {
        tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_SYNC) continue;
        uint32_t dev = ndev == 1 ? devs[0] : TPROF_DEVICE_UNKNOWN;
        for (size_t d = 0; trusted && ndev > 1 && d < ndev; d++)
            if (devs[d] == o->device) dev = o->device; /* the capture's, a device with work */
        for (size_t k = 0; k < nmap; k++)
            if (map[k].stream == o->stream) {
                dev = map[k].device;
                break;
            }
        o->device = dev;
    }
}

/* 0, or TPROF_ERR_NO_MEMORY when a streamed load could not hand its last ranges over. */
static int finish_process(loader *L) {
    tp_process *p = L->p;
    sync_devices(p);
    /* match async ends */
    if (L->nends) qsort(L->ends, L->nends, sizeof *L->ends, cmp_end);
    size_t matched = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *rg = &t->ranges[k];
            if (!(rg->flags & TP_R_ASYNC)) continue;
            uint64_t id = rg->child_ns;
            rg->child_ns = 0;
            size_t lo = 0, hi = L->nends;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (L->ends[mid].id < id) lo = mid + 1;
                else hi = mid;
            }
            if (lo < L->nends && L->ends[lo].id == id) {
                rg->end = L->ends[lo].ts < rg->start ? rg->start : L->ends[lo].ts;
                rg->end_tid = L->ends[lo].os_tid;
                rg->flags &= (uint16_t)~TP_R_UNCLOSED;
                L->ends[lo].id = 0; /* consumed; ids are never 0 */
                matched++;
            }
        }
    }
    p->unknown_ends = L->nends - matched;
    for (size_t k = 0; k < L->npending; k++)
        for (size_t i = 0; i < p->nthreads; i++)
            if (p->threads[i].os_tid == L->pending[k].tid) p->threads[i].name = L->pending[k].name;
    /* times */
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        if (t->first_ts && (!p->first_ts || t->first_ts < p->first_ts)) p->first_ts = t->first_ts;
        if (t->last_ts > p->last_ts) p->last_ts = t->last_ts;
        p->events += t->events;
        p->dropped += t->dropped;
    }
    if (!p->end_mono || p->end_mono < p->last_ts) p->end_mono = p->last_ts;
    if (!p->end_mono) p->end_mono = p->hdr.start_mono_ns;
    /* Ranges never ended end where they were last known open (model.h, TP_R_UNCLOSED): a
     * thread range at its thread's last event, since only that thread could have popped it
     * and a thread that exited records nothing more; a process range at the process's end,
     * since any thread could still have ended it until then. */
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            tp_range *rg = &t->ranges[k];
            if (!(rg->flags & TP_R_UNCLOSED)) continue;
            uint64_t last = rg->flags & TP_R_ASYNC ? p->end_mono : t->last_ts;
            rg->end = last > rg->start ? last : rg->start;
        }
    }
    /* a streamed load hands its last ranges over now (model_stream.c: its sweep did the
     * nesting); a slim process keeps no range that exclusive time or recursion is asked of */
    int streamed = L->rs != NULL, rc = streamed ? tp_stream_finish(L) : 0;
    tp_stream_free(L->rs);
    L->rs = NULL;
    for (size_t i = 0; !L->light && !streamed && i < p->nthreads; i++) nesting(&p->threads[i]);
    /* rank identity from metadata (last value wins) */
    tp_load_identity(p);
    if (L->bad_records)
        tp_load_damage(p, "%llu record(s) with a malformed payload skipped",
                   (unsigned long long)L->bad_records);
    return rc;
}

/* model_load.h: header texts are raw bytes, which reports print whole */
void tp_load_clean_field(char *f, size_t n) {
    f[n - 1] = 0;
    size_t len = strlen(f);
    char tmp[3 * 64 + 1];
    if (len > 64) len = 64;
    size_t tl = tp_load_utf8(f, len, tmp);
    size_t o = 0;
    for (size_t i = 0; i < tl;) {
        unsigned char c = (unsigned char)tmp[i];
        size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (o + k + 1 > n) break;
        if (k == 1) f[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        else { memcpy(f + o, tmp + i, k); o += k; }
        i += k;
    }
    f[o] = 0;
}

static int cmp_gpu_start(const void *a, const void *b) {
    const tp_gpu_op *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

/* GPU work in start order (CUPTI hands buffers back per stream and context, so the file
 * interleaves them): every analysis walks or unites them by time, and sorted input lets
 * tp_spans_sort skip its sort. Ties keep a fixed order (end, correlation id). */
static void gpu_in_start_order(tp_process *p) {
    for (size_t i = 1; i < p->ngpu; i++)
        if (p->gpu[i].start < p->gpu[i - 1].start) {
            qsort(p->gpu, p->ngpu, sizeof *p->gpu, cmp_gpu_start);
            return;
        }
}

int tp_driver_call(const char *n) {
    return n && n[0] == 'c' && n[1] == 'u' &&
           (strncmp(n, "cuda", 4) || !strcmp(n, "cuda driver call"));
}

static int cmp_call_tid_start(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    if (x->os_tid != y->os_tid) return x->os_tid < y->os_tid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Driver launches are taken from CUPTI callbacks (capture/cupti.c), which fire for the
 * runtime's own cuLaunchKernel inside each cudaLaunchKernel too: a driver call that lies within
 * any runtime call of its thread is that call's, and its kernel already has the runtime call as
 * its launch. Those are dropped, so each kernel has one launch, as CUPTI's DRIVER records
 * (program calls only) give. Returns 0, or -1 without memory (nothing dropped). */
static int drop_nested_driver_calls(tp_process *p) {
    size_t nrt = 0, ndrv = 0;
    for (size_t i = 0; i < p->napi; i++) {
        if (tp_driver_call(p->api[i].name)) ndrv++;
        else nrt++;
    }
    if (!ndrv || !nrt) return 0;
    const tp_gpu_op **rt = tp_malloc(nrt * sizeof *rt);
    if (!rt) return -1;
    size_t k = 0;
    for (size_t i = 0; i < p->napi; i++)
        if (!tp_driver_call(p->api[i].name)) rt[k++] = &p->api[i];
    qsort(rt, nrt, sizeof *rt, cmp_call_tid_start);
    /* reach[k]: the latest end among the runtime calls of rt[k]'s thread up to rt[k] in start
     * order. A driver call lies within one of its thread's runtime calls exactly when those
     * that began at or before it reach past its end: runtime calls may lie inside one another
     * (or share a start), so the last one to begin is not always the one that holds it. */
    uint64_t *reach = tp_malloc(nrt * sizeof *reach);
    unsigned char *drop = tp_calloc(p->napi, 1);
    if (!drop || !reach) {
        free(rt);
        free(reach);
        free(drop);
        return -1;
    }
    for (size_t j = 0; j < nrt; j++)
        reach[j] = j && rt[j - 1]->os_tid == rt[j]->os_tid && reach[j - 1] > rt[j]->end
                       ? reach[j - 1]
                       : rt[j]->end;
    for (size_t i = 0; i < p->napi; i++) {
        const tp_gpu_op *d = &p->api[i];
        if (!tp_driver_call(d->name)) continue;
        /* the last runtime call of d's thread that began at or before d */
        size_t lo = 0, hi = nrt;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const tp_gpu_op *r = rt[mid];
            if (r->os_tid < d->os_tid || (r->os_tid == d->os_tid && r->start <= d->start))
                lo = mid + 1;
            else
                hi = mid;
        }
        const tp_gpu_op *r = lo ? rt[lo - 1] : NULL;
        drop[i] = r && r->os_tid == d->os_tid && r->start <= d->start && d->end <= reach[lo - 1];
    }
    free(rt);
    free(reach);
    size_t w = 0;
    for (size_t i = 0; i < p->napi; i++) if (!drop[i]) p->api[w++] = p->api[i];
    p->napi = w;
    free(drop);
    return 0;
}

/* A rank file's GPU records once read: one launch per kernel, in start order, each clipped to
 * its stream's order; what memory refuses is said in the process's damage. */
static void settle_gpu_records(tp_process *p) {
    if (drop_nested_driver_calls(p) != 0)
        tp_load_damage(p, "out of memory while matching driver launches to runtime calls");
    gpu_in_start_order(p);
    if (tp_gpu_clip_to_streams(p) != 0)
        tp_load_damage(p, "out of memory while checking GPU records against their streams' order");
}

/* The writer's largest chunk (session.c, TPROF__CHUNK_MAX: it cuts a drain there at a record
 * boundary), and the most a record can take (its size field is 16 bits). */
#define WRITER_CHUNK_MAX (4u << 20)
#define MAX_RECORD_BYTES 65536u

/* trainprof.torch records every torch.distributed collective, but one that NCCL's profiler
 * plugin or the MPI wrappers also recorded must count once: the lower level's record has the
 * real timing. So a process with NCCL plugin records keeps none of torch's NCCL ones (flagged
 * enqueue: torch writes them only while the plugin is not recording, which it cannot know
 * for the call that creates a communicator), and one with MPI records none of torch's over
 * its "mpi" backend (ProcessGroupMPI calls MPI, which the wrappers record). */
static void drop_torch_twins(tp_process *p) {
    int nccl = 0, mpi = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        nccl |= p->comm[i].source == TPROF_COMM_SRC_NCCL;
        mpi |= p->comm[i].source == TPROF_COMM_SRC_MPI;
    }
    if (!nccl && !mpi) return;
    size_t k = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        int twin = tp_comm_torch_twin(o, nccl);
        /* torch's host-timed ops beside MPI's: twins when their group's backend is MPI */
        if (mpi && o->source == TPROF_COMM_SRC_TORCH && !(o->flags & TPROF_COMM_F_ENQUEUE)) {
            char key[40];
            snprintf(key, sizeof key, "torch.pg.%016llx", (unsigned long long)o->comm_hash);
            const char *d = tp_meta(p, key);
            twin = d && !strncmp(d, "backend=mpi ", 12);
        }
        if (!twin) p->comm[k++] = *o;
    }
    p->nrec_twins = p->ncomm - k; /* what a section reading its ops apart skips */
    p->ncomm = k;
}

/* Room for n records in arr (capacity cap), when n is known (a slim load counted them): a
 * whole load then takes what the records need, not up to twice that while doubling. Only a
 * count the file can hold (at most one record a byte, max) is taken: the slim process may
 * come from a summary (summary.h), whose counts are outside input, and a count past that
 * (or whose bytes overflow) is left for the array's growth to meet as records come. */
#define RESERVE(arr, cap, n, max)                                                   \
    do {                                                                            \
        if ((n) && (n) <= (max) && (n) <= SIZE_MAX / sizeof *(arr) && !(arr) &&     \
            ((arr) = tp_malloc((n) * sizeof *(arr))))                                  \
            (cap) = (n);                                                            \
    } while (0)

/* p's record arrays sized by what slim process `sizes` of the same file counted. */
static void reserve_like(tp_process *p, const tp_process *sizes, size_t gpu_max) {
    uint64_t max = sizes->file_bytes;
    /* a bounded load's window keeps at most gpu_max of either: pages never written cost
     * nothing, and an array that had to double would cost twice what it holds */
    size_t ngpu = gpu_max && sizes->nrec_gpu > gpu_max ? gpu_max : sizes->nrec_gpu;
    size_t napi = gpu_max && sizes->nrec_api > gpu_max ? gpu_max : sizes->nrec_api;
    RESERVE(p->gpu, p->cap_gpu, ngpu, max);
    RESERVE(p->api, p->cap_api, napi, max);
    RESERVE(p->ovh, p->cap_ovh, sizes->nrec_ovh, max);
    RESERVE(p->gmem, p->cap_gmem, sizes->nrec_gmem, max);
    RESERVE(p->comm, p->cap_comm, sizes->ncomm, max);
}

/* Whether two headers (cleaned) are of one process's file: its host, pid, run and start. */
static int same_process(const tprof_file_header *a, const tprof_file_header *b) {
    return a->pid == b->pid && a->start_realtime_ns == b->start_realtime_ns &&
           a->start_mono_ns == b->start_mono_ns && !strcmp(a->host, b->host) &&
           !strcmp(a->run_id, b->run_id);
}

/* Opens rank file `path`; for slim process `was` (NULL: none) read again, the bytes it was
 * read from (a file still being written has grown since) and only when it is still that
 * process's file (not replaced): else why in err. */
static int open_again(const char *path, const tp_process *was, tprof_reader **rd, char *err,
                      size_t n) {
    int rc = tprof__reader_open_prefix(path, was ? was->file_bytes : 0, rd, err, n);
    if (rc == TPROF_ERR_NO_MEMORY) tp_nomem_note(); /* the reader's, which it cannot count */
    if (rc != TPROF_OK || !was) return rc;
    tprof_file_header h = *tprof__reader_header(*rd);
    tp_load_clean_field(h.host, sizeof h.host);
    tp_load_clean_field(h.run_id, sizeof h.run_id);
    if (same_process(&h, &was->hdr)) return TPROF_OK;
    tprof__reader_close(*rd);
    snprintf(err, n, "replaced by the file of another process (%s:%d) since it was read",
             h.host, (int)h.pid);
    return TPROF_ERR_FORMAT;
}

/* What a load held for its threads while it read. */
static void loader_free(loader *L) {
    for (size_t i = 0; i < L->p->nthreads; i++) {
        for (size_t k = 0; k < L->tl[i].nstacks; k++) free(L->tl[i].stacks[k].idx);
        free(L->tl[i].stacks);
        free(L->tl[i].strs);
        tp_cpack_free(&L->tl[i].cpack);
    }
    free(L->tl);
    free(L->ends);
}

/* The read's end into p: drop windows spanned to the record's ends; no end record said. */
static void end_notes(tp_process *p) {
    uint64_t placed = 0;
    for (size_t i = 0; i < p->ndrops; i++) {
        tp_drop_window *d = &p->drops[i];
        if (!d->from) d->from = p->first_ts ? p->first_ts : p->hdr.start_mono_ns;
        if (!d->to || d->to < d->from) d->to = p->end_mono > d->from ? p->end_mono : d->from;
        placed += d->count;
    }
    p->drops_unplaced = p->dropped > placed ? p->dropped - placed : 0;
    const char *werr = tp_meta(p, "write_errors.first_errno");
    if (!p->complete && werr) {
        /* the writer counted write errors: the end may have been one more chunk it could
         * not write, so a kill is not the only explanation */
        const char *wtext = tp_meta(p, "write_errors.first_error");
        tp_load_damage(p, "no end record: the rank file had write errors (%s: %s), so its end "
                      "may not have been writable, else the process did not exit normally; "
                      "events after its last chunk written are lost",
                   werr, wtext ? wtext : "");
    } else if (!p->complete)
        tp_load_damage(p, "no end record: the process did not exit normally (killed?); "
                      "events after its last flush are lost");
}

#define SLIM_AGAIN 1000 /* load_once: a slim load's ops could not be keyed as read */

/* One rank file into p: whole, or slim (light: model.h, tp_process_slim), its arrays sized by
 * `sizes` when given (the slim process of the same file), its GPU records bounded by gb
 * then (tp_process_load_bounded; NULL: none), its ops keyed as read with sc (NULL: held). A
 * file that cannot be opened goes to run->errors when `note` is set. */
static int load_once(tp_run *run, const char *path, tp_process *p, int light, int note,
                     const tp_process *sizes, tp_range_stream *stream, const tp_gpu_bound *gb,
                     int comm_only, tp_slim_comm *sc) {
    memset(p, 0, sizeof *p);
    size_t gwin = sizes && !light ? tp_load_gpu_window(p, sizes, gb) : 0;
    if (sizes && !light) reserve_like(p, sizes, gwin);
    p->path = tp_intern(run, path);
    p->helper_of = -1;
    p->rank = p->world_size = p->local_rank = -1;
    tprof_reader *rd;
    char err[200];
    int rc = open_again(path, sizes, &rd, err, sizeof err);
    if (rc != TPROF_OK) {
        char line[512];
        snprintf(line, sizeof line, "%s: %s", path, err);
        char **e = note ? tp_realloc(run->errors, (run->nerrors + 1) * sizeof *e) : NULL;
        if (e) {
            run->errors = e;
            e[run->nerrors] = tp_strdup(line);
            if (e[run->nerrors]) run->nerrors++;
        }
        return rc;
    }
    p->hdr = *tprof__reader_header(rd);
    tp_load_clean_field(p->hdr.host, sizeof p->hdr.host);
    tp_load_clean_field(p->hdr.run_id, sizeof p->hdr.run_id);
    tp_load_clean_field(p->hdr.build, sizeof p->hdr.build);
    p->domains = tp_calloc(1, sizeof *p->domains);
    if (!p->domains) { tprof__reader_close(rd); return TPROF_ERR_NO_MEMORY; }
    p->domains[0] = tp_intern(run, "");
    p->ndomains = 1;
    loader L;
    memset(&L, 0, sizeof L);
    L.run = run;
    L.p = p;
    L.max_id = tprof__reader_size(rd) / MIN_NAMED_REC;
    L.light = light;
    L.gpu_max = gwin;
    /* a take-mode read hands its ranges over, and nothing reads its ops */
    const tp_comm_read slim = {tp_slim_comm_op, sc};
    L.comm = light && stream ? &tp_comm_read_none : sc ? &slim : gb ? gb->comm : NULL;
    L.comm_only = comm_only;
    L.rs = stream || light ? tp_stream_new(stream) : NULL; /* slim: few ranges kept */
    if ((stream || light) && !L.rs) { tprof__reader_close(rd); return TPROF_ERR_NO_MEMORY; }
    p->file_bytes = tprof__reader_size(rd);
    tprof_chunk c;
    uint64_t proc_dropped = 0;
    uint32_t prev_serial = 0;
    uint64_t prev_dropped = 0;
    size_t prev_len = 0;
    rc = TPROF_OK;
    while (rc == TPROF_OK && tprof__reader_next(rd, &c)) {
        int ti = -1;
        uint64_t new_drops = 0, last_before = 0;
        if (c.thread_serial == 0) proc_dropped = c.dropped;
        else {
            ti = tp_load_thread_index(&L, c.thread_serial, c.os_tid);
            if (ti < 0) { rc = TPROF_ERR_NO_MEMORY; break; }
            if (c.dropped > p->threads[ti].dropped) {
                new_drops = c.dropped - p->threads[ti].dropped;
                p->threads[ti].dropped = c.dropped;
            }
            last_before = p->threads[ti].last_ts;
        }
        size_t pos = 0;
        int bad = 0;
        uint64_t first_ts = 0;
        const tprof_rec *r;
        while (rc == TPROF_OK && (r = tprof__chunk_next_rec(&c, &pos, &bad)) != NULL) {
            if (!first_ts && ti >= 0 && r->kind != TPROF_REC_PAD && r->kind != TPROF_REC_STRING)
                first_ts = r->ts_ns;
            rc = ti < 0 ? tp_load_proc_record(&L, r) : tp_load_thread_record(&L, ti, r);
        }
        if (bad)
            tp_load_damage(p, "malformed record in the chunk at byte %llu; rest of chunk skipped",
                       (unsigned long long)c.file_offset);
        if (ti >= 0 && rc == TPROF_OK) {
            /* Ring drops, placed in time. The counter in a chunk's header is read when the
             * flusher drains the ring, and a ring drops only while full, between two drains:
             * so the events counted anew were recorded after the thread's last event of the
             * drains before and before its first event of a later drain. One drain writes its
             * chunks in a row with the same counter: the part up to the ring's end, then the
             * part from its start (a full ring, the case with drops, nearly always wraps),
             * each cut further at the writer's chunk limit. A chunk that follows one of the
             * same thread and counter is taken as part of the same drain when the drain may
             * still wrap, or when the chunk before it was cut at the limit: the window then
             * ends later, never earlier, than the drops. */
            tload *tl = &L.tl[ti];
            int same_drain = tl->drop_open && prev_serial == c.thread_serial &&
                             prev_dropped == c.dropped &&
                             (tl->drop_wrap || prev_len + MAX_RECORD_BYTES >= WRITER_CHUNK_MAX);
            if (same_drain && prev_len + MAX_RECORD_BYTES < WRITER_CHUNK_MAX) tl->drop_wrap = 0;
            if (tl->drop_open && !same_drain && first_ts) {
                p->drops[tl->drop_open - 1].to = first_ts;
                tl->drop_open = 0;
            }
            if (new_drops) {
                tp_drop_window dw = {last_before ? last_before : first_ts, 0, new_drops, c.os_tid};
                if (p->ndrops == p->cap_drops) {
                    size_t nc = p->cap_drops ? p->cap_drops * 2 : 16;
                    tp_drop_window *nd = tp_realloc(p->drops, nc * sizeof *nd);
                    if (!nd) { rc = TPROF_ERR_NO_MEMORY; break; }
                    p->drops = nd;
                    p->cap_drops = nc;
                }
                p->drops[p->ndrops++] = dw;
                tl->drop_open = p->ndrops;
                tl->drop_wrap = 1;
            }
        }
        prev_serial = c.thread_serial;
        prev_dropped = c.dropped;
        prev_len = c.len;
        tprof__reader_release(rd, c.file_offset); /* the model holds copies of what it keeps */
    }
    for (size_t i = 0; i < tprof__reader_damage_count(rd); i++)
        tp_load_damage(p, "%s at byte %llu", tprof__reader_damage(rd, i)->what,
                       (unsigned long long)tprof__reader_damage(rd, i)->offset);
    if (tprof__reader_nomem(rd)) tp_nomem_note(); /* what it skipped was skipped for memory */
    tprof__reader_close(rd);
    tp_load_meta_settle(&L);
    if (finish_process(&L) != 0 && rc == TPROF_OK) rc = TPROF_ERR_NO_MEMORY;
    settle_gpu_records(p);
    p->dropped += proc_dropped;
    if (p->end_dropped > p->dropped) p->dropped = p->end_dropped; /* the writer's own total */
    drop_torch_twins(p);
    end_notes(p);
    loader_free(&L);
    if (light) tp_process_slim(p);
    /* a run's slim process: a section's streamed second read reads no op of its own */
    if (light && !stream) p->nrec_comm = sc ? sc->seen : p->ncomm; /* tp_slim_comm_end's */
    if (sc) p->nrec_twins = sc->twins;
    if (sc && rc == TPROF_OK && !tp_slim_comm_end(sc, p)) rc = SLIM_AGAIN;
    else if (light && !stream) tp_process_slim_comm(p);
    if (light && !(p->file = tp_strdup(path))) rc = TPROF_ERR_NO_MEMORY;
    return rc;
}

/* load_once; a slim run load (light, no stream) keys its ops as read (tp_slim_comm), never
 * holding them, and reads the file again with them when that cannot be done. */
static int load_file(tp_run *run, const char *path, tp_process *p, int light, int note,
                     const tp_process *sizes, tp_range_stream *stream, const tp_gpu_bound *gb,
                     int comm_only) {
    if (!light || stream || comm_only)
        return load_once(run, path, p, light, note, sizes, stream, gb, comm_only, NULL);
    tp_slim_comm sc;
    tp_slim_comm_init(&sc);
    int rc = load_once(run, path, p, light, note, sizes, stream, gb, 0, &sc);
    tp_slim_comm_free(&sc);
    if (rc != SLIM_AGAIN) return rc;
    tp_process_free(p);
    return load_once(run, path, p, light, note, sizes, stream, gb, 0, NULL);
}

void tp_load_identity(tp_process *p) {
    p->rank = tp_meta_int(p, "rank");
    p->world_size = tp_meta_int(p, "world_size");
    p->local_rank = tp_meta_int(p, "local_rank");
}

int tp_load_finish_foreign(tp_process *p) {
    for (size_t i = 0; i < p->nthreads; i++)
        if (nesting(&p->threads[i]) != 0) return TPROF_ERR_NO_MEMORY;
    tp_load_identity(p);
    gpu_in_start_order(p);
    if (tp_gpu_clip_to_streams(p) != 0) return TPROF_ERR_NO_MEMORY;
    return 0;
}

static void assign_roles(tp_run *run);

int tp_run_load(const char *dir, tp_run *run, char *err, size_t errlen) {
    return tp_run_load_list(&dir, 1, run, err, errlen);
}

static int run_load(const char *const *ops, size_t nops, tp_run *run, char *err, size_t errlen,
                    int light);

int tp_run_load_list(const char *const *ops, size_t nops, tp_run *run, char *err,
                     size_t errlen) {
    return run_load(ops, nops, run, err, errlen, 0);
}

int tp_run_load_slim(const char *const *ops, size_t nops, tp_run *run, char *err,
                     size_t errlen) {
    return run_load(ops, nops, run, err, errlen, 1);
}

int tp_process_load_slim(tp_run *run, const char *path, tp_process *p) {
    return load_file(run, path, p, 1, 1, NULL, NULL, NULL, 0);
}

int tp_process_read_comm(tp_run *run, const tp_process *p, const tp_comm_read *r) {
    tp_process tmp;
    const tp_gpu_bound b = {0, 0, r};
    int rc = load_file(run, p->file ? p->file : p->path, &tmp, 1, 0, p, NULL, &b, 1);
    tp_process_free(&tmp);
    return rc;
}

int tp_process_file_check(const tp_process *p, char *why, size_t n) {
    tprof_reader *rd;
    char dummy[8];
    if (!n) why = dummy, n = sizeof dummy;
    why[0] = 0;
    int rc = open_again(p->file ? p->file : p->path, p, &rd, why, n);
    if (rc == TPROF_OK) tprof__reader_close(rd);
    return rc;
}

int tp_process_load_whole(tp_run *run, const tp_process *p, tp_process *out) {
    return tp_process_load_streamed(run, p, out, NULL);
}

int tp_process_load_streamed(tp_run *run, const tp_process *p, tp_process *out,
                             tp_range_stream *s) {
    return tp_process_load_bounded(run, p, out, s, NULL);
}

int tp_process_load_bounded(tp_run *run, const tp_process *p, tp_process *out,
                            tp_range_stream *s, const tp_gpu_bound *b) {
    int light = s && !s->keep; /* take mode keeps no GPU record either */
    int rc = load_file(run, p->file ? p->file : p->path, out, light, 0, p, s,
                       p->slim ? b : NULL, 0);
    if (rc != TPROF_OK) {
        tp_process_free(out);
        return rc;
    }
    if (out->gpu_window_to && !out->gpu_left_out) /* nothing was outside: a whole load */
        out->gpu_window_from = out->gpu_window_to = out->gpu_bound = out->gpu_held = 0;
    tp_load_gpu_window_close(out);
    /* what the run decided of it (assign_roles), which one file cannot tell */
    out->rank = p->rank;
    out->world_size = p->world_size;
    out->local_rank = p->local_rank;
    out->rank_implied = p->rank_implied;
    out->role = p->role;
    out->helper_of = p->helper_of;
    out->launched = p->launched;
    out->launched_lo = p->launched_lo;
    out->launched_hi = p->launched_hi;
    return TPROF_OK;
}

static int run_load(const char *const *ops, size_t nops, tp_run *run, char *err, size_t errlen,
                    int light) {
    memset(run, 0, sizeof *run);
    if (errlen) err[0] = 0;
    unsigned long nomem = tp_nomem_thread(); /* the load runs on this thread */
    run->pool = tp_load_pool_new();
    if (!run->pool) return TPROF_ERR_NO_MEMORY;
    {
        /* the operands go into reports: valid UTF-8, no control bytes */
        size_t n = 0;
        for (size_t i = 0; i < nops; i++) n += strlen(ops[i] ? ops[i] : "") + 1;
        char *all = tp_malloc(n + 1), *w = all;
        run->dir = tp_malloc(3 * n + 1);
        if (!all || !run->dir) {
            free(all);
            return TPROF_ERR_NO_MEMORY;
        }
        *w = 0;
        for (size_t i = 0; i < nops; i++)
            w += sprintf(w, "%s%s", i ? " " : "", ops[i] ? ops[i] : "");
        tp_load_utf8(all, strlen(all), run->dir);
        free(all);
        for (char *c = run->dir; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    }
    tp_flist fl = {0};
    int rc = TPROF_OK;
    for (size_t i = 0; rc == TPROF_OK && i < nops; i++) {
        size_t before = fl.n;
        rc = tp_load_operand_files(ops[i] ? ops[i] : "", &fl, err, errlen);
        if (rc == TPROF_OK && fl.n == before) {
            snprintf(err, errlen, "%s: no .tprof rank files found (nor torch.profiler traces: "
                                  "*.json, *.json.gz holding \"traceEvents\")",
                     ops[i]);
            rc = TPROF_ERR_NOT_FOUND;
        }
    }
    if (rc == TPROF_OK) {
        run->procs = tp_calloc(fl.n ? fl.n : 1, sizeof *run->procs);
        if (!run->procs) rc = TPROF_ERR_NO_MEMORY;
    }
    size_t nkineto = 0, kineto_ranked = 0;
    for (size_t i = 0; rc == TPROF_OK && i < fl.n; i++) {
        tp_process *p = &run->procs[run->nprocs];
        if (fl.kineto[i]) {
            /* a trace is read whole or not at all: its one line is the command's error */
            rc = tp_kineto_load(run, fl.v[i], p, err, errlen);
            if (rc == TPROF_OK) {
                run->nprocs++;
                nkineto++;
                kineto_ranked += p->rank >= 0;
            }
            continue;
        }
        /* slim: from the file's summary when it holds the slim process of the file as it is */
        int r = light ? tp_summary_slim_load(run, fl.v[i], p) : 0;
        run->from_summaries += r == 1;
        if (r != 1) r = load_file(run, fl.v[i], p, light, 1, NULL, NULL, NULL, 0);
        if (r == TPROF_OK || r == 1) run->nprocs++;
        else if (p->nthreads || p->nmeta) run->nprocs++; /* keep what a damaged file had */
        else tp_process_free(p); /* past run->nprocs: tp_run_free would not see it */
        if (r == TPROF_ERR_NO_MEMORY) rc = r;
    }
    tp_flist_free(&fl);
    if (rc == TPROF_OK && run->nprocs == 0) {
        snprintf(err, errlen, "%s: no readable rank file (%zu unreadable)", run->dir,
                 run->nerrors);
        rc = TPROF_ERR_FORMAT;
    }
    /* traces that name no rank (no distributedInfo, no rank in the file name): in the order
     * of their names, as the files of one job */
    if (rc == TPROF_OK && nkineto > 1 && !kineto_ranked) {
        int r = 0;
        for (size_t i = 0; i < run->nprocs; i++)
            if (tp_meta(&run->procs[i], "trainprof.source")) {
                run->procs[i].rank = r++;
                run->procs[i].world_size = (int)nkineto;
            }
    }
    if (rc == TPROF_OK) assign_roles(run);
    run->no_memory = tp_nomem_thread() != nomem;
    return rc;
}

/* Which processes are ranks (docs/design.md §4). A process whose metadata names a rank is that
 * rank, unless another process of the same rank did more (a launcher agent, or a DataLoader
 * worker that inherited RANK): the busiest is the rank, the others its helpers. Without any
 * rank metadata the busiest process is rank 0 (implied) and the others helpers. */
static void assign_roles(tp_run *run) {
    int any_rank = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        tp_process *p = &run->procs[i];
        const char *role = tp_meta(p, "trainprof.role");
        if (role && !strcmp(role, "node-sampler")) {
            p->role = TP_ROLE_SAMPLER;
            p->rank = -1; /* whatever a launcher's variables said */
        }
    }
    for (size_t i = 0; i < run->nprocs; i++) any_rank |= run->procs[i].rank >= 0;
    if (!any_rank) {
        size_t best = run->nprocs;
        for (size_t i = 0; i < run->nprocs; i++)
            if (run->procs[i].role != TP_ROLE_SAMPLER &&
                (best == run->nprocs || run->procs[i].events > run->procs[best].events))
                best = i;
        if (best < run->nprocs) {
            run->procs[best].rank = 0;
            run->procs[best].world_size = 1;
            run->procs[best].rank_implied = 1;
        }
    }
    for (size_t i = 0; i < run->nprocs; i++) {
        tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_SAMPLER) continue;
        if (p->rank < 0) {
            p->role = TP_ROLE_HELPER;
            /* attach to the rank whose pid is its parent, if any; or, being the parent of
             * ranks (a launcher: torchrun's agent, mpirun), say whose */
            for (size_t k = 0; k < run->nprocs; k++) {
                const tp_process *q = &run->procs[k];
                if (q->rank < 0 || strcmp(q->hdr.host, p->hdr.host)) continue;
                if (q->hdr.pid == p->hdr.ppid) p->helper_of = q->rank;
                if (q->hdr.ppid == p->hdr.pid) {
                    if (!p->launched++ || q->rank < p->launched_lo) p->launched_lo = q->rank;
                    if (p->launched == 1 || q->rank > p->launched_hi) p->launched_hi = q->rank;
                }
            }
            continue;
        }
        p->role = TP_ROLE_RANK;
        for (size_t k = 0; k < run->nprocs; k++) {
            tp_process *q = &run->procs[k];
            if (k == i || q->rank != p->rank) continue;
            if (q->events > p->events || (q->events == p->events && k < i)) {
                p->role = TP_ROLE_HELPER;
                p->helper_of = p->rank;
                break;
            }
        }
    }
}

/* The innermost open range of thread th, else the one that ended last: the first of them in
 * the thread's order (ended.c's last_range, which a slim process must answer alike). */
static size_t thread_last_range(const tp_thread *th) {
    size_t best = th->nranges;
    for (size_t k = 0; k < th->nranges; k++) {
        const tp_range *r = &th->ranges[k], *b = best < th->nranges ? &th->ranges[best] : NULL;
        int open = (r->flags & TP_R_UNCLOSED) != 0;
        int bopen = b && (b->flags & TP_R_UNCLOSED) != 0;
        if (!b || (open && !bopen) ||
            (open == bopen && (open ? r->start > b->start : r->end > b->end)))
            best = k;
    }
    return best;
}

/* Keeps of thread th's ranges its last one (thread_last_range) and the 63 ranges around it at
 * most (ended.c reads a stack of 64), in their order, parents renumbered. A parent precedes
 * its child (pushed before it), so the first best of the thread stays the first best. */
static void slim_ranges(tp_thread *th) {
    size_t best = thread_last_range(th);
    size_t idx[64], n = 0;
    for (size_t x = best; x < th->nranges && n < 64;) {
        idx[n++] = x;
        int32_t par = th->ranges[x].parent;
        x = par >= 0 && (size_t)par < th->nranges ? (size_t)par : th->nranges;
    }
    tp_range keep[64];
    for (size_t i = 0; i < n; i++) { /* idx holds descending indices: reverse */
        keep[i] = th->ranges[idx[n - 1 - i]];
        int32_t par = keep[i].parent;
        keep[i].parent = -1;
        for (size_t j = 0; j < i; j++)
            if (par >= 0 && idx[n - 1 - j] == (size_t)par) keep[i].parent = (int32_t)j;
    }
    free(th->ranges);
    th->ranges = n ? tp_malloc(n * sizeof *th->ranges) : NULL;
    th->nranges = th->cap_ranges = th->ranges ? n : 0;
    if (th->ranges) memcpy(th->ranges, keep, n * sizeof *keep);
}

/* Gives back the room arr (n used of cap) grew to while doubling: a slim process is kept for the
 * whole report, the doubling's slack of every rank's steps and ops with it. Kept as it is when
 * the smaller block cannot be had. */
#define SHRINK(arr, n, cap)                                           \
    do {                                                              \
        if ((n) && (n) < (cap)) {                                     \
            void *np_ = tp_realloc((arr), (n) * sizeof *(arr));          \
            if (np_) {                                                \
                (arr) = np_;                                          \
                (cap) = (n);                                          \
            }                                                         \
        }                                                             \
    } while (0)

void tp_process_slim(tp_process *p) {
    SHRINK(p->comm, p->ncomm, p->cap_comm);
    SHRINK(p->drops, p->ndrops, p->cap_drops);
    free(p->gpu);
    free(p->clips);
    free(p->api);
    free(p->ovh);
    free(p->gmem);
    free(p->gpu_fences);
    p->gpu = p->api = p->ovh = NULL;
    p->gpu_fences = NULL;
    p->ngpu_fences = 0;
    p->clips = NULL;
    p->gmem = NULL;
    p->ngpu = p->cap_gpu = p->nclips = p->napi = p->cap_api = p->novh = p->cap_ovh = 0;
    p->ngmem = p->cap_gmem = 0;
    for (size_t k = 0; k < p->nthreads; k++) {
        tp_thread *t = &p->threads[k];
        free(t->marks);
        t->marks = NULL;
        t->nmarks = t->cap_marks = 0;
        slim_ranges(t);
        tp_thread_pack_steps(t); /* else shrunk to their count */
        tp_thread_slim_counters(t);
        tp_thread_pack_counters(t);
    }
    p->slim = 1;
}

void tp_thread_slim_counters(tp_thread *t) {
    if (t->counters_packed) return; /* only the kept ones were packed */
    size_t k = 0;
    for (size_t i = 0; i < t->ncounters; i++)
        if (tp_slim_keeps_counter(t->counters[i].name)) t->counters[k++] = t->counters[i];
    t->ncounters = k;
    if (!k) {
        free(t->counters);
        t->counters = NULL;
        t->cap_counters = 0;
    }
    SHRINK(t->counters, t->ncounters, t->cap_counters);
}

void tp_process_free(tp_process *p) {
    for (size_t k = 0; k < p->nthreads; k++) {
        tp_thread *t = &p->threads[k];
        free(t->ranges);
        free(t->marks);
        tp_thread_free_counters(t);
        free(t->steps);
        free(t->steps_packed);
        tp_spill_block_free(t->steps_spilled);
    }
    free(p->threads);
    free(p->gpu);
    free(p->gpu_fences);
    free(p->clips);
    free(p->api);
    free(p->ovh);
    free(p->gmem);
    free(p->comm);
    free(p->drops);
    free(p->meta);
    free(p->domains);
    free(p->categories);
    for (size_t k = 0; k < p->ndamage; k++) free(p->damage[k]);
    free(p->damage);
    free(p->comm_memo);
    free(p->comm_keys);
    free(p->comm_last);
    free(p->comm_comms);
    free(p->comm_times);
    tp_comm_stream_free(p->comm_stream);
    free(p->file);
    if (p->steps_memo) {
        tp_steps_free(p->steps_memo);
        free(p->steps_memo);
    }
    memset(p, 0, sizeof *p);
}

void tp_run_free(tp_run *run) {
    if (!run) return;
    for (size_t i = 0; i < run->nprocs; i++) tp_process_free(&run->procs[i]);
    free(run->procs);
    for (size_t i = 0; i < run->nerrors; i++) free(run->errors[i]);
    free(run->errors);
    free(run->dir);
    tp_load_pool_free(run->pool);
    memset(run, 0, sizeof *run);
}
