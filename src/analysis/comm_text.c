/*
 * comm_text.c — the text form of the run's "communication" (comm.h), from its typed results;
 * a rank's is comm_rank_text.c.
 */
#include "analysis/comm.h"

#include <string.h>

#include "analysis/text.h"

/* ------------------------------------------------------------------ text */

void tp_comm_put_bytes(FILE *f, double b) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    fprintf(f, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void tp_comm_run_text(FILE *f, const tp_comm_run_result *c, const char *B, const char *N) {
    if (!c->present) return;
    if (!c->ncomms && !c->has_summary) {
        fprintf(f, "\n%scommunication%s: none recorded%s\n", B, N,
                c->world_size == 1 ? " (world size 1: a collective has no peer, so NCCL or MPI "
                                     "calls move no data and take no time worth recording)"
                                   : "");
        return;
    }
    fprintf(f, "\n%scommunication%s (across ranks; roles are guesses from size, members and "
               "traffic)\n", B, N);
    for (size_t k = 0; k < c->ncomms; k++) {
        if (k == 20) {
            fprintf(f, "  ... %zu more communicators (report.json lists them all)\n",
                    c->ncomms - 20);
            break;
        }
        const tp_comm_xcomm_result *e = &c->comms[k];
        fprintf(f, "  comm %s: size %.0f, seen on %zu rank file%s", e->id, e->size, e->nmembers,
                e->nmembers == 1 ? "" : "s");
        for (size_t i = 0; e->nmembers > 1 && i < e->nmembers; i++)
            fprintf(f, "%s%d", i ? ", " : " (world ranks ", e->members[i].rank);
        if (e->nmembers > 1) fputc(')', f);
        if (e->torch_group) { /* a program's text */
            fputs("; torch group \"", f);
            tp_fput_printable(f, e->torch_group);
            fputc('"', f);
        }
        if (e->group_names[0]) {
            fputs("; named ", f);
            tp_fput_printable(f, e->group_names);
        }
        fprintf(f, "; %s: %s (%s)\n", e->role_named ? "role" : "guess", e->role_guess,
                e->role_basis);
        for (size_t q = 0; q < e->nops; q++) {
            const tp_comm_xop_result *o = &e->ops[q];
            if (o->has_count_min)
                fprintf(f, "    %-14s %.0f-%.0f per rank (the rank files differ), ", o->op,
                        o->count_min_rank, o->count_per_rank);
            else
                fprintf(f, "    %-14s %.0f per rank, ", o->op, o->count_per_rank);
            tp_comm_put_bytes(f, o->bytes_per_op);
            fprintf(f, " per op on average (per rank), mean %.3f ms", o->mean_ms);
            if (o->has_bw)
                fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", o->algbw_gbs, o->busbw_gbs);
            fprintf(f, " [time: %s]\n", o->time_source);
        }
    }
    if (c->has_summary) {
        /* "mixed": each rank's share is of its own window, which for none of them need be
         * the run (a stepless rank bounded in GPU records: its span; a rank with steps) */
        int mixed = !strcmp(c->per, "mixed");
        size_t nr = c->nexposed;
        fprintf(f,
                "  exposed communication: mean %.1f %% of %s%s over %zu rank%s, median %.1f %%, "
                "worst rank %d (%.1f %%)\n",
                100 * c->mean_exposed_share, mixed ? "each rank's window (its step, span or run)"
                                                   : "the ",
                mixed ? "" : c->per, nr, nr == 1 ? "" : "s",
                100 * c->median_exposed_share, c->worst_rank, 100 * c->worst_exposed_share);
    }
}
