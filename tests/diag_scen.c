/*
 * diag_scen.c — the synthetic job of diag_scen.h.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/nvml_abi.h"
#include "diag_scen.h"
#include "format/format.h"
#include "synth.h"


scen scen_base(void) {
    scen s;
    memset(&s, 0, sizeof s);
    s.nranks = 2;
    s.hosts = 1;
    s.steps = 6;
    s.step = 10 * MS;
    s.end_frac = 0.9;
    s.lag_rank = -1;
    s.mem_share = 0.5;
    return s;
}

static void api(synth_file *f, uint64_t s, uint64_t e, const char *name) {
    tprof_pl_gpu pl = {e, 0, 0, 0, 0, 0, 0, 0};
    size_t n = strlen(name) + 1;
    synth_raw(f, 1, TPROF_REC_GPU_API, TPROF_INLINE_NAME, s, &pl, sizeof pl, name, n);
}

void scen_write_rank(const char *dir, const scen *sc, int r) {
    int host = sc->hosts > 1 && r >= sc->nranks / 2;
    char hn[16];
    snprintf(hn, sizeof hn, "node%d", host);
    /* true time u (ns since the job's start) is monotonic base + u on each host; host 1's
     * start pair is off by clock_err */
    uint64_t mono0 = host ? 7 * T0 : T0;
    synth_file *f = synth_open(dir, hn, 100 + r, RT0 + (uint64_t)(host ? sc->clock_err : 0), mono0);
    assert_non_null(f);
    synth_rank(f, r, sc->nranks);
    synth_meta(f, "gpu.0.name", "NVIDIA H100 80GB HBM3");
    synth_meta(f, "gpu.0.memory_total_bytes", "85899345920");
    synth_meta(f, "nvml.devices", "0"); /* NVML index 0 is CUDA device 0 */
    if (sc->alloc_share > 0) {
        tprof_pl_gpu_mem m = {0x1000, (uint64_t)(sc->alloc_share * 85899345920.0), 0, 1, 3, 0};
        synth_raw(f, 1, TPROF_REC_GPU_MEMORY, 0, mono0 + MS / 2, &m, sizeof m, NULL, 0);
    }
    if (sc->meta_model) synth_meta(f, "model", sc->meta_model);
    if (sc->meta_tokens) synth_meta(f, "tokens_per_step", sc->meta_tokens);
    if (sc->cmdline) synth_meta(f, "cmdline", sc->cmdline);
    synth_thread(f, 1, 100 + r);
    uint32_t corr = 1;
    uint64_t step = sc->step;
    for (int i = 0; i < sc->steps; i++) {
        uint64_t t = mono0 + MS + (uint64_t)i * step;
        uint64_t lag = r == sc->lag_rank ? sc->lag : 0;
        uint64_t end = t + (uint64_t)(sc->end_frac * (double)step);
        uint64_t comp_end = end - step / 20 + lag; /* compute ends 5 % before the work */
        uint64_t comm_start = end - (uint64_t)(0.4 * (double)step) + lag;
        synth_step_begin(f, 1, t, (uint64_t)i);
        uint64_t c0 = t + (sc->data_over_busy ? 0 : sc->data);
        if (sc->data) {
            uint64_t d0 = sc->data_over_busy ? t + 2 * MS : t;
            synth_push(f, 1, d0, "data", 0, 0);
            synth_pop(f, 1, d0 + sc->data, 0);
        }
        if (sc->short_kernels) {
            for (uint64_t k = c0; k + 10 * US <= comp_end; k += 20 * US)
                synth_kernel(f, 1, k, k + 10 * US, 0, 7, corr++, "elementwise_kernel");
        } else {
            synth_kernel(f, 1, c0, comp_end, 0, 7, corr++, "sm90_xmma_gemm_bf16");
        }
        /* the collective: GPU interval and the NCCL kernel on its own stream; every rank's
         * ends at `end` (true time), the late rank's starts later */
        synth_kernel(f, 1, comm_start, end, 0, 9, corr++,
                     "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.op = TPROF_COMM_ALLREDUCE;
        int groups = sc->groups > 1 ? sc->groups : 1;
        c.comm_hash = HASH + (uint64_t)(r % groups);
        c.nranks = (uint32_t)((sc->nranks - r % groups + groups - 1) / groups);
        c.rank = (uint32_t)(r / groups);
        c.bytes = 1 << 20;
        c.count = c.bytes / 4;
        c.seq = (uint32_t)(i * (1 + sc->buckets));
        c.end_ns = comm_start - 50 * US;
        c.peer = TPROF_COMM_NO_PEER;
        c.source = TPROF_COMM_SRC_NCCL;
        c.flags = TPROF_COMM_F_GPU_TIME;
        c.gpu_start_ns = comm_start;
        c.gpu_end_ns = end;
        synth_comm(f, 1, comm_start - 60 * US, &c, NULL);
        for (int b = 1; b <= sc->buckets; b++) {
            uint64_t b0 = end + (uint64_t)b * 20 * US;
            c.seq = (uint32_t)(i * (1 + sc->buckets) + b);
            c.end_ns = b0 - 50 * US;
            c.gpu_start_ns = b0;
            c.gpu_end_ns = b0 + 10 * US;
            synth_comm(f, 1, b0 - 60 * US, &c, NULL);
        }
        if (sc->sync) api(f, end - 10 * US, t + step - 5 * US, "cudaStreamSynchronize");
        /* NVML gauges, two samples per step */
        for (int h = 0; h < 2; h++) {
            uint64_t ts = t + (uint64_t)h * step / 2 + step / 4;
            int thr = sc->throttle && h == 1;
            synth_counter(f, 1, ts, "gpu0.sm_clock_mhz", thr ? 1400 : 1980);
            synth_counter(f, 1, ts, "gpu0.clock_event_reasons",
                          thr ? (double)NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN : 0);
            synth_counter(f, 1, ts, "gpu0.power_w", sc->power_at_limit ? 699 : 400);
            synth_counter(f, 1, ts, "gpu0.power_limit_w", 700);
            synth_counter(f, 1, ts, "gpu0.temp_c", 50);
            synth_counter(f, 1, ts, "gpu0.mem_used_bytes", sc->mem_share * 85899345920.0);
        }
        synth_step_end(f, 1, t + step, (uint64_t)i);
    }
    synth_end_of_file(f, mono0 + MS + (uint64_t)sc->steps * step + MS, 0);
    assert_int_equal(synth_close(f), 0);
}
