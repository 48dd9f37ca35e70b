#!/bin/sh
# `trainprof run --python` end to end on real input: two gloo ranks of
# examples/pytorch/train_gpt.py --device cpu, started by tests/torch_launch.sh (what torchrun
# does; torch 1.13's torchrun fails on Python 3.11), with no trainprof call in the script.
# Asserted from report.json: two ranks, STEPS steps each (optimizer steps), the CPU step
# breakdown with data/forward/backward/optimizer ranges whose shares are plausible and add
# up, and per step one all-reduce traffic equal to the gradient bytes DDP reduces (what
# train_gpt.py prints). Then the same job without --python: the final losses must be
# bitwise identical (float.hex), i.e. the instrumentation changed nothing computed.
# Skipped (77) when the interpreter cannot import torch with torch.distributed.
# usage: torch_run_test.sh TRAINPROF_CLI SCRIPT LAUNCHER DIR
set -eu
TP=$1 SCRIPT=$2 LAUNCH=$3 DIR=$4
PY=${TPROF_TORCH_PYTHON:-/usr/bin/python3}
STEPS=6

if ! "$PY" -c 'import torch, torch.distributed as d; assert d.is_available()' >/dev/null 2>&1; then
    echo "SKIP: $PY cannot import torch with torch.distributed (apt-get install python3-torch, or set TPROF_TORCH_PYTHON)"
    exit 77
fi
rm -rf "$DIR" "$DIR.plain"
mkdir -p "$DIR.plain"
port() { "$PY" "$(dirname "$0")/free_port.py"; } # below the ephemeral range: it says why
ARGS="--device cpu --model tiny --steps $STEPS --log-every 5 --seed 7"

rc=0
"$TP" run --python --quiet -o "$DIR" -- \
    sh "$LAUNCH" 2 "$(port)" timeout 150 "$PY" "$SCRIPT" $ARGS > "$DIR.out" 2>&1 || rc=$?
cat "$DIR.out"
[ "$rc" -eq 0 ] || { echo "FAIL: trainprof run --python exited $rc"; exit 1; }
rc=0
sh "$LAUNCH" 2 "$(port)" timeout 150 "$PY" "$SCRIPT" $ARGS > "$DIR.plain/out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$DIR.plain/out"; echo "FAIL: the plain run exited $rc"; exit 1; }

"$PY" - "$DIR" "$DIR.out" "$DIR.plain/out" "$STEPS" <<'PY'
import json, os, re, sys
d, out, plain, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log, base = open(out).read(), open(plain).read()
assert "launcher: exit status 0" in log, "a rank failed"
assert "not instrumented" not in log, "autostart failed"
m = re.search(r"ddp: (\d+) gradient bytes all-reduced per step per rank", log)
assert m, "train_gpt.py printed no gradient bytes"
grad_bytes = int(m.group(1))

def losses(text):
    got = dict(re.findall(r"^\[rank (\d)/2\] final loss exact (\S+)$", text, re.M))
    assert sorted(got) == ["0", "1"], ("final losses", got)
    return got
a, b = losses(log), losses(base)
assert a == b, ("losses differ with --python", a, b)
print("final losses bitwise identical with and without --python:", a)

rep = json.load(open(os.path.join(d, "report.json")))
ranks = sorted(p["rank"] for p in rep["processes"] if p["role"] == "rank")
assert ranks == [0, 1], rep["processes"]
assert rep["run"]["ranks"] == 2, rep["run"]
for r in rep["ranks"]:
    st = r["steps"]
    assert st["count"] == steps and st["source"] != "none", st
    bd = r["breakdown"]
    assert bd["basis"] == "cpu" and bd["windows"] == steps - st["warmup"], bd
    share = {x["name"]: x["share"] for x in bd["ranges"]}
    for name in ("data", "forward", "backward", "optimizer"):
        assert name in share, ("phase missing", name, share)
    # plausible: compute dominates a tiny model on CPU; data and optimizer are small;
    # the ranges and the untracked rest add up to the step
    assert share["forward"] > 0.05 and share["backward"] > 0.10, share
    assert share["backward"] + share["forward"] > 0.6, share
    assert share["data"] < 0.2 and share["optimizer"] < 0.5, share
    total = sum(share.values()) + bd["share"]["untracked"]
    assert abs(total - 1.0) < 0.01, ("shares do not add up", total)
    comm = r["communication"]
    assert comm["torch_ops"] > 0 and comm["nccl_ops"] == 0, comm
    cs = [c for c in comm["communicators"] if c.get("torch_group") == "backend=gloo size=2 ranks=0,1"]
    assert len(cs) == 1, comm["communicators"]
    ar = [o for o in cs[0]["ops"] if o["op"] == "AllReduce"]
    assert len(ar) == 1, cs[0]["ops"]
    ar = ar[0]
    assert ar["bytes_per_step"] == grad_bytes, ("all-reduce bytes per step", ar, grad_bytes)
    assert ar["bytes"] >= steps * grad_bytes - 0 and ar["bytes"] % grad_bytes == 0, ar
    print("rank %d: %d steps, mean %.1f ms; shares %s; AllReduce %d B/step (= DDP's %d), %d ops"
          % (r["rank"], st["count"], st.get("mean_ms", 0),
             ", ".join("%s %.1f%%" % (k, 100 * v) for k, v in sorted(share.items())),
             ar["bytes_per_step"], grad_bytes, ar["count"]))
PY
