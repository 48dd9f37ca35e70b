"""Inner loop of bench/nccl_overhead.py (run under torchrun): all-reduce latency per size,
timed with CUDA events around a loop of back-to-back all-reduces; rank 0 prints one JSON
line {"bytes": mean ms per all-reduce, ...}."""
import json
import os
import sys

import torch
import torch.distributed as dist

sizes = [8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20, 256 << 20]
local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
res = {}
for nbytes in sizes:
    x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    iters = 200 if nbytes <= (1 << 20) else 50 if nbytes <= (32 << 20) else 15
    for _ in range(10):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        dist.all_reduce(x)
    e.record()
    torch.cuda.synchronize()
    res[nbytes] = s.elapsed_time(e) / iters
    del x
if dist.get_rank() == 0:
    print("NCCL_LAT " + json.dumps(res), flush=True)
dist.destroy_process_group()
sys.exit(0)
