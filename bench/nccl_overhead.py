#!/usr/bin/env python3
"""bench/nccl_overhead — what trainprof's NCCL profiler plugin costs an all-reduce (needs 2+
GPUs and torch with NCCL).

Runs bench/nccl_lat.py under torchrun as separate processes, interleaved round by round
(off on off2 nokch, off on off2 nokch, ...):

  off    NCCL without a profiler plugin
  on     NCCL_PROFILER_PLUGIN=libtrainprof.so recording into a session (Coll, P2p and
         kernel-channel events; no CUPTI, no NVTX), as `trainprof run` loads it
  off2   the unloaded case again: its distance from `off` is the noise floor
  nokch  the plugin with TRAINPROF_NCCL_KERNEL=0 (Coll and P2p only)

Per size: the median over rounds of each mode's mean latency, the ratio on/off, and the
spread |off2/off - 1|. Target: on/off - 1 <= max(2 %, spread) at every size.

    python3 bench/nccl_overhead.py --lib build/libtrainprof.so --rounds 5 --nproc 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--lib", required=True, help="libtrainprof.so")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--nproc", type=int, default=2)
p.add_argument("--modes", default="off,on,off2,nokch")
p.add_argument("--json", help="write all measurements here")
a = p.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
lib = os.path.abspath(a.lib)


def run(mode):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TRAINPROF_") or k in ("NCCL_PROFILER_PLUGIN", "LD_PRELOAD",
                                               "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH"):
            del env[k]
    with tempfile.TemporaryDirectory(prefix="nccl-overhead-") as tmp:
        if mode in ("on", "nokch"):
            env.update(NCCL_PROFILER_PLUGIN=lib, TRAINPROF_DIR=tmp, TRAINPROF_SAMPLE_HZ="0",
                       TRAINPROF_NVML_HZ="0")
            if mode == "nokch":
                env["TRAINPROF_NCCL_KERNEL"] = "0"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=%d" % a.nproc,
               os.path.join(here, "nccl_lat.py")]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        line = [x for x in r.stdout.splitlines() if x.startswith("NCCL_LAT ")]
        if r.returncode != 0 or not line:
            sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
            raise SystemExit("%s: run failed (status %d)" % (mode, r.returncode))
        recorded = sum(1 for f in os.listdir(tmp) if f.endswith(".tprof")) if mode != "off" else 0
        return {int(k): v for k, v in json.loads(line[-1][9:]).items()}, recorded


modes = a.modes.split(",")
lat = {m: [] for m in modes}
for r in range(a.rounds):
    for m in modes:
        res, files = run(m)
        lat[m].append(res)
    print("round %d done" % r, flush=True)
sizes = sorted(lat[modes[0]][0])
med = {m: {s: statistics.median(x[s] for x in lat[m]) for s in sizes} for m in modes}
print("\n%10s %10s %10s %10s %10s %9s %9s %9s  %s" % ("bytes", "off ms", "on ms", "off2 ms",
      "nokch ms", "on/off", "nokch/off", "spread", "target"))
ok = True
for s in sizes:
    spread = abs(med["off2"][s] / med["off"][s] - 1) if "off2" in med else 0.0
    over = med["on"][s] / med["off"][s] - 1
    good = over <= max(0.02, spread)
    ok &= good
    print("%10d %10.4f %10.4f %10.4f %10.4f %8.2f%% %8.2f%% %8.2f%%  %s" % (
        s, med["off"][s], med["on"][s], med.get("off2", med["off"])[s],
        med.get("nokch", med["on"])[s], 100 * over,
        100 * (med.get("nokch", med["on"])[s] / med["off"][s] - 1), 100 * spread,
        "PASS" if good else "MISS"))
print("all sizes within max(2 %%, spread): %s" % ("yes" if ok else "no"))
if a.json:
    with open(a.json, "w") as f:
        json.dump({m: [{str(k): v for k, v in x.items()} for x in lat[m]] for m in modes}, f)
