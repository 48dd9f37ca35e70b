/*
 * mfu.h — throughput, model FLOPs and MFU (mfu.c).
 *
 * Model FLOPs per step come from the caller (--flops-per-step, or metadata flops_per_step) or
 * from a transformer description with the formula Megatron-LM uses
 * (num_floating_point_operations in megatron/training/training.py): forward plus backward
 * (factor 3), FMA = 2 FLOPs, activation recomputation not counted, core attention halved by the
 * causal mask. MFU = achieved model TFLOP/s per GPU / the GPU's dense peak for the dtype (table
 * in mfu.c).
 */
#ifndef TPROF_MFU_H
#define TPROF_MFU_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

typedef struct tp_model_desc {
    double layers, hidden, ffn, heads, groups, vocab, seq, experts, topk, moe_ffn, kv_channels;
    int gated;
    char dtype[8]; /* "" = not given */
} tp_model_desc;

/* 1 when dtype is one of the peak table's: bf16, fp16, fp8, tf32, fp32 (lower case). */
int tp_dtype_known(const char *dtype);

/* Parses "layers=12,hidden=768,heads=12,seq=1024,vocab=50257[,ffn=,groups=,experts=,topk=,
 * moe_ffn=,kv_channels=,gated=0|1,dtype=bf16|fp16|fp8|tf32|fp32]". Needs layers, hidden,
 * heads, seq and vocab; defaults: groups = heads, kv_channels = hidden/heads, ffn = 4·hidden
 * (gated: Megatron's int(8·hidden/3 / 64)·64), moe_ffn = ffn, topk = 1. Returns TPROF_OK (0),
 * or TPROF_ERR_INVALID_ARG with a reason in err (NUL-terminated, cut to errlen; err may be
 * NULL with errlen 0): a key given twice, a size that is not a whole number
 * from 0 to 1e9, heads not a multiple of groups, hidden not a multiple of heads without
 * kv_channels, topk above experts, an unknown dtype. */
int tp_model_parse(const char *spec, tp_model_desc *m, char *err, size_t errlen);

/* Megatron-LM's model FLOPs for `tokens` tokens in sequences of m->seq (BSHD: S2 = tokens·seq). */
double tp_model_flops(const tp_model_desc *m, double tokens);

/* Dense peak TFLOP/s of a GPU (NVML name, matched by substring) for a dtype; 0 when unknown.
 * *entry receives the table's name for the match and *source its reference. */
double tp_peak_tflops(const char *gpu_name, const char *dtype, const char **entry,
                      const char **source);

/* Computes the throughput section into *out (zeroed first) from the ranks' step times (res:
 * the ranks' results): samples/s, tokens/s, model FLOPs per step per rank, TFLOP/s per GPU
 * and MFU, as far as the inputs allow; a TFLOP/s past the GPU's peak (or the table's fastest)
 * is flagged (figures.h). Per-step inputs are per rank (a rank's share of the global batch:
 * the global batch / the world size); given values (> 0, or a non-NULL model) win over the
 * rank files' metadata (tokens_per_step, samples_per_step, flops_per_step, model, dtype).
 * dtype NULL: bf16. Strings of *out point into run, model, dtype or static tables. */
void tp_throughput_compute(tp_throughput_result *out, const tp_run *run,
                           const tp_run_results *res, double tokens, double samples,
                           double flops, const char *model, const char *dtype);

/* Adds "throughput" to the report from r (nothing when r->present is 0); a flagged figure is
 * in its "invalid" (figures.h, docs/report-json.md). */
void tp_throughput_json(cJSON *rep, const tp_throughput_result *r);

#endif
