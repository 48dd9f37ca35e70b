/*
 * mpi_comm_dump.c — test helper: loads a run directory through the analysis model
 * (src/analysis/model.h) and prints, as one JSON document, every process with its rank,
 * its mpi.* / capability.mpi / rank_source metadata and every communication record, so that
 * the MPI tests (tests/mpi_test.sh) can assert on exact records whatever the report shows.
 *
 * usage: mpi_comm_dump DIR    (exit 0, or 1 when the directory cannot be loaded)
 * comm_hash is printed as a "0x%016llx" string: JSON numbers cannot carry 64 bits exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analysis/model.h"

static void kv(const tp_process *p, const char *key, int *first) {
    const char *v = tp_meta(p, key);
    if (!v) return;
    printf("%s", *first ? "" : ", ");
    *first = 0;
    tp_json_string(stdout, key);
    printf(": ");
    tp_json_string(stdout, v);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: mpi_comm_dump DIR\n");
        return 2;
    }
    tp_run run;
    char err[512];
    if (tp_run_load(argv[1], &run, err, sizeof err) != 0) {
        fprintf(stderr, "mpi_comm_dump: %s\n", err);
        return 1;
    }
    printf("{\"processes\": [\n");
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        printf("%s {\"rank\": %d, \"world_size\": %d, \"pid\": %d, \"complete\": %d, "
               "\"dropped\": %" PRIu64 ", \"meta\": {",
               i ? "," : "", p->rank, p->world_size, (int)p->hdr.pid, p->complete, p->dropped);
        int first = 1;
        static const char *const keys[] = {"rank_source", "capability.mpi",
                                           "mpi.comms_over_limit", "mpi.ops_fallback_comm_id",
                                           "mpi.requests_untracked", "mpi.requests_unfinished"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) kv(p, keys[k], &first);
        printf("},\n  \"comm\": [");
        for (size_t c = 0; c < p->ncomm; c++) {
            const tp_comm_op *o = &p->comm[c];
            printf("%s\n   {\"name\": ", c ? "," : "");
            tp_json_string(stdout, o->name ? o->name : "");
            printf(", \"op\": %u, \"bytes\": %" PRIu64 ", \"count\": %" PRIu64
                   ", \"comm\": \"0x%016" PRIx64 "\", \"nranks\": %u, \"rank\": %u, "
                   "\"peer\": %d, \"seq\": %u, \"flags\": %u, \"source\": %u, "
                   "\"start\": %" PRIu64 ", \"end\": %" PRIu64 ", \"tid\": %u}",
                   o->op, o->bytes, o->count, o->comm_hash, o->nranks, o->rank,
                   o->peer == TPROF_COMM_NO_PEER ? -1 : (int)o->peer, o->seq, o->flags,
                   o->source, o->start, o->end, o->os_tid);
        }
        printf("]}\n");
    }
    printf("]}\n");
    tp_run_free(&run);
    return 0;
}
