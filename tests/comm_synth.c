/*
 * comm_synth.c — the communication tests' synthetic runs and report look-ups
 * (comm_synth.h).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "analysis/report.h"
#include "comm_synth.h"
#include "trainprof.h"

tprof_pl_comm comm(uint32_t op, uint64_t hash, uint32_t nranks, uint32_t rank,
                   uint64_t bytes, uint64_t end) {
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.comm_hash = hash;
    c.nranks = nranks;
    c.rank = rank;
    c.bytes = bytes;
    c.count = bytes / 4; /* float32 */
    c.end_ns = end;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_NCCL;
    c.algo = TPROF_ALGO_RING;
    c.proto = TPROF_PROTO_SIMPLE;
    c.nchannels = 4;
    return c;
}

void with_gpu(tprof_pl_comm *c, uint64_t s, uint64_t e) {
    c->flags |= TPROF_COMM_F_GPU_TIME;
    c->gpu_start_ns = s;
    c->gpu_end_ns = e;
}

/* A run directory with one rank file: process `pid` on host "h", rank `rank` of `world`. */
synth_file *rank_file(char *dir, size_t n, const char *tag, uint32_t pid, int rank,
                      int world) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", pid, RT0, T0);
    synth_rank(f, rank, world);
    return f;
}

/* steps [T0 + i*len, T0 + (i+1)*len) on thread 1 */
void steps(synth_file *f, int n, uint64_t len) {
    for (int i = 0; i < n; i++) {
        synth_step_begin(f, 1, T0 + (uint64_t)i * len, (uint64_t)i);
        synth_step_end(f, 1, T0 + (uint64_t)(i + 1) * len, (uint64_t)i);
    }
}

cJSON *report(const char *dir, tp_run *run) {
    char err[256] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = 0;
    cJSON *rep = tp_report_build(run, &o);
    assert_non_null(rep);
    return rep;
}

cJSON *rank_comm(cJSON *rep, int i) {
    cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), i),
                                   "communication");
    assert_non_null(c);
    return c;
}

double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\"", k);
    return v->valuedouble;
}

const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsString(v)) fail_msg("no string \"%s\"", k);
    return v->valuestring;
}

/* The row of op `op` in the rank communicator `id` ("0x..."). */
cJSON *rank_row(cJSON *c, const char *id, const char *op) {
    cJSON *e, *r;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "communicators")) {
        if (strcmp(str(e, "id"), id)) continue;
        cJSON_ArrayForEach(r, cJSON_GetObjectItem(e, "ops")) {
            if (!strcmp(str(r, "op"), op)) return r;
        }
    }
    fail_msg("no row %s %s", id, op);
    return NULL;
}

cJSON *run_comm(cJSON *rep, const char *id) {
    cJSON *e;
    cJSON *all = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "communication"), "communicators");
    cJSON_ArrayForEach(e, all) {
        if (!strcmp(str(e, "id"), id)) return e;
    }
    fail_msg("no communicator %s", id);
    return NULL;
}
