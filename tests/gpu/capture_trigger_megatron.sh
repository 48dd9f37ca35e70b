#!/bin/bash
# capture_trigger_megatron.sh — a GPU capture window opened from outside a running
# Megatron-LM job (`trainprof capture RUN_DIR --steps 5 --wait`), no restart: the report must
# show GPU activity in exactly the steps the command announced. Run on the GPU machine from
# the repository root after common.sh and python_module (TP exported: the command); MEG is the Megatron-LM folder
# (megatron/, pretrain_gpt.py, gpt_builders.py, model_provider.py). NPROC ranks (default 1)
# under torchrun, one GPU each. SHARED_GPU=N instead: N ranks on the machine's one GPU, started
# as N processes with RANK set and LOCAL_RANK=0 (Megatron-LM puts rank k on cuda:LOCAL_RANK)
# and Megatron's --fake-process-group (collectives that do nothing, torch.testing's fake
# backend; NCCL takes one GPU per rank): what is checked is that every rank captures the
# same steps.
set -u
NPROC=${NPROC:-1}
TP=${TP:-trainprof}
MEG=${1:?usage: capture_trigger_megatron.sh MEGATRON_DIR OUTDIR}
D=${2:?}/trigger
rm -rf "$D"
ARGS_FILE=$(dirname "$0")/../../bench/megatron_args.txt
args="$(grep -v '^#' "$ARGS_FILE" | tr '\n' ' ') --train-iters 120"
port=$((29500 + RANDOM % 1000))
if [ -n "${SHARED_GPU:-}" ]; then
    launch=(bash -c "for r in \$(seq 0 $((SHARED_GPU - 1))); do RANK=\$r LOCAL_RANK=0 \
        WORLD_SIZE=$SHARED_GPU LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        python3 pretrain_gpt.py $args --fake-process-group & done; wait")
else
    launch=(torchrun --nproc_per_node=$NPROC --master_port=$port pretrain_gpt.py $args)
fi
# Megatron-LM builds its dataset helpers (megatron/core/datasets/Makefile) on rank 0 and has the
# other ranks wait at a barrier, which --fake-process-group makes a no-op: rank 1 would import
# them before they exist and stop before its first step. Built here first, once, on one process.
if [ -n "${SHARED_GPU:-}" ]; then
    (cd "$MEG" && python3 -c "from megatron.core.datasets.utils import compile_helpers as c; c()") \
        > "${2}/helpers.log" 2>&1 || echo "Megatron-LM dataset helpers: build failed"
fi
# the default capture plan (auto: the start through step 4), whatever common.sh exported
(cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} timeout 400 env -u TRAINPROF_GPU_CAPTURE \
    "$TP" run --python --quiet -o "$D" -- "${launch[@]}") > "$D.log" 2>&1 &
job=$!
for i in $(seq 600); do
    s=$(cat "$D"/*.step 2>/dev/null | sed -n 's/.* step=\([0-9]*\) .*/\1/p' | sort -n | tail -1)
    [ -n "$s" ] && [ "$s" -ge 30 ] && break
    sleep 0.2
done
echo "progress before the request: step ${s:-none}"
"$TP" capture "$D" --steps 5 --wait --timeout 120 | tee "$D.capture.txt"
echo "capture: exit status ${PIPESTATUS[0]}"
wait $job
echo "job: exit status $?"
"$TP" report "$D" --format json > "$D.json" 2>/dev/null
"$TP" report "$D" > "$D.txt" 2>&1
python3 - "$D.json" "$D.capture.txt" <<'PY'
import json, re, sys
rep = json.load(open(sys.argv[1]))
m = re.search(r"in steps (\d+)-(\d+)", open(sys.argv[2]).read())
want = [int(m.group(1)), int(m.group(2))] if m else None
for r in rep["ranks"]:
    gc = r.get("gpu_capture") or {}
    got = gc.get("steps")
    dev = ((r.get("gpu") or {}).get("devices") or [{}])[0]
    print("rank %s: captured steps %s (asked %s), kernels per step %s, kernel ms per step %s; %s"
          % (r.get("rank"), got, want, dev.get("kernels"), dev.get("kernel_ms"),
             "MATCH" if got and want in got else "MISMATCH"))
PY
