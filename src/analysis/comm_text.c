/*
 * comm_text.c — the text form of the run's "communication" (comm.h), from the document; a
 * rank's is comm_rank_text.c, from its typed results.
 */
#include "analysis/comm.h"
#include "analysis/jsonget.h"

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

void tp_comm_run_text(FILE *f, const cJSON *c, const char *B, const char *N) {
    if (!c) return;
    const cJSON *comms = tp_jobj(c, "communicators"), *x = tp_jobj(c, "exposure");
    int ncomm = cJSON_GetArraySize(comms);
    if (!ncomm && !tp_jobj(x, "worst_rank")) {
        fprintf(f, "\n%scommunication%s: none recorded\n", B, N);
        return;
    }
    fprintf(f, "\n%scommunication%s (across ranks; roles are guesses from size, members and "
               "traffic)\n", B, N);
    int shown = 0;
    const cJSON *e, *o;
    cJSON_ArrayForEach(e, comms) {
        if (shown++ == 20) {
            fprintf(f, "  ... %d more communicators (report.json lists them all)\n", ncomm - 20);
            break;
        }
        fprintf(f, "  comm %s: size %.0f, seen on %.0f rank file%s", tp_jstr(e, "id"),
                tp_jnum(e, "size"), tp_jnum(e, "ranks_seen"),
                tp_jnum(e, "ranks_seen") == 1 ? "" : "s");
        const cJSON *m;
        int first = 1;
        cJSON_ArrayForEach(m, tp_jobj(e, "members")) {
            fprintf(f, "%s%.0f", first ? " (world ranks " : ", ", tp_jnum(m, "rank"));
            first = 0;
        }
        if (!first) fputc(')', f);
        if (tp_jobj(e, "torch_group")) { /* a program's text */
            fputs("; torch group \"", f);
            tp_fput_printable(f, tp_jstr(e, "torch_group"));
            fputc('"', f);
        }
        fprintf(f, "; guess: %s (%s)\n", tp_jstr(e, "role_guess"), tp_jstr(e, "role_basis"));
        cJSON_ArrayForEach(o, tp_jobj(e, "ops")) {
            if (tp_jobj(o, "count_min_rank"))
                fprintf(f, "    %-14s %.0f-%.0f per rank (the rank files differ), ",
                        tp_jstr(o, "op"), tp_jnum(o, "count_min_rank"),
                        tp_jnum(o, "count_per_rank"));
            else
                fprintf(f, "    %-14s %.0f per rank, ", tp_jstr(o, "op"),
                        tp_jnum(o, "count_per_rank"));
            tp_comm_put_bytes(f, tp_jnum(o, "bytes_per_op"));
            fprintf(f, " per op on average (per rank), mean %.3f ms", tp_jnum(o, "mean_ms"));
            if (tp_jobj(o, "algbw_gbs"))
                fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", tp_jnum(o, "algbw_gbs"),
                        tp_jnum(o, "busbw_gbs"));
            fprintf(f, " [time: %s]\n", tp_jstr(o, "time_source"));
        }
    }
    if (tp_jobj(x, "worst_rank")) {
        int step = !strcmp(tp_jstr(x, "per"), "step");
        int nr = cJSON_GetArraySize(tp_jobj(x, "ranks"));
        fprintf(f,
                "  exposed communication: mean %.1f %% of the %s over %d rank%s, median %.1f %%, "
                "worst rank %.0f (%.1f %%)\n",
                100 * tp_jnum(x, "mean_exposed_share"), step ? "step" : "run", nr,
                nr == 1 ? "" : "s", 100 * tp_jnum(x, "median_exposed_share"),
                tp_jnum(x, "worst_rank"), 100 * tp_jnum(x, "worst_exposed_share"));
    }
}
