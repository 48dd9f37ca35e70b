#!/bin/sh
# `trainprof run` samples the node's GPUs in its own process (the fake libnvidia-ml stands in
# for the driver): the rank leaves NVML alone, the report shows the sampler as the node's
# GPU sampler and attributes to rank 0 exactly its GPU (LOCAL_RANK 1 -> CUDA device 1 ->
# NVML index 1) with the fake's known power, also in rank 0's own Chrome file (`export
# --per-rank`); with TRAINPROF_NVML_HZ=0 or no NVML, no sampler.
set -eu
TP=$1 LM=$2 FAKE=$3 DIR=$4
rm -rf "$DIR" "$DIR.off" "$DIR.none"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=1 TRAINPROF_NVML_HZ=50 TRAINPROF_NVML_LIB="$FAKE"
unset CUDA_VISIBLE_DEVICES TRAINPROF_NVML_ALL_RANKS FAKE_NVML_GPUS || true
# 1 ms of data loading a step: at least 0.4 s, 20 samples at 50 Hz, however fast the machine
"$TP" run --quiet -o "$DIR" -- "$LM" --steps 400 --data-delay-us 1000 > "$DIR.log" 2>&1
"$TP" export "$DIR" --format chrome --per-rank "$DIR/per-rank" > /dev/null
TRAINPROF_NVML_HZ=0 "$TP" run --quiet -o "$DIR.off" -- "$LM" --steps 20 > /dev/null 2>&1
TRAINPROF_NVML_LIB=/nonexistent/libnvidia-ml.so.1 \
    "$TP" run --quiet -o "$DIR.none" -- "$LM" --steps 20 > /dev/null 2>&1
python3 - "$DIR" <<'PY'
import json, sys
d = sys.argv[1]
rep = json.load(open(d + "/report.json"))
roles = sorted(p["role"] for p in rep["processes"])
assert roles == ["node-sampler", "rank"], roles
assert rep["run"]["node_samplers"] == 1 and rep["run"]["ranks"] == 1, rep["run"]
r0 = rep["ranks"][0]
nv = r0["nvml"]
assert nv["sampled_by"] == "node sampler", nv
assert "shared_with_other_ranks" not in nv, nv
# only GPU 1 (the fake's power ramp P = 100 + 50 t W, t from the sampler's nvmlInit)
assert [g["index"] for g in nv["gpus"]] == [1], nv["gpus"]
g = nv["gpus"][0]
assert g["name"] == "Fake GPU 1", g
dur = rep["run"]["duration_s"]
assert 100.0 <= g["avg_power_w"] <= 100.0 + 50.0 * (dur + 0.5), (g, dur)
assert g["steps_with_energy"] >= 300, g
assert abs(g["energy_per_step_j"] * g["steps_with_energy"] / 1.0 - g["energy_j"]) < 1e-6 * g["energy_j"] + 1e-9, g
# the rank itself did not sample: its capability line says who did
sampler_pid = [p["pid"] for p in rep["processes"] if p["role"] == "node-sampler"][0]
assert nv["sampler_pid"] == sampler_pid, (nv, sampler_pid)
# rank 0's own Chrome file carries the sampler's counters of its GPU only (GPU 1), from the
# rank's start on
tr = json.load(open(d + "/per-rank/rank0.json"))
cs = [e for e in tr["traceEvents"] if e.get("ph") == "C"]
names = sorted(set(e["name"] for e in cs))
assert "gpu1.power_w" in names and not any(n.startswith("gpu0.") for n in names), names
assert all(e["pid"] == sampler_pid for e in cs if e["name"].startswith("gpu")), cs[:3]
assert all(e["ts"] >= 0 for e in cs), min(e["ts"] for e in cs)
power = [e["args"]["value"] for e in cs if e["name"] == "gpu1.power_w"]
assert len(power) >= 5 and all(100.0 <= v <= 100.0 + 50.0 * (dur + 0.5) for v in power), power[:5]
for name in ("off", "none"):
    r = json.load(open(d + "." + name + "/report.json"))
    assert [p["role"] for p in r["processes"]] == ["rank"], (name, r["processes"])
    assert "nvml" not in r["ranks"][0], name
print("node sampler ok: GPU 1 at %.1f W average, %.3f J per step over %d steps"
      % (g["avg_power_w"], g["energy_per_step_j"], g["steps_with_energy"]))
PY
