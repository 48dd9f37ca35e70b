from typing import Any, Optional, Sequence

from ._trainprof import EnergyMonitor as _EnergyMonitor
from ._trainprof import Timer as Timer
from ._trainprof import Timers as _Timers

class Timers(_Timers):
    def __init__(self, log_level: int, log_option: str) -> None: ...
    def log(self, names: Optional[Sequence[str]], rank: Optional[int] = ...,
            normalizer: float = ..., reset: bool = ..., barrier: bool = ...) -> None: ...  # type: ignore[override]
    def write(self, names: Optional[Sequence[str]], writer: Any, iteration: int,
              normalizer: float = ..., reset: bool = ..., barrier: bool = ...) -> None: ...

class EnergyMonitor(_EnergyMonitor): ...
