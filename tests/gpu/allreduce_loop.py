"""An isolated all-reduce loop timed by the program itself with CUDA events, to check
trainprof's NCCL durations and bus bandwidth (tests/gpu/allreduce_compare.py).

    trainprof run -o DIR -- torchrun --nproc_per_node=2 tests/gpu/allreduce_loop.py \
        --sizes-mib 1,4,16,64,256 --iters 20 --json times.json

Per size: --warmup all-reduces, then --iters ones, each between two CUDA events recorded on
the current stream (the all-reduce's NCCL stream waits for the first, the current stream
waits for the collective before the second). Rank 0 writes every op's milliseconds.

The timed ops are queued behind a --queue-ms spin kernel, so the host has enqueued them all
before the GPU reaches them: the events then time the GPU's work, not how fast the host
launches (without it, a 1 MiB all-reduce on an idle GPU measured ~10 us of host launch
latency on top of the ~140 us kernel).
"""
import argparse
import json
import os

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--sizes-mib", default="1,4,16,64,256")
p.add_argument("--iters", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--json", default=None)
p.add_argument("--queue-ms", type=float, default=20.0, help="spin before the timed ops (0: none)")
a = p.parse_args()

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
rank, world = dist.get_rank(), dist.get_world_size()
out = {"world": world, "sizes": []}
for mib in (float(s) for s in a.sizes_mib.split(",")):
    nbytes = int(mib * (1 << 20))
    x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    for _ in range(a.warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(a.iters)]
    if a.queue_ms > 0:  # ~1.98 GHz SM clock on an H200: cycles per ms
        torch.cuda._sleep(int(a.queue_ms * 1.98e6))
    for s, e in ev:
        s.record()
        dist.all_reduce(x)
        e.record()
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in ev]
    ms_sorted = sorted(ms)
    med = ms_sorted[len(ms) // 2]
    algbw = nbytes / (med / 1e3) / 1e9
    busbw = algbw * 2 * (world - 1) / world
    out["sizes"].append({"bytes": nbytes, "warmup": a.warmup, "ms": ms})
    if rank == 0:
        print("allreduce %9d bytes: median %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s (CUDA events)"
              % (nbytes, med, algbw, busbw), flush=True)
    del x
if rank == 0 and a.json:
    with open(a.json, "w") as f:
        json.dump(out, f)
dist.destroy_process_group()
