/*
 * ended.c — which ranks ended early, how, and where they were (ended.h).
 *
 * A rank file's end record carries the signal that ended the process (0 for a normal end;
 * docs/format.md); a file without one was cut short (SIGKILL, which no handler sees, or the
 * node went away). Where the rank was: the innermost range still open when its file ended
 * (the latest-started open range: an open range's children start after it), with the open
 * ranges around it, else the range that ended last; and the collective it started last,
 * in flight when its source never saw it stop.
 */
#include "analysis/ended.h"
#include "analysis/alloc.h"
#include "analysis/findings.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>


const char *tp_signal_name(int sig, char *buf, size_t n) {
    static const char *const names[] = {
        NULL,      "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",  "SIGTRAP", "SIGABRT",
        "SIGBUS",  "SIGFPE",  "SIGKILL",   "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE",
        "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP",
        "SIGTTIN", "SIGTTOU", "SIGURG",    "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
        "SIGWINCH", "SIGIO",  "SIGPWR",    "SIGSYS"};
    if (sig > 0 && sig < (int)(sizeof names / sizeof *names)) snprintf(buf, n, "%s", names[sig]);
    else snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* The range the process was last in: see the file comment. NULL when it has none. */
static const tp_range *last_range(const tp_process *p, const tp_thread **on) {
    const tp_range *best = NULL;
    int best_open = 0;
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        for (size_t k = 0; k < th->nranges; k++) {
            const tp_range *r = &th->ranges[k];
            int open = (r->flags & TP_R_UNCLOSED) != 0;
            int better = !best || (open && !best_open) ||
                         (open == best_open &&
                          (open ? r->start > best->start : r->end > best->end));
            if (better) {
                best = r;
                best_open = open;
                *on = th;
            }
        }
    }
    return best;
}

/* seconds from the process's start to t (0 before it) */
static double rel_s(const tp_process *p, uint64_t t) {
    return t > p->hdr.start_mono_ns ? (double)(t - p->hdr.start_mono_ns) / 1e9 : 0;
}

static const char *source_name(uint32_t s) {
    return s == TPROF_COMM_SRC_NCCL    ? "nccl"
           : s == TPROF_COMM_SRC_MPI   ? "mpi"
           : s == TPROF_COMM_SRC_TORCH ? "torch.distributed"
                                       : "unknown";
}

/* r and the open ranges around it into chain (64 entries), r first, its parent next: a
 * synchronous range's parents, up to 64. Returns how many. */
static size_t range_chain(const tp_thread *th, const tp_range *r, const tp_range **chain) {
    size_t n = 0;
    for (const tp_range *x = r; x && n < 64;
         x = x->parent >= 0 && (size_t)x->parent < th->nranges ? &th->ranges[x->parent] : NULL)
        chain[n++] = x;
    return n;
}

/* The last collective's "state": NCCL or MPI never saw it stop, or it completed. */
static const char *op_state(const tp_comm_op *c) {
    return (c->flags & TPROF_COMM_F_UNFINISHED) || c->end < c->start ? "in flight" : "completed";
}

static cJSON *range_json(const tp_process *p, const tp_thread *th, const tp_range *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", r->name);
    const char *dom = tp_domain_name(p, r->domain);
    if (dom && *dom) cJSON_AddStringToObject(j, "domain", dom);
    int open = (r->flags & TP_R_UNCLOSED) != 0;
    cJSON_AddBoolToObject(j, "open", open);
    const tp_range *chain[64];
    size_t n = range_chain(th, r, chain);
    cJSON *st = cJSON_AddArrayToObject(j, "stack");
    for (size_t i = n; i-- > 0;) tp_json_item_to_array(st, cJSON_CreateString(chain[i]->name));
    if (th->name) cJSON_AddStringToObject(j, "thread", th->name);
    cJSON_AddNumberToObject(j, "tid", th->os_tid);
    cJSON_AddNumberToObject(j, "start_s", rel_s(p, r->start));
    return j;
}

/* Signals that mean a process crashed (its own fault or abort), as opposed to one ended from
 * outside (SIGTERM, SIGKILL: how launchers and PyTorch's DataLoader stop their helpers). */
static int crash_signal(int sig) {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
           sig == SIGSYS || sig == SIGTRAP;
}

/* Whether p goes into "ended_early": a rank whose file does not end normally, or a helper
 * process (a data-loader worker, a launcher's child) that crashed. */
static int ended_early(const tp_process *p) {
    if (p->role == TP_ROLE_RANK) return !p->complete || p->end_signal;
    return p->role == TP_ROLE_HELPER && p->complete && crash_signal(p->end_signal);
}

/* The ranks that ended early, and the helpers that crashed, into *out. Returns 0, or -1
 * when out of memory. */
static int ended_compute(tp_ended_result *out, const tp_run *run) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (!ended_early(p)) continue;
        tp_ended_rank *nr = tp_realloc(out->ranks, (out->n + 1) * sizeof *nr);
        if (!nr) return -1;
        out->ranks = nr;
        tp_ended_rank *e = &out->ranks[out->n++];
        memset(e, 0, sizeof *e);
        e->proc = p;
        e->by_signal = p->complete;
        if (p->complete) {
            e->signal = p->end_signal;
            tp_signal_name(p->end_signal, e->signal_name, sizeof e->signal_name);
        }
        e->ended_s = rel_s(p, p->end_mono);
        e->last_range = last_range(p, &e->thread);
        e->last_collective = tp_comm_last(p);
    }
    return 0;
}

static cJSON *rank_json(const tp_ended_rank *x, const char *label) {
    const tp_process *p = x->proc;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "rank", p->rank);
    cJSON_AddStringToObject(e, "label", label);
    if (p->role == TP_ROLE_HELPER) cJSON_AddStringToObject(e, "role", "helper");
    cJSON_AddStringToObject(e, "host", p->hdr.host);
    cJSON_AddNumberToObject(e, "pid", p->hdr.pid);
    if (x->by_signal) {
        cJSON_AddStringToObject(e, "reason", "signal");
        cJSON_AddNumberToObject(e, "signal", x->signal);
        cJSON_AddStringToObject(e, "signal_name", x->signal_name);
    } else {
        cJSON_AddStringToObject(e, "reason", "no end record");
    }
    cJSON_AddNumberToObject(e, "ended_s", x->ended_s);
    if (x->last_range)
        tp_json_item_to_object(e, "last_range", range_json(p, x->thread, x->last_range));
    const tp_comm_op *c = x->last_collective;
    if (c) {
        cJSON *jc = cJSON_AddObjectToObject(e, "last_collective");
        char id[24];
        snprintf(id, sizeof id, "0x%016" PRIx64, c->comm_hash);
        cJSON_AddStringToObject(jc, "op", c->name);
        cJSON_AddStringToObject(jc, "communicator", id);
        cJSON_AddNumberToObject(jc, "seq", c->seq);
        cJSON_AddNumberToObject(jc, "bytes", (double)c->bytes);
        cJSON_AddNumberToObject(jc, "nranks", c->nranks);
        cJSON_AddStringToObject(jc, "source", source_name(c->source));
        cJSON_AddStringToObject(jc, "state", op_state(c));
        cJSON_AddNumberToObject(jc, "start_s", rel_s(p, c->start));
    }
    return e;
}

/* The finding of the ranks (role RANK) or of the helpers in out: "N ranks ended early: ..."
 * (critical) or "N helper processes crashed: ..." (warning), appended to fs when there are
 * some. */
static void ended_finding(tp_findings_result *fs, const tp_ended_result *out, int helpers) {
    char msg[512];
    size_t len = 0;
    int count = 0;
    int *rk = tp_malloc((out->n ? out->n : 1) * sizeof *rk);
    if (!rk) return;
    for (size_t i = 0; i < out->n; i++) {
        const tp_ended_rank *x = &out->ranks[i];
        if ((x->proc->role == TP_ROLE_HELPER) != helpers) continue;
        char label[64];
        tp_process_label(x->proc, label, sizeof label);
        rk[count] = helpers ? x->proc->helper_of : x->proc->rank;
        if (len < sizeof msg) {
            int w = snprintf(msg + len, sizeof msg - len, "%s%s (%s)", count ? ", " : "", label,
                             x->by_signal ? x->signal_name : "no end record");
            if (w > 0) len += (size_t)w;
        }
        count++;
    }
    if (!count) {
        free(rk);
        return;
    }
    if (len >= sizeof msg) memcpy(msg + sizeof msg - 5, "...", 4);
    char text[600];
    if (helpers)
        snprintf(text, sizeof text, "%d helper process%s crashed: %s", count,
                 count == 1 ? "" : "es", msg);
    else
        snprintf(text, sizeof text, "%d rank%s ended early: %s", count, count == 1 ? "" : "s",
                 msg);
    tp_finding *fd = tp_finding_add(
        fs, helpers ? "helper_crashed" : "ended_early", helpers ? "warning" : "critical", -1,
        text,
        helpers ? "a crashed data-loader worker or other helper can stall or end its rank; see "
                  "\"ended early\" for the range it was in"
                : "the figures of these ranks stop where their files end; see \"ended early\" "
                  "for the range and collective each was in");
    if (fd) fd->recommendation_last = 1;
    tp_ev_ints(fd, "ranks", rk, (size_t)count);
    free(rk);
}

void tp_ended_section(cJSON *rep, tp_findings_result *fs, const tp_run *run,
                      tp_ended_result *out) {
    if (ended_compute(out, run) || !out->n) return;
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return;
    for (size_t i = 0; i < out->n; i++) {
        const tp_ended_rank *x = &out->ranks[i];
        char label[64];
        tp_process_label(x->proc, label, sizeof label);
        tp_json_item_to_array(arr, rank_json(x, label));
    }
    tp_json_item_to_object(rep, "ended_early", arr);
    for (int helpers = 0; fs && helpers < 2; helpers++) ended_finding(fs, out, helpers);
}

/* The text of one rank that ended early: how, and where it was. */
static void rank_text(FILE *f, const tp_ended_rank *x, const char *N, const char *Y) {
    const tp_process *p = x->proc;
    char label[64];
    tp_process_label(p, label, sizeof label);
    fprintf(f, "%s  %s (", Y, label);
    tp_fput_printable(f, p->hdr.host);
    fprintf(f, ":%.0f): ", (double)p->hdr.pid);
    if (x->by_signal)
        fprintf(f, "killed by %s (signal %d)", x->signal_name, x->signal);
    else
        fputs("no end record (SIGKILL, the node failed, or the file was cut short)", f);
    fprintf(f, " at %.3f s%s\n", x->ended_s, N);
    const tp_range *r = x->last_range;
    if (r) {
        const tp_thread *th = x->thread;
        fputs(r->flags & TP_R_UNCLOSED ? "    in range " : "    last range ", f);
        const tp_range *chain[64];
        for (size_t i = range_chain(th, r, chain); i-- > 0;) { /* outermost first */
            tp_fput_printable(f, chain[i]->name);
            if (i) fputs(" > ", f);
        }
        fprintf(f, " (thread %.0f%s", (double)th->os_tid, th->name ? " " : "");
        if (th->name) tp_fput_printable(f, th->name);
        fprintf(f, ", from %.3f s)\n", rel_s(p, r->start));
    }
    const tp_comm_op *c = x->last_collective;
    if (c) {
        fputs("    last collective ", f);
        tp_fput_printable(f, c->name);
        fprintf(f, " #%.0f on communicator 0x%016" PRIx64 " (%.0f ranks, %.0f bytes, %s), %s, "
                   "from %.3f s\n",
                (double)c->seq, c->comm_hash, (double)c->nranks, (double)c->bytes,
                source_name(c->source), op_state(c), rel_s(p, c->start));
    }
}

void tp_ended_text(FILE *f, const tp_ended_result *e, const char *B, const char *N,
                   const char *Y) {
    if (!e || !e->n) return;
    fprintf(f, "\n%sended early%s\n", B, N);
    for (size_t i = 0; i < e->n; i++) rank_text(f, &e->ranks[i], N, Y);
}
