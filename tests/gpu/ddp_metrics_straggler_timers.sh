#!/bin/bash
# Zero-code DDP with live metrics (A), a straggler (B), the Megatron Timers script on NCCL
# (C), torch.profiler inside a captured process (D), the NCCL loop (E), trainprof serve (F)
# and the Python range cost (G), on a 2-GPU machine, from the repository root, with the
# binaries built here carried in $C (trainprof, libtrainprof.so, comm_dump, nccl_loop,
# lib/libcjson, lib/libmicrohttpd). The Python module is compiled here for this machine's
# interpreter. Everything lands in $OUT: summary.txt and a few compressed run folders.
. "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0
{ nvidia-smi -L; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; } >> $S 2>&1

say "0: the Python module for this interpreter"
python_module
python3 -c "import sys; sys.path.insert(0, '$PYD'); import trainprof; print('trainprof module', trainprof.__file__)" >> $S 2>&1

scrape() { # scrape URL... every second into $W/scrape/<port>.txt (the last one kept)
    mkdir -p $W/scrape
    python3 - "$@" > /dev/null 2>&1 <<'PY' &
import sys, time, urllib.request
urls = sys.argv[1:]
seen = {}
for i in range(150):
    for u in urls:
        try:
            t = time.perf_counter()
            body = urllib.request.urlopen(u, timeout=2).read().decode()
            ms = 1e3 * (time.perf_counter() - t)
            port = u.split(":")[2].split("/")[0]
            open("/tmp/w/scrape/%s.txt" % port, "w").write(body)
            seen[port] = seen.get(port, 0) + 1
            open("/tmp/w/scrape/%s.ms" % port, "a").write("%.3f\n" % ms)
        except Exception:
            pass
    time.sleep(1)
PY
    echo $!
}

say "A: zero-code DDP: trainprof run --python --metrics-port 9500 -- torchrun 2 x train_gpt --steps 100 --nvtx off"
SP=$(scrape http://127.0.0.1:9500/metrics http://127.0.0.1:9501/metrics http://127.0.0.1:10500/metrics)
timeout 240 $TP run --python --metrics-port 9500 -o $W/ddp -- torchrun --nproc_per_node=2 \
    examples/pytorch/train_gpt.py --steps 100 --nvtx off > $W/ddp.out 2>&1; lap $?
kill $SP 2>/dev/null
grep -E 'summary:|final loss exact|trainprof' $W/ddp.out | head -12 >> $S
sed -n '1,400p' $W/ddp/report.txt > $OUT/ddp_report.txt
$TP report $W/ddp --format html -o $W/ddp/report.html >> $S 2>&1; lap $?
for p in 9500 9501 10500; do
    echo "--- scrapes of port $p: $(wc -l < $W/scrape/$p.ms 2>/dev/null) ok; p50/max ms: $(sort -n $W/scrape/$p.ms 2>/dev/null | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)], a[NR]}')" >> $S
    grep -E '^trainprof_(steps_total|step_last|tokens_per|comm_(operations|bytes|seconds)_total|gpu_(power_watts|utilization|memory_used_bytes|energy))|^trainprof_step_duration_seconds_(sum|count)' $W/scrape/$p.txt 2>/dev/null | head -24 >> $S
done
cp $W/scrape/9500.txt $OUT/scrape_rank0.txt 2>/dev/null

say "B: straggler: 2 x train_gpt --steps 60, rank 1 sleeps 15 ms in each step's data loading"
timeout 200 $TP run -o $W/slow -- torchrun --nproc_per_node=2 examples/pytorch/train_gpt.py \
    --steps 60 --slow-rank 1 --slow-ms 15 > $W/slow.out 2>&1; lap $?
grep -E 'summary:' $W/slow.out >> $S
sed -n '1,400p' $W/slow/report.txt > $OUT/slow_report.txt
grep -n -i -A6 'straggl' $W/slow/report.txt | head -40 >> $S

say "C: Megatron Timers API script, unchanged, 2 NCCL ranks (minmax, then all)"
for opt in minmax all; do
    TPROF_DIST_BACKEND=nccl PYTHONPATH=$PYD timeout 120 $TP run -o $W/meg_$opt -- torchrun \
        --nproc_per_node=2 tests/python/megatron_api_script.py $opt > $W/meg_$opt.out 2>&1; lap $?
    grep -v -E '^(W|I)[0-9]{4}|^\*+$|OMP_NUM|^$' $W/meg_$opt.out | grep -v '^trainprof' | head -30 >> $S
done

say "D: torch.profiler inside a captured process: trainprof run --python -- train_gpt --steps 30 --torch-profiler 10:15"
CUDA_VISIBLE_DEVICES=0 timeout 150 $TP run --python -o $W/tpp -- python3 examples/pytorch/train_gpt.py \
    --steps 30 --torch-profiler 10:15 > $W/tpp.out 2>&1; lap $?
grep -E 'torch.profiler|profiler|summary' $W/tpp.out | head -6 >> $S
grep -n -i -B1 -A3 'torch.profiler\|paused\|yield' $W/tpp/report.txt | head -30 >> $S

say "E: NCCL all-reduce loop (events on the NCCL stream), 2 ranks, 1-256 MiB"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
echo "NCCL_LIB=$NCCL_LIB" >> $S
rm -f $W/ncclid
NCCL_LIB=$NCCL_LIB timeout 120 $TP run -o $W/ar -- bash -c "
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 $C/nccl_loop $W/ncclid $W/ar_times.json &
  RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 $C/nccl_loop $W/ncclid $W/ar_times1.json; wait" > $W/ar.out 2>&1; lap $?
grep -E 'allreduce|error|nccl_loop' $W/ar.out | head -12 >> $S
$C/comm_dump $W/ar > $W/ar/comm.csv 2>>$S
python3 tests/gpu/allreduce_compare.py $W/ar/comm.csv $W/ar_times.json >> $S 2>&1; lap $?
grep -A12 'communication:' $W/ar/report.txt | head -16 >> $S

say "F: trainprof serve on 127.0.0.1:9700 for 6 s"
timeout 8 $TP serve --listen 127.0.0.1:9700 > $W/serve.out 2>&1 &
sleep 4
python3 -c "
import urllib.request, time
t = time.perf_counter(); b = urllib.request.urlopen('http://127.0.0.1:9700/metrics').read().decode()
print('scrape %.2f ms, %d lines, %d series' % (1e3 * (time.perf_counter() - t), b.count(chr(10)), sum(1 for l in b.splitlines() if l and l[0] != '#')))
open('$OUT/serve_scrape.txt', 'w').write(b)
print(''.join(l + chr(10) for l in b.splitlines() if l.startswith(('trainprof_gpu_power_watts', 'trainprof_gpu_memory_total', 'trainprof_gpu_sm_clock', 'trainprof_gpu_temperature'))))
" >> $S 2>&1
wait; head -5 $W/serve.out >> $S

say "G: Python range and timer cost on this machine"
PYTHONPATH=$PYD timeout 60 python3 bench/python_ranges.py >> $S 2>&1; lap $?

say "H: the runs"
(cd $W && tar czf $OUT/ddp.tgz ddp ddp.out; tar czf $OUT/slow.tgz slow slow.out;
 tar czf $OUT/misc.tgz ar tpp meg_minmax meg_all ar.out tpp.out ar_times.json meg_*.out scrape 2>/dev/null)
ls -la $OUT >> $S
