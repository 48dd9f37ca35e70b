#!/bin/bash
# capture_pages.sh — capture windows and pauses past one page of their lists (docs/format.md:
# gpu_capture.windows and gpu_capture.pauses go on in pages) on real jobs: Megatron-LM under the
# plan 0/2 (a window every other step) for 400 iterations, 200 windows where one page holds
# 94 to 180 (its file written plain, TRAINPROF_COMPRESS=0, so that the pages' keys can be
# counted in it); and a program whose torch.profiler profiles one step in three for 150 steps
# (tests/gpu/profiler_handover.py --mode cycles), 50 hand-overs of CUPTI, each a pause, where
# one page holds about 24. The report must count every window's step as captured and list 24
# pauses with the rest counted. Run on the GPU machine from the repository root (common.sh
# says how); MEG: the Megatron-LM folder.
. tests/gpu/common.sh
python_module
MEG=${MEG:-$PWD/.megatron}
say "Megatron-LM, TRAINPROF_GPU_CAPTURE=0/2, 400 iterations"
args="$(grep -v '^#' bench/megatron_args.txt | tr '\n' ' ') --train-iters 400"
(cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} TRAINPROF_GPU_CAPTURE=0/2 TRAINPROF_COMPRESS=0 timeout 500 \
    "$TP" run --python --quiet -o $W/pages -- torchrun --nproc_per_node=1 \
    --master_port=$((29500 + RANDOM % 1000)) pretrain_gpt.py $args) > $W/pages.log 2>&1
lap $?
grep -E "iteration +400/" $W/pages.log | tail -1 | cut -c1-160 >> $S
"$TP" report $W/pages --format json > $OUT/pages.json 2>/dev/null
"$TP" report $W/pages > $OUT/pages.txt 2>&1
python3 - $W/pages $OUT/pages.json >> $S <<'PY'
import glob, json, sys
rep = json.load(open(sys.argv[2]))
for r in rep["ranks"]:
    gc = r.get("gpu_capture") or {}
    print("rank %s: steps %s, captured %s, windows_not_listed %s, ranges %s" % (
        r["rank"], (r.get("steps") or {}).get("count"), gc.get("captured_steps"),
        gc.get("windows_not_listed"), str(gc.get("steps"))[:80]))
PY
echo "records of each page's key (a page is written at each window of its own):" >> $S
grep -a -o "gpu_capture\.windows[._a-z0-9]*" $W/pages/*.tprof 2>/dev/null | sort | uniq -c | head -8 >> $S
say "torch.profiler one step in three, 150 steps, trainprof run --python"
$TP run --python --quiet -o $W/cycles -- python3 tests/gpu/profiler_handover.py --mode cycles \
    --steps 150 --trace $W/cycles.json > $W/cycles.log 2>&1
lap $?
grep -i "torch.profiler:\|done\|error" $W/cycles.log | head -4 >> $S
"$TP" report $W/cycles --format json > $OUT/cycles.json 2>/dev/null
"$TP" report $W/cycles > $OUT/cycles.txt 2>&1
python3 - $OUT/cycles.json >> $S <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for r in rep["ranks"]:
    g = r.get("gpu") or {}
    cp = g.get("capture_paused") or []
    print("rank %s: listed pauses %d (first %s), more %s; captured %s of %s steps" % (
        r["rank"], len(cp), cp[0] if cp else None, g.get("capture_paused_more"),
        (r.get("gpu_capture") or {}).get("captured_steps"), (r.get("steps") or {}).get("count")))
PY
grep -E "paused .* more times|recorded in" $OUT/cycles.txt | head -3 >> $S
