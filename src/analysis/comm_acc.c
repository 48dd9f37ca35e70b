/*
 * comm_acc.c — a rank's communication ops summed one at a time in the file's order
 * (comm_acc.h), for its section (comm_rank.c), whether its ops are held (a whole load) or
 * read apart in passes over its file (comm_stream.c): the same sums either way.
 */
#define _GNU_SOURCE
#include "analysis/comm_acc.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/steps.h"
#include "format/format.h"

typedef tp_comm_row_result row;

static int cmp_row(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    int c = strcmp(x->name, y->name);
    /* then the file's order: a row's first op names the communicator's source and backend,
     * and qsort need not be stable (glibc's is not when its buffer cannot be had) */
    return c ? c : x->op0 < y->op0 ? -1 : x->op0 > y->op0;
}

/* Op o's row alone (count 1), from its resolved times *t; i: its index in the file's order. */
static void op_row(const tp_comm_op *o, const tp_comm_time *t, const tp_step *st, size_t nst,
                   size_t i, row *r) {
    memset(r, 0, sizeof *r);
    r->hash = o->comm_hash;
    r->op = o->op < TPROF_COMM_OP_COUNT ? o->op : TPROF_COMM_UNKNOWN;
    r->name = tp_comm_op_name(o);
    r->nranks = o->nranks;
    r->rank = o->rank;
    r->first = o->start;
    r->op0 = i;
    r->count = 1;
    r->bytes = o->bytes;
    r->dtypes = o->dtype && o->dtype < TPROF_DTYPE_COUNT ? 1u << o->dtype : 0;
    /* an op never stopped has no real end unless the GPU side gave one */
    int untimed = (o->flags & TPROF_COMM_F_UNFINISHED) && t->src == TP_COMM_TIME_HOST;
    r->unfinished = untimed;
    if (!untimed) {
        r->timed = 1;
        r->time_ns = t->end - t->start;
        r->src[t->src] = 1;
        r->enqueue_only =
            !tp_comm_host_timed(o->source, o->flags) && t->src == TP_COMM_TIME_HOST;
        if (!r->enqueue_only) { /* an enqueue says nothing about the transfer's speed */
            r->bw_ops = 1;
            r->bw_ns = r->time_ns;
            r->bw_size = (double)tp_comm_size_bytes(r->op, o->bytes, o->nranks);
        }
    }
    if (nst && tp_steps_overlap(st, nst, o->start, o->start + 1)) {
        r->in_steps = 1;
        r->bytes_in_steps = o->bytes;
    }
}

/* Op row r added into its group's row d (the group's ops taken in file order, so that the
 * sums are the same whatever the number of groups). */
static void row_add(row *d, const row *r) {
    if (r->first < d->first) d->first = r->first;
    if (r->nranks > d->nranks) d->nranks = r->nranks;
    d->count += r->count;
    d->bytes += r->bytes;
    d->timed += r->timed;
    d->unfinished += r->unfinished;
    d->enqueue_only += r->enqueue_only;
    d->in_steps += r->in_steps;
    d->bytes_in_steps += r->bytes_in_steps;
    d->time_ns += r->time_ns;
    d->bw_ops += r->bw_ops;
    d->bw_ns += r->bw_ns;
    d->bw_size += r->bw_size;
    for (int k = 0; k < 3; k++) d->src[k] += r->src[k];
    d->dtypes |= r->dtypes;
}

static uint64_t row_hash(const row *r) {
    uint64_t h = r->hash * 0x9e3779b97f4a7c15ull ^ r->op;
    for (const unsigned char *c = (const unsigned char *)r->name; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull; /* FNV-1a's prime */
    return h ^ (h >> 29);
}

/* The rows given up (out of memory): the section shows none. */
static void acc_no_rows(comm_acc *a) {
    a->c->rows_no_memory = 1;
    free(a->v);
    free(a->first);
    free(a->slot);
    a->v = NULL;
    a->first = NULL;
    a->slot = NULL;
}

void tp_comm_acc_init(comm_acc *a, tp_comm_result *c, const tp_process *p, const tp_step *st,
                     size_t nst) {
    *a = (comm_acc){.c = c, .p = p, .st = st, .nst = nst, .cap = 16, .nslot = 32};
    a->v = tp_malloc(a->cap * sizeof *a->v);
    a->first = tp_malloc(a->cap * sizeof *a->first);
    a->slot = tp_malloc(a->nslot * sizeof *a->slot);
    if (a->slot) memset(a->slot, 0xff, a->nslot * sizeof *a->slot); /* SIZE_MAX: empty */
    if (!a->v || !a->first || !a->slot) acc_no_rows(a);
}


/* Row r into a's table: added into its group's row (the group's ops taken in file order,
 * so that the sums are the same whatever the number of groups), or a new row. */
static void acc_row(comm_acc *a, const row *r, const tp_comm_op *o) {
    size_t at = (size_t)row_hash(r) & (a->nslot - 1);
    while (a->slot[at] != SIZE_MAX) {
        const row *d = &a->v[a->slot[at]];
        if (d->hash == r->hash && d->op == r->op && !strcmp(d->name, r->name)) break;
        at = (at + 1) & (a->nslot - 1);
    }
    if (a->slot[at] != SIZE_MAX) {
        row_add(&a->v[a->slot[at]], r);
        return;
    }
    if (a->n == a->cap) {
        row *nv = tp_realloc(a->v, 2 * a->cap * sizeof *nv);
        if (nv) a->v = nv;
        tp_comm_row_first *nf = nv ? tp_realloc(a->first, 2 * a->cap * sizeof *nf) : NULL;
        if (nf) a->first = nf;
        if (!nf) return acc_no_rows(a);
        a->cap *= 2;
    }
    a->v[a->n] = *r;
    a->first[a->n] = (tp_comm_row_first){r->op0, tp_comm_key_of(o)};
    a->slot[at] = a->n++;
    if (2 * a->n <= a->nslot) return;
    size_t *ns = tp_malloc(2 * a->nslot * sizeof *ns); /* at most half full: twice the slots */
    if (!ns) return acc_no_rows(a);
    a->nslot *= 2;
    memset(ns, 0xff, a->nslot * sizeof *ns);
    for (size_t k = 0; k < a->n; k++) {
        size_t s = (size_t)row_hash(&a->v[k]) & (a->nslot - 1);
        while (ns[s] != SIZE_MAX) s = (s + 1) & (a->nslot - 1);
        ns[s] = k;
    }
    free(a->slot);
    a->slot = ns;
}

/* Op o (index i in the file's order), resolved as *t (NULL: not resolved, for want of
 * memory: its counts alone). */
void tp_comm_acc_op(comm_acc *a, const tp_comm_op *o, size_t i, const tp_comm_time *t) {
    tp_comm_result *c = a->c;
    c->ops++;
    c->mpi_ops += o->source == TPROF_COMM_SRC_MPI;
    c->torch_ops += o->source == TPROF_COMM_SRC_TORCH;
    if (o->source == TPROF_COMM_SRC_TORCH) {
        /* the backends torch.distributed's ops went through, in order of first use */
        char be[32] = {0}; /* copied whole, and so coded whole into a summary */
        tp_comm_key ki = tp_comm_key_of(o);
        tp_comm_backend(a->p, &ki, be, sizeof be);
        int seen = 0;
        for (size_t k = 0; k < c->ntorch_backends && !seen; k++)
            seen = !strcmp(c->torch_backends[k], be);
        size_t grown = (c->ntorch_backends + 1) * sizeof *c->torch_backends;
        char (*nb)[32] = seen ? NULL : tp_realloc(c->torch_backends, grown);
        if (nb) {
            c->torch_backends = nb;
            memcpy(c->torch_backends[c->ntorch_backends++], be, sizeof be);
        }
    }
    if (!t) return;
    int host = tp_comm_host_timed(o->source, o->flags);
    a->host_timed += host;
    a->gpu_timed += t->src != TP_COMM_TIME_HOST && !host;
    if (t->checked) {
        if (!a->nshift || t->shift_ns < a->shift_min) a->shift_min = t->shift_ns;
        if (!a->nshift || t->shift_ns > a->shift_max) a->shift_max = t->shift_ns;
        a->nshift++;
    }
    if (!a->v) return;
    row r;
    op_row(o, t, a->st, a->nst, i, &r);
    acc_row(a, &r, o);
}

/* The first op's key of the row whose first op is op0 (a's rows in op0 order). */
const tp_comm_key *tp_comm_acc_first(const comm_acc *a, size_t nrows, size_t op0) {
    size_t lo = 0, hi = nrows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->first[mid].op0 < op0) lo = mid + 1;
        else hi = mid;
    }
    return &a->first[lo].key;
}

/* The rows, sorted (communicator, op, name), into c (the table's memory given over). */
void tp_comm_acc_rows(comm_acc *a) {
    free(a->slot);
    a->slot = NULL;
    if (!a->v) return;
    if (a->n > 1) qsort(a->v, a->n, sizeof *a->v, cmp_row);
    /* the rows stay in the rank's results for the whole report */
    row *shrunk = a->n && a->n < a->cap ? tp_realloc(a->v, a->n * sizeof *a->v) : NULL;
    a->c->rows = shrunk ? shrunk : a->v;
    a->c->nrows = a->n;
    a->v = NULL;
}

void tp_comm_acc_free(comm_acc *a) {
    free(a->v);
    free(a->first);
    free(a->slot);
}
