"""trainprof: a profiler for distributed deep-learning training, from Python.

Ranges, marks, counters and steps are recorded by libtrainprof (the C library) into this
process's rank file when a session records (under ``trainprof run``, or with TRAINPROF_DIR
set, or after :func:`init`); otherwise every call is a cheap no-op. Times are nanoseconds
on CLOCK_MONOTONIC in the files; the Timers API speaks seconds (and prints milliseconds)
as Megatron-LM does; energy is in joules. See docs/python.md.

    import trainprof
    with trainprof.range("forward"):
        loss = model(batch)

    @trainprof.range("data")
    def next_batch(): ...

    timers = trainprof.Timers(log_level=2, log_option="minmax")
    timers("forward-compute", log_level=2).start()
    ...
    timers.log(["forward-compute"], normalizer=log_interval)

For a drop-in replacement of Megatron-LM's classes, import :mod:`trainprof.megatron`.
"""
import atexit as _atexit

from ._trainprof import (  # noqa: F401  (re-exported API)
    ERR_ALREADY,
    ERR_DISABLED,
    ERR_INVALID_ARG,
    ERR_NOT_FOUND,
    ERR_UNAVAILABLE,
    EnergyMonitor,
    Error,
    HEADER_VERSION,
    Timer,
    Timers,
    avg_watts,
    build_info,
    clear_collectives,
    counter,
    enabled,
    flush,
    get_collectives,
    gpu_capture_pause,
    gpu_capture_resume,
    gpu_capture_steps,
    init,
    joules_per_sample,
    joules_per_step,
    mark,
    name_thread,
    now_ns,
    output_path,
    pop,
    push,
    range,
    range_end,
    range_start,
    set_collectives,
    set_metadata,
    set_rank,
    shutdown,
    step,
    step_begin,
    step_end,
    strerror,
    version,
    wh_per_sample,
    wh_per_step,
)
from . import _trainprof
from ._dist import maybe_register_torch as _maybe_register_torch
from ._dist import register_torch_distributed  # noqa: F401

__version__ = HEADER_VERSION

__all__ = [
    "ERR_ALREADY", "ERR_DISABLED", "ERR_INVALID_ARG", "ERR_NOT_FOUND", "ERR_UNAVAILABLE",
    "EnergyMonitor", "Error", "Timer", "Timers", "avg_watts", "build_info",
    "clear_collectives", "counter", "enabled", "flush", "get_collectives", "get_rank",
    "get_world_size", "capture", "gpu_capture_pause", "gpu_capture_resume", "gpu_capture_steps", "init", "joules_per_sample", "joules_per_step", "mark", "name_thread",
    "now_ns", "output_path", "pop", "push", "range", "range_end", "range_start",
    "register_torch_distributed", "set_collectives", "set_metadata", "set_rank", "shutdown",
    "step", "step_begin", "step_end", "strerror", "version", "wh_per_sample", "wh_per_step",
]


def capture(steps: int, start: "int | None" = None) -> int:
    """Record GPU activity (kernels, copies, CUDA calls) in the next `steps` training steps, or
    in `steps` steps from step number `start`, on top of the capture plan
    (`trainprof run --gpu-capture`), without restarting the job: the window that
    `trainprof capture` opens from outside. Ranks that call it at the same point of the same
    step capture the same step numbers. Returns 0, or a negative library code, never raises
    for the library's answer: ERR_ALREADY when every step is captured already (plan "all"),
    ERR_UNAVAILABLE with plan "off", ERR_DISABLED when not recording, ERR_INVALID_ARG for
    steps < 1, steps >= 2**64 or a window past step 2**64 - 2."""
    if steps < 1:
        return ERR_INVALID_ARG
    return gpu_capture_steps(-1 if start is None else start, steps)


def get_rank() -> int:
    """This process's rank as the collectives hook sees it (0 without a hook)."""
    _trainprof._ensure_hook()
    return get_collectives()["rank"]


def get_world_size() -> int:
    """The number of ranks the collectives hook spans (1 without a hook)."""
    _trainprof._ensure_hook()
    return get_collectives()["world_size"]


# Timers and EnergyMonitor register torch.distributed as the collectives hook the first time
# they need one after the program initialised it (and only when no hook is registered yet).
_trainprof._set_hook_provider(_maybe_register_torch)


def _at_exit():
    # The hook's callables are Python: remove it before the interpreter tears them down.
    _trainprof._set_hook_provider(None)
    clear_collectives()


_atexit.register(_at_exit)
