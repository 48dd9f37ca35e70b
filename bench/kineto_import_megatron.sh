#!/bin/bash
# kineto_import_megatron.sh — `trainprof report` on Megatron-LM's own torch.profiler trace
# against trainprof's own capture of the same configuration and steps. Runs on a GPU machine.
#
#   bench/kineto_import_megatron.sh MEGATRON_DIR OUTDIR
#
# Megatron-LM (https://github.com/NVIDIA/Megatron-LM, its megatron/, pretrain_gpt.py,
# gpt_builders.py, model_provider.py; nothing of it is kept here) runs the configuration of
# bench/megatron_reference.sh on one GPU twice: bare with its own torch.profiler over
# iterations 16-19 (--profile --use-pytorch-profiler, which writes
# torch_profile/rank-0.json.gz beside --tensorboard-dir), and under
# `trainprof run --python --kernel-steps 15-18` (trainprof numbers steps from 0: the same
# iterations). Prints kernel time per step three ways (the trace's own kernel events summed in
# Python, trainprof's import of the trace, trainprof's capture) with the targets.
# Environment: TRAINPROF (the command), ITERS (30), TIMEOUT (600), MEGATRON_EXTRA (arguments
# after the configuration's, which override it: argparse keeps the last of a repeated option).
set -u
MEG=$(cd "${1:?usage: kineto_import_megatron.sh MEGATRON_DIR OUTDIR}" && pwd)
OUT=$(mkdir -p "${2:?}" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TP=${TRAINPROF:-trainprof}
ITERS=${ITERS:-30}
ARGS_FILE=$HERE/megatron_args.txt
args="$(grep -v '^#' "$ARGS_FILE") ${MEGATRON_EXTRA:-} --train-iters $ITERS"
meg() { # meg LOG EXTRA [trainprof run ... --]
    local log=$1 extra=$2; shift 2
    (cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} timeout "${TIMEOUT:-600}" "$@" torchrun \
        --nproc_per_node=1 --master_port=$((29500 + RANDOM % 1000)) pretrain_gpt.py \
        $args $extra) > "$log" 2>&1
}
rm -rf "$OUT/prof" "$OUT/run"
meg "$OUT/prof.log" "--profile --use-pytorch-profiler --profile-step-start 16
    --profile-step-end 20 --profile-ranks 0 --tensorboard-dir $OUT/prof/tb"
echo "torch.profiler run: exit status $?"
meg "$OUT/run.log" "" "$TP" run --python --quiet -o "$OUT/run" --kernel-steps 15-18 --
echo "trainprof run: exit status $?"
TRACE=$(ls "$OUT"/prof/torch_profile/*.json* 2>/dev/null | head -1)
[ -n "$TRACE" ] || { echo "no torch.profiler trace under $OUT/prof"; exit 1; }
"$TP" report "$TRACE" --format json > "$OUT/import.json" 2> "$OUT/import.err"
echo "report of the trace: exit status $? ($(wc -c < "$OUT/import.err") bytes on stderr)"
"$TP" report "$TRACE" > "$OUT/import.txt" 2>&1
"$TP" report "$OUT/run" --format json > "$OUT/run.json" 2> /dev/null
"$TP" report "$OUT/run" > "$OUT/run.txt" 2>&1
python3 "$HERE/kineto_import_compare.py" "$TRACE" "$OUT/import.json" "$OUT/run.json"
