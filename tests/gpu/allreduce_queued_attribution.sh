#!/bin/bash
# All-reduce timing and kernel attribution on a 2-GPU machine: the all-reduce loop with the ops
# queued ahead, the same-step kernel cross-check with the neighbour-based attribution (and
# with driver launch records, exact), and half of bench/gpu_overhead's rounds (the other half
# in a second call; --merge pools them). Binaries built here, carried in $C.
. "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0
ROUNDS=${ROUNDS:-5}
TAG=${TAG:-a}

if [ "${SKIP_CHECKS:-0}" != 1 ]; then
say "B: all-reduce loop 1-256 MiB, ops queued behind a spin kernel"
timeout 200 $TP run --quiet -o $W/ar -- torchrun --nproc_per_node=2 tests/gpu/allreduce_loop.py --json $W/ar_times.json > $W/ar.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep allreduce $W/ar.out >> $S
$C/comm_dump $W/ar > $W/ar/comm.csv 2>>$S
python3 tests/gpu/allreduce_compare.py $W/ar/comm.csv $W/ar_times.json >> $S 2>&1; echo "compare rc=$?" >> $S
$TP report $W/ar 2>/dev/null | grep -A12 '^  communication' | head -14 >> $S

say "F: steps 10-59: trainprof default, trainprof with driver records, torch.profiler"
export CUDA_VISIBLE_DEVICES=0
timeout 150 $TP run --quiet --warmup 10 -o $W/xc -- python3 examples/pytorch/train_gpt.py --steps 60 > $W/xc.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
TRAINPROF_CUPTI_KINDS=kernel,memcpy,memset,memory,sync,runtime,driver timeout 150 $TP run --quiet --warmup 10 -o $W/xcd -- python3 examples/pytorch/train_gpt.py --steps 60 > $W/xcd.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
for d in xc xcd; do python3 -c "
import json; r=json.load(open('$W/$d/report.json'))['ranks'][0]; g=r['gpu']
print('$d: measured', r['steps']['measured'], 'steps; kernel ms per step', g.get('kernel_ms_total'), '; lag ms', g.get('launch_lag_ms'), [(d.get('kernels'), d.get('kernel_ms')) for d in g.get('devices', [])])
" >> $S 2>&1; done
timeout 150 python3 examples/pytorch/train_gpt.py --steps 60 --torch-profiler 10:60 > $W/xc_torch.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep -E '^torch.profiler|kernel time' $W/xc_torch.out | head -3 >> $S
unset CUDA_VISIBLE_DEVICES
fi

say "G: bench/gpu_overhead, $ROUNDS rounds (train_gpt.py --steps 30, GPU 0)"
CUDA_VISIBLE_DEVICES=0 timeout $(( 580 - ($(date +%s) - t0) )) python3 bench/gpu_overhead.py --trainprof $TP --rounds $ROUNDS --json $OUT/gpu_overhead_$TAG.json -- examples/pytorch/train_gpt.py --steps 30 > $W/bench.txt 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
cat $W/bench.txt >> $S
