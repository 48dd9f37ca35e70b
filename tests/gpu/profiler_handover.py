"""A program that runs torch.profiler itself, for trainprof's CUPTI hand-over: 30 steps of a
small MLP, each inside an NVTX range "train_step" (trainprof's steps without its Python hooks),
with torch.profiler (CPU and CUDA activities) over steps 10-15, either started and stopped by
hand (--mode startstop) or through profile(schedule=...) around the whole loop (--mode
schedule: wait 8, warmup 2, active 6). Prints the kernels torch.profiler's trace holds and the
steps they came from, to compare with trainprof's report of the same run. --mode cycles:
profile(schedule=...) that profiles one step in every three for the whole loop (wait 2,
active 1, repeat 0), a trace a cycle: as many hand-overs as cycles, each a pause of
trainprof's capture; prints how many traces torch.profiler made.

    python3 tests/gpu/profiler_handover.py --mode startstop --trace OUT.json
"""
import argparse
import json

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["startstop", "schedule", "cycles"], required=True)
p.add_argument("--trace", required=True)
p.add_argument("--steps", type=int, default=30)
a = p.parse_args()

dev = torch.device("cuda", 0)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 2048)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def step(i):
    torch.cuda.nvtx.range_push("train_step")
    x = torch.randn(256, 2048, device=dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def report(prof):
    prof.export_chrome_trace(a.trace)
    ev = json.load(open(a.trace))["traceEvents"]
    k = [e for e in ev if e.get("cat") == "kernel"]
    steps = sorted({e["name"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")})
    print("torch.profiler: %d kernels in its trace; %s" % (len(k), ",".join(steps) or "no ProfilerStep"),
          flush=True)


if a.mode == "startstop":
    prof = profile(activities=acts)
    for i in range(a.steps):
        if i == 10:
            prof.start()
        step(i)
        if i == 15:
            prof.stop()
            report(prof)
elif a.mode == "schedule":
    with profile(activities=acts, schedule=schedule(wait=8, warmup=2, active=6, repeat=1),
                 on_trace_ready=report) as prof:
        for i in range(a.steps):
            step(i)
            prof.step()
else:
    traces = []
    with profile(activities=acts, schedule=schedule(wait=2, warmup=0, active=1, repeat=0),
                 on_trace_ready=lambda prof: traces.append(1)) as prof:
        for i in range(a.steps):
            step(i)
            prof.step()
    print("torch.profiler: %d traces" % len(traces), flush=True)
print("done %d steps" % a.steps, flush=True)
