#!/bin/bash
# NCCL timing and CUDA runtime records on a 2-GPU machine, from the repository root, with the
# binaries built here carried in $C (trainprof, libtrainprof.so, comm_dump, nccl_loop,
# lib/libcjson):
#   A  the NCCL all-reduce loop (tests/gpu/nccl_loop.cu) under trainprof run, against its own
#      CUDA events, the event pair's own cost (an empty kernel), and back-to-back batches;
#      whether NCCL's NVTX ranges (init, finalize: payload-extension pops) close
#   B  the same loop without trainprof, and under trainprof without CUPTI: what capture
#      does to the loop's own event timings
#   C  which CUDA runtime calls a GPT-2 training step makes, recorded with the default
#      selection (work calls only) and with TRAINPROF_CUPTI_CALLS=all, one run per GPU
#   D  GPU records with a small ring (--ring-kb 256): CUPTI's thread waits for room, so
#      nothing is dropped; kernel counts per step against C's default-ring run
#   E  one process on both GPUs (device-wide synchronisations)
#   F  DDP on 2 GPUs: where each op's time comes from, and the channel placement check
# PARTS (default ABCDEF) picks the parts. Everything lands in $OUT (summary.txt and
# compressed run folders).
. "$(dirname "$0")/common.sh"
PARTS=${PARTS:-ABCDEF}
part() { case $PARTS in *$1*) return 0 ;; esac; return 1; }
export NCCL_NVLS_ENABLE=0
{ nvidia-smi -L; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; } >> $S 2>&1
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
export NCCL_LIB
echo "NCCL_LIB=$NCCL_LIB" >> $S

loop() { # loop ID_FILE TIMES.json: both ranks of nccl_loop
    rm -f $1
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 $C/nccl_loop $1 $2 &
    RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 $C/nccl_loop $1 $2.rank1
    wait
}
export -f loop
export C

if part A; then
say "A: NCCL loop under trainprof run (full capture), 1-256 MiB"
timeout 150 $TP run -o $W/ar -- bash -c "loop $W/id_a $W/ar_times.json" > $W/ar.out 2>&1; lap $?
grep -E 'allreduce|error|nccl_loop' $W/ar.out | head -8 >> $S
$C/comm_dump $W/ar > $W/ar/comm.csv 2>>$S
python3 tests/gpu/allreduce_compare.py $W/ar/comm.csv $W/ar_times.json >> $S 2>&1; lap $?
echo "--- NVTX ranges (NCCL's among them) and any never closed" >> $S
grep -n -i 'never closed' $W/ar/report.txt >> $S || echo "no range was left open" >> $S
grep -i -E 'nccl|ranges' $W/ar/report.txt | head -30 >> $S
$TP report $W/ar --format json -o $W/ar/report.json >> $S 2>&1
python3 - $W/ar/report.json >> $S 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d.get("ranks", []):
    r = p.get("ranges") or {}
    rows = [x for x in r.get("top_inclusive", []) if "nccl" in json.dumps(x).lower()]
    print("rank", p.get("rank"), "unclosed:", r.get("unclosed"), "| NCCL ranges:",
          "; ".join("%s %s" % (x.get("name"), x.get("count")) for x in rows[:8]))
PY
fi

if part B; then
say "B: the same loop without trainprof, and under trainprof with TRAINPROF_CUPTI=0"
timeout 60 bash -c "loop $W/id_b $W/bare_times.json" > $W/bare.out 2>&1; lap $?
TRAINPROF_CUPTI=0 timeout 120 $TP run -o $W/arnc -- bash -c "loop $W/id_c $W/arnc_times.json" > $W/arnc.out 2>&1; lap $?
$C/comm_dump $W/arnc > $W/arnc/comm.csv 2>>$S
echo "--- under trainprof, CUPTI off:" >> $S
python3 tests/gpu/allreduce_compare.py $W/arnc/comm.csv $W/arnc_times.json >> $S 2>&1; lap $?
python3 - $W/bare_times.json $W/arnc_times.json $W/ar_times.json >> $S 2>&1 <<'PY'
import json, statistics, sys
runs = [json.load(open(f)) for f in sys.argv[1:]]
names = ["bare", "trainprof, no CUPTI", "trainprof, full"]
print("event medians (ms) per size: " + " | ".join(names))
for i, sz in enumerate(runs[0]["sizes"]):
    print("%10d: " % sz["bytes"] + " | ".join(
        "pairs %.4f b2b %.4f" % (statistics.median(r["sizes"][i]["ms"]), r["sizes"][i].get("b2b_ms", 0)) for r in runs))
print("empty-kernel pair: " + " | ".join("%.4f" % statistics.median(r["empty_kernel_ms"]) for r in runs))
PY
fi

if part C; then
say "C: CUDA runtime calls of a GPT-2 step: default selection (GPU 0) and TRAINPROF_CUPTI_CALLS=all (GPU 1)"
CUDA_VISIBLE_DEVICES=0 timeout 150 $TP run -o $W/g_def -- python3 examples/pytorch/train_gpt.py --steps 40 > $W/g_def.out 2>&1 &
CUDA_VISIBLE_DEVICES=1 TRAINPROF_CUPTI_CALLS=all timeout 150 $TP run -o $W/g_all -- python3 examples/pytorch/train_gpt.py --steps 40 > $W/g_all.out 2>&1
wait; lap $?
for r in g_def g_all; do
    echo "--- $r: $(grep -E 'mean step' $W/$r.out | tail -1)" >> $S
    grep -E 'summary:|GPU|launch|host sync|dropped|synchron' $W/$r/report.txt | head -16 >> $S
    $TP export $W/$r --format chrome -o $W/$r/trace.json >> $S 2>&1
    python3 - $W/$r/trace.json >> $S 2>&1 <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
c = collections.Counter(e.get("name") for e in ev if e.get("cat") == "cuda_runtime")
k = sum(1 for e in ev if e.get("cat") == "kernel")
syncs = collections.Counter(str((e.get("args") or {}).get("device")) for e in ev if e.get("cat") == "cuda_sync")
print("runtime records %d in %d names, kernels %d; sync records by device %s" % (sum(c.values()), len(c), k, dict(syncs)))
print("  " + ", ".join("%s %d" % kv for kv in c.most_common(16)))
PY
done
fi

if part D; then
say "D: small ring (--ring-kb 256), full capture, GPU 0: nothing dropped"
CUDA_VISIBLE_DEVICES=0 timeout 150 $TP run --ring-kb 256 -o $W/g_ring -- python3 examples/pytorch/train_gpt.py --steps 40 > $W/g_ring.out 2>&1; lap $?
grep -E '^run:|dropped|warning' $W/g_ring/report.txt | head -6 >> $S
grep -E '^run:|dropped|warning' $W/g_def/report.txt | head -6 >> $S
for r in g_def g_ring; do
    python3 - $W/$r >> $S 2>&1 <<PY
import subprocess, json
j = json.loads(subprocess.run(["$TP", "report", "$W/$r", "--format", "json"], capture_output=True, text=True).stdout)
def find(o, key, path=""):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == key: print("  $r", path + "/" + k, v if not isinstance(v, (dict, list)) else json.dumps(v)[:200])
            find(v, key, path + "/" + k)
    elif isinstance(o, list):
        for i, v in enumerate(o[:4]): find(v, key, path + "[%d]" % i)
for key in ("events_dropped", "cupti_records_dropped", "kernels_per_step", "launches_per_step"):
    find(j, key)
PY
done
fi

if part E; then
say "E: one process on both GPUs: device-wide synchronisations get their device from the context"
timeout 90 $TP run -o $W/two -- python3 -c "
import torch
x = [torch.randn(2048, 2048, device='cuda:%d' % d) for d in (0, 1)]
for i in range(5):
    for d in (0, 1):
        y = x[d] @ x[d]
        torch.cuda.synchronize(d)
print('two-GPU process done')
" > $W/two.out 2>&1; lap $?
tail -2 $W/two.out >> $S
$TP export $W/two --format chrome -o $W/two/trace.json >> $S 2>&1
python3 - $W/two/trace.json >> $S 2>&1 <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
print("sync records by (device, stream):", dict(collections.Counter(
    ((e.get("args") or {}).get("device"), (e.get("args") or {}).get("stream")) for e in ev if e.get("cat") == "cuda_sync")))
print("kernels by device:", dict(collections.Counter((e.get("args") or {}).get("device") for e in ev if e.get("cat") == "kernel")))
PY
fi

if part F; then
say "F: DDP, 2 x train_gpt --steps 60: op timing sources and the channel placement check"
timeout 200 $TP run -o $W/ddp -- torchrun --nproc_per_node=2 examples/pytorch/train_gpt.py --steps 60 > $W/ddp.out 2>&1; lap $?
grep -E 'summary:' $W/ddp.out >> $S
grep -E 'communication:|checked against|AllReduce|exposed communication|straggl|lag' $W/ddp/report.txt | head -16 >> $S
$C/comm_dump $W/ddp > $W/ddp/comm.csv 2>>$S
python3 - $W/ddp/comm.csv >> $S 2>&1 <<'PY'
import collections, statistics, sys
ops = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split(",")
    if f[0] == "op" and len(f) >= 16:
        ops[f[1]].append(f)
for rank, v in sorted(ops.items()):
    src = collections.Counter(f[14] for f in v)
    shift = [int(f[15]) / 1e3 for f in v if f[15] != "0"]
    dur = [(int(f[13]) - int(f[12])) / 1e3 for f in v if f[14] == "kernel"]
    chan = [(int(f[10]) - int(f[9])) / 1e3 for f in v if int(f[11]) & 2]
    print("rank %s: %d ops, sources %s; shift us median %s (%s..%s); kernel-timed median %.1f us, channel median %.1f us" % (
        rank, len(v), dict(src), "%.1f" % statistics.median(shift) if shift else "-",
        "%.1f" % min(shift) if shift else "-", "%.1f" % max(shift) if shift else "-",
        statistics.median(dur) if dur else 0, statistics.median(chan) if chan else 0))
PY
(cd $W && tar czf $OUT/ddp.tgz ddp/report.txt ddp/comm.csv ddp/*.tprof ddp.out 2>/dev/null)
fi

(cd $W && tar czf $OUT/ar.tgz ar/report.txt ar/comm.csv ar/*.tprof ar_times.json arnc/report.txt arnc_times.json bare_times.json ar.out 2>/dev/null;
 tar czf $OUT/gpt.tgz g_def/report.txt g_all/report.txt g_ring/report.txt g_def.out g_all.out g_ring.out 2>/dev/null)
ls -la $OUT >> $S
