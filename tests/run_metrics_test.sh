#!/bin/sh
# `trainprof run --metrics-port PORT -- char_lm`: the rank's endpoint answers while the job
# runs (scraped with urllib until trainprof_steps_total > 0): the step counter, the
# step-duration histogram (buckets ascending and cumulative, +Inf = _count), the last step's
# duration, the throughput counters from --tokens-per-step, the FLOPs counter from --model
# (2 layers, hidden 64, seq 32, vocab 100: 2 x (72 x 64^2 + 6 x 32 x 64) + 6 x 64 x 100 =
# 652800 FLOPs a token, x 4096 tokens a step), rank labels, the process metrics;
# then SIGTERM to `trainprof run` ends the job (forwarded) and the endpoint closes with it.
set -eu
TP=$1 LM=$2 DIR=$3
rm -rf "$DIR"
mkdir -p "$DIR"
unset TRAINPROF_METRICS_PORT TRAINPROF_METRICS_TOKEN TRAINPROF_METRICS_NODE_PORT || true
export TRAINPROF_NVML_HZ=0 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0
PORT=$(python3 "$(dirname "$0")/free_port.py") # below the ephemeral range
"$TP" run --quiet -o "$DIR/run" --metrics-port "$PORT" --tokens-per-step 4096 \
    --model layers=2,hidden=64,heads=2,seq=32,vocab=100 -- "$LM" --steps 100000 --log-every 0 > "$DIR/run.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT # never leave the job holding ctest's pipes
rc=0
python3 - "$PORT" <<'PY' || rc=$?
import re, sys, time, urllib.request
port = int(sys.argv[1])
url = "http://127.0.0.1:%d/metrics" % port

def scrape():
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()

def values(text, name):
    out = []
    for ln in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})? (\S+)$" % re.escape(name), ln)
        if m:
            out.append((m.group(1) or "", float(m.group(2))))
    return out

deadline = time.time() + 60
text, steps, err = "", 0.0, None
while time.time() < deadline:
    try:
        text = scrape()
        v = values(text, "trainprof_steps_total")
        steps = v[0][1] if v else 0.0
        if steps > 0:
            break
    except OSError as e:  # not listening yet
        err = e
    time.sleep(0.1)
assert steps > 0, "no step counted within 60 s (last error: %s)\n%s" % (err, text[:2000])
time.sleep(0.3)
t2 = scrape()
steps2 = values(t2, "trainprof_steps_total")[0][1]
assert steps2 >= steps, (steps, steps2)
lab = values(t2, "trainprof_steps_total")[0][0]
assert 'rank="0"' in lab and 'local_rank="0"' in lab, lab
# the histogram
assert "# TYPE trainprof_step_duration_seconds histogram" in t2
buckets = values(t2, "trainprof_step_duration_seconds_bucket")
assert len(buckets) >= 2, buckets
les = [re.search(r'le="([^"]+)"', b[0]).group(1) for b in buckets]
assert les[-1] == "+Inf", les
bounds = [float(x) for x in les[:-1]]
assert bounds == sorted(bounds), les
counts = [b[1] for b in buckets]
assert counts == sorted(counts), counts
count = values(t2, "trainprof_step_duration_seconds_count")[0][1]
total = values(t2, "trainprof_step_duration_seconds_sum")[0][1]
assert counts[-1] == count and count >= steps2 - 1 and count > 0, (counts[-1], count, steps2)
assert total > 0 and total / count < 10, (total, count)
last = values(t2, "trainprof_step_last_duration_seconds")[0][1]
assert 0 < last < 10, last
tok = values(t2, "trainprof_tokens_total")[0][1]
assert tok == 4096 * steps2, (tok, steps2)
flops = values(t2, "trainprof_model_flops_total")[0][1]
assert flops == 652800 * 4096 * steps2, (flops, steps2)
for m in ("process_cpu_seconds_total", "process_resident_memory_bytes", "trainprof_build_info"):
    assert values(t2, m), m
print("run --metrics-port: %d steps counted, histogram of %d buckets, mean step %.2f ms"
      % (steps2, len(buckets), 1e3 * total / count))
PY
kill -TERM $pid 2>/dev/null || true
st=0
wait $pid || st=$?
trap - EXIT
if [ $rc -ne 0 ]; then
    echo "--- trainprof run's output:" >&2
    tail -20 "$DIR/run.log" >&2
    exit 1
fi
# the job ended on the forwarded SIGTERM (143), or had finished (0)
[ $st -eq 143 ] || [ $st -eq 0 ] || { echo "trainprof run: status $st" >&2; tail -20 "$DIR/run.log" >&2; exit 1; }
# the endpoint went with the job
python3 - "$PORT" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=2)
    raise SystemExit("the endpoint still answers after the job ended")
except OSError:
    pass
PY
# the files keep the throughput figures: a later report has them without the options
"$TP" report "$DIR/run" --format json -o "$DIR/again.json" >/dev/null 2>&1 ||
    { echo "report of the run's files failed" >&2; exit 1; }
python3 - "$DIR/again.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["throughput"]
assert t["tokens_per_step"] == 4096 and t["tokens_per_step_source"] == "metadata", t
assert t["model"]["source"] == "metadata" and t["flops_source"] == "model", t
assert t["flops_per_step"] == 652800 * 4096, t
print("report from the files alone: %d tokens and %.0f FLOPs per step (from the model)"
      % (t["tokens_per_step"], t["flops_per_step"]))
PY
echo "run_metrics ok"
