"""GPU-accurate Timers on torch's current stream (tests/gpu/device_names_timer_stream.sh): bf16 matmuls
launched between start and stop, on the default stream and on a side stream made current
with `torch.cuda.stream(s)`; each timer mode against CUDA events recorded by torch on that
same stream around the same work, and the host time of the launches.
  current   set_timing('cuda_events'): events on torch's current stream at each edge
  fixed0    set_timing('cuda_events', cuda_stream=0): the legacy default stream only
  sync      set_timing('cuda_sync'): Megatron's device synchronize before each edge
  megatron  trainprof.megatron.Timers with set_timing('cuda_events')
"""
import time

import torch

import trainprof
from trainprof import megatron

N, REPS = 8192, 5
a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)


def work():
    for _ in range(12):
        a @ a


def timers(mode):
    if mode == "megatron":
        ts = megatron.Timers(2, "max")
        ts.set_timing("cuda_events")
    else:
        ts = trainprof.Timers(2, "max")
        if mode == "fixed0":
            ts.set_timing("cuda_events", cuda_stream=0)
        else:
            ts.set_timing("cuda_events" if mode == "current" else "cuda_sync")
    return ts


side = torch.cuda.Stream()
work()
torch.cuda.synchronize()
for where in ("default stream", "side stream"):
    for mode in ("current", "fixed0", "sync", "megatron"):
        ts = timers(mode)
        t = ts("work")
        ref = host = 0.0
        with torch.cuda.stream(side if where == "side stream" else torch.cuda.current_stream()):
            for _ in range(REPS):
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                h0 = time.perf_counter()
                t.start()
                work()
                t.stop()
                host += time.perf_counter() - h0
                e1.record()
                e1.synchronize()
                ref += e0.elapsed_time(e1)
        got = t.elapsed() * 1e3
        torch.cuda.synchronize()
        print("%-14s %-8s timer %8.3f ms  torch events %8.3f ms  (%+.2f %%)  host %7.3f ms"
              % (where, mode, got / REPS, ref / REPS, 100.0 * (got - ref) / ref, 1e3 * host / REPS))
