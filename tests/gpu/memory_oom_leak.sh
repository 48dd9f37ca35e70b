#!/bin/bash
# memory_oom_leak.sh — the memory timeline and the out-of-memory post-mortem on a GPU, zero
# code change: tests/gpu/memory_jobs.py grow (the batch grows until OOM) and leak, under
# `trainprof run --python`. Prints the report's OOM headline, its per-step peaks against the
# job's own torch.cuda.max_memory_allocated(), the leak finding, and whether PyTorch's
# visualiser reads the snapshot. Run on the GPU machine from the repository root after
# common.sh and python_module (TP exported: the command); OUTDIR for the runs. With
# MEGATRON_DIR, Megatron-LM's pretrain_gpt.py too, with a micro-batch that does not fit
# (512 sequences of 1024 tokens: its logits alone need about 100 GB).
set -u
TP=${TP:-trainprof}
O=${1:?usage: memory_oom_leak.sh OUTDIR [MEGATRON_DIR]}
MEG=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$O"
for m in grow leak; do
    rm -rf "$O/$m"
    "$TP" run --python --quiet -o "$O/$m" -- python3 "$HERE/memory_jobs.py" $m > "$O/$m.log" 2>&1
    echo "$m: exit status $? (grow must fail with the job's own OutOfMemoryError)"
    grep -c OutOfMemoryError "$O/$m.log" | sed "s/^/$m: OutOfMemoryError lines in the job's output: /"
    "$TP" report "$O/$m" > "$O/$m.txt" 2>&1
    "$TP" report "$O/$m" --format json > "$O/$m.json" 2>/dev/null
    head -12 "$O/$m.txt"
    ls "$O/$m"
done
if [ -n "$MEG" ]; then
    rm -rf "$O/megatron"
    # the benches' configuration (bench/megatron_args.txt) with a micro-batch that does not
    # fit: argparse keeps the last value of a repeated option
    args="$(grep -v '^#' "$HERE/../../bench/megatron_args.txt") --micro-batch-size 512
        --global-batch-size 512 --train-iters 5"
    (cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} timeout 300 "$TP" run --python --quiet \
        -o "$O/megatron" -- torchrun --nproc_per_node=1 \
        --master_port=$((29500 + RANDOM % 1000)) pretrain_gpt.py $args) > "$O/megatron.log" 2>&1
    echo "megatron: exit status $?; $(grep -c OutOfMemoryError "$O/megatron.log") OutOfMemoryError lines"
    "$TP" report "$O/megatron" > "$O/megatron.txt" 2>&1
    head -8 "$O/megatron.txt"
    ls "$O/megatron"
fi
snap=$(ls "$O"/grow/*.pickle 2>/dev/null | head -1)
if [ -n "$snap" ]; then
    python3 -m torch.cuda._memory_viz trace_plot "$snap" -o "$O/snapshot.html" > "$O/viz.log" 2>&1
    echo "memory_viz trace_plot on $(basename "$snap"): exit status $? ($(wc -c < "$O/snapshot.html" 2>/dev/null || echo 0) bytes)"
    python3 -m torch.cuda._memory_viz stats "$snap" 2>&1 | head -5
else
    echo "no snapshot pickle in $O/grow"
fi
python3 - "$O" <<'PY'
import json, re, sys
o = sys.argv[1]
for m in ("grow", "leak"):
    job = {}
    for line in open("%s/%s.log" % (o, m), errors="replace"):
        x = re.match(r"step (\d+) rows \d+ max_allocated (\d+)", line)
        if x:
            job[int(x.group(1))] = int(x.group(2))
    try:
        rep = json.load(open("%s/%s.json" % (o, m)))
    except Exception as e:
        print(m, "no report JSON:", e)
        continue
    ids = [f.get("id") for f in rep.get("findings", [])]
    print("%s: findings %s" % (m, ids))
    for r in rep.get("ranks", []):
        mem = r.get("memory") or {}
        for d in [mem]:
            steps = d.get("steps") or []
            worst = 0.0
            n = 0
            for s in steps:
                k, pk = s.get("step"), s.get("peak_allocated_bytes")
                if k in job and pk and s.get("peak_allocated_bound", "exact") == "exact":
                    worst = max(worst, abs(pk / job[k] - 1))
                    n += 1
            print("%s: %d steps compared with the job's max_memory_allocated; worst difference "
                  "%.4f %% (target <= 1 %%): %s" % (m, n, 100 * worst,
                                                    "met" if n and worst <= 0.01 else "NOT met"))
            if mem.get("oom"):
                print("%s: oom %s" % (m, json.dumps(mem["oom"])[:600]))
PY
