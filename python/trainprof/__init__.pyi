from ._trainprof import (
    ERR_ALREADY as ERR_ALREADY, ERR_DISABLED as ERR_DISABLED,
    ERR_INVALID_ARG as ERR_INVALID_ARG, ERR_NOT_FOUND as ERR_NOT_FOUND,
    ERR_UNAVAILABLE as ERR_UNAVAILABLE,
    EnergyMonitor as EnergyMonitor, gpu_capture_pause as gpu_capture_pause,
    gpu_capture_resume as gpu_capture_resume, gpu_capture_steps as gpu_capture_steps, Error as Error, HEADER_VERSION as HEADER_VERSION,
    Timer as Timer, Timers as Timers, avg_watts as avg_watts, build_info as build_info,
    clear_collectives as clear_collectives, counter as counter, enabled as enabled,
    flush as flush, get_collectives as get_collectives, init as init,
    joules_per_sample as joules_per_sample, joules_per_step as joules_per_step, mark as mark,
    name_thread as name_thread, now_ns as now_ns, output_path as output_path, pop as pop,
    push as push, range as range, range_end as range_end, range_start as range_start,
    set_collectives as set_collectives, set_metadata as set_metadata, set_rank as set_rank,
    shutdown as shutdown, step as step, step_begin as step_begin, step_end as step_end,
    strerror as strerror, version as version, wh_per_sample as wh_per_sample,
    wh_per_step as wh_per_step,
)

__version__: str

def capture(steps: int, start: int | None = None) -> int:
    """GPU activity in the next `steps` steps (or from step `start`) on top of the capture
    plan: 0 or a negative library code (tprof_gpu_capture_steps)."""
def get_rank() -> int: ...
def get_world_size() -> int: ...
def register_torch_distributed(force: bool = ...) -> bool:
    """Register torch.distributed's default group as the collectives hook; True when
    registered by this call."""
