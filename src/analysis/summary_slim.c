/*
 * summary_slim.c — the slim process in a summary file (summary.h; docs/format.md "Summary
 * files"): what tp_run_load_slim keeps of a rank file, coded field by field both ways in one
 * function per struct (as summary_codec.c), and the key that says the rank file is still the
 * one it was read from. With it the report's load takes each file's slim process from its
 * summary and decodes no rank file at all.
 *
 * What is not coded, and why: the fields the run decides over all its processes (role,
 * helper_of, launched, rank_implied, and the rank and world size a sampler or an implied rank
 * is given) are set again by the load's assign_roles from the slim processes, so the reader
 * leaves them as the loader's own read does (rank, world size and local rank from the
 * metadata, as model.c's finish_process reads them); the path is the one the load opened
 * now (another operand spelling names the same file); the memos are the section's part of the
 * summary (summary.c). A slim process holds no GPU record, API call, allocation, clip or mark:
 * their counts are coded (nrec_*) with the sample of their start times (gpu_starts), the records
 * are not, nor the window of a load bounded in GPU records (gpu_window_*, gpu_held,
 * gpu_left_out, gpu_bound, gpu_fences: a whole load's, 0 in a slim process).
 */
#define _GNU_SOURCE
#include "analysis/summary.h"
#include "analysis/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/comm.h"
#include "analysis/counter_pack.h"
#include "analysis/model_load.h"
#include "analysis/step_pack.h"
#include "trainprof.h"

/* Each struct below is coded field by field: a field added to one of them must be added to
 * its codec here (and TP_SUMMARY_VERSION bumped): these sizes fail the build until it is. */
#if UINTPTR_MAX == UINT64_MAX && INT_MAX == 2147483647
/* (tp_thread.steps_packed and steps_spilled are not coded: the events are coded unpacked
 * and packed again as read; the counters are coded in the form the thread holds,
 * counters(), the packed bytes whole whether some were spilled or not, so counters_spilled
 * is not coded) */
/* (tp_process.comm_times and comm_stream are not coded: a whole process's, never a slim one's) */
_Static_assert(sizeof(tp_process) == 2920, "tp_process changed: update tp_sum_slim");
_Static_assert(sizeof(tp_thread) == 232, "tp_thread changed: update its codec");
_Static_assert(sizeof(tp_range) == 56, "tp_range changed: update its codec");
_Static_assert(sizeof(tp_counter) == 24, "tp_counter changed: update its codec");
_Static_assert(sizeof(tp_stepev) == 24, "tp_stepev changed: update its codec");
_Static_assert(sizeof(tp_comm_op) == 112, "tp_comm_op changed: update its codec");
_Static_assert(sizeof(tp_comm_key) == 16, "tp_comm_key changed: update its codec");
_Static_assert(sizeof(tp_drop_window) == 32, "tp_drop_window changed: update its codec");
_Static_assert(sizeof(tp_kv) == 16, "tp_kv changed: update its codec");
_Static_assert(sizeof(struct tp_category) == 16, "tp_category changed: update its codec");
_Static_assert(sizeof(tprof_file_header) == 240, "the file header changed: update the codec");
#endif

#define RAW(x) tp_sum_raw(c, rd, &(x), sizeof(x))
#define S(x) tp_sum_str(c, rd, &(x))
/* A name the loader always sets (an unknown one is "(unknown name)", model_records.c), which
 * its readers take as a string (tp_meta's strcmp, the tables' names): NULL is damage. */
#define SN(x) (tp_sum_str(c, rd, &(x)), c->bad |= rd && !(x))
#define Z(x) tp_sum_size(c, rd, &(x))

/* An owned array of n elements (tp_sum_array, which rejects a count without an array):
 * whether its elements are to be coded. */
static int arr(tp_sum_buf *c, int rd, void *a, size_t n, size_t elem) {
    return tp_sum_array(c, rd, a, n, elem) && !c->bad;
}

static void range(tp_sum_buf *c, int rd, tp_range *r, size_t i) {
    SN(r->name);
    RAW(r->start), RAW(r->end), RAW(r->child_ns), RAW(r->parent), RAW(r->domain);
    RAW(r->category), RAW(r->depth), RAW(r->flags), RAW(r->end_tid);
    /* ended.c walks the parents: each precedes its child (model.c, slim_ranges) */
    if (rd && (r->parent < -1 || (r->parent >= 0 && (size_t)r->parent >= i))) c->bad = 1;
}

/* A thread's len packed bytes, a window at a time (counter_pack.h): read, into its buffer,
 * which writes them out to the temporary file as they pass the spill threshold, so that a
 * node sampler's summary is not held whole; written, from memory and that file. */
static void packed_bytes(tp_sum_buf *c, int rd, tp_thread *t, size_t len) {
    tp_cpack st = {0};
    size_t spill = tp_cpack_spill_threshold();
    /* a summary read in place: its bytes stay there (read here only for the CRC) */
    int refer = rd && c->in_place && c->f && spill && len >= spill &&
                tp_cpack_refer(t, fileno(c->f), c->src_off + c->at, len) == 0;
    size_t wlen = len < TP_CPACK_WINDOW ? (len ? len : 1) : TP_CPACK_WINDOW;
    uint8_t *w = rd && !refer ? NULL : tp_malloc(wlen);
    if ((!rd || refer) && !w) c->bad = 1;
    for (size_t done = 0, n; done < len && !c->bad; done += n) {
        n = len - done < TP_CPACK_WINDOW ? len - done : TP_CPACK_WINDOW;
        if (refer) {
            tp_sum_raw(c, 1, w, n);
            continue;
        }
        if (!rd) {
            if (tp_counters_packed_read(t, done, w, n) != TPROF_OK) c->bad = 1, c->err = EIO;
            else tp_sum_raw(c, 0, w, n);
            continue;
        }
        uint8_t *at = tp_cpack_reserve(t, &st, n);
        if (!at) {
            c->bad = 1;
            break;
        }
        tp_sum_raw(c, 1, at, n);
        if (!c->bad) tp_cpack_commit(t, &st, n);
    }
    if (rd && !t->counters_packed) t->counters_packed = tp_malloc(1); /* none: still packed */
    if (rd && !t->counters_packed) c->bad = 1;
    if (rd && !c->bad) tp_cpack_finish(t);
    free(w);
}

/* A thread's counters: their count, then their form (1 byte): 1, packed (counter_pack.h:
 * the names table, each name as a string, then the packed bytes), as a slim thread holds
 * them; 0, the array of name, time and value, for a thread whose counters could not be
 * packed (more names than a table holds). Read, the packed form is checked whole (every
 * counter decodes, each a GPU sample as a slim thread keeps) and kept as it is; the array is
 * filtered and packed as tp_process_slim does. */
static void counters(tp_sum_buf *c, int rd, tp_thread *t) {
    Z(t->ncounters);
    unsigned char packed = t->counters_packed && t->ncounters;
    RAW(packed);
    if (rd && packed > 1) c->bad = 1;
    if (c->bad) return;
    if (!packed) {
        if (arr(c, rd, &t->counters, t->ncounters, sizeof *t->counters))
            for (size_t i = 0; i < t->ncounters && !c->bad; i++) {
                SN(t->counters[i].name);
                RAW(t->counters[i].ts), RAW(t->counters[i].value);
            }
        return;
    }
    Z(t->ncounter_names);
    size_t len = rd ? 0 : (size_t)tp_counters_packed_size(t);
    Z(len);
    /* a name takes 2 bytes at least, a counter 3 */
    if (rd && (!t->ncounters || !t->ncounter_names || t->ncounter_names > TP_CPACK_NAMES ||
               t->ncounter_names > (c->len - c->at) / 2 || len > c->len - c->at ||
               t->ncounters > len / 3)) {
        t->counter_names = NULL, t->ncounter_names = 0;
        c->bad = 1;
        return;
    }
    if (rd && !(t->counter_names = tp_calloc(t->ncounter_names, sizeof *t->counter_names))) {
        c->bad = 1;
        return;
    }
    for (size_t i = 0; i < t->ncounter_names && !c->bad; i++) SN(t->counter_names[i]);
    packed_bytes(c, rd, t, len);
    if (!rd || c->bad) return;
    tp_counter_it it;
    tp_counter k;
    if (tp_counter_it_init(&it, t)) c->bad = 1;
    it.quiet = 1; /* a failure here makes the loader read the rank file instead */
    while (!c->bad && tp_counter_next(&it, &k)) c->bad |= !tp_slim_keeps_counter(k.name);
    if (tp_counter_it_done(&it)) c->bad = 1;
}

static void thread(tp_sum_buf *c, int rd, tp_thread *t) {
    RAW(t->serial), RAW(t->os_tid);
    S(t->name);
    Z(t->nranges);
    if (arr(c, rd, &t->ranges, t->nranges, sizeof *t->ranges))
        for (size_t i = 0; i < t->nranges && !c->bad; i++) range(c, rd, &t->ranges[i], i);
    counters(c, rd, t);
    Z(t->nsteps);
    /* written unpacked (step_pack.h), so that the block is the same whichever form the
     * process holds; read, then packed below */
    int owned = 0;
    uint64_t failed = tp_counters_read_failures_here();
    tp_stepev *ev = rd ? NULL : tp_thread_stepevs(t, &owned);
    if (!rd && t->nsteps && !ev) { /* no memory to unpack, or written out and not read back */
        c->bad = 1;
        if (tp_counters_read_failures_here() != failed) c->err = EIO;
    }
    if (arr(c, rd, rd ? &t->steps : &ev, t->nsteps, sizeof *t->steps)) {
        tp_stepev *e = rd ? t->steps : ev;
        for (size_t i = 0; i < t->nsteps && !c->bad; i++)
            RAW(e[i].step), RAW(e[i].ts), RAW(e[i].begin);
    }
    if (owned) free(ev);
    RAW(t->dropped), RAW(t->first_ts), RAW(t->last_ts), RAW(t->unmatched_pops);
    RAW(t->first_unmatched_pop_ts), RAW(t->unmatched_pops_after_drops), RAW(t->events);
    if (rd) { /* the arrays hold what they were given, as tp_process_slim shrinks them to */
        t->cap_ranges = t->ranges ? t->nranges : 0;
        t->cap_counters = t->counters ? t->ncounters : 0;
        /* an array (unpackable) is filtered as tp_process_slim does, then left as it is */
        if (!c->bad && !t->counters_packed) tp_thread_slim_counters(t);
        t->cap_steps = t->steps ? t->nsteps : 0;
        if (!c->bad) tp_thread_pack_steps(t);
    }
}

static void comm_op(tp_sum_buf *c, int rd, tp_comm_op *x) {
    RAW(x->start), RAW(x->end), RAW(x->gpu_start), RAW(x->gpu_end), RAW(x->bytes);
    RAW(x->count), RAW(x->comm_hash);
    SN(x->name);
    RAW(x->seq), RAW(x->nranks), RAW(x->rank), RAW(x->op), RAW(x->algo), RAW(x->proto);
    RAW(x->peer), RAW(x->flags), RAW(x->nchannels), RAW(x->source), RAW(x->os_tid);
    RAW(x->dtype);
}

/* A slim process's communication ops: their keys, the last op and the times resolved without
 * GPU records (tp_process_slim_comm), or the ops themselves where that form could not be made
 * (out of memory). Read, the key form must be whole: its readers take each part as there. */
static void comm_ops(tp_sum_buf *c, int rd, tp_process *p) {
    Z(p->ncomm);
    unsigned char keys = p->comm_keys != NULL;
    RAW(keys);
    if (rd) c->bad |= keys > 1;
    if (!keys || c->bad) {
        if (!c->bad && arr(c, rd, &p->comm, p->ncomm, sizeof *p->comm))
            for (size_t i = 0; i < p->ncomm && !c->bad; i++) comm_op(c, rd, &p->comm[i]);
        if (rd) p->cap_comm = p->comm ? p->ncomm : 0;
        return;
    }
    RAW(p->comm_level);
    /* a key form keeps ops, unless its level kept none of them (sends and receives alone) */
    if (rd) c->bad |= p->comm_level > TP_COMM_LEVEL_MAX || (!p->ncomm && !p->comm_level);
    /* more ops than the key's bound: only what no level could cut further without leaving
     * none (tp_comm_level), collectives of one class */
    int over = !c->bad && p->ncomm > tp_comm_keep_of(p); /* its metadata read back above */
    unsigned cls = TP_COMM_LEVEL_MAX;
    if (arr(c, rd, &p->comm_keys, p->ncomm, sizeof *p->comm_keys))
        for (size_t i = 0; i < p->ncomm && !c->bad; i++) {
            tp_comm_key *k = &p->comm_keys[i];
            RAW(k->comm_hash), RAW(k->seq), RAW(k->op), RAW(k->flags), RAW(k->source);
            /* the merge takes a rank's keys for all it has of its level (clocks.c) */
            if (rd && over && cls == TP_COMM_LEVEL_MAX) cls = tp_comm_class(k);
            if (rd && (!tp_comm_kept(k, p->comm_level) ||
                       (over && (!tp_comm_kept(k, 1) || tp_comm_class(k) != cls))))
                c->bad = 1;
        }
    RAW(p->ncomm_comms);
    if (rd) c->bad |= (p->comm_level >= 2) != (p->ncomm_comms > 0);
    if (arr(c, rd, &p->comm_comms, p->ncomm_comms, sizeof *p->comm_comms))
        for (size_t i = 0; i < p->ncomm_comms && !c->bad; i++) {
            RAW(p->comm_comms[i]);
            if (rd && i && p->comm_comms[i] <= p->comm_comms[i - 1]) c->bad = 1;
        }
    /* each kept key's communicator is one of them */
    for (size_t i = 0; rd && p->ncomm_comms && i < p->ncomm && !c->bad; i++)
        c->bad |= !tp_comm_comms_has(p, p->comm_keys[i].comm_hash);
    if (arr(c, rd, &p->comm_last, 1, sizeof *p->comm_last)) comm_op(c, rd, p->comm_last);
    RAW(p->comm_memo_whole);
    if (rd) c->bad |= (unsigned)p->comm_memo_whole > 1;
    if (arr(c, rd, &p->comm_memo, p->ncomm, sizeof *p->comm_memo))
        for (size_t i = 0; i < p->ncomm && !c->bad; i++) {
            tp_comm_span *m = &p->comm_memo[i];
            int src = (int)m->src;
            RAW(m->start), RAW(m->end), RAW(src);
            /* the analyses index by it (comm_rank.c: timed ops per source) */
            if (rd && (src < TP_COMM_TIME_HOST || src > TP_COMM_TIME_GPU)) c->bad = 1;
            m->src = (tp_comm_src)src;
        }
    if (rd) c->bad |= !p->comm_keys || !p->comm_last || !p->comm_memo;
}

/* The process's own lists: metadata, domains, categories, damage, drop windows. */
static void lists(tp_sum_buf *c, int rd, tp_process *p) {
    Z(p->nmeta);
    if (arr(c, rd, &p->meta, p->nmeta, sizeof *p->meta))
        for (size_t i = 0; i < p->nmeta && !c->bad; i++) SN(p->meta[i].key), SN(p->meta[i].value);
    if (rd) p->cap_meta = p->meta ? p->nmeta : 0;
    Z(p->ndomains);
    if (arr(c, rd, &p->domains, p->ndomains, sizeof *p->domains))
        for (size_t i = 0; i < p->ndomains && !c->bad; i++) S(p->domains[i]);
    Z(p->ncategories);
    if (arr(c, rd, &p->categories, p->ncategories, sizeof *p->categories))
        for (size_t i = 0; i < p->ncategories && !c->bad; i++) {
            RAW(p->categories[i].domain), RAW(p->categories[i].id);
            SN(p->categories[i].name);
        }
    Z(p->ndamage);
    if (arr(c, rd, &p->damage, p->ndamage, sizeof *p->damage))
        for (size_t i = 0; i < p->ndamage && !c->bad; i++) {
            tp_sum_owned(c, rd, &p->damage[i]); /* a line each: printed whole */
            c->bad |= rd && !p->damage[i];
        }
    Z(p->ndrops);
    if (arr(c, rd, &p->drops, p->ndrops, sizeof *p->drops))
        for (size_t i = 0; i < p->ndrops && !c->bad; i++) {
            tp_drop_window *d = &p->drops[i];
            RAW(d->from), RAW(d->to), RAW(d->count), RAW(d->os_tid);
        }
    if (rd) p->cap_drops = p->drops ? p->ndrops : 0;
}

/* Reading: the header's texts must be as the loader leaves them (model_load.h,
 * tp_load_clean_field), ended inside their fields: the reports print them whole, and a text
 * without its NUL would be read on into the next fields. */
static void header_texts(tp_sum_buf *c, const tprof_file_header *h) {
    const char *f[] = {h->host, h->run_id, h->build};
    _Static_assert(sizeof h->host == sizeof h->run_id && sizeof h->host == sizeof h->build,
                   "the header's texts are coded as fields of one size");
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        char clean[sizeof h->host];
        memcpy(clean, f[i], sizeof clean);
        tp_load_clean_field(clean, sizeof clean);
        if (!memchr(f[i], 0, sizeof clean) || strcmp(clean, f[i])) c->bad = 1;
    }
}

void tp_sum_slim(tp_sum_buf *c, tp_process *p, int rd) {
    if (!rd && (!p->slim || p->ngpu || p->napi || p->novh || p->ngmem || p->nclips))
        c->bad = 1; /* not a slim process: what it holds is not what a slim load keeps */
    for (size_t i = 0; !rd && i < p->nthreads; i++) c->bad |= p->threads[i].nmarks != 0;
    RAW(p->hdr);
    if (rd) header_texts(c, &p->hdr);
    lists(c, rd, p);
    Z(p->nthreads);
    if (arr(c, rd, &p->threads, p->nthreads, sizeof *p->threads))
        for (size_t i = 0; i < p->nthreads && !c->bad; i++) thread(c, rd, &p->threads[i]);
    RAW(p->complete), RAW(p->end_signal), RAW(p->end_mono), RAW(p->dropped);
    RAW(p->end_dropped), RAW(p->events), RAW(p->first_ts), RAW(p->last_ts);
    RAW(p->unknown_ends), RAW(p->drops_unplaced), RAW(p->cupti_dropped), RAW(p->clipped_ns);
    comm_ops(c, rd, p);
    Z(p->gpu_nstarts), RAW(p->gpu_stride);
    if (rd && p->gpu_nstarts > TP_GPU_STARTS) c->bad = 1;
    RAW(p->gpu_starts);
    RAW(p->file_bytes);
    Z(p->nrec_gpu), Z(p->nrec_api), Z(p->nrec_ovh), Z(p->nrec_gmem), Z(p->nrec_ranges);
    Z(p->nrec_comm), Z(p->nrec_twins);
    /* a whole load sizes its arrays by these (model.c, reserve_like): no count past one record
     * a byte of the file (a record takes 16 bytes at least, a few once compressed) */
    if (rd && (p->nrec_gpu > p->file_bytes || p->nrec_api > p->file_bytes ||
               p->nrec_ovh > p->file_bytes || p->nrec_gmem > p->file_bytes ||
               p->nrec_ranges > p->file_bytes || p->nrec_comm > p->file_bytes ||
               p->nrec_twins > p->file_bytes))
        c->bad = 1;
    if (rd) p->slim = 1;
    /* the domains' first is the default (""): every domain index of 0 reads it */
    if (rd && !c->bad && (!p->ndomains || !p->domains || !p->domains[0])) c->bad = 1;
}

int tp_sum_slim_key(const char *file, tp_sum_buf *k, uint64_t *size) {
    uint32_t kind[] = {0x01020304u, (uint32_t)sizeof(void *), (uint32_t)sizeof(int),
                       (uint32_t)sizeof(long), (uint32_t)sizeof(double)};
    tp_sum_put(k, kind, sizeof kind);
    const char *b = tprof_build_info();
    uint64_t n = strlen(b);
    tp_sum_put(k, &n, 8);
    tp_sum_put(k, b, n);
    /* the bound that chose which ops the slim process keeps (comm.h): the configured one, or
     * 0 for the one that follows the file's world size (tp_comm_keep_of) */
    uint64_t keep = tp_comm_keep();
    tp_sum_put(k, &keep, 8);
    /* the header read through the descriptor that is stat'ed: one file, even if renamed over
     * (not blocking: a FIFO under the name would hold the open; it is no regular file) */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    unsigned char hdr[sizeof(tprof_file_header)];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr;
    close(fd);
    if (!ok) return -1;
    uint64_t sz = (uint64_t)st.st_size;
    /* the change time too: no call sets it, so a file written in place with its modification
     * time put back (utimensat) still reads as changed; a copy of the run (a new inode) reads
     * so as well, which costs its summaries, never a wrong report */
    int64_t mt[4] = {(int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec,
                     (int64_t)st.st_ctim.tv_sec, (int64_t)st.st_ctim.tv_nsec};
    tp_sum_put(k, &sz, 8);
    tp_sum_put(k, mt, sizeof mt);
    tp_sum_put(k, hdr, sizeof hdr);
    *size = sz;
    return k->bad ? -1 : 0;
}
