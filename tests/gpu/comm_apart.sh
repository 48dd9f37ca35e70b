#!/bin/bash
# comm_apart.sh — communication ops read apart on real NCCL jobs of two ranks. Each rank file's
# report with TRAINPROF_SECTION_COMM_OPS=16 (its ops read apart, in passes over the file) must
# equal the default one (ops held in the section), JSON and text byte for byte:
#   1. tests/gpu/comm_steps.py, 300 steps of ten 256 KiB all-reduces, GPU activity captured in
#      steps 10-14, 100-104, 200-204;
#   2. the same, 100 steps, captured all through: the matching then needs most ops, so the
#      sections are read whole (0 read apart), the report the same;
#   3. the first again with NCCL's profiler plugin not loaded: torch.distributed's records of
#      the collectives (enqueue-flagged) are the file's ops;
#   4. the first again with a gloo all-reduce a step beside the NCCL ones (host-timed ops,
#      which the first pass over the file keeps, the NCCL ones read apart beside them);
#   5. with MEGATRON_DIR, Megatron-LM's pretrain_gpt.py data-parallel 2 (nodes_torchrun_megatron.sh),
#      30 iterations, captured in iterations 5-9 and 20-24.
# Each job runs with TRAINPROF_SECTION_COMM_OPS=16, so that the summaries `trainprof run` writes
# at its end read the ops apart too; the report from them must equal the rank files' report.
# Two ranks on this machine's one GPU: each torchrun node runs in a UTS namespace of its own
# (`unshare -u`), so NCCL sees two hosts and connects them through sockets on the loopback.
# Prints, for each run, whether the reports are equal, how many sections were read apart
# (comm_apart_count), and each rank's communication counts. Run on the GPU machine from the
# repository root (common.sh says how):
#   comm_apart.sh [MEGATRON_DIR]       (RUNS="1 4": those runs alone)
# Each run's report (JSON, from its rank files) comes back under $OUT.
. tests/gpu/common.sh
python_module
export TP TRAINPROF_SECTION_COMM_OPS=16
if ! unshare -u true 2>/dev/null; then
    echo "comm_apart: no UTS namespaces here (unshare -u fails): not run"
    exit 77
fi
two_nodes() { # DIR -- ARGS of comm_steps.py: trainprof run around each of the two torchrun nodes
    local d=$1 port=$((29500 + RANDOM % 1000)) k pids=()
    shift
    for k in 0 1; do
        NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 timeout 300 \
            unshare -u bash -c 'hostname "$0" && exec "$@"' "apart-$k" \
            "$TP" run --python --quiet -o "$d" -- torchrun --nnodes 2 --node-rank $k \
            --nproc-per-node 1 --master-addr 127.0.0.1 --master-port $port \
            tests/gpu/comm_steps.py "$@" > "$d-$k.log" 2>&1 &
        pids+=($!)
    done
    for k in 0 1; do wait ${pids[$k]}; echo "node $k: rc=$?" >> $S; done
    tail -1 "$d-1.log" >> $S
}
compare() { # DIR LABEL: the rank files' report (a copy without the summaries, which the report
    # would take instead) with ops held and read apart, and the report from the job's summaries
    local d=$W/$2-copy
    mkdir -p $d && cp "$1"/*.tprof $d/
    TRAINPROF_SECTION_COMM_OPS= "$TP" report $d --format json > $W/whole.json 2> $W/whole.err
    "$TP" report $d --format json > $W/apart.json 2> $W/apart.err
    if cmp -s $W/whole.json $W/apart.json; then echo "$2: apart == whole: same JSON" >> $S
    else echo "$2: JSON DIFFERS" >> $S; diff $W/whole.json $W/apart.json | head -20 >> $S; fi
    TRAINPROF_SECTION_COMM_OPS= "$TP" report $d > $W/whole.txt 2>&1
    "$TP" report $d > $W/apart.txt 2>&1
    if cmp -s $W/whole.txt $W/apart.txt; then echo "$2: apart == whole: same text" >> $S
    else echo "$2: TEXT DIFFERS" >> $S; fi
    echo "$2: $($C/comm_apart_count $d 16)" >> $S
    "$TP" report "$1" --format json > $W/sums.json 2> $W/sums.err
    cp $W/whole.json "$OUT/$2.json"
    echo "  report from the job's summaries == report of the rank files:" \
        "$(python3 tests/gpu/same_reports.py $W/whole.json $W/sums.json)" >> $S
    python3 - $W/whole.json >> $S <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for rk in r["ranks"]:
    c = rk.get("communication") or {}
    ops = [(o.get("op"), o.get("count"), o.get("time_source") or o.get("time_sources"))
           for cm in c.get("communicators", []) for o in cm.get("ops", [])]
    print("  rank %s: %s ops, %s NCCL, %s torch; %s" % (rk["rank"], c.get("ops"),
          c.get("nccl_ops"), c.get("torch_ops"), ops[:4]))
PY
}
runs=" ${RUNS:-1 2 3 4 5} "
if [[ $runs == *" 1 "* ]]; then
    say "1. comm_steps.py, 2 ranks, 300 steps of 10 all-reduces, capture 10-14,100-104,200-204"
    TRAINPROF_GPU_CAPTURE=10-14,100-104,200-204 two_nodes $W/ar
    lap $?
    compare $W/ar windows
fi
if [[ $runs == *" 2 "* ]]; then
    say "2. comm_steps.py, 2 ranks, 100 steps, capture all"
    TRAINPROF_GPU_CAPTURE=all two_nodes $W/all --steps 100
    lap $?
    compare $W/all capture_all
fi
if [[ $runs == *" 3 "* ]]; then
    say "3. comm_steps.py without NCCL's profiler plugin (torch.distributed's records), 300 steps"
    TRAINPROF_GPU_CAPTURE=10-14,100-104,200-204 two_nodes $W/torch --no-plugin
    lap $?
    compare $W/torch torch_alone
fi
if [[ $runs == *" 4 "* ]]; then
    say "4. comm_steps.py with a gloo all-reduce a step beside the NCCL ones, 300 steps"
    TRAINPROF_GPU_CAPTURE=10-14,100-104,200-204 two_nodes $W/gloo --gloo
    lap $?
    compare $W/gloo beside_gloo
fi
if [ -n "${1:-}" ] && [[ $runs == *" 5 "* ]]; then
    say "5. Megatron-LM pretrain_gpt.py, data-parallel 2, 30 iterations, capture 5-9,20-24"
    TRAINPROF_GPU_CAPTURE=5-9,20-24 ITERS=30 bash tests/gpu/nodes_torchrun_megatron.sh "$1" $W \
        > $W/meg.txt 2>&1
    lap $?
    grep -E "exit status|Megatron-LM|rank [01] " $W/meg.txt >> $S
    compare $W/nodes megatron
fi
cat $S
