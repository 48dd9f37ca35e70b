/*
 * comm_rank_text.c — the text form of a rank's communication (comm.h), from its typed
 * results (tp_comm_result): ops per source, the communicators and their ops, the exposure.
 * The figures are the document's (comm_rank.c writes the same values), derived here with the
 * same helpers (tp_comm_row_bw, tp_comm_bus_factor, tp_comm_time_source).
 */
#include "analysis/comm.h"

#include <string.h>

#include "analysis/text.h"

/* s, then spaces up to `width` bytes of the form the report shows (an invalid byte becomes the
 * 3 bytes of U+FFFD, text.h): a column as wide as printf's %-*s of the cleaned name */
static void put_col(FILE *f, const char *s, int width) {
    size_t n = strlen(s), shown = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad;
        size_t k = tp_utf8_next(s + i, n - i, &cp, &bad);
        shown += bad ? 3 : k;
        i += k;
    }
    fputs(s, f);
    for (size_t c = shown; c < (size_t)width; c++) fputc(' ', f);
}

/* the NCCL ops the plugin could not record (its event pool was full), when there were any */
static void pool_warning(FILE *f, const tp_comm_result *c) {
    if (c->has_not_recorded && c->nccl_ops_not_recorded > 0)
        fprintf(f, "    warning: at least %.0f NCCL ops not recorded: the profiler plugin's event "
                   "pool was full\n",
                c->nccl_ops_not_recorded);
}

/* One op row of a communicator; returns 1 when its "host" time is NCCL's enqueue only. */
static int row_text(FILE *f, const tp_comm_row_result *r, size_t nst) {
    fputs("      ", f);
    put_col(f, r->name, 14);
    fprintf(f, " %7.0f ops  ", (double)r->count);
    tp_comm_put_bytes(f, (double)r->bytes);
    fprintf(f, " total");
    if (nst) { /* per measured step: e.g. DDP's gradient bytes */
        fprintf(f, " (%.1f ops, ", (double)r->in_steps / (double)nst);
        tp_comm_put_bytes(f, (double)r->bytes_in_steps / (double)nst);
        fprintf(f, " per step)");
    }
    fprintf(f, ", %.3f ms total, %.1f us mean", (double)r->time_ns / 1e6,
            r->timed ? (double)r->time_ns / 1e3 / (double)r->timed : 0.0);
    double algbw, bw_ms;
    if (tp_comm_row_bw(r, &algbw, &bw_ms))
        fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", algbw,
                algbw * tp_comm_bus_factor(r->op, r->nranks));
    const double src[3] = {(double)r->src[0], (double)r->src[1], (double)r->src[2]};
    fprintf(f, " [time: %s]\n", tp_comm_time_source(src));
    return r->enqueue_only > 0;
}

/* A communicator's line and its op rows; returns 1 when a row is NCCL's enqueue only. */
static int communicator_text(FILE *f, const tp_comm_communicator_result *e, size_t nst) {
    fprintf(f, "    comm %s", e->id);
    if (e->name) { /* a program's text */
        fputs(" \"", f);
        tp_fput_printable(f, e->name);
        fputc('"', f);
    }
    fputs(" via ", f);
    tp_fput_printable(f, e->backend);
    if (e->torch_group) { /* written by trainprof.torch: backend, size, ranks */
        fputs(" [torch: ", f);
        tp_fput_printable(f, e->torch_group);
        fputc(']', f);
    }
    fprintf(f, ": size %.0f, this rank %.0f in it", (double)e->size, (double)e->rank);
    if (e->nodes > 0) fprintf(f, ", %u node%s", e->nodes, e->nodes == 1 ? "" : "s");
    fputc('\n', f);
    int enq = 0;
    for (size_t i = 0; i < e->nrows; i++) enq |= row_text(f, &e->rows[i], nst);
    return enq;
}

static void exposure_text(FILE *f, const tp_comm_exposure_result *x) {
    const char *per = tp_comm_exposure_per(x);
    if (!x->has_figures) {
        fprintf(f, "    exposed communication: not known (%s)\n", x->note);
        return;
    }
    fprintf(f, "    exposed communication: %.2f ms per %s = %.1f %% of the %s (median %.2f ms",
            x->exposed_ms.mean, per, 100 * x->exposed_share, per, x->exposed_ms.p50);
    if (x->per_step)
        fprintf(f, ", worst %.1f %% in step %.0f", 100 * x->exposed_share_per_window.max,
                x->has_worst_step ? x->worst_step : 0.0);
    fprintf(f, "); overlapped %.2f ms; communication %.2f ms in all\n", x->overlapped_ms.mean,
            x->comm_ms.mean);
    fprintf(f, "      basis: %s\n", x->note);
}

void tp_comm_rank_text(FILE *f, const tp_comm_result *c) {
    if (!c || !c->present) return;
    /* the exposure is there when the ops were timed (comm_rank.c) */
    int exposure = c->resolved && !c->nothing;
    int ncomm = (int)c->ncomms;
    if (c->ops == 0 && !exposure) {
        fprintf(f, "  communication: none recorded\n");
        pool_warning(f, c);
        return;
    }
    if (c->torch_ops) {
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI, %.0f torch.distributed",
                (double)c->ops, (double)c->nccl_ops, (double)c->mpi_ops, (double)c->torch_ops);
        for (size_t i = 0; i < c->ntorch_backends; i++) {
            fputs(i ? ", " : " over ", f);
            tp_fput_printable(f, c->torch_backends[i]);
        }
        fprintf(f, ") on %d communicator%s\n", ncomm, ncomm == 1 ? "" : "s");
    } else {
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI) on %d communicator%s\n",
                (double)c->ops, (double)c->nccl_ops, (double)c->mpi_ops, ncomm,
                ncomm == 1 ? "" : "s");
    }
    pool_warning(f, c);
    if (c->rows_no_memory)
        fprintf(f, "    communicators: not known (%s)\n", TP_COMM_ROWS_NO_MEMORY);
    if (exposure && c->has_placement)
        fprintf(f,
                "    NCCL's GPU times checked against CUPTI's NCCL kernels: moved by %+.1f us "
                "(median; %+.1f to %+.1f) over %.0f ops\n",
                -c->shift_us_p50, -c->shift_us_max, -c->shift_us_min, c->placement_ops);
    int enq = 0;
    for (size_t k = 0; exposure && k < c->ncomms; k++) {
        if (k == 10) {
            fprintf(f, "    ... %d more communicators (report.json lists them all)\n", ncomm - 10);
            break;
        }
        enq |= communicator_text(f, &c->comms[k], c->nsteps);
    }
    if (enq)
        fprintf(f, "    note: ops timed by \"host\" on NCCL are the enqueue only, not the duration "
                   "(no GPU interval and no matching NCCL kernel)\n");
    if (exposure) exposure_text(f, &c->exposure);
}
