"""A small PyTorch training job instrumented only with torch.cuda.nvtx, for checking
trainprof's NVTX injection on a GPU machine (single process, or several ranks under torchrun
with DistributedDataParallel over NCCL). It knows nothing of trainprof.

    trainprof run -- python3 tests/gpu/torch_nvtx.py --steps 50
    trainprof run -- torchrun --nproc_per_node=2 tests/gpu/torch_nvtx.py --steps 50

Prints one line per rank with its own wall-clock step times, to compare with the report.
"""
import argparse
import os
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=50)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--batch", type=int, default=256)
p.add_argument("--data-sleep-ms", type=float, default=2.0)
a = p.parse_args()

rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
local = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local)
torch.cuda.set_device(dev)
if world > 1:
    torch.distributed.init_process_group("nccl", device_id=dev)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(a.hidden, a.hidden), nn.GELU(), nn.Linear(a.hidden, a.hidden)).to(dev)
if world > 1:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
nvtx = torch.cuda.nvtx
times = []
for step in range(a.steps):
    t0 = time.perf_counter()
    nvtx.range_push("step")
    nvtx.range_push("data")
    time.sleep(a.data_sleep_ms / 1000.0)  # a slow input pipeline, on purpose
    x = torch.randn(a.batch, a.hidden, device=dev)
    nvtx.range_pop()
    nvtx.range_push("forward")
    loss = model(x).pow(2).mean()
    nvtx.range_pop()
    nvtx.range_push("backward")
    loss.backward()
    nvtx.range_pop()
    nvtx.range_push("optimizer")
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    nvtx.range_pop()
    nvtx.range_pop()
    times.append(time.perf_counter() - t0)
times = sorted(times[1:])
print("rank %d/%d: %d steps, own p50 %.2f ms, loss %.4f" % (rank, world, a.steps, 1000 * times[len(times) // 2], loss.item()), flush=True)
if world > 1:
    torch.distributed.destroy_process_group()
