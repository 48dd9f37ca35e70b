"""A small training loop written against Megatron-LM's Timers and EnergyMonitor API (the call
shapes of megatron/training/training.py and the pipeline schedules), run unchanged with
trainprof.megatron. Used by test_megatron.py. With WORLD_SIZE > 1 it initialises
torch.distributed (gloo) as Megatron would, and trainprof registers it as its collectives
hook by itself. TPROF_DIST_BACKEND=nccl runs it on the GPUs instead (one per rank, with a
little GPU work per iteration, so the EnergyMonitor reads real joules).

To compare with Megatron-LM itself: TPROF_USE_MEGATRON=1 imports megatron.core instead.
Then the injected values below print the same lines."""
import logging
import os
import sys
import time

if os.environ.get("TPROF_USE_MEGATRON") == "1":
    from megatron.core.energy_monitor import EnergyMonitor
    from megatron.core.timers import Timers
else:
    from trainprof.megatron import EnergyMonitor, Timers

logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = 0
backend = os.environ.get("TPROF_DIST_BACKEND", "gloo")
gpu_work = None
if world > 1:
    import torch
    import torch.distributed as dist
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        x = torch.randn(4096, 4096, device="cuda")

        def gpu_work():
            torch.tanh(x @ x)
    dist.init_process_group(backend)
    rank = dist.get_rank()

option = sys.argv[1] if len(sys.argv) > 1 else "minmax"
log_interval = 10
timers = Timers(2, option)
energy = EnergyMonitor()
energy.setup()
energy.resume()


class PrintWriter:
    """A TensorBoard-style writer: SummaryWriter.add_scalar's shape."""

    def add_scalar(self, tag, value, step):
        print("[rank %d] add_scalar %s %.6f %d" % (rank, tag, value, step))


timers("interval-time", log_level=0).start(barrier=True)
for iteration in range(1, log_interval + 1):
    timers("batch-generator", log_level=2).start()
    time.sleep(0.0005)
    timers("batch-generator").stop()
    timers("forward-backward", log_level=1).start(barrier=False)
    timers("forward-compute", log_level=2).start()
    if gpu_work:
        gpu_work()
    time.sleep(0.001)
    timers("forward-compute").stop()
    timers("backward-compute", log_level=2).start()
    time.sleep(0.002)
    timers("backward-compute").stop()
    timers("forward-backward").stop()
elapsed_time = timers("interval-time").elapsed(barrier=True)
assert elapsed_time > 0.03, elapsed_time
lap = energy.lap()
print("[rank %d] measured %.1f ms per iteration, energy %.1f J" % (
    rank, elapsed_time * 1000.0 / log_interval, lap))
timers("forward-compute").elapsed(reset=True)  # the measured values are not compared

# Known values per rank (seconds over the interval): what the compared lines show.
known = [{"forward-compute": 1.25, "backward-compute": 3.0},
         {"forward-compute": 2.0, "backward-compute": 3.5, "batch-generator": 0.05}]
for name in ("forward-compute", "backward-compute", "batch-generator"):
    timers(name).set_elapsed(known[rank % 2].get(name, 0.0))
names = ["forward-compute", "backward-compute", "optimizer", "batch-generator"]
timers.write(names, PrintWriter() if rank == world - 1 else None, 100,
             normalizer=log_interval)
timers.log(names, normalizer=log_interval)
energy.lap()
total = energy.get_total()
if rank == 0:
    print("Total training energy (GPU): %.3f MJ" % (total / 1e6))
energy.shutdown()
if world > 1:
    # as train_gpt.py does: torch 1.13's gloo group torn down at interpreter exit instead
    # can abort ("terminate called without an active exception")
    dist.destroy_process_group()
