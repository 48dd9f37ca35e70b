"""A stepped job of many small NCCL collectives, for the checks of the communication analysis
on a real PyTorch job (tests/gpu/comm_apart.sh): each step, marked by an NVTX range "step"
(trainprof's default step name), runs a matmul and --ops all-reduces of --kib KiB on the
default process group, whatever its size. With --no-plugin NCCL loads no profiler plugin
(NCCL_PROFILER_PLUGIN names none that exists, set before the process group is made), so
trainprof.torch records the collectives itself, as with an NCCL older than 2.23. With --gloo
each step also all-reduces a small CPU tensor on a gloo group of all ranks, host-timed ops
beside NCCL's (as a job's CPU-side barriers and metric reductions are).

    trainprof run --python -o DIR -- torchrun --nproc_per_node=1 tests/gpu/comm_steps.py
"""
import argparse
import os

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--ops", type=int, default=10)
p.add_argument("--kib", type=int, default=256)
p.add_argument("--no-plugin", action="store_true")
p.add_argument("--gloo", action="store_true")
a = p.parse_args()
if a.no_plugin:
    os.environ["NCCL_PROFILER_PLUGIN"] = "/nonexistent/libnccl-profiler-none.so"

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
x = torch.ones(a.kib * 256, dtype=torch.float32, device="cuda")
w = torch.randn(1024, 1024, device="cuda")
cpu_group = dist.new_group(backend="gloo") if a.gloo else None
c = torch.ones(16)
for s in range(a.steps):
    torch.cuda.nvtx.range_push("step")
    y = w @ w
    for _ in range(a.ops):
        dist.all_reduce(x)
    if cpu_group is not None:
        dist.all_reduce(c, group=cpu_group)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("done %d steps, %.1f" % (a.steps, float(y[0, 0])))
dist.destroy_process_group()
