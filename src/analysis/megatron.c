/*
 * megatron.c — Megatron-LM's arguments from a rank's command line, and advice in its terms
 * (megatron.h).
 */
#define _GNU_SOURCE
#include "analysis/megatron.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *flag; unsigned bit; } fusion_flags[] = {
    {"--no-masked-softmax-fusion", TP_MEG_NO_MASKED_SOFTMAX_FUSION},
    {"--no-bias-dropout-fusion", TP_MEG_NO_BIAS_DROPOUT_FUSION},
    {"--no-bias-gelu-fusion", TP_MEG_NO_BIAS_GELU_FUSION},
    {"--no-bias-swiglu-fusion", TP_MEG_NO_BIAS_SWIGLU_FUSION},
    {"--no-gradient-accumulation-fusion", TP_MEG_NO_GRADIENT_ACCUMULATION_FUSION},
    {"--no-persist-layer-norm", TP_MEG_NO_PERSIST_LAYER_NORM},
    {"--no-rope-fusion", TP_MEG_NO_ROPE_FUSION},
};

/* The argument token at tok (len bytes) is `flag`, alone or as "flag=value". */
static int is_flag(const char *tok, size_t len, const char *flag, const char **value) {
    size_t fl = strlen(flag);
    if (len < fl || strncmp(tok, flag, fl)) return 0;
    if (len == fl) {
        *value = NULL;
        return 1;
    }
    if (tok[fl] != '=') return 0;
    *value = tok + fl + 1;
    return 1;
}

/* The value of a flag: after '=' in its token, else the next token. */
static void value_of(const char *v, const char *next, size_t next_len, char *buf, size_t n) {
    const char *s = v ? v : next;
    size_t len = v ? strcspn(v, " ") : next_len;
    if (!s) len = 0;
    if (len >= n) len = n - 1;
    memcpy(buf, s ? s : "", len);
    buf[len] = 0;
}

static int script_is_training(const char *tok, size_t len) {
    const char *base = tok;
    for (size_t i = 0; i < len; i++)
        if (tok[i] == '/') base = tok + i + 1;
    size_t bl = (size_t)(tok + len - base);
    return bl > 11 && !strncmp(base, "pretrain_", 9) && !strncmp(base + bl - 3, ".py", 3);
}

/* No Megatron-LM job: found 0, the defaults of what it did not give. */
static void args_none(tp_megatron_args *out) {
    memset(out, 0, sizeof *out);
    out->tp = 1;
    out->num_workers = -1;
}

void tp_megatron_args_parse(const char *cmdline, tp_megatron_args *out) {
    args_none(out);
    if (!cmdline) return;
    int script = 0, mbs = 0, gbs = 0;
    const char *p = cmdline;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        const char *next = p + len;
        while (*next == ' ') next++;
        size_t next_len = *next ? strcspn(next, " ") : 0;
        const char *v;
        char val[32];
        script |= script_is_training(p, len);
        for (size_t i = 0; i < sizeof fusion_flags / sizeof *fusion_flags; i++)
            if (is_flag(p, len, fusion_flags[i].flag, &v)) out->fusions_off |= fusion_flags[i].bit;
        if (is_flag(p, len, "--transformer-impl", &v)) {
            value_of(v, *next ? next : NULL, next_len, out->transformer_impl,
                     sizeof out->transformer_impl);
        } else if (is_flag(p, len, "--overlap-grad-reduce", &v)) {
            out->overlap_grad_reduce = 1;
        } else if (is_flag(p, len, "--overlap-param-gather", &v)) {
            out->overlap_param_gather = 1;
        } else if (is_flag(p, len, "--use-distributed-optimizer", &v)) {
            out->distributed_optimizer = 1;
        } else if (is_flag(p, len, "--tp-comm-overlap", &v)) {
            out->tp_comm_overlap = 1;
        } else if (is_flag(p, len, "--recompute-activations", &v) ||
                   is_flag(p, len, "--recompute-granularity", &v)) {
            out->recompute = 1;
        } else if (is_flag(p, len, "--enable-cuda-graph", &v) ||
                   is_flag(p, len, "--external-cuda-graph", &v)) {
            out->cuda_graph = 1;
        } else if (is_flag(p, len, "--cuda-graph-impl", &v)) {
            value_of(v, *next ? next : NULL, next_len, val, sizeof val);
            out->cuda_graph = strcmp(val, "none") != 0;
        } else if (is_flag(p, len, "--micro-batch-size", &v)) {
            value_of(v, *next ? next : NULL, next_len, val, sizeof val);
            out->micro_batch = atoi(val);
            mbs = 1;
        } else if (is_flag(p, len, "--global-batch-size", &v)) {
            gbs = 1;
        } else if (is_flag(p, len, "--tensor-model-parallel-size", &v)) {
            value_of(v, *next ? next : NULL, next_len, val, sizeof val);
            out->tp = atoi(val) > 0 ? atoi(val) : 1;
        } else if (is_flag(p, len, "--num-workers", &v)) {
            value_of(v, *next ? next : NULL, next_len, val, sizeof val);
            out->num_workers = atoi(val);
        }
        p += len;
    }
    if (!script && !(mbs && gbs)) {
        args_none(out);
        return;
    }
    out->found = 1;
}

void tp_megatron_args_of(const tp_run *run, tp_megatron_args *out) {
    tp_megatron_args_parse(NULL, out);
    for (size_t i = 0; i < run->nprocs; i++) {
        if (run->procs[i].role != TP_ROLE_RANK) continue;
        tp_megatron_args_parse(tp_meta(&run->procs[i], "cmdline"), out);
        if (out->found) return;
    }
}

/* Appends a clause to buf: "; " between clauses. */
static void clause(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    if (*len >= n) return;
    if (*len) {
        int w = snprintf(buf + *len, n - *len, "; ");
        *len += w > 0 ? (size_t)w : 0;
        if (*len >= n) return;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    *len += w > 0 ? (size_t)w : 0;
}

/* The --no-* switches given, as "--no-a --no-b", into buf. */
static void fusions_given(const tp_megatron_args *a, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof fusion_flags / sizeof *fusion_flags && len < n; i++)
        if (a->fusions_off & fusion_flags[i].bit) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", fusion_flags[i].flag);
            len += w > 0 ? (size_t)w : 0;
        }
}

size_t tp_megatron_advice(const tp_megatron_args *a, const char *id, char *buf, size_t n) {
    if (!n) return 0;
    buf[0] = 0;
    if (!a || !a->found || !id) return 0;
    size_t len = 0;
    char fl[256];
    if (!strcmp(id, "launch_bound") || !strcmp(id, "gpu_busy")) {
        if (!strcmp(a->transformer_impl, "local"))
            clause(buf, n, &len, "--transformer-impl transformer_engine instead of local (fused "
                                 "attention, LayerNorm and GEMM kernels: fewer, larger kernels)");
        fusions_given(a, fl, sizeof fl);
        if (*fl) clause(buf, n, &len, "turn the fusions back on (drop %s)", fl);
        if (!a->cuda_graph)
            clause(buf, n, &len, "CUDA graphs (--cuda-graph-impl local or transformer_engine) "
                                 "to replay the step's launches");
        if (a->micro_batch > 0)
            clause(buf, n, &len, "a larger --micro-batch-size (now %d) with fewer micro-batches "
                                 "per step", a->micro_batch);
    } else if (!strcmp(id, "exposed_communication")) {
        if (!a->overlap_grad_reduce)
            clause(buf, n, &len, "--overlap-grad-reduce (overlaps the data-parallel gradient "
                                 "reduction with the backward pass)");
        if (!a->distributed_optimizer)
            clause(buf, n, &len, "--use-distributed-optimizer with --overlap-param-gather");
        else if (!a->overlap_param_gather)
            clause(buf, n, &len, "--overlap-param-gather");
        if (a->tp > 1 && !a->tp_comm_overlap)
            clause(buf, n, &len, "--tp-comm-overlap (tensor-parallel communication overlapped "
                                 "with GEMMs; needs Transformer Engine)");
    } else if (!strcmp(id, "memory_peak")) {
        if (!a->recompute)
            clause(buf, n, &len, "--recompute-activations (selective activation recomputation)");
        if (!a->distributed_optimizer)
            clause(buf, n, &len, "--use-distributed-optimizer (optimizer state sharded over the "
                                 "data-parallel ranks)");
        if (a->micro_batch > 1)
            clause(buf, n, &len, "a smaller --micro-batch-size (now %d)", a->micro_batch);
    } else if (!strcmp(id, "data_loading")) {
        clause(buf, n, &len, "more --num-workers (now %d)",
               a->num_workers >= 0 ? a->num_workers : 2);
    }
    if (len >= n) len = n - 1;
    return len;
}

/* most specific first: a prefix table (names carry suffixes such as _GLOO or _WITH_CP) */
const char *tp_megatron_group_dimension(const char *name) {
    static const struct { const char *prefix, *dim; } t[] = {
        {"EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "expert tensor and model parallel"},
        {"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP",
         "expert tensor, model and pipeline parallel"},
        {"EXPERT_TENSOR_PARALLEL_GROUP", "expert tensor parallel"},
        {"EXPERT_MODEL_PARALLEL_GROUP", "expert model parallel"},
        {"EXPERT_DATA_PARALLEL_GROUP", "expert data parallel"},
        {"TENSOR_AND_DATA_PARALLEL_GROUP", "tensor and data parallel"},
        {"TENSOR_AND_CONTEXT_PARALLEL_GROUP", "tensor and context parallel"},
        {"TENSOR_MODEL_PARALLEL_GROUP", "tensor parallel"},
        {"PIPELINE_MODEL_PARALLEL_GROUP", "pipeline parallel"},
        {"DATA_PARALLEL_GROUP_WITH_CP", "data parallel (with context parallel)"},
        {"INTRA_PARTIAL_DATA_PARALLEL_GROUP", "data parallel (partial, distributed optimizer)"},
        {"DATA_PARALLEL_GROUP", "data parallel"},
        {"CONTEXT_PARALLEL_GROUP", "context parallel"},
        {"MODEL_PARALLEL_GROUP", "model parallel (tensor and pipeline)"},
        {"POSITION_EMBEDDING_GROUP", "position embedding (first pipeline stages)"},
        {"EMBEDDING_GROUP", "embedding (first and last pipeline stages)"},
        {"default_pg", "world (the default group)"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strncmp(name, t[i].prefix, strlen(t[i].prefix))) return t[i].dim;
    return NULL;
}
