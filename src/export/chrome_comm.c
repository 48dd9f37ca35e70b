/*
 * chrome_comm.c — the communication part of the traces: the ops of each communicator of a
 * process in the order and with the times its track shows them (tp_cw_comm_walk, for both
 * formats), and the Chrome trace's communicator tracks (complete events).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/comm.h"
#include "export/chrome.h"
#include "export/chrome_cw.h"
#include "format/format.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ communication */

/* Communicator tracks are tids COMM_TID_BASE + k, k the communicator's order of first issue
 * (host start) in the process: above any Linux thread id (pid_max <= 2^22), below the GPU tracks. */
#define COMM_TID_BASE 0x20000000u

typedef struct cop {
    uint64_t hash, start, end;
    size_t i;
} cop;

static int cmp_cop(const void *a, const void *b) {
    const cop *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* enclosing first */
    return x->i < y->i ? -1 : x->i > y->i;
}

typedef struct cgroup {
    size_t a, b;
    uint64_t first;
} cgroup;

static int cmp_cgroup(const void *a, const void *b) {
    const cgroup *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->a < y->a ? -1 : x->a > y->a;
}

int tp_cw_comm_walk(const tp_process *p, tp_cw_comm_fn fn, void *ctx) {
    if (!p->ncomm) return TPROF_OK;
    tp_comm_time *tm = malloc(p->ncomm * sizeof *tm);
    cop *v = malloc(p->ncomm * sizeof *v);
    cgroup *g = malloc(p->ncomm * sizeof *g);
    uint64_t *stack = malloc(p->ncomm * sizeof *stack);
    int rc = TPROF_OK;
    if (!tm || !v || !g || !stack) {
        rc = TPROF_ERR_NO_MEMORY;
        goto out;
    }
    tp_comm_resolve(p, tm); /* out of memory leaves host intervals: still a valid trace */
    for (size_t i = 0; i < p->ncomm; i++) v[i] = (cop){p->comm[i].comm_hash, tm[i].start, tm[i].end, i};
    qsort(v, p->ncomm, sizeof *v, cmp_cop);
    size_t ng = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        uint64_t issued = p->comm[v[i].i].start; /* tracks in order of first issue */
        if (i && v[i].hash == v[i - 1].hash) {
            if (issued < g[ng - 1].first) g[ng - 1].first = issued;
            continue;
        }
        if (ng) g[ng - 1].b = i;
        g[ng++] = (cgroup){i, p->ncomm, issued};
    }
    qsort(g, ng, sizeof *g, cmp_cgroup);
    for (size_t k = 0; k < ng && rc == TPROF_OK; k++) {
        size_t sp = 0;
        for (size_t j = g[k].a; j < g[k].b && rc == TPROF_OK; j++) {
            const tp_comm_op *o = &p->comm[v[j].i];
            const tp_comm_time *t = &tm[v[j].i];
            uint64_t end = t->end;
            while (sp && stack[sp - 1] <= t->start) sp--;
            int clamped = sp && end > stack[sp - 1];
            if (clamped) end = stack[sp - 1];
            stack[sp++] = end;
            const char *name = o->op != TPROF_COMM_UNKNOWN && o->op < TPROF_COMM_OP_COUNT
                                   ? tprof__comm_op_name(o->op)
                                   : o->name ? o->name : "Unknown";
            tp_cw_comm_ev ev = {k, j == g[k].a, o, t, name, t->start, end, clamped};
            rc = fn(ctx, &ev);
        }
    }
out:
    free(tm);
    free(v);
    free(g);
    free(stack);
    return rc;
}

typedef struct comm_ctx {
    cw *w;
    const tp_process *p;
    int64_t pid;
} comm_ctx;

/* One op as a complete event, with the op's figures and its algbw/busbw (nccl-tests
 * definitions) as args; the track's name first. */
static int write_comm_op(void *ctx, const tp_cw_comm_ev *ev) {
    comm_ctx *c = ctx;
    cw *w = c->w;
    FILE *f = w->f;
    const tp_comm_op *o = ev->op;
    const tp_comm_time *t = ev->time;
    uint32_t tid = COMM_TID_BASE + (uint32_t)ev->track;
    if (ev->first) {
        tp_cw_write_meta(w, c->pid, tid, "thread_name", "name");
        fprintf(f, "\"comm 0x%016" PRIx64 " (%" PRIu32 " ranks, rank %" PRIu32 ")\"}}", o->comm_hash,
                o->nranks, o->rank);
        tp_cw_write_meta(w, c->pid, tid, "thread_sort_index", "sort_index");
        fprintf(f, "%" PRIu32 "}}", tid);
    }
    int64_t ts = tp_cw_rel_ns(w, c->p, ev->start), te = tp_cw_rel_ns(w, c->p, ev->end);
    if (!tp_cw_in_win(w, ts, te)) return TPROF_OK;
    const char *name = ev->name;
    tp_cw_ev_open(w, "X", c->pid, tid);
    fputs(",\"cat\":\"comm\",\"name\":", f);
    tp_json_string(f, name);
    tp_cw_put_ts(w, "ts", ts);
    tp_cw_put_ts(w, "dur", te - ts);
    fputs(",\"args\":{\"op\":", f);
    tp_json_string(f, name);
    fprintf(f, ",\"comm\":\"0x%016" PRIx64 "\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
               ",\"seq\":%" PRIu32 ",\"nranks\":%" PRIu32 ",\"rank\":%" PRIu32,
            o->comm_hash, o->bytes, o->count, o->seq, o->nranks, o->rank);
    if (o->peer != TPROF_COMM_NO_PEER)
        fprintf(f, ",\"%s\":%" PRIu32,
                o->op == TPROF_COMM_SEND || o->op == TPROF_COMM_RECV ? "peer" : "root",
                o->peer);
    /* who recorded it (nccl, mpi, torch) and the backend that carried it (for
     * torch.distributed: its group's, gloo, nccl, mpi, ucc or a custom one) */
    char be[32];
    fprintf(f, ",\"algo\":\"%s\",\"proto\":\"%s\",\"channels\":%" PRIu32
               ",\"source\":\"%s\",\"backend\":",
            tp_comm_algo_name(o->algo), tp_comm_proto_name(o->proto), o->nchannels,
            tp_comm_source_name(o->source));
    tp_comm_key key = tp_comm_key_of(o);
    tp_json_string(f, tp_comm_backend(c->p, &key, be, sizeof be));
    fprintf(f, ",\"time_source\":\"%s\"", tp_comm_src_name(t->src));
    /* a bandwidth only from a real duration: not from an NCCL enqueue */
    uint64_t size = tp_comm_size_bytes(o->op, o->bytes, o->nranks);
    double factor = tp_comm_bus_factor(o->op, o->nranks);
    int real = t->src != TP_COMM_TIME_HOST || tp_comm_host_timed(o->source, o->flags);
    if (real && size && factor > 0 && t->end > t->start &&
        !(o->flags & TPROF_COMM_F_UNFINISHED && t->src == TP_COMM_TIME_HOST)) {
        double algbw = (double)size / (double)(t->end - t->start); /* GB/s, GB = 1e9 */
        fputs(",\"algbw (GB/s)\":", f);
        tp_cw_put_double(f, algbw);
        fputs(",\"busbw (GB/s)\":", f);
        tp_cw_put_double(f, algbw * factor);
    }
    if (o->flags & TPROF_COMM_F_UNFINISHED) fputs(",\"unfinished\":true", f);
    if (ev->clamped) fputs(",\"clamped\":true", f);
    fputs("}}", f);
    tp_cw_note_time(w, te);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

/* One track per communicator with its ops as complete events, timed by the report's rule
 * (tp_cw_comm_walk). */
int tp_cw_write_comm(cw *w, const tp_process *p, int64_t pid) {
    comm_ctx c = {w, p, pid};
    return tp_cw_comm_walk(p, write_comm_op, &c);
}
