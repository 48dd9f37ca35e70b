/*
 * comm_run.c — the run-level communication (comm.h): the communicators across the ranks
 * (members, traffic, a guess at their role, per-op figures over the ranks) and the exposed
 * communication across the ranks with its finding. It reads the ranks' typed results
 * (tp_rank_result.comm, results.h), never their sections of the document.
 */
#define _GNU_SOURCE
#include "analysis/comm.h"
#include "analysis/alloc.h"
#include "analysis/megatron.h"

#include <stdio.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/findings.h"
#include "analysis/gpu.h"
#include "analysis/hash.h"
#include "analysis/stats.h"
#include "format/format.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ across ranks */


typedef struct xop {
    const char *op;
    double count_max, count_min, bytes_max, ranks, count, timed, time_ms, bw_time_ms, size_bytes,
        factor, enqueue_only;
    double src[3];
} xop;

typedef struct member { int rank, comm_rank; } member;

typedef struct xcomm {
    const char *id;
    double size;
    member *m;
    size_t nm, cap_m;
    xop *ops;
    size_t nops;
    int p2p_only;
    double time_ms;
} xcomm;

static int cmp_member(const void *a, const void *b) {
    const member *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_xcomm(const void *a, const void *b) {
    const xcomm *x = a, *y = b;
    if (x->time_ms != y->time_ms) return x->time_ms < y->time_ms ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* A guess at what a communicator is for (docs/design.md §5.2: by size, members and traffic),
 * with the reason; Megatron-LM's default rank order puts tensor-parallel groups on consecutive
 * ranks and data-parallel groups at a stride. */
static void guess_role(const xcomm *c, int world, char *role, size_t nr, char *basis, size_t nb) {
    int size = (int)c->size;
    if (size <= 1) {
        snprintf(role, nr, "single rank");
        snprintf(basis, nb, "size 1: no traffic between ranks");
    } else if (c->p2p_only && c->nops) {
        snprintf(role, nr, "pipeline");
        snprintf(basis, nb, "only Send/Recv traffic");
    } else if (world > 1 && size == world) {
        snprintf(role, nr, "world/data-parallel");
        snprintf(basis, nb, "spans all %d ranks of the world", world);
    } else if ((int)c->nm == size) {
        int stride = c->m[1].rank - c->m[0].rank, even = 1;
        for (size_t i = 2; i < c->nm; i++) even &= c->m[i].rank - c->m[i - 1].rank == stride;
        if (even && stride == 1) {
            snprintf(role, nr, "tensor-parallel");
            snprintf(basis, nb, "%d consecutive world ranks with collectives: Megatron-LM puts "
                                "tensor-parallel groups on adjacent ranks", size);
        } else if (even) {
            snprintf(role, nr, "data-parallel");
            snprintf(basis, nb, "%d world ranks at a stride of %d with collectives; could also "
                                "be context- or expert-parallel", size, stride);
        } else {
            snprintf(role, nr, "subgroup");
            snprintf(basis, nb, "%d world ranks without a regular stride", size);
        }
    } else {
        snprintf(role, nr, "tensor- or data-parallel subgroup");
        snprintf(basis, nb, "%d of %d ranks with collectives; members not all in this run's files",
                 size, world);
    }
}

/* Whether a torch.pg.* description ("backend=B size=N ranks=a,b,...") lists exactly x's
 * members (x->m sorted by world rank, no repeats), each once. */
static int same_members(const char *desc, const xcomm *x) {
    const char *r = strstr(desc, " ranks=");
    if (!r) return 0;
    r += 7;
    unsigned char *seen = tp_calloc(x->nm ? x->nm : 1, 1);
    if (!seen) return 0;
    size_t n = 0;
    int ok = 0;
    while (*r) {
        char *end;
        long v = strtol(r, &end, 10);
        if (end == r || n >= x->nm) break;
        member key = {(int)v, 0};
        const member *hit = bsearch(&key, x->m, x->nm, sizeof *x->m, cmp_member);
        if (!hit || seen[hit - x->m]++) break;
        n++;
        if (*end != ',') {
            ok = *end == 0 && n == x->nm;
            break;
        }
        r = end + 1;
    }
    free(seen);
    return ok;
}

/* The torch.distributed group of communicator x, from trainprof.torch's torch.pg.* metadata
 * in any rank file: the one with x's id (torch's own records, gloo/mpi), else an NCCL-backend
 * group whose member list is exactly x's world ranks when all of them were seen (an NCCL
 * communicator: NCCL's id is not torch's; Megatron's gloo twin of a data-parallel group has
 * the same members and must not be taken). Tells apart groups of the same size (a tensor- and a
 * data-parallel group of 2), which the per-rank match by size cannot. NULL when none. */
static const char *torch_group_by_members(const xcomm *x, const tp_run *run) {
    char key[40];
    unsigned long long id = strtoull(x->id, NULL, 16);
    snprintf(key, sizeof key, "torch.pg.%016llx", id);
    for (size_t pi = 0; pi < run->nprocs; pi++) {
        const char *d = tp_meta(&run->procs[pi], key);
        if (d) return d;
    }
    if (x->nm < 2 || (double)x->nm != x->size) return NULL;
    for (size_t pi = 0; pi < run->nprocs; pi++) {
        const tp_process *p = &run->procs[pi];
        for (size_t i = 0; i < p->nmeta; i++)
            if (!strncmp(p->meta[i].key, "torch.pg.", 9) &&
                tp_comm_nccl_backend(p->meta[i].value) && same_members(p->meta[i].value, x))
                return p->meta[i].value;
    }
    return NULL;
}

/* The names of the torch groups with x's id or, for an NCCL communicator, with exactly x's
 * members (trainprof.torch's torch.pg_name.<id> beside torch.pg.<id>), into e; and the role
 * they give. Several NCCL groups can share one member list (Megatron-LM's tensor- and
 * model-parallel groups without pipeline parallelism): all their names are listed, and the
 * role is theirs only when they agree. */
static void group_names(tp_comm_xcomm_result *e, const xcomm *x, const tp_run *run) {
    const char *dims[8];
    size_t nd = 0, len = 0;
    unsigned long long id = strtoull(x->id, NULL, 16);
    e->group_names[0] = 0;
    for (size_t pi = 0; pi < run->nprocs; pi++) {
        const tp_process *p = &run->procs[pi];
        for (size_t i = 0; i < p->nmeta; i++) {
            const char *k = p->meta[i].key;
            if (strncmp(k, "torch.pg.", 9)) continue;
            int mine = strtoull(k + 9, NULL, 16) == id;
            if (!mine && !(x->nm >= 2 && (double)x->nm == x->size &&
                           tp_comm_nccl_backend(p->meta[i].value) &&
                           same_members(p->meta[i].value, x)))
                continue;
            char nk[48];
            snprintf(nk, sizeof nk, "torch.pg_name.%s", k + 9);
            const char *name = tp_meta(p, nk);
            if (!name || strstr(e->group_names, name)) continue;
            int w = snprintf(e->group_names + len, sizeof e->group_names - len, "%s%s",
                             len ? " or " : "", name);
            if (w < 0 || (size_t)w >= sizeof e->group_names - len) break;
            len += (size_t)w;
            if (nd < 8) dims[nd++] = tp_megatron_group_dimension(name);
        }
        if (len) break; /* the names from one rank file: every member wrote the same */
    }
    if (!nd) return;
    for (size_t i = 1; i < nd; i++)
        if (!dims[i] || !dims[0] || strcmp(dims[i], dims[0])) return;
    if (!dims[0]) return;
    snprintf(e->role_guess, sizeof e->role_guess, "%s", dims[0]);
    snprintf(e->role_basis, sizeof e->role_basis, "the program named the group %.100s "
             "(Megatron-LM's parallel groups, megatron/core/parallel_state.py)", e->group_names);
    e->role_named = 1;
}

/* The communicators gathered across the ranks: one entry per id, found through an
 * open-addressed table of their indices, so that a run of thousands of ranks and
 * communicators (a TP group per 8 ranks, a DP group per TP rank, pipeline pairs...) gathers
 * in time linear in its ranks' communicators, where a search of every entry for each took
 * time quadratic in the communicators. */
typedef struct xgather {
    xcomm *v;
    size_t n, cap;
    size_t *tab; /* index + 1 of the entry, 0 empty; tcap a power of two, at most half full */
    size_t tcap;
    uint64_t key; /* mixed into the ids' hashes, so that ids written into files cannot
                   * choose their slots */
} xgather;

/* The slot of id in g's table: the one holding it, or the empty one where it goes. */
static size_t *id_slot(const xgather *g, size_t *tab, size_t tcap, const char *id) {
    size_t at = (size_t)(tp_mix64(tp_fnv1a(id, strlen(id), TP_FNV_OFFSET ^ g->key)) & (tcap - 1));
    while (tab[at] && strcmp(g->v[tab[at] - 1].id, id)) at = (at + 1) & (tcap - 1);
    return &tab[at];
}

/* The entry of communicator id, made (empty) when it is new: its index, or SIZE_MAX out of
 * memory. */
static size_t xgather_entry(xgather *g, const char *id) {
    if (2 * (g->n + 1) > g->tcap) {
        size_t nc = g->tcap ? 2 * g->tcap : 64;
        size_t *nt = tp_calloc(nc, sizeof *nt);
        if (!nt) return SIZE_MAX;
        for (size_t k = 0; k < g->n; k++) *id_slot(g, nt, nc, g->v[k].id) = k + 1;
        free(g->tab);
        g->tab = nt;
        g->tcap = nc;
    }
    size_t *slot = id_slot(g, g->tab, g->tcap, id);
    if (*slot) return *slot - 1;
    if (g->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 16;
        xcomm *nv = tp_realloc(g->v, nc * sizeof *nv);
        if (!nv) return SIZE_MAX;
        g->v = nv;
        g->cap = nc;
    }
    memset(&g->v[g->n], 0, sizeof *g->v);
    g->v[g->n].id = id;
    g->v[g->n].p2p_only = 1;
    *slot = ++g->n;
    return g->n - 1;
}

/* Adds rank rr's communicators to g (one entry per id across the ranks). Returns 0, or -1
 * when out of memory. */
static int gather_rank(xgather *g, const tp_rank_result *rr) {
    const tp_comm_result *c = &rr->comm;
    for (size_t ci = 0; c->present && ci < c->ncomms; ci++) {
        const tp_comm_communicator_result *rc = &c->comms[ci];
        size_t k = xgather_entry(g, rc->id);
        if (k == SIZE_MAX) return -1;
        xcomm *x = &g->v[k];
        if ((double)rc->size > x->size) x->size = rc->size;
        if (x->nm == x->cap_m) { /* doubling: the world's communicator has every rank */
            size_t nc = x->cap_m ? 2 * x->cap_m : 8;
            member *m2 = tp_realloc(x->m, nc * sizeof *m2);
            if (!m2) return -1;
            x->m = m2;
            x->cap_m = nc;
        }
        /* through double, as the document's number is read back: a forged rank beyond INT_MAX
         * converts as it always has */
        x->m[x->nm++] = (member){rr->rank, (int)(double)rc->rank};
        for (size_t ri = 0; ri < rc->nrows; ri++) {
            const tp_comm_row_result *ro = &rc->rows[ri];
            const char *op = ro->name;
            if (strcmp(op, "Send") && strcmp(op, "Recv")) x->p2p_only = 0;
            size_t q = 0;
            while (q < x->nops && strcmp(x->ops[q].op, op)) q++;
            if (q == x->nops) {
                xop *o2 = tp_realloc(x->ops, (x->nops + 1) * sizeof *o2);
                if (!o2) return -1;
                x->ops = o2;
                memset(&x->ops[q], 0, sizeof *x->ops);
                x->ops[q].op = op;
                x->nops++;
            }
            xop *o = &x->ops[q];
            double cnt = (double)ro->count, by = (double)ro->bytes, t = (double)ro->time_ns / 1e6;
            if (cnt > o->count_max) o->count_max = cnt;
            if (!o->ranks || cnt < o->count_min) o->count_min = cnt;
            if (by > o->bytes_max) o->bytes_max = by;
            o->ranks++;
            o->count += cnt;
            o->timed += (double)ro->timed;
            o->time_ms += t;
            x->time_ms += t;
            /* S of the ops with a real duration, back from algbw = S / t */
            double algbw, bw_ms;
            tp_comm_row_bw(ro, &algbw, &bw_ms);
            o->size_bytes += algbw * bw_ms * 1e6;
            o->bw_time_ms += bw_ms;
            o->factor = tp_comm_bus_factor(ro->op, ro->nranks);
            o->enqueue_only += (double)ro->enqueue_only;
            for (int z = 0; z < 3; z++) o->src[z] += (double)ro->src[z];
        }
    }
    return 0;
}

/* Communicator x's typed result (members sorted here); its figures per op. Returns 0, or -1
 * when out of memory. */
static int xcomm_result(tp_comm_xcomm_result *e, xcomm *x, const tp_run *run, int world) {
    if (x->nm > 1) qsort(x->m, x->nm, sizeof *x->m, cmp_member);
    e->id = x->id;
    e->size = x->size;
    e->members = tp_calloc(x->nm ? x->nm : 1, sizeof *e->members);
    e->ops = tp_calloc(x->nops ? x->nops : 1, sizeof *e->ops);
    if (!e->members || !e->ops) return -1; /* no member counted: none read */
    e->nmembers = x->nm;
    for (size_t i = 0; i < x->nm; i++) {
        e->members[i].rank = x->m[i].rank;
        e->members[i].comm_rank = x->m[i].comm_rank;
    }
    e->traffic = x->p2p_only && x->nops ? "point-to-point" : "collective";
    e->torch_group = torch_group_by_members(x, run);
    guess_role(x, world, e->role_guess, sizeof e->role_guess, e->role_basis,
               sizeof e->role_basis);
    group_names(e, x, run);
    for (size_t q = 0; q < x->nops; q++) {
        const xop *o = &x->ops[q];
        tp_comm_xop_result *r = &e->ops[e->nops++];
        r->op = o->op;
        r->ranks = o->ranks;
        r->count_per_rank = o->count_max;
        /* ranks that saw fewer (a damaged or cut-short rank file, a rank that left) */
        r->has_count_min = o->count_min < o->count_max;
        r->count_min_rank = o->count_min;
        r->bytes_per_rank = o->bytes_max;
        r->has_bytes_per_op = o->count_max > 0;
        r->bytes_per_op = o->count_max > 0 ? o->bytes_max / o->count_max : 0;
        r->has_mean = o->timed > 0;
        r->mean_ms = o->timed > 0 ? o->time_ms / o->timed : 0;
        if (o->bw_time_ms > 0 && o->size_bytes > 0 && o->factor > 0) {
            r->has_bw = 1;
            r->algbw_gbs = o->size_bytes / (o->bw_time_ms * 1e6);
            r->busbw_gbs = r->algbw_gbs * o->factor;
        }
        r->time_source = tp_comm_time_source(o->src);
        r->enqueue_only = o->enqueue_only;
    }
    return 0;
}

/* The run's communicators across the ranks, most time first, into out (none when out of
 * memory). */
static void communicators_compute(tp_comm_run_result *out, const tp_run *run,
                                  const tp_run_results *res, int world) {
    xgather g = {0};
    g.key = tp_table_key(&g);
    int oom = 0;
    for (size_t i = 0; i < res->nranks && !oom; i++) oom = gather_rank(&g, &res->ranks[i]);
    free(g.tab);
    xcomm *xc = g.v;
    size_t nxc = g.n;
    if (nxc > 1) qsort(xc, nxc, sizeof *xc, cmp_xcomm);
    out->comms = oom || !nxc ? NULL : tp_calloc(nxc, sizeof *out->comms);
    for (size_t k = 0; k < nxc && out->comms; k++)
        if (xcomm_result(&out->comms[out->ncomms++], &xc[k], run, world)) break;
    for (size_t k = 0; k < nxc; k++) {
        free(xc[k].m);
        free(xc[k].ops);
    }
    free(xc);
}

/* The document's "communicators" from the typed results, into c. */
static void communicators_json(cJSON *c, const tp_comm_run_result *r) {
    cJSON *jc = cJSON_AddArrayToObject(c, "communicators");
    for (size_t k = 0; k < r->ncomms; k++) {
        const tp_comm_xcomm_result *x = &r->comms[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", x->id);
        cJSON_AddNumberToObject(e, "size", x->size);
        cJSON_AddNumberToObject(e, "ranks_seen", (double)x->nmembers);
        if (x->nmembers > 1) { /* several rank files show this id: who is in it */
            cJSON *jm = cJSON_AddArrayToObject(e, "members");
            for (size_t i = 0; i < x->nmembers; i++) {
                cJSON *m = cJSON_CreateObject();
                cJSON_AddNumberToObject(m, "rank", x->members[i].rank);
                cJSON_AddNumberToObject(m, "comm_rank", x->members[i].comm_rank);
                tp_json_item_to_array(jm, m);
            }
        } else if (x->nmembers == 1) {
            cJSON_AddNumberToObject(e, "rank", x->members[0].rank);
            cJSON_AddNumberToObject(e, "comm_rank", x->members[0].comm_rank);
        }
        cJSON_AddStringToObject(e, "traffic", x->traffic);
        if (x->torch_group) cJSON_AddStringToObject(e, "torch_group", x->torch_group);
        if (x->group_names[0]) cJSON_AddStringToObject(e, "group_names", x->group_names);
        cJSON_AddStringToObject(e, "role_guess", x->role_guess);
        if (x->role_named) cJSON_AddBoolToObject(e, "role_named", 1);
        cJSON_AddStringToObject(e, "role_basis", x->role_basis);
        cJSON *jo = cJSON_AddArrayToObject(e, "ops");
        for (size_t q = 0; q < x->nops; q++) {
            const tp_comm_xop_result *o = &x->ops[q];
            cJSON *oj = cJSON_CreateObject();
            cJSON_AddStringToObject(oj, "op", o->op);
            cJSON_AddNumberToObject(oj, "ranks", o->ranks);
            cJSON_AddNumberToObject(oj, "count_per_rank", o->count_per_rank);
            if (o->has_count_min) cJSON_AddNumberToObject(oj, "count_min_rank", o->count_min_rank);
            cJSON_AddNumberToObject(oj, "bytes_per_rank", o->bytes_per_rank);
            if (o->has_bytes_per_op) cJSON_AddNumberToObject(oj, "bytes_per_op", o->bytes_per_op);
            if (o->has_mean) cJSON_AddNumberToObject(oj, "mean_ms", o->mean_ms);
            if (o->has_bw) {
                cJSON_AddNumberToObject(oj, "algbw_gbs", o->algbw_gbs);
                cJSON_AddNumberToObject(oj, "busbw_gbs", o->busbw_gbs);
            }
            cJSON_AddStringToObject(oj, "time_source", o->time_source);
            if (o->enqueue_only > 0) cJSON_AddNumberToObject(oj, "enqueue_only", o->enqueue_only);
            tp_json_item_to_array(jo, oj);
        }
        tp_json_item_to_array(jc, e);
    }
}

/* The exposed-communication finding on the worst rank (see tp_comm_run_section): its index
 * in fs, or SIZE_MAX when out of memory. */
static size_t exposure_finding(tp_findings_result *fs, const tp_rank_result *worst, size_t n,
                               double mean, size_t over, double warn_share, double crit_share) {
    const tp_comm_exposure_result *wx = &worst->comm.exposure;
    double ws = wx->exposed_share;
    /* exposed communication over 10 % of the step is a warning (docs/design.md §5.2), over
     * 30 % critical: then communication takes more of the step than any single phase
     * usually does (thresholds in tp_report_opts) */
    const char *per = tp_comm_exposure_per(wx);
    const char *sev = ws > crit_share ? "critical" : "warning";
    char msg[400];
    snprintf(msg, sizeof msg,
             "exposed communication is %.1f %% of the %s time on rank %.0f (%.2f ms of "
             "%.2f ms per %s; %.2f ms more overlapped with compute); mean over %zu "
             "rank%s %.1f %%: %s",
             100 * ws, per, (double)worst->rank, wx->exposed_ms.mean, wx->window_ms, per,
             wx->overlapped_ms.mean, n, n == 1 ? "" : "s",
             100 * mean,
             !strcmp(wx->basis, "host")
                 ? "time the process spent blocked in communication instead of computing"
                 : "communication the GPU could not hide behind compute");
    tp_finding *ev = tp_finding_add(fs, "exposed_communication", sev, worst->rank, msg, NULL);
    if (!ev) return SIZE_MAX;
    tp_ev_string(ev, "per", per);
    tp_ev_string(ev, "basis", wx->basis);
    tp_ev_number(ev, "exposed_share", ws);
    tp_ev_number(ev, "exposed_ms", wx->exposed_ms.mean);
    tp_ev_number(ev, "overlapped_ms", wx->overlapped_ms.mean);
    tp_ev_number(ev, "window_ms", wx->window_ms);
    tp_ev_number(ev, "mean_exposed_share", mean);
    tp_ev_number(ev, "ranks_over_warning", (double)over);
    tp_ev_number(ev, "threshold", ws > crit_share ? crit_share : warn_share);
    return fs->n - 1;
}

/* Exposure across the ranks into out: the ranks with figures, their mean and median share,
 * the worst rank. Returns the worst, or NULL without figures. */
static const tp_rank_result *exposure_compute_run(tp_comm_run_result *out,
                                                  const tp_run_results *res, double *shares,
                                                  size_t *n, size_t *over) {
    const tp_rank_result *worst = NULL;
    const char *per = NULL; /* the ranks' "per" so far (tp_comm_exposure_per); NULL: none yet */
    int mixed = 0;
    *n = 0;
    out->exposed = tp_calloc(res->nranks ? res->nranks : 1, sizeof *out->exposed);
    for (size_t i = 0; i < res->nranks && out->exposed; i++) {
        const tp_rank_result *r = &res->ranks[i];
        const tp_comm_exposure_result *x = &r->comm.exposure;
        if (!r->comm.present || !x->has_figures) continue;
        out->exposed[out->nexposed++] = r;
        if (per && strcmp(per, tp_comm_exposure_per(x))) mixed = 1;
        per = tp_comm_exposure_per(x);
        if (shares) shares[(*n)++] = x->exposed_share;
        if (!worst || x->exposed_share > worst->comm.exposure.exposed_share) worst = r;
    }
    out->per = mixed ? "mixed" : per ? per : "step";
    if (!*n || !worst) return NULL;
    double mean = 0;
    *over = 0;
    for (size_t i = 0; i < *n; i++) {
        mean += shares[i];
        *over += shares[i] > out->warn_share;
    }
    mean /= (double)*n;
    out->has_summary = 1;
    out->mean_exposed_share = mean;
    qsort(shares, *n, sizeof *shares, tp_cmp_double);
    out->median_exposed_share = tp_pct_double(shares, *n, 0.5);
    out->worst_rank = worst->rank;
    out->worst_exposed_share = worst->comm.exposure.exposed_share;
    return worst;
}

/* The document's "communication" from out. */
static void comm_run_json(cJSON *rep, const tp_comm_run_result *out) {
    cJSON *c = cJSON_AddObjectToObject(rep, "communication");
    cJSON_AddNumberToObject(c, "world_size", out->world_size);
    communicators_json(c, out);
    cJSON *xe = cJSON_AddObjectToObject(c, "exposure");
    cJSON *jr = cJSON_AddArrayToObject(xe, "ranks");
    for (size_t i = 0; i < out->nexposed; i++) {
        const tp_rank_result *r = out->exposed[i];
        const tp_comm_exposure_result *x = &r->comm.exposure;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", r->rank);
        cJSON_AddStringToObject(e, "per", tp_comm_exposure_per(x));
        cJSON_AddStringToObject(e, "basis", x->basis);
        cJSON_AddNumberToObject(e, "exposed_share", x->exposed_share);
        cJSON_AddNumberToObject(e, "exposed_ms_mean", x->exposed_ms.mean);
        cJSON_AddNumberToObject(e, "exposed_ms_p50", x->exposed_ms.p50);
        cJSON_AddNumberToObject(e, "overlapped_ms_mean", x->overlapped_ms.mean);
        cJSON_AddNumberToObject(e, "window_ms", x->window_ms);
        tp_json_item_to_array(jr, e);
    }
    cJSON_AddStringToObject(xe, "per", out->per);
    cJSON *th = cJSON_AddObjectToObject(xe, "thresholds");
    cJSON_AddNumberToObject(th, "warning", out->warn_share);
    cJSON_AddNumberToObject(th, "critical", out->crit_share);
    if (!out->has_summary) return;
    cJSON_AddNumberToObject(xe, "mean_exposed_share", out->mean_exposed_share);
    cJSON_AddNumberToObject(xe, "median_exposed_share", out->median_exposed_share);
    cJSON_AddNumberToObject(xe, "worst_rank", out->worst_rank);
    cJSON_AddNumberToObject(xe, "worst_exposed_share", out->worst_exposed_share);
}

void tp_comm_run_result_free(tp_comm_run_result *r) {
    for (size_t k = 0; k < r->ncomms; k++) {
        free(r->comms[k].members);
        free(r->comms[k].ops);
    }
    free(r->comms);
    free(r->exposed);
    memset(r, 0, sizeof *r);
}

size_t tp_comm_run_section(cJSON *rep, const tp_run *run, tp_run_results *res,
                           double warn_share, double crit_share) {
    tp_comm_run_result *out = &res->comm;
    memset(out, 0, sizeof *out);
    int world = 0, nrank_procs = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        if (run->procs[i].role != TP_ROLE_RANK) continue;
        nrank_procs++;
        if (run->procs[i].world_size > world) world = run->procs[i].world_size;
    }
    if (world <= 0) world = nrank_procs;
    out->present = 1;
    out->world_size = world;
    out->warn_share = warn_share;
    out->crit_share = crit_share;
    communicators_compute(out, run, res, world);
    size_t found = SIZE_MAX; /* the finding appended */
    size_t n = 0, over = 0;
    double *shares = tp_malloc((res->nranks ? res->nranks : 1) * sizeof *shares);
    const tp_rank_result *worst = exposure_compute_run(out, res, shares, &n, &over);
    if (worst && out->worst_exposed_share > warn_share)
        found = exposure_finding(&res->findings, worst, n, out->mean_exposed_share, over,
                                 warn_share, crit_share);
    free(shares);
    comm_run_json(rep, out);
    return found;
}
