"""torch.distributed as trainprof's collectives hook (tprof_set_collectives).

The C callbacks of the hook (python/src/collectives.c) call these functions; they move the
Timers' [world x timers] float32 matrix and the EnergyMonitor's joules with
torch.distributed over the default (world) process group: all_gather_into_tensor when the
backend supports it (NCCL on torch >= 1.13), else the list form of all_gather (gloo, older
torch); all_reduce on float64; barrier. With NCCL the tensors live on the current CUDA
device, otherwise on the CPU. torch is never imported here: only a program that imported
it (and initialised the process group) gets the hook.
"""
import sys

from . import _trainprof

_registered = False


def _dist():
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None
    dist = getattr(torch, "distributed", None)
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return torch, None
    except Exception:  # a half-imported or broken torch: no hook
        return torch, None
    return torch, dist


def _device(torch, dist):
    try:
        backend = str(dist.get_backend()).lower()
    except Exception:
        backend = ""
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class _TorchHook:
    """The three callbacks, bound to one torch and one device."""

    def __init__(self, torch, dist):
        self.torch = torch
        self.dist = dist
        self.device = _device(torch, dist)
        self.world = dist.get_world_size()
        backend = str(dist.get_backend()).lower()
        # gloo in torch 1.13 has no _allgather_base: use the list form there
        self.into_tensor = "gloo" not in backend and (
            hasattr(dist, "all_gather_into_tensor") or hasattr(dist, "_all_gather_base"))

    def all_gather(self, data: bytes) -> bytes:
        torch, dist = self.torch, self.dist
        send = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device) \
            if len(data) else torch.empty(0, dtype=torch.uint8, device=self.device)
        if self.into_tensor:
            out = torch.empty(self.world * len(data), dtype=torch.uint8, device=self.device)
            fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
            fn(out, send)
        else:
            parts = [torch.empty(len(data), dtype=torch.uint8, device=self.device)
                     for _ in range(self.world)]
            dist.all_gather(parts, send)
            out = torch.cat(parts)
        out = out.cpu()
        try:
            return out.numpy().tobytes()
        except Exception:  # torch without numpy
            return bytes(out.tolist())

    def all_reduce(self, values, op):
        torch, dist = self.torch, self.dist
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        rop = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]
        dist.all_reduce(t, op=rop)
        return t.cpu().tolist()

    def barrier(self):
        self.dist.barrier()


def register_torch_distributed(force: bool = False) -> bool:
    """Register torch.distributed (default group) as the collectives hook now.

    Without force, only when torch.distributed is initialised and no hook is registered
    (an MPI program's hook from libtrainprof_mpi.so, or the program's own, is kept).
    Returns True when this call registered the hook.
    """
    global _registered
    torch, dist = _dist()
    if dist is None:
        return False
    cur = _trainprof.get_collectives()
    if cur["registered"] and not force:
        return False
    world = dist.get_world_size()
    if world <= 1 and not force:
        return False
    h = _TorchHook(torch, dist)
    _trainprof.set_collectives(dist.get_rank(), world, h.all_gather, h.all_reduce, h.barrier)
    _registered = True
    return True


def maybe_register_torch():
    """The hook provider: run before each collective call of Timers/EnergyMonitor."""
    global _registered
    if "torch" not in sys.modules:
        return
    if _registered:
        # the program destroyed its process group: drop the hook that used it
        if _dist()[1] is None:
            _trainprof.clear_collectives()
            _registered = False
        return
    register_torch_distributed()
