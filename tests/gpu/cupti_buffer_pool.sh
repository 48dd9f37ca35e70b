#!/bin/bash
# CUPTI buffer reuse (capture/bufpool.c) on the GPU: the same 40-step GPT-2 run under full
# capture with reused buffers (default) and with a fresh buffer per request
# (TRAINPROF_CUPTI_POOL=0); both reports come back ($OUT/report_pool.txt, report_fresh.txt)
# to compare their figures, and their lines on CUPTI, launches, drops, each GPU's name and
# SMs, CUPTI's own overhead and untimed records, with the cuda.<ordinal>.* keys in the rank
# files, go to the summary (skipped with SANITY=0); with TORCHPROF=1, torch.profiler inside a
# captured process (the pause hands CUPTI over with its buffers, and back). Then, unless
# LIMIT=0, tests/gpu/gpu_overhead_two_gpus.sh with MODES.
. "$(dirname "$0")/common.sh"
[ "${SANITY:-1}" = 0 ] || for v in pool fresh; do
    [ $v = fresh ] && export TRAINPROF_CUPTI_POOL=0
    say "trainprof run ($v) -- train_gpt.py --steps 40"
    timeout 120 $TP run -o $W/$v -- python3 examples/pytorch/train_gpt.py --steps 40 > $W/$v.out 2>&1
    lap $?
    unset TRAINPROF_CUPTI_POOL
    grep -E "mean step|final loss" $W/$v.out | tail -2 >> $S
    cp $W/$v/report.txt $OUT/report_$v.txt 2>/dev/null
    grep -i "cupti\|launches\|dropped\|GPU [0-9] (\|no start or end" $W/$v/report.txt | head -12 >> $S
    grep -a -h -o 'cuda\.[0-9]*\.[a-z_]*' $W/$v/*.tprof 2>/dev/null | sort | uniq -c | head -8 >> $S
done
if [ "${TORCHPROF:-0}" = 1 ]; then
    python_module
    say "trainprof run --python -- train_gpt --steps 30 --torch-profiler 10:15"
    timeout 150 $TP run --python -o $W/tpp -- python3 examples/pytorch/train_gpt.py \
        --steps 30 --torch-profiler 10:15 > $W/tpp.out 2>&1; lap $?
    grep -E 'torch.profiler|summary' $W/tpp.out | head -6 >> $S
    grep -i 'paused\|launches\|cupti\|dropped' $W/tpp/report.txt | head -12 >> $S
fi
export MODES=${MODES:-bare,floor,floor@TRAINPROF_CUPTI_POOL=0,trainprof,trainprof@TRAINPROF_CUPTI_POOL=0,torchprof}
bash "$(dirname "$0")/gpu_overhead_two_gpus.sh"
