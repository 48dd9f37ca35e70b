#!/bin/bash
# bench/gpu_overhead on a 2-GPU machine: two interleaved benchmarks at once, one per GPU
# (each its own A B C ... rounds; pooled afterwards with --merge), so one device call gives
# twice the rounds. Modes: bare, the CUPTI floor with full capture's kinds, the kernel-only
# floor, full capture, capture without kernels, the same with the zero-code torch hooks, and
# torch.profiler. Carried: $C (trainprof, libtrainprof.so, lib/libcjson).
. "$(dirname "$0")/common.sh"
LIMIT=${LIMIT:-540}
python_module
MODES=${MODES:-bare,floor,kinds=kernel,trainprof,nokernels,pyhooks,torchprof}
if [ -n "${METRICS_CHECK:-}" ]; then
    # rank 0's endpoint under torchrun (the agent, without a local rank, must leave it free)
    echo "=== metrics: trainprof run --python --metrics-port 9500 -- torchrun 2 x train_gpt --steps 60" >> $S
    python3 - > /dev/null 2>&1 <<'PY' &
import time, urllib.request
ok = {}
for i in range(200):
    for port in (9500, 9501, 10500):
        try:
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
        except Exception:
            continue
        ok[port] = ok.get(port, 0) + 1
        open("/tmp/w/m%d.txt" % port, "w").write(body)
        open("/tmp/w/m%d.n" % port, "w").write("%d scrapes answered\n" % ok[port])
    time.sleep(0.5)
PY
    SP=$!
    NCCL_NVLS_ENABLE=0 timeout 120 $TP run --python --metrics-port 9500 -o $W/met -- torchrun --nproc_per_node=2 \
        examples/pytorch/train_gpt.py --steps ${MSTEPS:-60} > $W/met.out 2>&1; echo "rc=$?" >> $S
    kill $SP 2>/dev/null; wait $SP 2>/dev/null
    grep -i "metrics\|address" $W/met.out | head -5 >> $S
    for p in 9500 9501 10500; do echo "--- port $p: $(cat $W/m$p.n 2>/dev/null)" >> $S; grep -E '^trainprof_(steps_total|step_duration_seconds_count|comm_operations_total|gpu_power_watts)' $W/m$p.txt 2>/dev/null | head -6 >> $S; done
    grep -E "^  (metrics|nvml|cupti|nccl)" $W/met/report.txt >> $S; cp $W/m9500.txt $W/m9501.txt $W/m10500.txt $OUT/ 2>/dev/null
    echo "=== trainprof serve: 20 scrapes" >> $S
    timeout 12 $TP serve --listen 127.0.0.1:9700 > $W/serve.out 2>&1 &
    sleep 3
    python3 -c "
import urllib.request, time
ms = []
for i in range(20):
    t = time.perf_counter(); b = urllib.request.urlopen('http://127.0.0.1:9700/metrics').read(); ms.append(1e3 * (time.perf_counter() - t)); time.sleep(0.2)
print('serve scrapes (urllib, new connection each): first three %s ms' % ' '.join('%.2f' % x for x in ms[:3]))
ms.sort(); print('serve scrapes: p50 %.2f ms, max %.2f ms, %d bytes' % (ms[10], ms[-1], len(b)))
" >> $S 2>&1
    wait
    echo "=== bench_metrics_scrape (16-core machine)" >> $S
    timeout 60 $C/bench_metrics_scrape >> $S 2>&1
fi
[ "$LIMIT" = 0 ] && exit 0
for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g timeout $LIMIT python3 bench/gpu_overhead.py --trainprof $TP --rounds 30 \
        --modes $MODES --json $OUT/gpu_overhead_gpu$g.json -- examples/pytorch/train_gpt.py --steps 40 \
        > $W/bench$g.txt 2>&1 &
done
wait
for g in 0 1; do echo "=== GPU $g"; grep -E '^round|failed' $W/bench$g.txt; done >> $S
python3 bench/gpu_overhead.py --trainprof $TP --modes $MODES \
    --merge $OUT/gpu_overhead_gpu0.json $OUT/gpu_overhead_gpu1.json >> $S 2>&1
for g in 0 1; do grep -B2 -A12 'failed' $W/bench$g.txt | head -40; done >> $S
