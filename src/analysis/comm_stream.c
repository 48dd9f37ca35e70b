/*
 * comm_stream.c — a rank section's communication ops read apart from the section's read,
 * in passes over its file (comm.h, tp_comm_stream_open), for a file holding more ops than a
 * section may hold: a day of a tensor-parallel job issues thousands of collectives a step,
 * 170 bytes each while a section held them all.
 *
 * Why the figures are those of a section holding every op. The matching aligns only the
 * ops the cut keeps (comm.c, matchable), served by each communicator's first op: the first
 * pass keeps those and each communicator's first, so the matching over them is the one over
 * all (comm.c says why the cut changes no match), and so are the communicators' devices,
 * the kernels' uses and the placement's points, which come from the matches alone. Every
 * other op took no kernel and resolves alone from those (tp_comm_resolve_other); host-timed
 * ops (MPI's, gloo's) take none either; each communicator's first is kept, the others'
 * spans alone, being the exposure's and the step breakdown's communication spans (comm.c,
 * tp_comm_device_spans; tp_comm_stream_host). The second
 * pass gives every op in the file's order, resolved, to the section's sums (comm_acc.h,
 * which sum in that order as a whole load's section does) and to the memo; the placement's
 * median is selected in passes of its own (tp_kth). What the sums cannot take one op at a
 * time sends the file back to a whole read (tp_comm_stream_open's conditions).
 */
#define _GNU_SOURCE
#include "analysis/comm.h"
#include "analysis/alloc.h"
#include "analysis/comm_acc.h"
#include "analysis/capture.h"
#include "analysis/idmap.h"
#include "analysis/model_load.h"
#include "analysis/span_store.h"
#include "analysis/spans.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "trainprof.h"

struct tp_comm_stream {
    tp_run *run;
    const tp_process *slim;  /* the run's slim process of the file: outlives the section */
    const size_t *cand_at;   /* whole->comm's indices in the file's order, ascending */
    size_t ncand, nops;      /* whole->ncomm of them; the file's ops */
    tp_comm_resolver *res;
    tp_span_store *host[2];  /* the spans of the host-timed ops not kept: blocking, not */
    tp_comm_time *kept;      /* the memo's times (tp_comm_stream_kept), nkept of ckept */
    size_t nkept, ckept;
    int kept_done, kept_oom; /* the pass that made them ran; memory ran out in it */
    int failed;              /* a pass could not read the file as it was */
    tp_comm_levels lv;       /* the file's keys counted, for the memo's level */
};

static _Atomic size_t g_opened;

size_t tp_comm_streams_opened(void) { return atomic_load(&g_opened); }

void tp_comm_stream_free(struct tp_comm_stream *s) {
    if (!s) return;
    tp_comm_resolver_free(s->res);
    free((void *)s->cand_at);
    tp_span_store_free(s->host[0]);
    tp_span_store_free(s->host[1]);
    free(s->kept);
    free(s);
}

int tp_comm_apart(const tp_process *p, size_t bound) {
    return p->slim && p->nrec_comm > (bound ? bound : TP_SECTION_COMM_OPS);
}

/* ------------------------------------------------------------------ the first pass */

/* A communicator's state in the first pass: its last issue, and its cut's state. */
typedef struct comm_state {
    uint64_t last_start;
    tp_comm_cut cut;
} comm_state;

typedef struct first_pass {
    const tp_process *slim;
    tp_step *spans; /* the capture spans (tp_capture_timeline) */
    size_t nspans;
    tp_idmap comms;  /* the communicators, numbered as they came */
    tp_idmap hosts;  /* ... of the host-timed ops, apart (their first op is kept) */
    tp_span_store *host[2]; /* the spans of the other host-timed ops: blocking, not */
    comm_state *st;  /* their states, by that number (room for cap_st) */
    size_t cap_st;
    tp_comm_op *ops; /* the ops kept, n of cap, and their indices in the file's order */
    size_t *at;
    size_t n, cap;
    size_t seen;  /* the file's ops */
    size_t max;   /* kept past this: a whole read holds no more */
    int whole;    /* a condition failed: read the file whole */
    int gpu_time; /* an op has a GPU interval */
    int torch_nccl, torch_host; /* the file has torch's NCCL ops (not twins); its others */
    int plugin, mpi;            /* ... the plugin's ops; MPI's */
    int oom;
} first_pass;

/* The state of communicator `hash`, made when new; NULL without memory. */
static comm_state *state_of(first_pass *m, uint64_t hash, int *made) {
    if (m->comms.n == m->cap_st) {
        size_t nc = m->cap_st ? 2 * m->cap_st : 16;
        comm_state *g = tp_realloc(m->st, nc * sizeof *g);
        if (!g) return NULL;
        m->st = g;
        m->cap_st = nc;
    }
    size_t k = tp_idmap_add(&m->comms, hash, made);
    if (k == SIZE_MAX) return NULL;
    if (*made) m->st[k] = (comm_state){0};
    return &m->st[k];
}

/* 1 when op is one a whole load drops as the twin of a plugin's op: a file with plugin
 * ops has its twins counted by the slim load; torch's others send the file to a whole read
 * when it has plugin ops (first_op). */
static int twin(const tp_process *slim, const tp_comm_op *op) {
    return tp_comm_torch_twin(op, slim->nrec_twins != 0);
}

/* 1 when the matching needs NCCL op `op` (the cut's, or its communicator's first), its
 * communicator's state updated; m->whole when its communicator's ops are out of issue order,
 * m->oom without memory (then 0). */
static int matchable(first_pass *m, const tp_comm_op *op) {
    m->gpu_time |= (op->flags & TPROF_COMM_F_GPU_TIME) != 0;
    int first;
    comm_state *s = state_of(m, op->comm_hash, &first);
    if (!s) {
        m->oom = 1;
        return 0;
    }
    /* the cut goes over a communicator's ops in issue order: one recorded out of it would
     * need them all sorted (comm.c, ops_in_order) */
    if (!first && op->start < s->last_start) {
        m->whole = 1;
        return 0;
    }
    s->last_start = op->start;
    return tp_comm_cut_keeps(&s->cut, m->spans, m->nspans, op) || first;
}

/* 1 when host-timed op `op` is kept whole (its communicator's first: every communicator
 * has a row, and the section its ops); else its span goes where the exposure and the step
 * breakdown take it (tp_comm_stream_host): a finished call's, blocking or not (a nonblocking
 * op's span counts as communication the host overlapped; comm_rank.c), and 0. m->oom
 * without memory. */
static int host_kept(first_pass *m, const tp_comm_op *op) {
    int first;
    if (tp_idmap_add(&m->hosts, op->comm_hash, &first) == SIZE_MAX) {
        m->oom = 1;
        return 0;
    }
    if (first) return 1;
    int k = tp_comm_host_span(op);
    if (k >= 0 && tp_span_store_push(m->host[k], op->start, op->end) != TPROF_OK) m->oom = 1;
    return 0;
}

/* An op kept when the matching needs it (the cut's, or its communicator's first: the
 * communicators are served in the order of their first op), or host-timed and its
 * communicator's first. Keeps none in the load; the ops are numbered as a whole load holds
 * them, its twins dropped. */
static int first_op(void *ctx, const tp_comm_op *op, size_t file_i) {
    first_pass *m = ctx;
    (void)file_i;
    if (m->whole || m->oom || twin(m->slim, op)) return 0;
    size_t i = m->seen++;
    /* Which of torch's ops are twins depends on the file's other ops (model.c,
     * drop_torch_twins). Its NCCL ops that are not twins are the file's own when neither the
     * plugin nor MPI recorded any (the slim load found none: a PyTorch job without NCCL's
     * profiler plugin); its host-timed ones (gloo) when MPI recorded none. Else the file
     * changed since the slim load, or the twins go by metadata: read whole. */
    int torch = op->source == TPROF_COMM_SRC_TORCH;
    int host = tp_comm_host_timed(op->source, op->flags);
    m->torch_nccl |= torch && !host;
    m->torch_host |= torch && host;
    m->plugin |= op->source == TPROF_COMM_SRC_NCCL;
    m->mpi |= op->source == TPROF_COMM_SRC_MPI;
    if ((m->torch_nccl && (m->plugin || m->mpi)) || (m->torch_host && m->mpi)) {
        m->whole = 1;
        return 0;
    }
    /* host-timed ops take no kernel, but they are the communication spans of the exposure
     * and the step breakdown (comm.c, tp_comm_device_spans): their spans are kept, 16 bytes
     * each where an op takes 120, past the bound on disk */
    if (host ? !host_kept(m, op) : !matchable(m, op)) return 0;
    if (m->n == m->cap && tp_grow_pair((void **)&m->ops, sizeof *m->ops, (void **)&m->at,
                                       sizeof *m->at, &m->cap, 1024) != TPROF_OK) {
        m->oom = 1;
        return 0;
    }
    m->ops[m->n] = *op;
    m->at[m->n++] = i;
    m->whole |= m->n > m->max;
    return 0;
}

/* 1 when some device with kernels ran no NCCL kernel: its communication spans would be
 * the ops' GPU intervals (comm.c, tp_comm_device_spans), every op's. */
static int device_without_comm_kernels(const tp_process *p) {
    uint32_t dev[64];
    int has_comm[64];
    size_t nd = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *g = &p->gpu[i];
        if (g->type != TPROF_REC_GPU_KERNEL) continue;
        size_t k = 0;
        while (k < nd && dev[k] != g->device) k++;
        if (k == nd) {
            if (nd == 64) return 1; /* more devices than looked at: read whole */
            dev[nd] = g->device;
            has_comm[nd++] = 0;
        }
        has_comm[k] |= tp_comm_is_kernel(g);
    }
    for (size_t k = 0; k < nd; k++)
        if (!has_comm[k]) return 1;
    return 0;
}

int tp_comm_stream_open(tp_run *run, const tp_process *slim, tp_process *whole, size_t bound) {
    first_pass m = {0};
    m.slim = slim;
    /* past half the file's ops kept (capture on over most of the run), the passes would
     * cost more than the ops they spare */
    m.max = bound ? bound : TP_SECTION_COMM_OPS;
    if (m.max < slim->nrec_comm / 2) m.max = slim->nrec_comm / 2;
    tp_idmap_init(&m.comms);
    tp_idmap_init(&m.hosts);
    /* the host-timed ops' spans: the bound's held, the others in sorted runs on disk */
    size_t hold = bound ? bound : TP_SECTION_COMM_OPS;
    m.host[0] = tp_span_store_new(hold);
    m.host[1] = tp_span_store_new(hold);
    if (!m.host[0] || !m.host[1] ||
        tp_capture_timeline(whole, &m.spans, &m.nspans) != TPROF_OK) {
        tp_span_store_free(m.host[0]);
        tp_span_store_free(m.host[1]);
        return -1;
    }
    const tp_comm_read r = {first_op, &m};
    int rc = tp_process_read_comm(run, slim, &r);
    free(m.spans);
    tp_idmap_free(&m.comms);
    tp_idmap_free(&m.hosts);
    free(m.st);
    int ok = rc == TPROF_OK && !m.oom && !m.whole && m.seen == slim->nrec_comm &&
             !(m.gpu_time && device_without_comm_kernels(whole));
    struct tp_comm_stream *s = ok ? tp_calloc(1, sizeof *s) : NULL;
    tp_comm_time *times = s ? tp_malloc(m.n * sizeof *times) : NULL;
    if (times) {
        free(whole->comm);
        whole->comm = m.ops;
        whole->ncomm = whole->cap_comm = m.n;
        m.ops = NULL;
        if (tp_comm_resolve_keep(whole, times, &s->res) != TPROF_OK || !s->res) {
            tp_comm_resolver_free(s->res);
            s->res = NULL;
        }
    }
    if (!s || !times || !s->res) {
        free(m.ops);
        free(m.at);
        tp_span_store_free(m.host[0]);
        tp_span_store_free(m.host[1]);
        free(times);
        free(s);
        if (times) { /* the ops kept go: the caller reads the file again with all of them */
            free(whole->comm);
            whole->comm = NULL;
            whole->ncomm = whole->cap_comm = 0;
        }
        return rc != TPROF_OK ? -1 : m.oom ? -1 : 0;
    }
    s->run = run;
    s->slim = slim;
    s->cand_at = m.at;
    s->ncand = m.n;
    for (int k = 0; k < 2; k++) {
        tp_span_store_seal(m.host[k]);
        s->host[k] = m.host[k];
    }
    s->nops = m.seen;
    /* the kept ops' times are the section's resolution of whole's ops (tp_comm_resolve_once) */
    free(whole->comm_times);
    whole->comm_times = times;
    whole->comm_stream = s;
    atomic_fetch_add(&g_opened, 1);
    return 1;
}

/* ------------------------------------------------------------------ the other passes */

/* A pass over every op, each resolved: the kept ones from the first pass's resolution. */
typedef struct each_pass {
    const tp_process *whole;
    struct tp_comm_stream *s;
    size_t next; /* the next kept op's place in whole->comm */
    size_t i;    /* the next op's index, as a whole load numbers it */
    comm_acc *acc;   /* may be NULL */
    tp_kth *kth;     /* may be NULL: the checked ops' shifts */
    int memo;        /* the memo's times and the keys' count */
} each_pass;

static int each_op(void *ctx, const tp_comm_op *op, size_t file_i) {
    each_pass *e = ctx;
    struct tp_comm_stream *s = e->s;
    (void)file_i;
    if (twin(s->slim, op)) return 0;
    size_t i = e->i++;
    tp_comm_time t;
    if (e->next < s->ncand && s->cand_at[e->next] == i) t = e->whole->comm_times[e->next++];
    else tp_comm_resolve_other(s->res, op, &t);
    if (e->acc) tp_comm_acc_op(e->acc, op, i, &t);
    if (e->kth && t.checked) tp_kth_see(e->kth, tp_comm_shift_key(t.shift_ns));
    if (!e->memo) return 0;
    tp_comm_key k = tp_comm_key_of(op);
    tp_comm_level_add(&s->lv, &k);
    if (s->kept_oom || !tp_comm_kept(&k, s->slim->comm_level)) return 0;
    if (s->nkept == s->ckept) {
        size_t nc = s->ckept ? 2 * s->ckept : 256;
        tp_comm_time *nk = tp_realloc(s->kept, nc * sizeof *nk);
        if (!nk) {
            s->kept_oom = 1;
            return 0;
        }
        s->kept = nk;
        s->ckept = nc;
    }
    s->kept[s->nkept++] = t;
    return 0;
}

/* One pass; the memo's times made in the first pass that asks. */
static int pass(const tp_process *whole, comm_acc *acc, tp_kth *kth) {
    struct tp_comm_stream *s = whole->comm_stream;
    each_pass e = {whole, s, 0, 0, acc, kth, !s->kept_done};
    const tp_comm_read r = {each_op, &e};
    int rc = tp_process_read_comm(s->run, s->slim, &r);
    /* a file that changed between the passes holds other ops */
    if (rc == TPROF_OK && e.i != s->nops) rc = TPROF_ERR_CORRUPT;
    if (rc != TPROF_OK) s->failed = 1;
    if (e.memo && rc == TPROF_OK) s->kept_done = 1;
    if (e.memo && rc != TPROF_OK) { /* another pass counts again */
        memset(&s->lv, 0, sizeof s->lv);
        s->nkept = 0;
    }
    return rc;
}

const tp_span_store *tp_comm_stream_host(const tp_process *p, int nonblocking) {
    const struct tp_comm_stream *s = p->comm_stream;
    return s ? s->host[nonblocking != 0] : NULL;
}

int tp_comm_stream_failed(const tp_process *whole) {
    const struct tp_comm_stream *s = whole->comm_stream;
    if (!s) return 0;
    if (s->failed) return 1;
    return tp_span_store_failed(s->host[0]) || tp_span_store_failed(s->host[1]) ? 2 : 0;
}

int tp_comm_stream_feed(const tp_process *whole, comm_acc *a) {
    return pass(whole, a, NULL);
}

int tp_comm_stream_kth(const tp_process *whole, tp_kth *q) {
    int rc = TPROF_OK;
    while (tp_kth_pass(q))
        if (rc == TPROF_OK) rc = pass(whole, NULL, q);
    return rc;
}

tp_comm_time *tp_comm_stream_kept(tp_process *whole, const tp_process *slim) {
    struct tp_comm_stream *s = whole->comm_stream;
    if (!s->kept_done && pass(whole, NULL, NULL) != TPROF_OK) return NULL;
    unsigned level = tp_comm_level_end(&s->lv, s->nops, tp_comm_keep_of(whole));
    if (s->kept_oom || !s->nops || !slim->ncomm ||
        (slim->comm_level ? level != slim->comm_level || s->nkept != slim->ncomm
                          : s->nops != slim->ncomm))
        return NULL;
    tp_comm_time *t = s->kept;
    s->kept = NULL;
    s->nkept = s->ckept = 0;
    return t;
}
