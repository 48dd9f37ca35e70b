#!/bin/bash
# megatron_reference.sh — Megatron-LM's own pretrain_gpt.py, bare and under `trainprof run`,
# and what trainprof says about it against what Megatron logs itself (bench/megatron_compare.py
# prints each figure against its target). Runs on a GPU machine.
#
#   bench/megatron_reference.sh MEGATRON_DIR [OUTDIR]
#
# MEGATRON_DIR: a checkout of NVIDIA/Megatron-LM (https://github.com/NVIDIA/Megatron-LM), or
# just its megatron/, pretrain_gpt.py, gpt_builders.py and model_provider.py; nothing of it is
# kept in this repository. Mock data, `--transformer-impl local`, bf16, 4 layers, hidden
# 1024, 16 heads, sequence 1024, micro-batch 4, global batch 16, ITERS iterations (40),
# --log-energy --log-throughput --log-interval 1. With two GPUs, PAR picks the layouts
# (default "tp2 dp2": tensor-parallel 2, then data-parallel 2), else one GPU.
# Environment: TRAINPROF (the command, default `trainprof` on PATH), RUNS (trainprof runs per
# layout, default 4: findings must not change between identical runs), ITERS, PAR,
# TIMEOUT (per run, seconds, default 600).
set -u
MEG=$(cd "${1:?usage: megatron_reference.sh MEGATRON_DIR [OUTDIR]}" && pwd)
OUT=$(mkdir -p "${2:-megatron-reference}" && cd "${2:-megatron-reference}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TP=${TRAINPROF:-trainprof}
RUNS=${RUNS:-4}
ITERS=${ITERS:-40}
TIMEOUT=${TIMEOUT:-600}
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NGPU" -ge 1 ] || { echo "megatron_reference: no GPU (nvidia-smi -L lists none)"; exit 1; }
if [ "$NGPU" -ge 2 ]; then LAYOUTS=${PAR:-tp2 dp2}; else LAYOUTS=1gpu; fi

ARGS_FILE=$HERE/megatron_args.txt
args="$(grep -v '^#' "$ARGS_FILE") --train-iters $ITERS --log-throughput --log-energy"
model="layers=4,hidden=1024,heads=16,seq=1024,vocab=32000"

meg() { # meg LAYOUT LOG [trainprof run options --]
    local layout=$1 log=$2 n=1 par=""; shift 2
    case $layout in
        tp2) n=2; par="--tensor-model-parallel-size 2" ;;
        dp2) n=2 ;;
    esac
    (cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} timeout "$TIMEOUT" "$@" torchrun \
        --nproc_per_node=$n --master_port=$((29500 + RANDOM % 1000)) pretrain_gpt.py \
        $args $par ${MEG_EXTRA:-}) > "$log" 2>&1
}

{ nvidia-smi -L; python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  "$TP" --version; } > "$OUT/machine.txt" 2>&1
for layout in $LAYOUTS; do
    case $layout in tp2 | dp2) world=2 ;; *) world=1 ;; esac
    # --tokens-per-step is per rank: the global batch's tokens over the world size (so that
    # FLOPs per rank are Megatron's per GPU under tensor parallelism too)
    tokens=$((16 * 1024 / world))
    meg "$layout" "$OUT/$layout-bare.log"
    echo "$layout bare: exit status $?" >> "$OUT/status.txt"
    # Megatron's own torch.profiler window (iterations 20-24), for kernel time per iteration;
    # it writes <tensorboard-dir>/../torch_profile/rank-<r>.json.gz
    rm -rf "$OUT/$layout-prof"
    MEG_EXTRA="--profile --use-pytorch-profiler --profile-step-start 20 --profile-step-end 25
        --profile-ranks 0 --tensorboard-dir $OUT/$layout-prof/tb" \
        meg "$layout" "$OUT/$layout-prof.log"
    echo "$layout bare with torch.profiler: exit status $?" >> "$OUT/status.txt"
    for r in $(seq "$RUNS"); do
        rm -rf "$OUT/$layout-run$r"
        meg "$layout" "$OUT/$layout-tp$r.log" "$TP" run --python --gpu-capture all -o "$OUT/$layout-run$r" \
            --model "$model" --tokens-per-step "$tokens" --
        echo "$layout trainprof run $r: exit status $?" >> "$OUT/status.txt"
        "$TP" report "$OUT/$layout-run$r" --warmup 10 --model "$model" \
            --tokens-per-step "$tokens" --format json > "$OUT/$layout-run$r.json" 2>/dev/null
        "$TP" report "$OUT/$layout-run$r" --warmup 10 --model "$model" \
            --tokens-per-step "$tokens" > "$OUT/$layout-run$r.txt" 2>&1
    done
    python3 "$HERE/megatron_compare.py" --layout "$layout" --world "$world" \
        --bare "$OUT/$layout-bare.log" --runs "$RUNS" --dir "$OUT" \
        --trace "$OUT/$layout-prof/torch_profile/rank-0.json.gz" --active 5 |
        tee -a "$OUT/compare.txt"
done
