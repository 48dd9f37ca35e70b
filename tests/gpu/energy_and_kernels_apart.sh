#!/bin/sh
# Energy and GPU activity in separate runs, each bounded by a timeout: energy with GPU
# capture off (TRAINPROF_CUPTI=0), then GPU capture with kernel time checked against
# torch.profiler in a separate process. NVML sampled inside a process whose GPU activity
# CUPTI records can hang its launches (docs/design-notes.md, "NVML is sampled once per node"), so
# each capability is checked alone here.  sh tests/gpu/energy_and_kernels_apart.sh CARRY OUT
set -u
C=$1 OUT=$2
export LD_LIBRARY_PATH=$C:$C/lib PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
TP=$C/trainprof
S="python3 examples/pytorch/train_gpt.py"
TRAINPROF_CUPTI=0 timeout 120 $TP run -o /tmp/e1 -- $S --steps 150 --energy-check > $OUT/energy.txt 2>&1
echo "energy run status $?" >> $OUT/energy.txt
timeout 120 $TP run -o /tmp/g2 -- $S --steps 60 > $OUT/gpu.txt 2>&1
echo "gpu run status $?" >> $OUT/gpu.txt
$TP report /tmp/g2 --warmup 10 --format json -o $OUT/g2.json
timeout 120 $S --steps 60 --torch-profiler 10:60 2>&1 | grep -E "torch.profiler|summary" > $OUT/xcheck.txt
$TP export /tmp/g2 --format chrome -o /tmp/g2/trace.json && python3 -c "import json; t=json.load(open('/tmp/g2/trace.json')); print(len(t['traceEvents']), 'events in the trace')" >> $OUT/xcheck.txt
$TP report /tmp/e1 --format json -o $OUT/e1.json
