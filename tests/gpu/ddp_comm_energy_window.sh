#!/bin/bash
# Communication, energy and the kernel window on a 2-GPU machine: DDP train_gpt's collectives
# (A), the all-reduce loop against its own CUDA events (B), energy with the node's NVML sampler
# (D), --kernel-steps (E), kernel attribution against torch.profiler (F) and
# bench/nccl_overhead.py (C). Run from the repository root with the binaries built here
# carried in $C (trainprof, libtrainprof.so, comm_dump, lib/libcjson).
# Everything lands in $OUT: summary.txt (all figures) and a few compressed run folders.
. "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; } >> $S 2>&1

say "A: DDP train_gpt on 2 GPUs, 40 steps"
timeout 240 $TP run -o $W/ddp -- torchrun --nproc_per_node=2 examples/pytorch/train_gpt.py --steps 40 > $W/ddp.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep -E 'ddp:|summary:|params|trainprof' $W/ddp.out | head -8 >> $S
$C/comm_dump $W/ddp > $W/ddp/comm.csv 2>>$S
python3 - $W/ddp/comm.csv >> $S 2>&1 <<'PY'
import sys, collections
ops = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.rstrip("\n").split(",")
    if f[0] == "op": ops[f[1]].append(f)
    if f[0] == "meta": print("  meta", f[1], f[2], ",".join(f[3:]))
for r, L in sorted(ops.items()):
    by = collections.Counter((f[2], f[5]) for f in L)
    ar = [f for f in L if f[2] == "AllReduce"]
    g = sum(1 for f in ar if int(f[11]) & 2)
    print("  rank %s: %d ops; by (op, comm): %s" % (r, len(L), dict(by)))
    print("  rank %s: AllReduce %d, %d with GPU time, bytes total %d" % (r, len(ar), g, sum(int(f[3]) for f in ar)))
PY
sed -n '/^rank 0/,$p' $W/ddp/report.txt | head -80 >> $S

say "B: all-reduce loop 1-256 MiB under trainprof run"
timeout 200 $TP run --quiet -o $W/ar -- torchrun --nproc_per_node=2 tests/gpu/allreduce_loop.py --json $W/ar_times.json > $W/ar.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep allreduce $W/ar.out >> $S
$C/comm_dump $W/ar > $W/ar/comm.csv 2>>$S
cp $W/ar_times.json $W/ar/
python3 tests/gpu/allreduce_compare.py $W/ar/comm.csv $W/ar_times.json >> $S 2>&1; echo "compare rc=$?" >> $S

say "D: 1 GPU, full capture + node NVML sampler, 150 steps, energy check"
CUDA_VISIBLE_DEVICES=0 timeout 200 $TP run -o $W/gpt1 -- python3 examples/pytorch/train_gpt.py --steps 150 --energy-check > $W/gpt1.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep -E 'nvml counter|summary:' $W/gpt1.out >> $S
sed -n '/^capabilities/,$p' $W/gpt1/report.txt | head -70 >> $S

say "E: kernel window --kernel-steps 10-12, 30 steps"
CUDA_VISIBLE_DEVICES=0 timeout 150 $TP run --kernel-steps 10-12 -o $W/kwin -- python3 examples/pytorch/train_gpt.py --steps 30 > $W/kwin.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep -E 'summary:' $W/kwin.out >> $S
grep -E 'GPU|kernel|cupti' $W/kwin/report.txt | head -20 >> $S

say "F: same steps (10-59): trainprof default attribution vs torch.profiler, separate processes"
CUDA_VISIBLE_DEVICES=0 timeout 150 $TP run --warmup 10 -o $W/xc -- python3 examples/pytorch/train_gpt.py --steps 60 > $W/xc.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
python3 -c "
import json; r=json.load(open('$W/xc/report.json'))['ranks'][0]; g=r['gpu']
print('trainprof steps measured', r['steps']['measured'], 'kernel_ms_total per step', g.get('kernel_ms_total'), 'launch lag ms', g.get('launch_lag_ms'))
for d in g.get('devices', []): print('  device', d.get('device'), 'kernel_ms', d.get('kernel_ms'), 'kernels', d.get('kernels'))
" >> $S 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 examples/pytorch/train_gpt.py --steps 60 --torch-profiler 10:60 > $W/xc_torch.out 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
grep -iE 'profiler|kernel' $W/xc_torch.out | head -5 >> $S

cd $W && tar czf $OUT/ddp.tgz ddp && tar czf $OUT/ar.tgz ar && tar czf $OUT/gpt1.tgz gpt1/report.json gpt1/report.txt kwin/report.json kwin/report.txt xc/report.json && cd - >/dev/null
ls -la $OUT >> $S

say "C: bench/nccl_overhead, 3 rounds"
timeout $(( 570 - ($(date +%s) - t0) )) python3 bench/nccl_overhead.py --lib $C/libtrainprof.so --rounds 3 > $W/nccl.txt 2>&1
echo "rc=$? t=$(( $(date +%s) - t0 ))s" >> $S
tail -15 $W/nccl.txt >> $S
