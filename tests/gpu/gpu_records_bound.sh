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
python3 - "$W/whole.json" "$W/bounded.json" "$W/from_sums.json" <<'EOF'
import json, sys
w, b, s = (json.load(open(p)) for p in sys.argv[1:4])

def strip(x):
    """The document less what names its directory and files."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("dir", "file", "path")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x

print("report from the summaries equals the bounded report from the files:",
      strip(b) == strip(s))
def dev(r):
    return ((r.get("gpu") or {}).get("devices") or [{}])[0]
for rw, rb in zip(w["ranks"], b["ranks"]):
    if not rw.get("gpu"):
        continue
    cap = rb.get("gpu_capture") or {}
    bound = cap.get("gpu_records_bound") or {}
    print("rank %s: bounded GPU figures over %s of %s measured steps %s; held %s, left out %s,"
          " span %.1f-%.1f s" % (rw.get("rank"), cap.get("captured_steps"),
                                 cap.get("measured_steps"), cap.get("steps"), bound.get("held"),
                                 bound.get("left_out"), bound.get("from_s", 0),
                                 bound.get("to_s", 0)))
    dw, db = dev(rw), dev(rb)
    for key in ("busy_share", "kernels", "kernel_ms"):
        a, c = dw.get(key), db.get(key)
        if isinstance(a, (int, float)) and isinstance(c, (int, float)):
            print("  %-12s whole %10.4f  bounded %10.4f  (%+.2f %%)" %
                  (key, a, c, 100 * (c - a) / a if a else 0))
    for cls, a in (dw.get("kernel_ms_by_class") or {}).items():
        c = (db.get("kernel_ms_by_class") or {}).get(cls)
        if a:
            print("  class %-18s whole %8.4f ms  bounded %8.4f ms" % (cls, a, c or 0))
    tw = [(k["name"][:50], k["count_per_unit"]) for k in rw["gpu"].get("top_kernels", [])[:5]]
    tb = [(k["name"][:50], k["count_per_unit"]) for k in rb["gpu"].get("top_kernels", [])[:5]]
    print("  top 5 kernels (name, per step) equal:", tw == tb)
    if tw != tb:
        print("    whole  ", tw)
        print("    bounded", tb)
    cw = dict(rw.get("communication") or {})
    cb = dict(rb.get("communication") or {})
    cw.pop("exposure", None)
    cb.pop("exposure", None)
    print("  communication (less exposure, over the captured steps) equal:", cw == cb,
          "(ops: %s)" % cw.get("ops"))
    print("  after_last_step: whole %s, bounded %s" % (rw["gpu"].get("after_last_step"),
                                                        rb["gpu"].get("after_last_step")))
fw = [(f.get("id"), f.get("rank")) for f in w.get("findings", [])]
fb = [(f.get("id"), f.get("rank")) for f in b.get("findings", [])]
print("findings whole:  ", fw)
print("findings bounded:", fb)
EOF

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
python3 - "$W/whole_nosteps.json" "$W/bounded_nosteps.json" "$W/from_sums_nosteps.json" \
    "$W/whole.json" <<'EOF'
import json, sys
w, b, s, stepped = (json.load(open(p)) for p in sys.argv[1:5])

def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("dir", "file", "path")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x

print("no steps: report from the summaries equals the bounded report from the files:",
      strip(b) == strip(s))
def dev(r):
    return ((r.get("gpu") or {}).get("devices") or [{}])[0]
for rw, rb, rs in zip(w["ranks"], b["ranks"], stepped["ranks"]):
    if not rw.get("gpu"):
        continue
    bound = (rb.get("gpu_capture") or {}).get("gpu_records_bound") or {}
    span = bound.get("to_s", 0) - bound.get("from_s", 0)
    dw, db = dev(rw), dev(rb)
    print("rank %s: per whole %s, bounded %s; held %s, left out %s, span %.2f-%.2f s (%.2f s)" %
          (rw.get("rank"), rw["gpu"].get("per"), rb["gpu"].get("per"), bound.get("held"),
           bound.get("left_out"), bound.get("from_s", 0), bound.get("to_s", 0), span))
    print("  kernels: whole %s (run), bounded %s (span); kernel ms whole %.1f, bounded %.1f" %
          (dw.get("kernels"), db.get("kernels"), dw.get("kernel_ms", 0), db.get("kernel_ms", 0)))
    print("  busy share: bounded %s of the span; the stepped whole report's %s of the step" %
          (db.get("busy_share"), dev(rs).get("busy_share")))
    xw = (rw.get("communication") or {}).get("exposure") or {}
    xb = (rb.get("communication") or {}).get("exposure") or {}
    print("  exposure: whole per %s window %.1f ms exposed %.1f ms; bounded per %s window %.1f "
          "ms exposed %.1f ms (share %.4f; stepped %.4f)" %
          (xw.get("per"), xw.get("window_ms", 0), (xw.get("exposed_ms") or {}).get("mean", 0),
           xb.get("per"), xb.get("window_ms", 0), (xb.get("exposed_ms") or {}).get("mean", 0),
           xb.get("exposed_share", 0),
           ((rs.get("communication") or {}).get("exposure") or {}).get("exposed_share", 0)))
    cw = dict(rw.get("communication") or {})
    cb = dict(rb.get("communication") or {})
    cw.pop("exposure", None)
    cb.pop("exposure", None)
    print("  communication (less exposure) equal:", cw == cb, "(ops: %s)" % cw.get("ops"))
EOF
