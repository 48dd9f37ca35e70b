"""Cross-check for trainprof's GPU capture: the same workload as torch_nvtx.py, profiled
with torch.profiler (CUDA activities) over steps [skip, steps). Prints the summed kernel
time (excluding memcpy/memset) per step in ms, to compare with trainprof's report over the
same steps (trainprof report --warmup SKIP) from a separate process.

    python3 tests/gpu/kernel_crosscheck.py --steps 60 --skip 10
"""
import argparse

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--skip", type=int, default=10)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--batch", type=int, default=256)
a = p.parse_args()

dev = torch.device("cuda", 0)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(a.hidden, a.hidden), nn.GELU(), nn.Linear(a.hidden, a.hidden)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def step():
    x = torch.randn(a.batch, a.hidden, device=dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


for _ in range(a.skip):
    step()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(a.steps - a.skip):
        step()
total_us = 0.0
n = 0
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset")):
        total_us += e.device_time if hasattr(e, "device_time") else e.cuda_time
        n += 1
print("torch.profiler: %d kernels, kernel time per step %.4f ms over %d steps" % (n, total_us / 1000.0 / (a.steps - a.skip), a.steps - a.skip))
