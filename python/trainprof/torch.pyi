from typing import Any, Dict, Optional, Sequence, Union

def instrument(model: Optional[Any] = None,
               optimizer: Optional[Union[Any, Sequence[Any]]] = None,
               dataloader: Optional[Any] = None) -> bool:
    """Record steps (at optimizer steps), data/forward/backward/optimizer ranges,
    torch.distributed collectives, CUDA allocator counters; False when not recording."""
def autostart() -> bool:
    """What `trainprof run --python` calls when torch is imported."""
def instrumented() -> Dict[str, Any]: ...
def current_cuda_stream() -> int:
    """torch's current CUDA stream (cudaStream_t as int; 0 before CUDA is initialised)."""
