#!/bin/sh
# GPU capture on one GPU, one call: energy against the script's own NVML counter reads, kernel
# time against torch.profiler, GPU-accurate Timers, and the overhead benchmark.
# CARRY=dir with trainprof built:
#   sh tests/gpu/gpt_energy_kernels_timers.sh CARRY OUT ROUNDS
# 1. train_gpt.py (GPT-2 small, 150 steps) under trainprof run, with the script reading the
#    NVML energy counter itself at step boundaries: report text and JSON.
# 2. Kernel time over steps 10-59: trainprof (report --warmup 10) vs torch.profiler in a
#    separate process of the same script.
# 3. GPU-accurate Timers on an asynchronous 20 ms kernel (nvcc).
# 4. bench/gpu_overhead.py, ROUNDS interleaved rounds.
set -u
C=$1 OUT=$2 ROUNDS=${3:-10}
export LD_LIBRARY_PATH=$C:$C/lib PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
TP=$C/trainprof
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
$TP run -o /tmp/g1 -- python3 examples/pytorch/train_gpt.py --steps 150 --energy-check > $OUT/g1.txt 2>&1
$TP report /tmp/g1 --format json -o $OUT/g1.json
$TP run --quiet -o /tmp/g2 -- python3 examples/pytorch/train_gpt.py --steps 60 > /dev/null 2>&1
$TP report /tmp/g2 --warmup 10 --format json | python3 -c "import json,sys; r=json.load(sys.stdin)['ranks'][0]; print('trainprof: kernel time %.4f ms per step over %d steps' % (r['gpu']['kernel_ms_total'], r['steps']['measured']))" > $OUT/xcheck.txt
python3 examples/pytorch/train_gpt.py --steps 60 --torch-profiler 10:60 2>&1 | grep torch.profiler >> $OUT/xcheck.txt
nvcc -O2 -o /tmp/gpu_timer tests/gpu/gpu_timer.cu -Iinclude -L$C -ltrainprof > $OUT/timer.txt 2>&1 && /tmp/gpu_timer >> $OUT/timer.txt 2>&1
$TP export /tmp/g1 --format chrome -o /tmp/g1/trace.json && python3 -c "import json; t=json.load(open('/tmp/g1/trace.json')); print(len(t['traceEvents']), 'events in the trace')" >> $OUT/xcheck.txt
[ "$ROUNDS" -gt 0 ] && python3 bench/gpu_overhead.py --trainprof $TP --rounds $ROUNDS -- examples/pytorch/train_gpt.py --steps 40 > $OUT/bench.txt 2>&1
tar czf $OUT/g1.tgz -C /tmp g1/report.txt g1/report.json $(cd /tmp && ls g1/*.tprof)
