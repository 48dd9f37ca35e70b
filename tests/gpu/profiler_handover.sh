#!/bin/bash
# A program that runs torch.profiler itself (tests/gpu/profiler_handover.py: started and stopped
# by hand, and profile(schedule=...) around the loop), under `trainprof run` with and without
# --python, GPU capture in every step: torch.profiler's trace must hold its 6 steps' kernels,
# trainprof's report its captured steps only and the pause. Run on the GPU machine from the
# repository root (common.sh says how).
. tests/gpu/common.sh
python_module
for mode in startstop schedule; do
  for py in plain python; do
    say "torch.profiler $mode, trainprof run ${py/plain/without --python}"
    flag=""; [ $py = python ] && flag="--python"
    $TP run $flag --quiet -o $W/ho-$mode-$py -- python3 tests/gpu/profiler_handover.py \
        --mode $mode --steps 60 --trace $W/ho-$mode-$py.json > $W/ho-$mode-$py.log 2>&1
    lap $?
    grep -i "torch.profiler:\|trainprof\[\|error\|done" $W/ho-$mode-$py.log | head -8 >> $S
    $TP report $W/ho-$mode-$py > $OUT/ho-$mode-$py.txt 2>&1
    grep -i -E "recorded in|paused|kernels per step|no start" $OUT/ho-$mode-$py.txt | head -6 >> $S
  done
done
