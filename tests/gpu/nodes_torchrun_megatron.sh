#!/bin/bash
# nodes_torchrun_megatron.sh — `trainprof run` on every node of a real torchrun job of two
# nodes: Megatron-LM's pretrain_gpt.py (MEG: megatron/, pretrain_gpt.py, gpt_builders.py,
# model_provider.py) under `torchrun --nnodes 2 --node-rank K --nproc-per-node 1`, one
# `trainprof run --python -o DIR` around each torchrun, both writing into one DIR. Each node is
# a UTS namespace of its own on this machine (`unshare -u`: its own host name, so that the rank
# files, the locks and NCCL see two hosts), both ranks on this machine's first GPU (NCCL, seeing
# two hosts, connects them through its socket transport on the loopback). Data-parallel 2.
# Prints: each run's exit status and lines, the report node's wait, the report's ranks and step
# figures from summaries against the same report computed from the rank files alone, and
# Megatron-LM's own time per iteration beside trainprof's step time. Run on the GPU machine
# from the repository root after common.sh and python_module (TP: the command, exported).
#   nodes_torchrun_megatron.sh MEGATRON_DIR OUTDIR
set -u
MEG=$(cd "${1:?usage: nodes_torchrun_megatron.sh MEGATRON_DIR OUTDIR}" && pwd)
OUTD=${2:?}
D=$OUTD/nodes
rm -rf "$D" "$D-copy"
ITERS=${ITERS:-30}
args="$(grep -v '^#' bench/megatron_args.txt | tr '\n' ' ') --train-iters $ITERS"
port=$((29500 + RANDOM % 1000))
if ! unshare -u true 2>/dev/null; then
    echo "nodes: no UTS namespaces here (unshare -u fails): not run"
    exit 77
fi
# Megatron-LM builds its dataset helpers on the first rank; built here once, before both nodes
(cd "$MEG" && python3 -c "from megatron.core.datasets.utils import compile_helpers as c; c()") \
    > "$OUTD/nodes-helpers.log" 2>&1 || echo "Megatron-LM dataset helpers: build failed"
node() { # NAME NODE_RANK LOG
    (cd "$MEG" && PYTHONPATH=$MEG:${PYTHONPATH:-} NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
        timeout 500 unshare -u bash -c 'hostname "$0" && exec "$@"' "$1" \
        "$TP" run --python --quiet -o "$D" -- torchrun --nnodes 2 --node-rank "$2" \
        --nproc-per-node 1 --master-addr 127.0.0.1 --master-port "$port" pretrain_gpt.py \
        $args) > "$3" 2>&1
}
t0=$(date +%s.%N)
node megn-a 0 "$D-a.log" &
pa=$!
node megn-b 1 "$D-b.log" &
pb=$!
wait $pa
ra=$?
ta=$(date +%s.%N)
wait $pb
rb=$?
tb=$(date +%s.%N)
since() { python3 -c "import sys; print('%.1f' % (float(sys.argv[1]) - float(sys.argv[2])))" "$1" "$t0"; }
echo "node megn-a (rank 0): exit status $ra, ended $(since "$ta") s after the start"
echo "node megn-b (rank 1): exit status $rb, ended $(since "$tb") s after the start"
echo "--- megn-a's trainprof lines"; grep "^trainprof" "$D-a.log"
echo "--- megn-b's trainprof lines"; grep "^trainprof" "$D-b.log"
echo "--- the directory"; ls -la "$D"
for f in "$D"/summarize-*.log; do echo "--- $f"; cat "$f"; done
mkdir -p "$D-copy" && cp "$D"/*.tprof "$D-copy"/
"$TP" report "$D-copy" --format json -o "$D-copy.json" 2>"$D-copy.err"
echo "report of the copy (rank files alone): exit status $?"
echo "report from the nodes' summaries == report from the rank files alone:" \
    "$(python3 tests/gpu/same_reports.py "$D/report.json" "$D-copy.json")"
# Megatron-LM logs each iteration on its last rank: node megn-b's
python3 - "$D/report.json" "$D-copy.json" "$D-b.log" "$D/report.txt" <<'EOF'
import json, re, sys
a = json.load(open(sys.argv[1]))
txt = open(sys.argv[4]).read()
print("'out of date' in report.txt:", "out of date" in txt)
for r in a["ranks"]:
    st = r.get("steps", {})
    print("rank %s (%s) on %s: steps %s from %s, measured %s, mean step %.1f ms, p50 %.1f ms" % (
        r.get("rank"), r.get("label"), r.get("host"), st.get("count"), st.get("source"),
        st.get("measured"), st.get("mean_ms") or 0, st.get("p50_ms") or 0))
log = open(sys.argv[3]).read()
its = [float(x) for x in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", log)]
if its:
    skip = 1  # the report's warm-up: its first step
    m = sorted(its[skip:])
    print("Megatron-LM (the last rank's log): %d iterations, median elapsed time per iteration "
          "%.1f ms (its own first %d left out)" % (len(its), m[len(m) // 2], skip))
EOF
