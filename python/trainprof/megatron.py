"""Drop-in replacements for Megatron-LM's ``megatron.core.timers.Timers`` and
``megatron.core.energy_monitor.EnergyMonitor``, backed by libtrainprof.

Change one import::

    # from megatron.core.timers import Timers
    from trainprof.megatron import Timers
    # from megatron.core.energy_monitor import EnergyMonitor
    from trainprof.megatron import EnergyMonitor

Same constructors and method signatures, same printed text. What differs (docs/python.md):
host time is CLOCK_MONOTONIC and no device is synchronised (Megatron: time.time() after
torch.cuda.synchronize(); ``timers.set_timing('cuda_sync')`` gives Megatron's numbers,
``'cuda_events'`` GPU time on torch's current stream); starting a running timer (or
stopping a stopped one) warns once instead of asserting; energy comes from every GPU of the rank found by UUID. Cross-rank
values go through torch.distributed (registered as trainprof's collectives hook once the
process group is initialised, unless another hook, e.g. MPI's, is registered).
"""
import logging as _logging

from . import _trainprof
from ._trainprof import Timer  # noqa: F401

__all__ = ["Timers", "Timer", "EnergyMonitor"]

_logger = _logging.getLogger("megatron.core.timers")


class Timers(_trainprof.Timers):
    """Megatron-LM's ``Timers(log_level, log_option)``.

    log_level: 0..2, timers above it are dummies; log_option: 'max', 'minmax' or 'all'.
    ``timers(name, log_level=None)`` returns a Timer with ``start(barrier=False)``,
    ``stop(barrier=False)``, ``reset()``, ``elapsed(reset=True, barrier=False)`` (seconds),
    ``active_time()``, ``set_elapsed(seconds)``, ``set_barrier_group(group)``. As in
    Megatron a level mismatch raises AssertionError and a dummy timer's ``elapsed()`` raises.
    """

    def __init__(self, log_level, log_option):
        super().__init__(log_level, log_option, strict=True)

    def log(self, names, rank=None, normalizer=1.0, reset=True, barrier=False):
        """Collective. Rank ``rank`` (default the last) logs Megatron's text with
        ``logging.getLogger('megatron.core.timers').info`` (as Megatron-LM does): average
        milliseconds per normalizer unit (pass the log interval)."""
        assert normalizer > 0.0
        text = self.get_all_timers_string(names, normalizer, reset, barrier)
        info = _trainprof.get_collectives()
        if rank is None:
            rank = info["world_size"] - 1
        if rank == info["rank"] and text is not None:
            _logger.info(text)

    def write(self, names, writer, iteration, normalizer=1.0, reset=False, barrier=False):
        """Collective. ``writer.add_scalar(name + '-time', max over ranks, iteration)`` for
        each timer with a value, in SECONDS per normalizer unit (Megatron's TensorBoard
        values)."""
        assert normalizer > 0.0
        super().write(names, writer, iteration, normalizer, reset, barrier)


class EnergyMonitor(_trainprof.EnergyMonitor):
    """Megatron-LM's ``EnergyMonitor()``: ``setup()``, ``resume()``, ``pause()``,
    ``lap()`` and ``get_total()`` (collective; joules summed over every rank's GPUs, 0.0
    without NVML) and ``shutdown()``."""


# ---------------------------------------------------------------- Megatron-LM's own timers

class _Recorded:
    """What ``megatron.core.timers.Timers.__call__`` returns, once trainprof watches it: the
    program's timer (a real one, or the shared dummy above ``--timing-log-level``) and, for
    each start and stop, the same edge on a trainprof timer of the same name. The program's
    timer runs first, so a real one's own synchronisation and barrier happen where Megatron
    puts them and the interval recorded is the one it measures; a dummy's interval is the
    host time between the calls, with no synchronisation added. Everything else (elapsed,
    reset, active_time, ...) is the program's timer's."""
    __slots__ = ("_t", "_o")

    def __init__(self, timer, ours):
        self._t = timer
        self._o = ours

    def start(self, barrier=False):
        self._t.start(barrier=barrier)
        self._o.start()

    def stop(self, barrier=False):
        self._t.stop(barrier=barrier)
        self._o.stop()

    def __getattr__(self, name):
        return getattr(self._t, name)


def watch_megatron_timers(module):
    """Records the intervals of Megatron-LM's own timers (``megatron.core.timers``, the
    module given) under their names as trainprof timer ranges (domain "trainprof",
    category "timers": the report's "timers" section), at every ``--timing-log-level``: a
    timer above the level is Megatron's shared dummy, and its calls still mark the interval.
    Called by ``trainprof run --python`` when the program imports that module; does nothing
    when trainprof is not recording or the module has no ``Timers``."""
    if not _trainprof.enabled():
        return False
    cls = getattr(module, "Timers", None)
    if cls is None or getattr(cls, "_trainprof_watched", False):
        return False
    orig_call = cls.__call__
    ours = _trainprof.Timers(0, "max")

    def __call__(self, name, *args, **kwargs):
        t = orig_call(self, name, *args, **kwargs)
        cache = self.__dict__.setdefault("_trainprof_recorded", {})
        r = cache.get(name)
        if r is None or r._t is not t:
            r = cache[name] = _Recorded(t, ours(name, 0))
        return r

    __call__.__wrapped__ = orig_call
    __call__.__doc__ = orig_call.__doc__
    cls.__call__ = __call__
    cls._trainprof_watched = True
    return True
