/*
 * comm_text.c — the text form of the rank's and the run's "communication" (comm.h).
 */
#include "analysis/comm.h"
#include "analysis/jsonget.h"

#include <string.h>

#include "analysis/text.h"

/* ------------------------------------------------------------------ text */

static void put_bytes(FILE *f, double b) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    fprintf(f, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

/* the NCCL ops the plugin could not record (its event pool was full), when there were any */
static void pool_warning(FILE *f, const cJSON *c) {
    if (tp_jnum(c, "nccl_ops_not_recorded") > 0)
        fprintf(f, "    warning: at least %.0f NCCL ops not recorded: the profiler plugin's event "
                   "pool was full\n",
                tp_jnum(c, "nccl_ops_not_recorded"));
}

void tp_comm_rank_text(FILE *f, const cJSON *c) {
    if (!c) return;
    const cJSON *comms = tp_jobj(c, "communicators");
    int ncomm = cJSON_GetArraySize(comms);
    if (tp_jnum(c, "ops") == 0 && !tp_jobj(c, "exposure")) {
        fprintf(f, "  communication: none recorded\n");
        pool_warning(f, c);
        return;
    }
    if (tp_jobj(c, "torch_ops")) {
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI, %.0f torch.distributed",
                tp_jnum(c, "ops"), tp_jnum(c, "nccl_ops"), tp_jnum(c, "mpi_ops"),
                tp_jnum(c, "torch_ops"));
        const cJSON *b;
        int first = 1;
        cJSON_ArrayForEach(b, tp_jobj(c, "torch_backends")) {
            fputs(first ? " over " : ", ", f);
            tp_fput_printable(f, cJSON_IsString(b) ? b->valuestring : "");
            first = 0;
        }
        fprintf(f, ") on %d communicator%s\n", ncomm, ncomm == 1 ? "" : "s");
    }
    else
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI) on %d communicator%s\n",
                tp_jnum(c, "ops"), tp_jnum(c, "nccl_ops"), tp_jnum(c, "mpi_ops"), ncomm,
                ncomm == 1 ? "" : "s");
    pool_warning(f, c);
    const cJSON *pl = tp_jobj(c, "channel_placement");
    if (pl)
        fprintf(f,
                "    NCCL's GPU times checked against CUPTI's NCCL kernels: moved by %+.1f us "
                "(median; %+.1f to %+.1f) over %.0f ops\n",
                -tp_jnum(pl, "shift_us_p50"), -tp_jnum(pl, "shift_us_max"),
                -tp_jnum(pl, "shift_us_min"), tp_jnum(pl, "ops"));
    int shown = 0, enq = 0;
    const cJSON *e, *o;
    cJSON_ArrayForEach(e, comms) {
        if (shown++ == 10) {
            fprintf(f, "    ... %d more communicators (report.json lists them all)\n", ncomm - 10);
            break;
        }
        fprintf(f, "    comm %s", tp_jstr(e, "id"));
        if (tp_jobj(e, "name")) { /* a program's text */
            fputs(" \"", f);
            tp_fput_printable(f, tp_jstr(e, "name"));
            fputc('"', f);
        }
        if (tp_jobj(e, "backend")) {
            fputs(" via ", f);
            tp_fput_printable(f, tp_jstr(e, "backend"));
        }
        if (tp_jobj(e, "torch_group")) { /* written by trainprof.torch: backend, size, ranks */
            fputs(" [torch: ", f);
            tp_fput_printable(f, tp_jstr(e, "torch_group"));
            fputc(']', f);
        }
        fprintf(f, ": size %.0f, this rank %.0f in it", tp_jnum(e, "size"), tp_jnum(e, "rank"));
        if (tp_jnum(e, "nodes") > 0)
            fprintf(f, ", %.0f node%s", tp_jnum(e, "nodes"), tp_jnum(e, "nodes") == 1 ? "" : "s");
        fputc('\n', f);
        cJSON_ArrayForEach(o, tp_jobj(e, "ops")) {
            fprintf(f, "      %-14s %7.0f ops  ", tp_jstr(o, "op"), tp_jnum(o, "count"));
            put_bytes(f, tp_jnum(o, "bytes"));
            fprintf(f, " total");
            if (tp_jobj(o, "bytes_per_step")) { /* per measured step: e.g. DDP's gradient bytes */
                fprintf(f, " (%.1f ops, ", tp_jnum(o, "count_per_step"));
                put_bytes(f, tp_jnum(o, "bytes_per_step"));
                fprintf(f, " per step)");
            }
            fprintf(f, ", %.3f ms total, %.1f us mean", tp_jnum(o, "time_ms"),
                    tp_jnum(o, "mean_us"));
            if (tp_jobj(o, "algbw_gbs"))
                fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", tp_jnum(o, "algbw_gbs"),
                        tp_jnum(o, "busbw_gbs"));
            fprintf(f, " [time: %s]\n", tp_jstr(o, "time_source"));
            enq |= tp_jnum(o, "enqueue_only") > 0;
        }
    }
    if (enq)
        fprintf(f, "    note: ops timed by \"host\" on NCCL are the enqueue only, not the duration "
                   "(no GPU interval and no matching NCCL kernel)\n");
    const cJSON *x = tp_jobj(c, "exposure");
    if (!x) return;
    int step = !strcmp(tp_jstr(x, "per"), "step");
    if (!tp_jobj(x, "exposed_share")) {
        fprintf(f, "    exposed communication: not known (%s)\n", tp_jstr(x, "note"));
        return;
    }
    fprintf(f, "    exposed communication: %.2f ms per %s = %.1f %% of the %s (median %.2f ms",
            tp_jnum(tp_jobj(x, "exposed_ms"), "mean"), step ? "step" : "run",
            100 * tp_jnum(x, "exposed_share"), step ? "step" : "run",
            tp_jnum(tp_jobj(x, "exposed_ms"), "p50"));
    if (step)
        fprintf(f, ", worst %.1f %% in step %.0f",
                100 * tp_jnum(tp_jobj(x, "exposed_share_per_window"), "max"),
                tp_jnum(x, "worst_step"));
    fprintf(f, "); overlapped %.2f ms; communication %.2f ms in all\n",
            tp_jnum(tp_jobj(x, "overlapped_ms"), "mean"), tp_jnum(tp_jobj(x, "comm_ms"), "mean"));
    fprintf(f, "      basis: %s\n", tp_jstr(x, "note"));
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
            put_bytes(f, tp_jnum(o, "bytes_per_op"));
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
