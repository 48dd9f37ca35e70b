/*
 * mfu.c — throughput, model FLOPs (Megatron-LM's formula) and MFU (mfu.h).
 */
#define _GNU_SOURCE
#include "analysis/mfu.h"
#include "core/per_step.h"
#include "trainprof.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tp_dtype_known(const char *dtype) {
    static const char *const dts[] = {"bf16", "fp16", "fp8", "tf32", "fp32"};
    for (size_t k = 0; dtype && k < sizeof dts / sizeof *dts; k++)
        if (!strcmp(dtype, dts[k])) return 1;
    return 0;
}

int tp_model_parse(const char *spec, tp_model_desc *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->groups = m->kv_channels = m->ffn = m->moe_ffn = m->topk = -1;
    static const char *const keys[] = {"layers", "hidden", "ffn", "heads", "groups", "vocab",
                                       "seq", "experts", "topk", "moe_ffn", "kv_channels",
                                       "gated", "dtype"};
    double *slot[] = {&m->layers, &m->hidden, &m->ffn, &m->heads, &m->groups, &m->vocab,
                      &m->seq, &m->experts, &m->topk, &m->moe_ffn, &m->kv_channels};
    unsigned seen = 0; /* keys given, by index */
    const char *c = spec;
    while (c && *c) {
        const char *end = strchr(c, ',');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        const char *eq = memchr(c, '=', len);
        if (!eq) {
            snprintf(err, errlen, "'%.*s' is not KEY=VALUE", (int)len, c);
            return TPROF_ERR_INVALID_ARG;
        }
        size_t kl = (size_t)(eq - c);
        char val[32];
        size_t vl = len - kl - 1;
        if (vl >= sizeof val) {
            snprintf(err, errlen, "the value of '%.*s' is too long", (int)kl, c);
            return TPROF_ERR_INVALID_ARG;
        }
        memcpy(val, eq + 1, vl);
        val[vl] = 0;
        size_t k = 0;
        while (k < sizeof keys / sizeof *keys && (strlen(keys[k]) != kl || strncmp(keys[k], c, kl))) k++;
        if (k == sizeof keys / sizeof *keys) {
            snprintf(err, errlen, "unknown key '%.*s' (layers, hidden, ffn, heads, groups, vocab, "
                                  "seq, experts, topk, moe_ffn, kv_channels, gated, dtype)",
                     (int)kl, c);
            return TPROF_ERR_INVALID_ARG;
        }
        if (seen & (1u << k)) {
            snprintf(err, errlen, "'%s' is given twice", keys[k]);
            return TPROF_ERR_INVALID_ARG;
        }
        seen |= 1u << k;
        if (!strcmp(keys[k], "dtype")) {
            for (char *q = val; *q; q++) *q = (char)tolower((unsigned char)*q);
            if (!tp_dtype_known(val)) {
                snprintf(err, errlen, "unknown dtype '%s' (bf16, fp16, fp8, tf32, fp32)", val);
                return TPROF_ERR_INVALID_ARG;
            }
            memcpy(m->dtype, val, strlen(val) + 1);
        } else {
            /* sizes and counts: whole numbers; 1e9 is far above any real model's (the
             * largest vocabularies and FFN sizes are below 1e6) */
            char *e;
            double v = strtod(val, &e);
            if (e == val || *e || !(v >= 0) || v > 1e9 || v != floor(v)) {
                snprintf(err, errlen, "%s needs a whole number from 0 to 1e9, got '%s'", keys[k], val);
                return TPROF_ERR_INVALID_ARG;
            }
            if (!strcmp(keys[k], "gated")) m->gated = v != 0;
            else *slot[k] = v;
        }
        c = end ? end + 1 : NULL;
    }
    if (!(m->layers > 0 && m->hidden > 0 && m->heads > 0 && m->seq > 0 && m->vocab > 0)) {
        snprintf(err, errlen, "the model needs layers, hidden, heads, seq and vocab (> 0)");
        return TPROF_ERR_INVALID_ARG;
    }
    if (m->groups <= 0) m->groups = m->heads;
    if (fmod(m->heads, m->groups) != 0) {
        snprintf(err, errlen, "heads (%.0f) is not a multiple of groups (%.0f)", m->heads, m->groups);
        return TPROF_ERR_INVALID_ARG;
    }
    if (m->kv_channels <= 0 && fmod(m->hidden, m->heads) != 0) {
        snprintf(err, errlen, "hidden (%.0f) is not a multiple of heads (%.0f): give kv_channels",
                 m->hidden, m->heads);
        return TPROF_ERR_INVALID_ARG;
    }
    if (m->experts > 0 && m->topk > m->experts) {
        snprintf(err, errlen, "topk (%.0f) is larger than experts (%.0f)", m->topk, m->experts);
        return TPROF_ERR_INVALID_ARG;
    }
    if (m->kv_channels <= 0) m->kv_channels = m->hidden / m->heads;
    /* Megatron-LM's default FFN size: 4h, or with SwiGLU int(4h·2/3 / 64)·64 (arguments.py) */
    if (m->ffn <= 0) m->ffn = m->gated ? floor(4 * m->hidden * 2 / 3 / 64) * 64 : 4 * m->hidden;
    if (m->moe_ffn <= 0) m->moe_ffn = m->ffn;
    if (m->topk <= 0) m->topk = 1;
    return TPROF_OK;
}

/* Megatron-LM num_floating_point_operations (megatron/training/training.py), standard transformer,
 * MHA/GQA, no attention output gate, no MTP, no MLA:
 *   q = kv_channels·heads, k = v = kv_channels·groups
 *   per token, per layer: attention linear 6·[h·(q+k+v) + q·h]
 *                         dense MLP 6·h·ffn·(3 gated | 2), or MoE 6·h·moe_ffn·topk·(3|2)
 *   once per token:       logits 6·h·V
 *   per S2, per layer:    core attention 6·q (the causal mask halves 12·q)
 *   total = T·(Σ token terms) + S2·(Σ core terms), with T = tokens and S2 = T·seq.
 * For a plain GPT (MHA, ffn = 4h, no gating) that is 72·h² per token per layer plus 6·s·h. */
double tp_model_flops(const tp_model_desc *m, double tokens) {
    double h = m->hidden, q = m->kv_channels * m->heads, kv = m->kv_channels * m->groups;
    double f = m->gated ? 3 : 2;
    double attn = 6 * (h * (q + 2 * kv) + q * h);
    double mlp = m->experts > 0 ? 6 * h * m->moe_ffn * m->topk * f : 6 * h * m->ffn * f;
    double logits = 6 * h * m->vocab;
    double per_token = m->layers * (attn + mlp) + logits;
    double s2 = tokens * m->seq;
    return tokens * per_token + s2 * m->layers * 6 * q;
}

/* Dense (no structured sparsity) tensor-core peaks in TFLOP/s, from NVIDIA's datasheets; the
 * datasheets print "with sparsity" figures for the tensor cores, halved here. Matched by
 * substring of the NVML name, first match wins (so more specific names come first). fp32 is
 * the non-tensor FP32 rate; 0 = not supported or not published. */
static const struct peak {
    const char *pat;
    double bf16, fp16, fp8, tf32, fp32;
    const char *source;
} peaks[] = {
    /* H200 NVL datasheet (2024): FP16/BF16 1,671 TF sparse, FP8 3,341, TF32 835, FP32 60 */
    {"H200 NVL", 835.5, 835.5, 1670.5, 417.5, 60, "NVIDIA H200 NVL datasheet (sparse / 2)"},
    /* GH200 datasheet: the Hopper GPU of GH200 has H100 SXM's rates */
    {"GH200", 989.5, 989.5, 1979, 494.5, 67, "NVIDIA GH200 datasheet (sparse / 2)"},
    /* H200 SXM datasheet (2024): BF16/FP16 1,979 TF sparse, FP8 3,958, TF32 989, FP32 67 */
    {"H200", 989.5, 989.5, 1979, 494.5, 67, "NVIDIA H200 SXM datasheet (sparse / 2)"},
    /* H100 datasheet (2023): NVL: BF16 1,671 sparse, FP8 3,341, TF32 835, FP32 60 */
    {"H100 NVL", 835.5, 835.5, 1670.5, 417.5, 60, "NVIDIA H100 NVL datasheet (sparse / 2)"},
    /* H100 PCIe: BF16 1,513 sparse, FP8 3,026, TF32 756, FP32 51 */
    {"H100 PCIe", 756.5, 756.5, 1513, 378, 51, "NVIDIA H100 PCIe datasheet (sparse / 2)"},
    /* H100 SXM5 ("NVIDIA H100 80GB HBM3"): BF16 1,979 sparse, FP8 3,958, TF32 989, FP32 67 */
    {"H100", 989.5, 989.5, 1979, 494.5, 67, "NVIDIA H100 SXM datasheet (sparse / 2)"},
    /* HGX B200 datasheet (8 GPUs): FP16/BF16 36 PF sparse, FP8 72 PF, TF32 18 PF, FP32 600 TF */
    {"B200", 2250, 2250, 4500, 1125, 75, "NVIDIA HGX B200 datasheet (per GPU, sparse / 2)"},
    /* A100 datasheet (SXM and PCIe, 40/80 GB): BF16/FP16 312 dense, TF32 156, FP32 19.5 */
    {"A100", 312, 312, 0, 156, 19.5, "NVIDIA A100 datasheet (dense)"},
    /* L40S datasheet: BF16/FP16 362.05 dense, FP8 733, TF32 183, FP32 91.6 */
    {"L40S", 362.05, 362.05, 733, 183, 91.6, "NVIDIA L40S datasheet (dense)"},
    /* L40 datasheet: BF16/FP16 181 dense (362 sparse), FP8 362, TF32 90.5, FP32 90.5 */
    {"L40", 181, 181, 362, 90.5, 90.5, "NVIDIA L40 datasheet (sparse / 2)"},
    /* L4 datasheet: BF16/FP16 242 sparse, FP8 485 sparse, TF32 120 sparse, FP32 30.3 */
    {"L4", 121, 121, 242.5, 60, 30.3, "NVIDIA L4 datasheet (sparse / 2)"},
    /* V100 SXM2 datasheet: FP16 tensor 125, FP32 15.7 (no BF16, TF32 or FP8) */
    {"V100", 0, 125, 0, 0, 15.7, "NVIDIA V100 datasheet (SXM2)"},
};

double tp_peak_tflops(const char *gpu, const char *dtype, const char **entry, const char **source) {
    *entry = *source = NULL;
    if (!gpu) return 0;
    if (!dtype || !*dtype) dtype = "bf16";
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++) {
        if (!strcasestr(gpu, peaks[i].pat)) continue;
        *entry = peaks[i].pat;
        *source = peaks[i].source;
        if (!strcmp(dtype, "bf16")) return peaks[i].bf16;
        if (!strcmp(dtype, "fp16")) return peaks[i].fp16;
        if (!strcmp(dtype, "fp8")) return peaks[i].fp8;
        if (!strcmp(dtype, "tf32")) return peaks[i].tf32;
        if (!strcmp(dtype, "fp32")) return peaks[i].fp32;
        return 0;
    }
    return 0;
}

/* ------------------------------------------------------------------ the section */


/* the first rank file's metadata value for key */
static const char *run_meta(const tp_run *run, const char *key) {
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK && tp_meta(&run->procs[i], key))
            return tp_meta(&run->procs[i], key);
    return NULL;
}

static double pick(double given, const tp_run *run, const char *key, const char **src) {
    if (given > 0) {
        *src = "option";
        return given;
    }
    const char *v = run_meta(run, key);
    double x = 0;
    if (tprof__per_step_parse(key, v, &x)) {
        *src = "metadata";
        return x;
    }
    *src = NULL;
    return 0;
}

/* Why achieved model FLOP/s past a peak cannot be true, naming the inputs that make it:
 * where the FLOPs came from, and the peak it was compared with. */
static void impossible_reason(char *buf, size_t n, const char *fsrc, double peak,
                              const char *gpu, const char *dtype) {
    const char *in = !strcmp(fsrc, "option")   ? "--flops-per-step (per rank and step: not the "
                                                 "global batch's)"
                     : !strcmp(fsrc, "model") ? "--model or --tokens-per-step (tokens per rank "
                                                 "and step)"
                                              : "the program's flops_per_step metadata (per rank "
                                                "and step)";
    if (gpu)
        snprintf(buf, n, "above the peak of %.1f TFLOP/s (%s, %s, dense): impossible; check %s, "
                         "and that the peak is this GPU's for the dtype it computes in (--dtype)",
                 peak, gpu, dtype, in);
    else
        snprintf(buf, n, "above %.1f TFLOP/s, the fastest GPU's dense peak in the table: "
                         "impossible; check %s", peak, in);
}

/* The model's figures in the document's order (topk and moe_ffn only with experts). */
static void model_figures(tp_throughput_result *out, const tp_model_desc *md) {
    const struct { const char *k; double v; } f[] = {
        {"layers", md->layers}, {"hidden", md->hidden}, {"ffn", md->ffn}, {"heads", md->heads},
        {"groups", md->groups}, {"kv_channels", md->kv_channels}, {"vocab", md->vocab},
        {"seq", md->seq}, {"experts", md->experts}, {"topk", md->topk}, {"moe_ffn", md->moe_ffn}};
    out->nmodel = 0;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        if ((!strcmp(f[i].k, "topk") || !strcmp(f[i].k, "moe_ffn")) && md->experts <= 0) continue;
        out->model[out->nmodel].key = f[i].k;
        out->model[out->nmodel++].v = f[i].v;
    }
    out->model_gated = md->gated;
    out->flops_per_token = tp_model_flops(md, 1);
    out->model_formula = "Megatron-LM num_floating_point_operations "
                         "(megatron/training/training.py)";
}

/* TFLOP/s per GPU against this GPU's peak (MFU) and against the fastest GPU of the table:
 * a figure past a peak cannot be true and is flagged, not reported. */
static void mfu_figures(tp_throughput_result *out, const char *dt) {
    double tf = out->tflops_per_gpu;
    snprintf(out->dtype, sizeof out->dtype, "%s", dt);
    if (out->gpu) {
        const char *entry, *source;
        double peak = tp_peak_tflops(out->gpu, dt, &entry, &source);
        if (peak > 0) {
            out->has_peak = 1;
            out->peak_tflops = peak;
            out->peak_entry = entry;
            out->peak_source = source;
            out->mfu = tf / peak;
            if (!(tf <= peak)) { /* above the peak, or not a number */
                impossible_reason(out->flag_reason, sizeof out->flag_reason, out->flops_source,
                                  peak, out->gpu, dt);
                out->mfu_flagged = (tp_flagged_figure){1, out->mfu, 1};
                out->tflops_flagged = (tp_flagged_figure){1, tf, peak};
            }
        } else {
            out->mfu_note = entry ? "no peak rate in the table for this dtype on this GPU"
                                  : "GPU not in the peak table";
        }
    } else {
        out->mfu_note = "GPU model unknown (no NVML metadata): no MFU";
    }
    /* without this GPU's peak, still no GPU in the table reaches past the fastest */
    double top = 0;
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++) {
        const double v[] = {peaks[i].bf16, peaks[i].fp16, peaks[i].fp8, peaks[i].tf32, peaks[i].fp32};
        for (size_t k = 0; k < sizeof v / sizeof *v; k++)
            if (v[k] > top) top = v[k];
    }
    if (!out->tflops_flagged.flagged && !(tf <= top)) {
        impossible_reason(out->flag_reason, sizeof out->flag_reason, out->flops_source, top,
                          NULL, dt);
        out->tflops_flagged = (tp_flagged_figure){1, tf, top};
    }
}

void tp_throughput_compute(tp_throughput_result *out, const tp_run *run,
                           const tp_run_results *res, double tokens, double samples,
                           double flops, const char *model, const char *dtype) {
    memset(out, 0, sizeof *out);
    /* step time: the mean over ranks of their mean measured step (equal in a synchronous job) */
    double sum = 0;
    size_t n = 0;
    const char *gpu = NULL;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *r = &res->ranks[i];
        if (r->steps.measured > 0) {
            sum += r->steps.mean_ms;
            n++;
        }
        for (size_t k = 0; k < r->nvml.ngpus && !gpu; k++) gpu = r->nvml.gpus[k].name;
    }
    if (!n) return;
    out->present = 1;
    out->gpu = gpu;
    out->ranks = res->nranks;
    double nranks = (double)res->nranks;
    double step_s = sum / (double)n / 1e3;
    out->step_ms = step_s * 1e3;
    samples = pick(samples, run, "samples_per_step", &out->samples_source);
    if (out->samples_source) {
        out->samples_per_step = samples;
        out->samples_per_s = samples * nranks / step_s;
        out->samples_per_s_per_gpu = samples / step_s;
    }
    tokens = pick(tokens, run, "tokens_per_step", &out->tokens_source);
    if (out->tokens_source) {
        out->tokens_per_step = tokens;
        out->tokens_per_s = tokens * nranks / step_s;
        out->tokens_per_s_per_gpu = tokens / step_s;
    }
    const char *fsrc;
    flops = pick(flops, run, "flops_per_step", &fsrc);
    const char *mspec = model ? model : run_meta(run, "model");
    tp_model_desc md;
    int have_model = mspec && tp_model_parse(mspec, &md, out->model_error,
                                             sizeof out->model_error) == 0;
    out->has_model_error = mspec && !have_model;
    if (have_model) {
        out->has_model = 1;
        out->model_spec = mspec;
        out->model_source = model ? "option" : "metadata";
        model_figures(out, &md);
    }
    if (fsrc && have_model)
        out->note = "flops_per_step is given, so the model's formula is not used for the FLOPs";
    if (!fsrc && have_model) {
        if (tokens > 0) {
            flops = tp_model_flops(&md, tokens);
            fsrc = "model";
        } else {
            out->note = "a model is given but no tokens per step: pass --tokens-per-step to get "
                        "its FLOPs";
        }
    }
    if (!fsrc) return;
    out->flops_source = fsrc;
    out->flops_per_step = flops;
    out->tflops_per_gpu = step_s > 0 ? flops / step_s / 1e12 : INFINITY;
    const char *dt = dtype ? dtype : have_model && md.dtype[0] ? md.dtype : run_meta(run, "dtype");
    mfu_figures(out, dt ? dt : "bf16");
}

/* inv[key] = {value, limit, reason} (figures.h), for a flagged figure. */
static void flagged_json(cJSON *inv, const char *key, const tp_flagged_figure *x,
                         const char *reason) {
    if (!x->flagged) return;
    cJSON *e = cJSON_AddObjectToObject(inv, key);
    cJSON_AddNumberToObject(e, "value", x->value);
    cJSON_AddNumberToObject(e, "limit", x->limit);
    cJSON_AddStringToObject(e, "reason", reason);
}

void tp_throughput_json(cJSON *rep, const tp_throughput_result *r) {
    if (!r->present) return;
    cJSON *t = cJSON_AddObjectToObject(rep, "throughput");
    cJSON_AddNumberToObject(t, "step_ms", r->step_ms);
    cJSON_AddNumberToObject(t, "ranks", (double)r->ranks);
    if (r->samples_source) {
        cJSON_AddNumberToObject(t, "samples_per_step", r->samples_per_step);
        cJSON_AddStringToObject(t, "samples_per_step_source", r->samples_source);
        cJSON_AddNumberToObject(t, "samples_per_s", r->samples_per_s);
        cJSON_AddNumberToObject(t, "samples_per_s_per_gpu", r->samples_per_s_per_gpu);
    }
    if (r->tokens_source) {
        cJSON_AddNumberToObject(t, "tokens_per_step", r->tokens_per_step);
        cJSON_AddStringToObject(t, "tokens_per_step_source", r->tokens_source);
        cJSON_AddNumberToObject(t, "tokens_per_s", r->tokens_per_s);
        cJSON_AddNumberToObject(t, "tokens_per_s_per_gpu", r->tokens_per_s_per_gpu);
    }
    if (r->has_model_error) cJSON_AddStringToObject(t, "model_error", r->model_error);
    if (r->has_model) {
        cJSON *m = cJSON_AddObjectToObject(t, "model");
        cJSON_AddStringToObject(m, "spec", r->model_spec);
        cJSON_AddStringToObject(m, "source", r->model_source);
        for (size_t i = 0; i < r->nmodel; i++)
            cJSON_AddNumberToObject(m, r->model[i].key, r->model[i].v);
        cJSON_AddBoolToObject(m, "gated", r->model_gated);
        cJSON_AddNumberToObject(m, "flops_per_token", r->flops_per_token);
        cJSON_AddStringToObject(m, "formula", r->model_formula);
    }
    if (r->note) cJSON_AddStringToObject(t, "note", r->note);
    if (!r->flops_source) return;
    cJSON_AddNumberToObject(t, "flops_per_step", r->flops_per_step);
    cJSON_AddStringToObject(t, "flops_source", r->flops_source);
    if (!r->tflops_flagged.flagged) cJSON_AddNumberToObject(t, "tflops_per_gpu", r->tflops_per_gpu);
    cJSON_AddStringToObject(t, "dtype", r->dtype);
    if (r->gpu) cJSON_AddStringToObject(t, "gpu", r->gpu);
    if (r->has_peak) {
        cJSON_AddNumberToObject(t, "peak_tflops", r->peak_tflops);
        cJSON_AddStringToObject(t, "peak_entry", r->peak_entry);
        cJSON_AddStringToObject(t, "peak_source", r->peak_source);
        if (!r->mfu_flagged.flagged) cJSON_AddNumberToObject(t, "mfu", r->mfu);
    }
    if (r->mfu_note) cJSON_AddStringToObject(t, "mfu_note", r->mfu_note);
    if (!r->mfu_flagged.flagged && !r->tflops_flagged.flagged) return;
    cJSON *inv = cJSON_AddObjectToObject(t, "invalid");
    flagged_json(inv, "mfu", &r->mfu_flagged, r->flag_reason);
    flagged_json(inv, "tflops_per_gpu", &r->tflops_flagged, r->flag_reason);
}
