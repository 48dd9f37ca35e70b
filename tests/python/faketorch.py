"""A stand-in for torch with a scripted CUDA caching allocator, for trainprof.torch's memory
capture on machines without torch or a GPU (tests/python/test_memory.py). install() puts it in
sys.modules["torch"]; it holds just what trainprof.torch touches: nn.Module with the global
forward hooks, an Optimizer with step hooks, a DataLoader and its iterator class,
autograd.backward, and torch.cuda with the allocator's API as torch/cuda/memory.py gives it
(memory_stats, memory_stats_as_nested_dict, max_memory_allocated, _snapshot,
_record_memory_history, torch._C._cuda_attach_out_of_memory_observer and the
torch._C._cuda_memoryStats that memory_stats_as_nested_dict wraps).

The allocator (device 0, 80 MiB): alloc(n) adds n bytes to the allocated figure (its peak
follows) as one allocation; reserved grows in 2 MiB segments to hold what is allocated and
never shrinks; active = allocated; inactive split = reserved - allocated. free(n) takes them
back. An allocation that would pass CAPACITY is an OOM as PyTorch's allocator does it: num_ooms
+ 1, each observer called with (device, bytes, capacity, capacity - reserved), then
OutOfMemoryError raised. Live allocations carry the frames given to alloc in the snapshot
while history is recorded.
"""
import sys
import types

MiB = 1 << 20
SEGMENT = 2 * MiB
CAPACITY = 80 * MiB


class OutOfMemoryError(RuntimeError):
    pass


class Allocator:
    def __init__(self):
        self.initialized = False
        self.allocated = self.peak = self.reserved = self.reserved_peak = 0
        self.allocations = self.frees = self.ooms = self.retries = 0
        self.live = []        # [size, frames]
        self.observers = []
        self.history = None   # (max_entries, stacks) once _record_memory_history was called
        self.resets = 0       # reset_peak_memory_stats calls
        self.stats_calls = 0
        self.c_stats_calls = 0  # of which through torch._C._cuda_memoryStats
        self.available_calls = 0  # torch.cuda.is_available: cudaGetDeviceCount initialises
        # the driver, which breaks CUDA in children forked after it (PyTorch's
        # PYTORCH_NVML_BASED_CUDA_CHECK, "CUDA Environment Variables")

    def alloc(self, n, frames=()):
        if self.allocated + n > CAPACITY:
            self.ooms += 1
            for obs in list(self.observers):
                obs(0, n, CAPACITY, CAPACITY - self.reserved)
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % n)
        self.allocated += n
        self.allocations += 1
        self.peak = max(self.peak, self.allocated)
        need = -(-self.allocated // SEGMENT) * SEGMENT
        self.reserved = max(self.reserved, need)
        self.reserved_peak = max(self.reserved_peak, self.reserved)
        self.live.append([n, list(frames) if self.history else []])

    def free(self, n):
        for i, (size, _) in enumerate(self.live):
            if size == n:
                del self.live[i]
                break
        self.allocated -= n
        self.frees += 1

    def nested(self):
        self.stats_calls += 1

        def stat(cur, peak):
            return {"all": {"current": cur, "peak": peak, "allocated": 0, "freed": 0}}
        return {
            "allocated_bytes": stat(self.allocated, self.peak),
            "reserved_bytes": stat(self.reserved, self.reserved_peak),
            "active_bytes": stat(self.allocated, self.peak),
            "inactive_split_bytes": stat(self.reserved - self.allocated, 0),
            "allocation": {"all": {"current": len(self.live), "peak": 0,
                                   "allocated": self.allocations, "freed": self.frees}},
            "num_alloc_retries": self.retries,
            "num_ooms": self.ooms,
        }

    def flat(self):
        out = {}

        def walk(prefix, d):
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(prefix + k + ".", v)
                else:
                    out[prefix + k] = v
        walk("", self.nested())
        return dict(sorted(out.items()))

    def snapshot(self):
        blocks = [{"address": 0, "size": s, "requested_size": s, "state": "active_allocated",
                   "frames": [dict(f) for f in fr]} for s, fr in self.live]
        free = self.reserved - self.allocated
        if free:
            blocks.append({"address": 0, "size": free, "requested_size": 0,
                           "state": "inactive", "frames": []})
        return {"segments": [{"device": 0, "address": 0, "total_size": self.reserved,
                              "allocated_size": self.allocated, "stream": 0,
                              "segment_type": "large", "blocks": blocks}],
                "device_traces": [[]]}


A = Allocator()


def install(nested=True):
    """The fake as sys.modules["torch"]; nested=False leaves out memory_stats_as_nested_dict
    and torch._C._cuda_memoryStats (a torch with only the flat memory_stats)."""
    torch = types.ModuleType("torch")
    torch.A = A

    # ----------------------------------------------------------------- nn
    pre_hooks, post_hooks, always = [], [], set()

    class Module:
        def __call__(self, *args):
            # as torch 2.1+'s Module._call_impl (torch/nn/modules/module.py): the hooks
            # registered with always_call run when the pre hooks or forward raise an
            # Exception; a BaseException that is no Exception (KeyboardInterrupt,
            # SystemExit) unwinds past every hook
            out, called = None, set()
            try:
                for h in list(pre_hooks):
                    h(self, args)
                out = self.forward(*args)
                for h in list(post_hooks):
                    called.add(id(h))
                    h(self, args, out)
                return out
            except Exception:
                for h in list(post_hooks):
                    if id(h) in always and id(h) not in called:
                        try:
                            h(self, args, out)
                        except Exception:
                            pass
                raise

        def __setattr__(self, name, value):
            # submodules register as attributes do in torch (Module.__setattr__ -> _modules)
            if isinstance(value, Module):
                self.__dict__.setdefault("_modules", {})[name] = value
            object.__setattr__(self, name, value)

        def children(self):
            return list(self.__dict__.get("_modules", {}).values())

        def named_modules(self, prefix=""):
            yield prefix, self
            for name, m in self.__dict__.get("_modules", {}).items():
                yield from m.named_modules(prefix + "." + name if prefix else name)

        def parameters(self, recurse=True):
            own = list(getattr(self, "params", []))
            if recurse:
                for m in self.children():
                    own += m.parameters()
            return own

    module_mod = types.SimpleNamespace(
        register_module_forward_pre_hook=lambda h: pre_hooks.append(h),
        register_module_forward_hook=lambda h, always_call=False: (
            post_hooks.append(h), always.add(id(h)) if always_call else None)[0])
    torch.nn = types.SimpleNamespace(Module=Module,
                                     modules=types.SimpleNamespace(module=module_mod))

    # ----------------------------------------------------------------- optim
    class Optimizer:
        def __init__(self, params):
            self.param_groups = [{"params": list(params)}]
            self._pre, self._post = [], []

        def register_step_pre_hook(self, h):
            self._pre.append(h)

        def register_step_post_hook(self, h):
            self._post.append(h)

        def step(self):
            for h in self._pre:
                h(self, (), {})
            self.do_step()
            for h in self._post:
                h(self, (), {})

    torch.optim = types.SimpleNamespace(Optimizer=Optimizer)

    # ----------------------------------------------------------------- data
    class _BaseDataLoaderIter:
        def __init__(self, items):
            self._it = iter(items)

        def __next__(self):
            return next(self._it)

        def __iter__(self):
            return self

    class DataLoader:
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return _BaseDataLoaderIter(self.items)

    torch.utils = types.SimpleNamespace(data=types.SimpleNamespace(
        DataLoader=DataLoader, dataloader=types.SimpleNamespace(_BaseDataLoaderIter=_BaseDataLoaderIter)))

    # ----------------------------------------------------------------- autograd
    def backward(fn):
        fn()
    torch.autograd = types.SimpleNamespace(backward=backward)

    # ----------------------------------------------------------------- cuda
    def init():
        A.initialized = True

    def available():
        A.available_calls += 1
        return True

    def attach(obs):
        init()  # as torch's: attaching initialises CUDA (torch/csrc/cuda/Module.cpp)
        A.observers.append(obs)

    def record_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                       device=None):
        A.history = (max_entries, stacks)

    def reset_peak(device=None):
        A.resets += 1
        A.peak = A.allocated

    memory = types.SimpleNamespace(
        _snapshot=lambda device=None: A.snapshot(),
        _record_memory_history=record_history)
    if nested:
        memory.memory_stats_as_nested_dict = lambda device=None: A.nested()
    torch.cuda = types.SimpleNamespace(
        is_available=available,
        is_initialized=lambda: A.initialized,
        init=init,
        current_device=lambda: 0,
        memory_stats=lambda device=None: A.flat(),
        memory_allocated=lambda device=None: A.allocated,
        max_memory_allocated=lambda device=None: A.peak,
        reset_peak_memory_stats=reset_peak,
        OutOfMemoryError=OutOfMemoryError,
        memory=memory)
    torch._C = types.SimpleNamespace(_cuda_getDevice=lambda: 0,
                                     _cuda_attach_out_of_memory_observer=attach)
    if nested:
        def c_stats(device):  # what memory_stats_as_nested_dict returns, called directly
            A.c_stats_calls += 1
            return A.nested()
        torch._C._cuda_memoryStats = c_stats
    sys.modules["torch"] = torch
    return torch
