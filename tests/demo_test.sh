#!/bin/sh
# The bundled trainer under `trainprof run`: the loss falls, and the report shows its 80
# steps (1 warm-up), the step/data/forward/backward/optimizer ranges nested as the trainer
# nests them, and a data-loading share; the Chrome export parses and holds every step.
set -eu
TP=$1 LM=$2 DIR=$3
rm -rf "$DIR"
"$TP" run --quiet -o "$DIR" -- "$LM" --steps 80 --log-every 40 > "$DIR.out"
grep -q "final loss" "$DIR.out"
"$TP" export "$DIR" --format chrome -o "$DIR/trace.json"
python3 - "$DIR" "$DIR.out" <<'PY'
import json, re, sys
d, out = sys.argv[1], sys.argv[2]
m = re.search(r"final loss ([0-9.]+) \(initial ([0-9.]+)\)", open(out).read())
final, initial = float(m.group(1)), float(m.group(2))
assert final < initial - 0.5, (final, initial)
rep = json.load(open(d + "/report.json"))
assert rep["schema_version"] == 1
r0 = rep["ranks"][0]
st = r0["steps"]
assert st["count"] == 80 and st["warmup"] == 1 and st["measured"] == 79, st
assert st["name"] == "step" and st["thread"] == "main", st
assert 0 < st["p50_ms"] <= st["p90_ms"] <= st["max_ms"], st
# the default domain's ranges (NVTX); the Timers' ranges are in domain "trainprof"
names = {row["name"]: row for row in r0["ranges"]["top_inclusive"] if "domain" not in row}
timers = {row["name"]: row for row in r0["timers"]["rows"]}
for n in ("interval-time", "batch-generator", "forward-compute", "backward-compute", "optimizer"):
    assert n in timers, (n, list(timers))
# a timer and the NVTX range around the same phase agree within 10 %
for t, n in (("forward-compute", "forward"), ("backward-compute", "backward")):
    assert abs(timers[t]["ms"] - names[n]["inclusive_ms"]) <= 0.1 * names[n]["inclusive_ms"], (t, n)
mm = rep["timers"]["megatron_minmax"]
assert mm.startswith("(min, max) time across ranks (ms):\n    interval-time ..."), mm
assert "\n    forward-compute ................................: (" in mm, mm
# the trainer's own Megatron log lines
log = open(out).read()
assert "(min, max) time across ranks (ms):" in log and "    interval-time ..." in log
for n in ("step", "data", "forward", "backward", "optimizer", "load_batch"):
    assert n in names, (n, list(names))
# every phase runs once per step, inside it
for n in ("data", "forward", "backward", "optimizer"):
    assert abs(names[n]["count_per_unit"] - 1.0) < 1e-9, names[n]
    assert names[n]["inclusive_ms"] < names["step"]["inclusive_ms"]
assert abs(names["step"]["inclusive_share"] - 1.0) < 1e-6
parts = sum(names[n]["inclusive_ms"] for n in ("data", "forward", "backward", "optimizer"))
assert parts <= names["step"]["inclusive_ms"] * 1.0001
assert parts >= names["step"]["inclusive_ms"] * 0.9, (parts, names["step"])
assert r0["data_loading"]["found"] and 0 <= r0["data_loading"]["share"] < 1
tr = json.load(open(d + "/trace.json"))
steps = [e for e in tr["traceEvents"] if e.get("name") == "step" and e.get("ph") == "X"]
assert len(steps) == 80, len(steps)
print("demo ok: %d steps, p50 %.2f ms, loss %.3f -> %.3f" % (st["count"], st["p50_ms"], initial, final))
PY
