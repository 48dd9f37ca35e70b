#!/bin/bash
# The ends of a captured GPU process and the overhead benchmark: bench/gpu_overhead's second
# half (pooled with the first by --merge), a launch-bound variant of the same bench (GPT-2
# small at batch 1, seq 256), and the ends of a captured process: SIGTERM and a Python
# exception after GPU work.
. "$(dirname "$0")/common.sh"
export CUDA_VISIBLE_DEVICES=0

say "H: SIGTERM to trainprof run during training (train_gpt --steps 100000, TERM after 20 s)"
timeout -s TERM 20 $TP run -o $W/term -- python3 examples/pytorch/train_gpt.py --steps 100000 > $W/term.out 2>&1
echo "exit status $? after $(( $(date +%s) - t0 ))s" >> $S
python3 -c "
import json; r=json.load(open('$W/term/report.json')); k=r['ranks'][0]
print('steps', k['steps']['count'], 'complete', [p['complete'] for p in r['processes']], 'kernels/step', [d['kernels'] for d in k['gpu']['devices']], 'nvml', 'nvml' in k)
" >> $S 2>&1
say "I: a Python exception after GPU work"
cat > $W/crash.py <<'PY'
import torch
x = torch.randn(4096, 4096, device="cuda")
for _ in range(50):
    x = torch.tanh(x @ x)
torch.cuda.synchronize()
raise RuntimeError("deliberate failure after GPU work")
PY
timeout 120 $TP run -o $W/crash -- python3 $W/crash.py > $W/crash.out 2>&1
echo "exit status $? after $(( $(date +%s) - t0 ))s" >> $S
python3 -c "
import json; r=json.load(open('$W/crash/report.json')); k=r['ranks'][0]
print('complete', [p['complete'] for p in r['processes']], 'kernels', [d['kernels'] for d in k['gpu']['devices']], 'top', k['gpu']['top_kernels'][0]['name'][:60])
" >> $S 2>&1

say "G2: bench/gpu_overhead, 5 more rounds (train_gpt.py --steps 30)"
timeout 330 python3 bench/gpu_overhead.py --trainprof $TP --rounds 5 --json $OUT/gpu_overhead_b.json -- examples/pytorch/train_gpt.py --steps 30 > $W/bench.txt 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
tail -12 $W/bench.txt >> $S
say "G3: launch-bound variant: batch 1, seq 256, 3 rounds"
timeout $(( 585 - ($(date +%s) - t0) )) python3 bench/gpu_overhead.py --trainprof $TP --rounds 3 --json $OUT/gpu_overhead_small.json -- examples/pytorch/train_gpt.py --steps 40 --batch-size 1 --seq-len 256 > $W/bench2.txt 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
tail -12 $W/bench2.txt >> $S
