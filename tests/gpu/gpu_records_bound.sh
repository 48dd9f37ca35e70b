#!/bin/bash
# gpu_records_bound.sh — the report of a real job's rank files bounded in GPU records
# (--gpu-records) against the whole report of the same files: what each holds (peak RSS, wall
# time), which steps the bounded GPU figures are over, and each per-step GPU figure, the top
# kernels and the communication section side by side; then the same bound through
# `trainprof summarize` and a report from the summaries, which must equal the bounded report
# made from the files. DIR is a run directory of a job with CUPTI capture on (e.g. the one
# nodes_torchrun_megatron.sh leaves in OUTDIR/nodes). Run on the GPU machine from the
# repository root after common.sh (TP: the command, exported).
#   gpu_records_bound.sh DIR OUTDIR
set -u
D=$(cd "${1:?usage: gpu_records_bound.sh DIR OUTDIR}" && pwd)
OUTD=${2:?}
W=$OUTD/bound
rm -rf "$W" && mkdir -p "$W/files" "$W/sums"
cp "$D"/*.tprof "$W/files/" && cp "$D"/*.tprof "$W/sums/"
timed() { # NAME COMMAND...: runs it, its peak RSS and wall time into W/NAME.time
    local name=$1
    shift
    /usr/bin/time -f "%e s %M KB" -o "$W/$name.time" "$@" > "$W/$name.out" 2> "$W/$name.err"
    echo "$name: exit status $?, $(cat "$W/$name.time")"
}
timed whole "$TP" report "$W/files" --gpu-records all --format json -o "$W/whole.json"
# half the busiest rank's kernels: the bound cuts every rank (its API calls count too)
N=$(python3 - "$W/whole.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
best = 0
for k in r["ranks"]:
    g = k.get("gpu") or {}
    d = (g.get("devices") or [{}])[0]
    n = (d.get("kernels") or 0) * ((k.get("steps") or {}).get("measured") or 0)
    best = max(best, n)
print(max(1000, int(best / 2)))
EOF
)
echo "bound: $N GPU records (half the busiest rank's kernels)"
timed bounded "$TP" report "$W/files" --gpu-records "$N" --format json -o "$W/bounded.json"
"$TP" report "$W/files" --gpu-records "$N" > "$W/bounded.txt" 2>&1
timed summarize "$TP" summarize --gpu-records "$N" "$W/sums"
cat "$W/summarize.out" "$W/summarize.err"
timed from_sums "$TP" report "$W/sums" --gpu-records "$N" --format json -o "$W/from_sums.json"
echo "--- the bounded text's capture lines"
grep -E "GPU activity recorded|GPU records held" "$W/bounded.txt"
python3 "$(dirname "$0")/gpu_records_bound.py" steps "$W/whole.json" "$W/bounded.json" \
    "$W/from_sums.json"

# The same files as if no step were found (a warm-up longer than the run: no measured step),
# where the bounded ranks' GPU figures are totals over the span held ("per": "span"): against
# the whole report (totals over the run), the exposure over the span, every op still counted,
# and a report from summaries made so equal to the one from the files.
NOSTEPS="--warmup 1000000"
rm -rf "$W/sums2" && mkdir -p "$W/sums2" && cp "$D"/*.tprof "$W/sums2/"
timed whole_nosteps "$TP" report "$W/files" $NOSTEPS --gpu-records all --format json \
    -o "$W/whole_nosteps.json"
timed bounded_nosteps "$TP" report "$W/files" $NOSTEPS --gpu-records "$N" --format json \
    -o "$W/bounded_nosteps.json"
"$TP" report "$W/files" $NOSTEPS --gpu-records "$N" > "$W/bounded_nosteps.txt" 2>&1
timed summarize_nosteps "$TP" summarize $NOSTEPS --gpu-records "$N" "$W/sums2"
timed from_sums_nosteps "$TP" report "$W/sums2" $NOSTEPS --gpu-records "$N" --format json \
    -o "$W/from_sums_nosteps.json"
echo "--- the bounded text without steps: its span lines"
grep -E "GPU records held|in the span|of the span|whose GPU records" "$W/bounded_nosteps.txt"
python3 "$(dirname "$0")/gpu_records_bound.py" nosteps "$W/whole_nosteps.json" \
    "$W/bounded_nosteps.json" "$W/from_sums_nosteps.json" "$W/whole.json"
