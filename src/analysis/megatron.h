/*
 * megatron.h — a Megatron-LM job's own arguments, read from its command line, and advice in
 * its terms for the report's findings (megatron.c).
 *
 * The flags are Megatron-LM's (megatron/training/arguments.py, and the config dataclasses
 * whose fields become flags, megatron/core/model_parallel_config.py and
 * megatron/core/transformer/transformer_config.py): --transformer-impl, the --no-*-fusion
 * switches, --no-persist-layer-norm, --overlap-grad-reduce, --overlap-param-gather,
 * --use-distributed-optimizer, --tp-comm-overlap, --recompute-activations,
 * --recompute-granularity, --micro-batch-size, --tensor-model-parallel-size,
 * --cuda-graph-impl (and the older --enable-cuda-graph, --external-cuda-graph),
 * --num-workers. Pure functions of their arguments: thread safe, no allocation.
 */
#ifndef TPROF_MEGATRON_H
#define TPROF_MEGATRON_H

#include <stddef.h>

#include "analysis/model.h"

/* The --no-*-fusion and --no-persist-layer-norm switches a job gave (bits of `fusions_off`). */
enum {
    TP_MEG_NO_MASKED_SOFTMAX_FUSION = 1,
    TP_MEG_NO_BIAS_DROPOUT_FUSION = 2,
    TP_MEG_NO_BIAS_GELU_FUSION = 4,
    TP_MEG_NO_BIAS_SWIGLU_FUSION = 8,
    TP_MEG_NO_GRADIENT_ACCUMULATION_FUSION = 16,
    TP_MEG_NO_PERSIST_LAYER_NORM = 32,
    TP_MEG_NO_ROPE_FUSION = 64,
};

typedef struct tp_megatron_args {
    int found;                  /* a rank's command line is a Megatron-LM training script */
    char transformer_impl[32];  /* as given; "" when not given (Megatron's default) */
    unsigned fusions_off;       /* TP_MEG_NO_* given */
    int overlap_grad_reduce, overlap_param_gather, distributed_optimizer, tp_comm_overlap;
    int recompute;              /* --recompute-activations or --recompute-granularity */
    int cuda_graph;             /* --cuda-graph-impl other than none, or an older graph flag */
    int micro_batch;            /* --micro-batch-size; 0 when not given */
    int tp;                     /* --tensor-model-parallel-size; 1 when not given */
    int num_workers;            /* --num-workers; -1 when not given (Megatron's default 2) */
} tp_megatron_args;

/* Reads the arguments from a command line (arguments separated by spaces, as the rank
 * file's "cmdline" metadata holds them). A training script is one whose file name starts
 * with "pretrain_" (pretrain_gpt.py, ...) or a command line with both --micro-batch-size and
 * --global-batch-size; otherwise out->found is 0 and the rest is zero. */
void tp_megatron_args_parse(const char *cmdline, tp_megatron_args *out);

/* The arguments of the run's first rank that ran Megatron-LM (out->found 0: none did). */
void tp_megatron_args_of(const tp_run *run, tp_megatron_args *out);

/* Advice in Megatron-LM's terms for a finding (its rule id: launch_bound, gpu_busy,
 * exposed_communication, memory_peak, data_loading) from the arguments the job gave: only
 * what it did not already do. Writes a sentence to buf (n bytes, NUL-terminated) and returns
 * its length; 0 (buf "") when there is nothing to add. */
size_t tp_megatron_advice(const tp_megatron_args *a, const char *finding_id, char *buf, size_t n);

/* The parallel dimension a Megatron-LM process-group name stands for (the group_desc
 * megatron/core/parallel_state.py gives torch.distributed.new_group: "TENSOR_MODEL_PARALLEL_GROUP"
 * -> "tensor parallel", ...; static), or NULL for a name not Megatron-LM's. */
const char *tp_megatron_group_dimension(const char *name);

#endif /* TPROF_MEGATRON_H */
