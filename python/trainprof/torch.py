"""trainprof.torch: a PyTorch training loop recorded with no change to its code.

``instrument(model=None, optimizer=None, dataloader=None)`` records, into this process's rank
file (docs/python.md, "trainprof.torch"):

- **steps**: training iterations. A step begins at the first data fetch, forward or
  backward after the previous optimizer step (or at the optimizer step itself) and its end
  is written when ``optimizer.step()`` returns (``tprof_step_begin/end``, numbered from 0 on
  the thread that trains); the metadata ``trainprof.torch.steps = iteration`` tells the
  report to read each step as running to the next one's begin, so that the work after the
  optimizer belongs to its iteration;
- **phases** as ranges at the top of the step: ``data`` (each DataLoader iterator fetch, and
  ``iter(loader)``, which starts workers), ``forward`` (the top-level module: forward pre and
  post hooks), ``backward`` (each call into the autograd engine's ``run_backward``:
  ``torch.autograd.backward``, ``Tensor.backward``, ``torch.autograd.grad`` and programs that
  call the engine directly, as Megatron-LM does; it holds DDP's gradient reduction) and
  ``optimizer`` (``optimizer.step()``: a wrapper on torch 1.13, whose optimizers have no step
  hooks; ``register_step_pre_hook``/``register_step_post_hook`` where they exist);
- **torch.distributed collectives** (all_reduce, all_gather, all_gather_into_tensor,
  reduce_scatter, reduce_scatter_tensor, broadcast, reduce, all_to_all_single, gather,
  scatter, barrier, send, recv, isend, irecv; blocking, or async with the returned work
  object: start to the return of ``wait()``) and DistributedDataParallel's gradient
  all-reduce (through a DDP communication hook doing what DDP's default does, timed to the
  completion of its future), as COMM_OP records of source torch with bytes (numel x
  element_size), group size, rank in the group, and the group's description (backend and
  member ranks) as metadata ``torch.pg.<id>``. With the NCCL backend the NCCL profiler
  plugin records the same collectives, so torch records none of them (nothing counts
  twice): only the description is written, and the report joins it to the NCCL
  communicator of that size;
- **CUDA caching-allocator samples** once the program initialised CUDA (never before: we
  never initialise it): the allocator's figures of the current device (allocated, reserved,
  their peaks, active, inactive split, allocation, free, retry and OOM counts; docs/format.md,
  "Memory") as counters at each phase boundary (a data fetch's end, the model's forward begin
  and end, backward begin and end, optimizer begin and end, step end), read from one
  ``torch._C._cuda_memoryStats`` call each (``memory_stats`` where torch lacks it); nothing
  that changes the allocator's state (its peaks stay the job's). ``TRAINPROF_MEMORY=0``
  turns it off;
- **module detail** in the steps the GPU capture plan chose (``auto``: the first steps, then
  five every thousand; an on-demand window; ``tprof_gpu_capture_on``): a range
  ``nn.Module: NAME`` around the forward of each of the model's modules down to
  ``_MODULE_DEPTH`` names below it (``decoder.layers.3``: wrappers with one child and no
  parameters of their own, as DDP and Megatron-LM's Float16Module, are looked through; the
  model itself goes by its class name, ``GPTModel``, for its own code), with
  an allocator sample at its begin and end, so the report names the module where a step's
  peak fell. In every step the name of the innermost module whose forward runs is kept (a
  list append and pop per module call) for the OOM post-mortem (``memory.oom.module``); a
  forward unwound past its post hook (torch runs none for a KeyboardInterrupt) has its
  ranges closed at the loop's next phase;
- **the OOM post-mortem**: an observer on the allocator's out-of-memory path writes a
  ``cuda.oom`` mark, a sample, the ``memory.oom.*`` metadata (request, free and total, step
  and phase, the largest live allocations, the largest free block) and PyTorch's memory
  snapshot beside the rank file, then flushes; the job's OutOfMemoryError is raised as
  without trainprof. ``TRAINPROF_MEMORY_HISTORY=N`` asks PyTorch to keep its last N
  allocations with their Python stacks, for the snapshot and the named allocations;
- **torch.profiler**: trainprof's CUPTI capture is paused while a profiler with CUDA activity
  holds CUPTI, from its warm-up (or start) to its stop, also under ``schedule=``, whose wait
  steps stay captured (the two cannot share CUPTI), and the report names the steps.

It never changes what the program computes: hooks only read clocks and call the library
(losses are bitwise identical with and without it on CPU: tests/torch_run_test.sh).
torch is imported only by the program: this module touches ``sys.modules["torch"]``.
``autostart()`` is what ``trainprof run --python`` calls when the program imports torch.
"""

import json
import os
import pickle
import sys
import threading
import types
import warnings
import weakref

from . import _trainprof as _tp

__all__ = ["instrument", "autostart", "instrumented", "current_cuda_stream"]

# enum tprof_comm_op (src/format/format.h)
_ALLREDUCE, _ALLGATHER, _REDUCESCATTER, _BROADCAST, _REDUCE, _ALLTOALL = 1, 2, 3, 4, 5, 6
_SEND, _RECV, _BARRIER, _GATHER, _SCATTER = 7, 8, 9, 10, 11
_F_NONBLOCKING = 4  # TPROF_COMM_F_NONBLOCKING: start to observed completion
_F_ENQUEUE = 8      # TPROF_COMM_F_ENQUEUE: the host interval is only the enqueue (NCCL)
_WAIT = 0           # TPROF_COMM_UNKNOWN, named "Wait": the host blocked until ops completed

_lock = threading.RLock()


class _State:
    def __init__(self):
        self.step = 0
        self.in_step = False
        self.optimizers = []        # instrumented optimizers (kept alive: few)
        self.models = {}            # id(model) -> weakref of the models (forward phase)
        self.patched = set()        # names of what is patched process-wide
        self.groups = {}            # id(pg) -> _Group
        self.group_names = {}       # id(pg) -> the group_desc given to new_group
        self.group_ordinal = {}     # (backend, ranks) -> count, for duplicate groups
        self.opt_param_ids = []     # per optimizer: frozenset of id(param)
        self.rule_written = False
        self.after_opt = False      # an optimizer step ended the step; nothing since
        self.capturing = 0          # CUDA graph captures open on the training thread
        self.step_in_capture = False  # an optimizer step ran inside the open capture
        self.train_thread = None    # get_ident() of the thread of the first backward


_S = _State()


def instrumented():
    """What is instrumented now: a dict for tests and curiosity."""
    return {"step": _S.step, "in_step": _S.in_step, "optimizers": len(_S.optimizers),
            "modules": len(_S.models), "patched": sorted(_S.patched)}


def _torch():
    t = sys.modules.get("torch")
    if t is None:
        raise RuntimeError("trainprof.torch: import torch first (trainprof never imports it)")
    return t


def current_cuda_stream():
    """torch's current CUDA stream on its current device, as a cudaStream_t int: where
    ``Timers.set_timing('cuda_events')`` records its events at each start and stop, as
    Megatron-LM's timers measure on the current stream. 0 (the legacy default stream) while
    torch is not imported or has not initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # no Stream object: about 1 us with the device lookup
        return raw(torch._C._cuda_getDevice())
    return torch.cuda.current_stream().cuda_stream


# ------------------------------------------------------------------------------ steps

def _ensure_step():
    if getattr(_mod_tls, "stack", None):
        _mod_unwound(_mod_tls.stack)  # before this phase's range opens
    _S.after_opt = False
    if _S.capturing:
        return  # recording a CUDA graph runs nothing on the GPU: not an iteration
    if not _S.in_step:
        _S.in_step = True
        _tp.step_begin(_S.step)
        # the plan switches as the step begins (core/kwindow.c)
        _D.detail = _M.on and _D.balanced and _tp._gpu_capture_on()


def _end_step():
    if _S.capturing:
        _S.step_in_capture = True  # the graph being captured holds the optimizer step
        return
    if not _S.in_step:
        _tp.step_begin(_S.step)
    if not _S.rule_written:
        # how the report reads these steps (docs/python.md): a training iteration runs from
        # its first data fetch, forward or backward to the next one's, so the work after the
        # optimizer (parameter copies, loss reduction, logging) belongs to its iteration;
        # the last ends here, at its optimizer step's return
        _S.rule_written = True
        _tp.set_metadata("trainprof.torch.steps", "iteration")
    _tp.step_end(_S.step)
    _S.step += 1
    _S.in_step = False
    _S.after_opt = True
    _mem_sample()


def _opt_begin():
    """An optimizer step begins. Optimizer steps that follow one another with no data fetch,
    forward or backward between them are one iteration (Megatron-LM's ChainedOptimizer steps
    one optimizer per parameter group in turn): such a step continues the iteration the
    previous one ended. Returns whether it continues one."""
    if _S.after_opt and not _S.capturing:
        return True
    _ensure_step()
    return False


def _opt_end(continued):
    """The optimizer step begun by _opt_begin returns: it ends its iteration, or, continuing
    one, ends that iteration again (the report takes an iteration's last end)."""
    if continued:
        _tp.step_end(_S.step - 1)
        _S.after_opt = True
        return
    _end_step()


# ------------------------------------------------------------------------------ memory

# One SAMPLE of the CUDA caching allocator (docs/format.md, "Memory"): these counters written
# back to back, read from one statistics call of the current device (_stats). Paths into
# torch._C._cuda_memoryStats's nested dict (torch/cuda/memory.py, memory_stats_as_nested_dict;
# memory_stats joins the same paths with "."). The last four are cumulative counts.
_MEM_STATS = (
    ("cuda.memory_allocated_bytes", ("allocated_bytes", "all", "current")),
    ("cuda.memory_reserved_bytes", ("reserved_bytes", "all", "current")),
    ("cuda.max_memory_allocated_bytes", ("allocated_bytes", "all", "peak")),
    ("cuda.max_memory_reserved_bytes", ("reserved_bytes", "all", "peak")),
    ("cuda.memory_active_bytes", ("active_bytes", "all", "current")),
    ("cuda.memory_inactive_split_bytes", ("inactive_split_bytes", "all", "current")),
    ("cuda.memory_alloc_retries", ("num_alloc_retries",)),
    ("cuda.memory_allocations", ("allocation", "all", "allocated")),
    ("cuda.memory_frees", ("allocation", "all", "freed")),
    ("cuda.memory_ooms", ("num_ooms",)),
)
_MODULE_DEPTH = 3      # names below the model that get module detail ("decoder.layers.3"):
                       # a few dozen modules per forward, at one sample each way (17 us on an
                       # H200 host) a few ms per step, paid in the plan's steps only
_MODULE_PREFIX = "nn.Module: "  # the ranges' names, as torch.profiler names module events
_OOM_TOP = 10          # live allocations named in memory.oom.top
_OOM_TOP_BYTES = 3500  # memory.oom.top stays under this (metadata values: 4000 at most)


class _Mem:
    def __init__(self):
        self.on = False         # sampling: TRAINPROF_MEMORY, CUDA available, nothing failed
        self.ready = False      # set up once CUDA is initialised (device, observer, history)
        self.phases = []        # open phases of the training loop (data, forward, ...)
        self.stats = None       # the allocator's statistics of a device, nested (_mem_setup)
        self.history = 0        # TRAINPROF_MEMORY_HISTORY, read once (_mem_enable)


_M = _Mem()


class _Mods:
    def __init__(self):
        self.names = {}         # id(module) -> _Held with its range name (_mod_names)
        self.roots = {}         # id(model) -> _Held, for the models whose modules are named
        self.detail = False     # this step is one of the plan's: ranges and samples per module
        self.balanced = False   # the forward post hook runs even when forward raises


_D = _Mods()
_mod_tls = threading.local()  # .stack: _mod_enter's entries of the module forwards running


class _Held(weakref.ref):
    """An entry of _D.names or _D.roots: a weak reference to the module, under its id() in
    table (a lookup per module call, never the module's own __hash__), with its range name.
    An id() is the object's address, which CPython gives to a new object once the module is
    freed: the entry leaves its table as the module dies (weak reference callbacks run before
    the memory is freed), and a lookup also checks that the entry still refers to the module
    called, so a model deleted and a new one made, or any module of no instrumented model,
    never wears an old module's name."""
    __slots__ = ("table", "key", "name")


def _held_gone(ref):
    if ref.table.get(ref.key) is ref:
        ref.table.pop(ref.key, None)


def _hold(table, obj, name=None):
    """Enters obj (weakly) into table under its id(); False when obj takes no weak reference
    (torch's modules all do)."""
    try:
        ref = _Held(obj, _held_gone)
    except TypeError:
        return False
    ref.table, ref.key, ref.name = table, id(obj), name
    table[ref.key] = ref
    return True


def _held(table, obj):
    """obj's entry in table, or None."""
    ref = table.get(id(obj))
    return ref if ref is not None and ref() is obj else None


def _mod_name(module):
    # _held's lookup, written out: this runs for every module call of the program
    ref = _D.names.get(id(module))
    return ref.name if ref is not None and ref() is module else None


def _range_name(name):
    """The range name of a module named name: valid UTF-8 with no NUL, as the library reads
    names, whatever the program named its modules (a lone surrogate, as surrogateescape
    decodes an undecodable file name, would make push raise inside the job's forward; a NUL
    would cut the name), those characters written as Python escapes."""
    s = (_MODULE_PREFIX + name).encode("utf-8", "backslashreplace").decode("utf-8")
    return s.replace("\0", "\\x00")


def _mod_names(model):
    """Names the modules of an instrumented model, once: the model's wrappers (one child, no
    parameters of their own) are looked through, then every module down to _MODULE_DEPTH
    names below gets its range name. A module already named (shared with a model named
    before) keeps its name."""
    if not _hold(_D.roots, model):
        # kept alive by _S.models (no weak reference either): its id is never reused
        _D.roots[id(model)] = (lambda m: lambda: m)(model)
    if not _D.balanced:
        return  # without always_call a raising forward would leave a range open
    try:
        m = model
        for _ in range(8):
            kids = list(m.children())
            if len(kids) != 1 or any(True for _ in m.parameters(recurse=False)):
                break
            m = kids[0]
        # the model's own code (Megatron-LM's GPTModel computes its loss outside any child)
        # goes by its class name
        if _held(_D.names, m) is None:
            _hold(_D.names, m, _range_name(type(m).__name__))
        for name, sub in m.named_modules():
            if name and name.count(".") < _MODULE_DEPTH and _held(_D.names, sub) is None:
                _hold(_D.names, sub, _range_name(name))
    except Exception:
        pass


def _mod_enter(name, model, frame):
    """A forward begins: an instrumented model's (model: its "forward" phase range is open)
    or a named module's (name; its range is pushed in the plan's steps). The entry holds
    the frame of torch's Module call that runs the hooks, to tell a call that is still
    running from one unwound past its post hook (_mod_unwound)."""
    st = getattr(_mod_tls, "stack", None)
    if st is None:
        st = _mod_tls.stack = []
    pushed = _D.detail and name is not None
    st.append((name, pushed, frame, model))
    if pushed:
        _tp.push(name)
        _mem_sample()


def _mod_close(entry, sample=True):
    """Closes what _mod_enter's entry opened, innermost first."""
    if entry[1]:
        if sample:
            _mem_sample()
        _tp.pop()
    if entry[3]:
        if sample:
            _phase_out()
        else:  # the last "forward", whatever phase opened after it
            ph = _M.phases
            for i in range(len(ph) - 1, -1, -1):
                if ph[i] == "forward":
                    del ph[i]
                    break
            _tp.pop()


def _mod_leave(name, model):
    st = getattr(_mod_tls, "stack", None)
    if st and (st[-1][0] != name or st[-1][3] != model):
        _mod_unwound(st)  # an inner call's exception was caught inside this forward
    if st and st[-1][0] == name and st[-1][3] == model:
        _mod_close(st.pop())


def _live_frames():
    """ids of the calling thread's running Python frames."""
    live = set()
    f = sys._getframe(1)
    while f is not None:
        live.add(id(f))
        f = f.f_back
    return live


def _mod_unwound(st):
    """Drops from this thread's stack the calls that an exception unwound without their post
    hook: torch runs the hooks registered with always_call when forward raises an Exception
    only (torch/nn/modules/module.py, Module._call_impl: "except Exception"), so a
    KeyboardInterrupt or SystemExit the program catches, or any exception on torch < 2.1,
    leaves the entries of the forwards it crossed. A call is running while its frame is one
    of the thread's (the entries hold their frames: no other frame has their ids). Their
    ranges are popped, as many as they pushed, so the thread's range stack is as deep as
    before them; a later OOM names no module that is no longer running; and their frames
    (with the tensors of the interrupted forward) are let go at the next phase of the loop.
    O(stack depth), paid only while the stack is not empty (a nested forward, or after such
    an exception)."""
    live = _live_frames()
    dead = [e for e in st if id(e[2]) not in live]
    if dead:
        st[:] = [e for e in st if id(e[2]) in live]
        for e in reversed(dead):
            _mod_close(e, sample=False)


def _mem_enable(torch):
    """Whether this process samples the allocator: TRAINPROF_MEMORY (default 1). Whether CUDA
    is there is known once the program initialised it (_mem_setup): torch.cuda.is_available
    is never asked, since it initialises the CUDA driver (cudaGetDeviceCount), which
    "poisons fork" (torch.cuda.is_available's documentation): a child forked after it could
    not use CUDA, and CUDA_VISIBLE_DEVICES set after it would no longer apply."""
    try:
        on, _M.history = _tp._memory_config()  # once: a malformed value warns once
        _M.on = bool(on) and hasattr(torch, "cuda")
        if _M.on:
            _mem_setup(torch)
    except Exception:
        _M.on = False


def _stats(dev):
    """The allocator's statistics of device dev: a nested dict, or memory_stats' flat one."""
    if _M.stats is not None:
        return _M.stats(dev)
    return _torch().cuda.memory_stats(dev)


def _stat(stats, path):
    """The figure at path in a nested or flat statistics dict (0 when the allocator has none)."""
    v = stats.get(path[0])
    if isinstance(v, dict):
        for k in path[1:]:
            v = v[k]
        return v
    return stats.get(".".join(path), 0)


def _mem_setup(torch):
    """Once CUDA is initialised (never initialising it ourselves: attaching an observer would):
    the sampled device, the allocator's OOM observer, and the allocation history asked for by
    TRAINPROF_MEMORY_HISTORY. Returns whether CUDA is initialised."""
    cuda = torch.cuda
    if not cuda.is_initialized():
        return False
    if _M.ready:
        return True
    _M.ready = True
    mem = getattr(cuda, "memory", None)
    # torch._C._cuda_memoryStats(device) is the C function that memory_stats_as_nested_dict
    # wraps (after is_initialized and _get_device_index, which the sample has done) and that
    # memory_stats flattens into a sorted dict of dotted keys in Python (torch/cuda/memory.py),
    # several times the C call's cost
    _M.stats = getattr(torch._C, "_cuda_memoryStats", None) or getattr(
        mem, "memory_stats_as_nested_dict", None)
    _tp.set_metadata("torch.cuda.device", str(_device(torch)))
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None:
        try:
            attach(_oom_observer)
            _tp._oom_observed()
        except Exception:
            pass
    history = _M.history
    if history:
        try:  # torch 2.1+ (torch/cuda/memory.py): stacks of Python frames only
            mem._record_memory_history(max_entries=int(history), stacks="python")
            _tp.set_metadata("memory.history_entries", str(int(history)))
        except Exception:
            pass
    return True


def _device(torch):
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get is not None else torch.cuda.current_device()


def _mem_sample(dev=None):
    """One sample on the current device (or dev), on the calling thread. Any failure turns
    sampling off for the process: a broken CUDA state must not stop training."""
    if not _M.on:
        return
    try:
        torch = _torch()
        if not _M.ready and not _mem_setup(torch):
            return
        if not torch.cuda.is_initialized():
            return
        stats = _stats(_device(torch) if dev is None else dev)
        counter = _tp.counter
        for name, path in _MEM_STATS:
            counter(name, float(_stat(stats, path)))
        return stats
    except Exception:
        _M.on = False


def _phase_in(name, sample=True):
    """A phase of the loop begins: its range opens, then one sample inside it, except at a
    data fetch's begin. The open phases name the phase of an OOM."""
    _tp.push(name)
    _M.phases.append(name)
    if sample:
        _mem_sample()


def _phase_out():
    """The phase ends: one sample inside it, then its range closes."""
    _mem_sample()
    if _M.phases:
        _M.phases.pop()
    _tp.pop()


def _oom_observer(device, alloc, total, free):
    """torch's caching allocator calls this at an OOM, on the allocating thread, with its lock
    released and before it raises OutOfMemoryError (c10/cuda/CUDACachingAllocator.cpp: the
    device, the rounded request, the device's total memory (or the limit
    set_per_process_memory_fraction allowed) and cudaMemGetInfo's free). What it raises would
    replace the job's OutOfMemoryError: nothing leaves here."""
    try:
        _oom(int(device), int(alloc), int(total), int(free))
    except BaseException:
        pass


def _oom(device, alloc, total, free):
    n = _tp._oom_begin()
    _tp.mark("cuda.oom")
    stats = _mem_sample(device)
    meta = _tp.set_metadata
    if n == 1:  # the keys describe the process's first OOM, whichever source saw it
        meta("memory.oom.source", "torch")
        meta("memory.oom.request_bytes", str(alloc))
        meta("memory.oom.device", str(device))
        meta("memory.oom.free_bytes", str(free))
        meta("memory.oom.total_bytes", str(total))
        if stats is not None:
            meta("memory.oom.allocated_bytes", str(int(_stat(stats, _MEM_STATS[0][1]))))
            meta("memory.oom.reserved_bytes", str(int(_stat(stats, _MEM_STATS[1][1]))))
        meta("memory.oom.step", str(_S.step))
        meta("memory.oom.phase", _M.phases[-1] if _M.phases else "other")
        st = getattr(_mod_tls, "stack", None)
        if st:
            live = _live_frames()
            names = [e[0] for e in st if e[0] is not None and id(e[2]) in live]
            if names:
                meta("memory.oom.module", names[-1][len(_MODULE_PREFIX):])
        meta("memory.oom.count", str(n))
        _tp.flush()  # the rank file exists now: the snapshot goes beside it
        try:
            snap = _torch().cuda.memory._snapshot()
        except Exception:
            snap = None
        if snap is not None:
            top, largest = _oom_blocks(snap, device)
            if largest is not None:
                meta("memory.oom.largest_free_block_bytes", str(largest))
            meta("memory.oom.top", _oom_top(top))
            name = _write_snapshot(snap)
            if name:
                meta("memory.oom.snapshot", name)
    else:
        meta("memory.oom.count", str(n))
    _tp.flush()  # a process that dies of the error right after keeps all of it


def _frames(block):
    """A block's Python stack as "file:line function; ...", innermost first ("" when the
    allocation history was not recorded). torch 2.1+ keeps the frames on the block; torch 2.0
    in its history list."""
    frames = block.get("frames")
    if frames is None:
        hist = block.get("history") or []
        frames = hist[-1].get("frames", []) if hist else []
    return "; ".join("%s:%s %s" % (f.get("filename", "?"), f.get("line", 0), f.get("name", "?"))
                     for f in frames or ())


def _oom_blocks(snap, device):
    """From a memory snapshot (torch.cuda.memory._snapshot): the live allocations of device
    largest first as (bytes, stream, frames), and the largest inactive block in its segments
    (None when it has none)."""
    live, largest = [], None
    for seg in snap.get("segments", ()):
        if seg.get("device", device) != device:
            continue
        for b in seg.get("blocks", ()):
            state = b.get("state")
            if state == "active_allocated":
                live.append((int(b.get("size", 0)), int(seg.get("stream", 0)), b))
            elif state == "inactive":
                size = int(b.get("size", 0))
                if largest is None or size > largest:
                    largest = size
    live.sort(key=lambda x: -x[0])
    return [(size, stream, _frames(b)) for size, stream, b in live[:_OOM_TOP]], largest


def _oom_top(top):
    """memory.oom.top: a JSON array under _OOM_TOP_BYTES, each entry's frames cut at a frame
    boundary to an equal share of what the sizes leave, then entries dropped from the end."""
    def dump(entries):
        return json.dumps([{"bytes": b, "stream": s, "frames": f} for b, s, f in entries],
                          separators=(",", ":"))
    bare = dump([(b, s, "") for b, s, f in top])
    if len(dump(top).encode()) < _OOM_TOP_BYTES:
        return dump(top)
    share = max(0, (_OOM_TOP_BYTES - 1 - len(bare.encode())) // max(1, len(top)))
    cut = []
    for b, s, f in top:
        while len(json.dumps(f).encode()) - 2 > share:
            i = f.rfind("; ")
            f = f[:i] if i > 0 else f[:len(f) // 2]  # shorter each time: escapes may grow it
        cut.append((b, s, f))
    while cut and len(dump(cut).encode()) >= _OOM_TOP_BYTES:
        cut.pop()
    return dump(cut)


def _write_snapshot(snap):
    """The snapshot pickled as torch.cuda.memory._dump_snapshot does, beside this process's
    rank file under its name (<host>-<pid>.oom-snapshot.pickle: no two ranks collide); written
    to a temporary name and renamed, so that a reader never sees half of it. Returns the file
    name, relative to the rank file's directory, or None."""
    path = _tp.output_path()
    if not path:
        return None
    d, base = os.path.split(path)
    stem = base[:-len(".tprof")] if base.endswith(".tprof") else base
    name = stem + ".oom-snapshot.pickle"
    tmp = os.path.join(d, "." + name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            pickle.dump(snap, f)
        os.replace(tmp, os.path.join(d, name))
        return name
    except Exception:
        return None
    finally:  # an interrupted write too (KeyboardInterrupt) leaves no temporary file
        try:
            os.unlink(tmp)
        except OSError:
            pass


# ------------------------------------------------------------------------------ optimizer

_opt = threading.local()


def _opt_enter(opt):
    """Whether this step of opt is the outermost optimizer step of the thread: an optimizer
    whose step runs another optimizer's step (torch's ZeroRedundancyOptimizer, itself an
    Optimizer, steps its local optimizer inside its own) makes one iteration, not two. A
    step that raised without its post hook (torch 2.x) leaves opt as the outermost, so that
    its next step counts again."""
    outer = getattr(_opt, "outer", None)
    if outer is not None and outer is not opt:
        return False
    _opt.outer = opt
    return True


def _opt_leave(opt):
    """Whether opt's step that returns now is the outermost one (see _opt_enter)."""
    if getattr(_opt, "outer", None) is not opt:
        return False
    _opt.outer = None
    return True


def _instrument_optimizer(opt):
    with _lock:
        if any(o is opt for o in _S.optimizers):
            return
        _S.optimizers.append(opt)
        ids = frozenset(id(p) for g in opt.param_groups for p in g["params"])
        _S.opt_param_ids.append(ids)
    if hasattr(opt, "register_step_pre_hook") and hasattr(opt, "register_step_post_hook"):
        # torch 2.x: the optimizer's own hooks (they survive LR schedulers and re-wrapping)
        def pre(o, args, kwargs):
            if _opt_enter(opt):
                _opt.continued = _opt_begin()
                _phase_in("optimizer")

        def post(o, args, kwargs):
            if _opt_leave(opt):
                _phase_out()
                _opt_end(getattr(_opt, "continued", False))

        opt.register_step_pre_hook(pre)
        opt.register_step_post_hook(post)
        return
    # torch 1.13: wrap the instance's step as a bound method (LR schedulers wrap it again
    # through __self__/__func__, which a bound method keeps)
    orig = opt.step

    def step(self, *args, **kwargs):
        if not _opt_enter(opt):
            return orig(*args, **kwargs)
        continued = _opt_begin()
        _phase_in("optimizer")
        try:
            return orig(*args, **kwargs)
        finally:
            _opt_leave(opt)
            _phase_out()
            _opt_end(continued)

    opt.step = types.MethodType(step, opt)


# ------------------------------------------------------------------------------ model

def _is_model(module):
    # by id, never by the module's own __hash__/__eq__ (a subclass may define them, or make
    # itself unhashable): this runs for every module call of the program
    r = _S.models.get(id(module))
    return r is not None and r() is module


def _fwd_pre(module, inputs):
    model = _is_model(module)
    if model:
        _ensure_step()
        _phase_in("forward")
        if _held(_D.roots, module) is None:
            _mod_names(module)
    name = _mod_name(module)
    if name is not None or model:
        _mod_enter(name, model, sys._getframe(1))


def _fwd_post(module, inputs, output):
    model = _is_model(module)
    name = _mod_name(module)
    if name is not None or model:
        _mod_leave(name, model)


def _module_hooks():
    """The forward phase comes from torch's global module hooks
    (torch.nn.modules.module.register_module_forward_pre_hook/_forward_hook), which run for
    every module and act for the instrumented models only: hooks put on the model itself
    would be part of it, pickled with it by torch.save (a checkpoint that then needs
    trainprof to load) and compiled by torch.jit.script (which rejects them)."""
    with _lock:
        if "module hooks" in _S.patched:
            return
        _S.patched.add("module hooks")
    mm = _torch().nn.modules.module
    mm.register_module_forward_pre_hook(_fwd_pre)
    try:  # torch 2.1+: the post hook runs even when forward raises
        mm.register_module_forward_hook(_fwd_post, always_call=True)
        _D.balanced = True
        if _S.in_step:  # the model was found inside a step: module detail from now on
            _D.detail = _M.on and _tp._gpu_capture_on()
    except TypeError:
        mm.register_module_forward_hook(_fwd_post)


def _instrument_module(module):
    with _lock:
        if _is_model(module):
            return
        try:
            ref = weakref.ref(module)
        except TypeError:  # not weakly referenceable: kept alive (models live as long)
            ref = (lambda m: lambda: m)(module)
        _S.models[id(module)] = ref
    _module_hooks()
    ddp = _ddp_class()
    if ddp is not None and isinstance(module, ddp):
        _install_ddp_hook(module)


def _backward_wrapper(orig):
    def backward(*args, **kwargs):
        return _as_backward(orig, args, kwargs)
    backward.__wrapped__ = orig
    backward.__doc__ = orig.__doc__
    return backward


_bw = threading.local()


def _bw_enter():
    """Opens the backward phase for one call into the autograd engine: on the thread that
    trains (the one that ran the first backward; a DataLoader's prefetching thread never
    does), outside any other backward of that thread. A backward run inside a backward
    (reentrant activation checkpointing, on the engine's own threads) or elsewhere is work of
    the same phase, not a phase of its own. Returns whether it opened one."""
    if getattr(_bw, "depth", 0):
        return False
    tid = threading.get_ident()
    if _S.train_thread is None:
        _S.train_thread = tid
    elif _S.train_thread != tid:
        return False
    _bw.depth = 1
    _ensure_step()
    _phase_in("backward")
    return True


def _bw_leave():
    _phase_out()
    _bw.depth = 0


def _as_backward(fn, args, kwargs):
    """fn(*args, **kwargs) as the backward phase, when _bw_enter opens one."""
    if not _bw_enter():
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    finally:
        _bw_leave()


class _Engine:
    """Stands in for torch's autograd engine object (``Variable._execution_engine``): every
    backward pass enters the engine through its ``run_backward``, whether it comes from
    ``torch.autograd.backward``, ``Tensor.backward``, ``torch.autograd.grad`` or a program
    that calls the engine directly, as Megatron-LM's pipeline schedules do
    (megatron/core/pipeline_parallel/schedules.py, custom_backward). Everything else
    (queue_callback, is_checkpoint_valid, ...) goes to the engine unchanged."""
    __slots__ = ("_engine",)

    def __init__(self, engine):
        object.__setattr__(self, "_engine", engine)

    def run_backward(self, *args, **kwargs):
        return _as_backward(object.__getattribute__(self, "_engine").run_backward, args, kwargs)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_engine"), name)

    def __setattr__(self, name, value):
        setattr(object.__getattribute__(self, "_engine"), name, value)


def _patch_backward():
    torch = _torch()
    with _lock:
        if "autograd.backward" in _S.patched:
            return
        _S.patched.add("autograd.backward")
    try:
        var = torch.autograd.variable.Variable
        eng = var.__dict__["_execution_engine"]
        if not callable(getattr(eng, "run_backward", None)):
            raise AttributeError("run_backward")
        var._execution_engine = _Engine(eng)
        _S.patched.add("autograd engine")
    except Exception:  # another torch: the public entry points at least
        torch.autograd.backward = _backward_wrapper(torch.autograd.backward)


# ------------------------------------------------------------------------------ data

def _patch_dataloader():
    data = _torch().utils.data
    with _lock:
        if "DataLoader" in _S.patched:
            return
        _S.patched.add("DataLoader")
    base = data.dataloader._BaseDataLoaderIter
    orig_next = base.__next__
    orig_iter = data.DataLoader.__iter__

    def __next__(self):
        _ensure_step()
        _phase_in("data", False)
        try:
            return orig_next(self)
        finally:
            _phase_out()

    def __iter__(self):
        _ensure_step()
        _phase_in("data", False)
        try:
            return orig_iter(self)
        finally:
            _phase_out()

    __next__.__wrapped__ = orig_next
    __iter__.__wrapped__ = orig_iter
    base.__next__ = __next__
    data.DataLoader.__iter__ = __iter__


# ------------------------------------------------------------------------------ collectives

def _fnv(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


class _Group:
    # No reference to the process group itself: a record closure released on a gloo worker
    # thread must never drop the group's last reference there (its destructor joins that
    # very thread: std::terminate at exit)
    __slots__ = ("pgref", "hash", "size", "rank", "backend", "backends", "seq", "desc")


def _same(g, pg):
    r = g.pgref
    return r() is pg if r is not None else True


def _group(dist, group):
    """The description of a process group, computed once per group."""
    c10d = dist.distributed_c10d
    pg = group if group is not None else c10d._get_default_group()
    g = _S.groups.get(id(pg))
    if g is not None and _same(g, pg):
        return g
    g = _Group()
    try:
        g.pgref = weakref.ref(pg)
    except TypeError:  # not weakly referenceable: trust id() (groups live as long as the job)
        g.pgref = None
    g.size = dist.get_world_size(pg)
    g.rank = dist.get_rank(pg)
    try:
        g.backend = str(dist.get_backend(pg))
    except Exception:
        g.backend = "unknown"
    try:
        if hasattr(dist, "get_process_group_ranks"):
            ranks = list(dist.get_process_group_ranks(pg))
        elif pg is c10d._get_default_group():
            ranks = list(range(g.size))
        else:
            ranks = sorted(c10d._pg_group_ranks[pg].keys())
    except Exception:
        ranks = []
    g.backends = _backends(g.backend)
    key = (g.backend, tuple(ranks))
    with _lock:
        ordinal = _S.group_ordinal.get(key, 0)
        _S.group_ordinal[key] = ordinal + 1
    # the same id on every member: backend, members' world ranks, and the ordinal of this
    # member list (groups are created collectively, so every member counts alike)
    g.hash = _fnv(("torch:%s:%s:%d" % (g.backend, ",".join(map(str, ranks)), ordinal)).encode())
    g.seq = 0
    g.desc = "backend=%s size=%d ranks=%s" % (g.backend, g.size,
                                               ",".join(map(str, ranks)) or "?")
    _tp.set_metadata("torch.pg.%016x" % g.hash, g.desc)
    # the group's own name: torch 2.4+ keeps new_group(group_desc=...) on the group, and
    # Megatron-LM names every group it makes by its parallel dimension
    # (megatron/core/parallel_state.py: TENSOR_MODEL_PARALLEL_GROUP, DATA_PARALLEL_GROUP, ...)
    name = _S.group_names.get(id(pg))
    if name is None:
        try:
            name = pg.group_desc
        except Exception:  # an older torch
            name = None
    if isinstance(name, str) and name and name != "undefined":
        _tp.set_metadata("torch.pg_name.%016x" % g.hash, name)
    _S.groups[id(pg)] = g
    return g


def _backends(backend):
    """The backend per device of a group: {"cpu": "gloo", "cuda": "nccl"} for the device-mapped
    default group of torch 2.x ("cpu:gloo,cuda:nccl"), else {None: backend}."""
    b = backend.lower()
    if ":" not in b:
        return {None: b}
    m = {}
    for part in b.split(","):
        dev, _, name = part.partition(":")
        if name:
            m[dev.strip()] = name.strip()
    return m or {None: b}


def _runs_on(g, t):
    """The backend that runs a collective of group g on tensor t (None: a barrier, which a
    device-mapped group runs on its CUDA backend)."""
    m = g.backends
    if None in m:
        return m[None]
    dev = getattr(getattr(t, "device", None), "type", None) if t is not None else "cuda"
    if dev in m:
        return m[dev]
    return m.get("cpu") or next(iter(m.values()))


def _nbytes(t):
    try:
        return t.numel() * t.element_size(), t.numel()
    except Exception:
        return 0, 0


def _record(g, name, op, t0, t1, nbytes, count, peer, flags):
    p2p = op in (_SEND, _RECV)
    seq = 0
    if not p2p:
        g.seq += 1
        seq = g.seq
    _tp._comm_record(name, op, t0, t1, nbytes, count, g.hash, seq & 0xFFFFFFFF, g.size,
                     g.rank, peer, flags)


def _record_wait(g, t0, t1):
    """The host blocked from t0 to t1 until ops of g completed: a blocking "Wait" record (as
    the MPI wrappers write theirs), the exposed part of async communication. No sequence
    number: waits are a rank's own, not a collective matched across ranks."""
    _tp._comm_record("Wait", _WAIT, t0, t1, 0, 0, g.hash, 0, g.size, g.rank, -1, 0)


class _Work:
    """An async collective's work object: recorded when wait() returns (or its future
    completes, or is_completed() first says so), and the wait itself, the time the host was
    blocked; everything else is the real object's."""
    __slots__ = ("_w", "_rec", "_g")

    def __init__(self, w, rec, g):
        self._w = w
        self._rec = rec
        self._g = g

    def _done(self, *unused):
        rec, self._rec = self._rec, None
        if rec is not None:
            rec(_tp.now_ns())

    def wait(self, *args, **kwargs):
        pending = self._rec is not None
        t0 = _tp.now_ns()
        r = self._w.wait(*args, **kwargs)
        t1 = _tp.now_ns()
        self._done()
        if pending:
            _record_wait(self._g, t0, t1)
        return r

    def is_completed(self):
        c = self._w.is_completed()
        if c:
            self._done()
        return c

    def get_future(self):
        f = self._w.get_future()
        if self._rec is not None and hasattr(f, "add_done_callback"):
            f.add_done_callback(self._done)
        return f

    def __getattr__(self, name):
        return getattr(self._w, name)


# name -> (op, how to read bytes from the arguments, index of the group argument, peer arg)
def _b_first(args, kwargs, key):
    t = kwargs.get(key) if key in kwargs else (args[0] if args else None)
    return _nbytes(t) if t is not None else (0, 0)


def _arg(args, kwargs, i, key):
    if key in kwargs:
        return kwargs[key]
    return args[i] if len(args) > i else None


_SPECS = {
    # name: (op, tensor arg (index, keyword), group arg (index, keyword), peer (index, keyword))
    "all_reduce": (_ALLREDUCE, (0, "tensor"), (2, "group"), None),
    "all_gather": (_ALLGATHER, (1, "tensor"), (2, "group"), None),
    "all_gather_into_tensor": (_ALLGATHER, (1, "input_tensor"), (2, "group"), None),
    "_all_gather_base": (_ALLGATHER, (1, "input_tensor"), (2, "group"), None),
    "reduce_scatter": (_REDUCESCATTER, (0, "output"), (3, "group"), None),
    "reduce_scatter_tensor": (_REDUCESCATTER, (0, "output"), (3, "group"), None),
    "_reduce_scatter_base": (_REDUCESCATTER, (0, "output"), (3, "group"), None),
    "broadcast": (_BROADCAST, (0, "tensor"), (2, "group"), (1, "src")),
    "reduce": (_REDUCE, (0, "tensor"), (3, "group"), (1, "dst")),
    "all_to_all_single": (_ALLTOALL, (1, "input"), (4, "group"), None),
    "gather": (_GATHER, (0, "tensor"), (3, "group"), (2, "dst")),
    "scatter": (_SCATTER, (0, "tensor"), (3, "group"), (2, "src")),
    "barrier": (_BARRIER, None, (0, "group"), None),
    "send": (_SEND, (0, "tensor"), (2, "group"), (1, "dst")),
    "recv": (_RECV, (0, "tensor"), (2, "group"), (1, "src")),
    "isend": (_SEND, (0, "tensor"), (2, "group"), (1, "dst")),
    "irecv": (_RECV, (0, "tensor"), (2, "group"), (1, "src")),
}
_ASYNC_ALWAYS = ("isend", "irecv")


def _wrap_collective(dist, fname, orig):
    op, targ, garg, parg = _SPECS[fname]
    label = {_ALLREDUCE: "AllReduce", _ALLGATHER: "AllGather", _REDUCESCATTER: "ReduceScatter",
             _BROADCAST: "Broadcast", _REDUCE: "Reduce", _ALLTOALL: "AllToAll", _SEND: "Send",
             _RECV: "Recv", _BARRIER: "Barrier", _GATHER: "Gather", _SCATTER: "Scatter"}[op]

    def collective(*args, **kwargs):
        try:
            g = _group(dist, _arg(args, kwargs, garg[0], garg[1]))
            t = _arg(args, kwargs, targ[0], targ[1]) if targ else None
            nccl = _runs_on(g, t) == "nccl"
            if nccl and _tp._nccl_recording():
                g = None  # NCCL's profiler plugin records it, with its GPU times
        except Exception:
            g = None
        if g is None:
            return orig(*args, **kwargs)
        nbytes, count = _nbytes(t) if t is not None else (0, 0)
        peer = -1
        if parg:
            pv = _arg(args, kwargs, parg[0], parg[1])
            peer = int(pv) if isinstance(pv, int) else -1
        t0 = _tp.now_ns()
        r = orig(*args, **kwargs)
        if nccl:
            # NCCL without its profiler plugin (NCCL < 2.23, or the plugin not loaded): the
            # call only enqueued the work on a CUDA stream. When this very call created the
            # communicator, the plugin records it too and the report keeps the plugin's.
            _record(g, label, op, t0, _tp.now_ns(), nbytes, count, peer, _F_ENQUEUE)
            return r
        async_op = fname in _ASYNC_ALWAYS or kwargs.get("async_op", False)
        if async_op and r is not None:
            return _Work(r, lambda t1: _record(g, label, op, t0, t1, nbytes, count, peer,
                                                _F_NONBLOCKING), g)
        _record(g, label, op, t0, _tp.now_ns(), nbytes, count, peer, 0)
        return r

    collective.__wrapped__ = orig
    collective.__name__ = fname
    collective.__doc__ = orig.__doc__
    return collective


def _patch_distributed():
    torch = _torch()
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available():
        return
    with _lock:
        if "distributed" in _S.patched:
            return
        _S.patched.add("distributed")
    c10d = dist.distributed_c10d
    for fname in _SPECS:
        orig = getattr(c10d, fname, None)
        if orig is None:
            continue
        w = _wrap_collective(dist, fname, orig)
        for mod in (c10d, dist):  # the same function under both names
            if getattr(mod, fname, None) is orig:
                setattr(mod, fname, w)
    orig_new_group = getattr(c10d, "new_group", None)
    if orig_new_group is not None:
        def new_group(*args, **kwargs):
            pg = orig_new_group(*args, **kwargs)
            desc = kwargs.get("group_desc")
            if isinstance(desc, str) and desc:  # a torch whose groups do not keep it
                _S.group_names[id(pg)] = desc
            return pg
        new_group.__wrapped__ = orig_new_group
        new_group.__doc__ = orig_new_group.__doc__
        for mod in (c10d, dist):
            if getattr(mod, "new_group", None) is orig_new_group:
                setattr(mod, "new_group", new_group)
    _patch_ddp_class()


# ------------------------------------------------------------------------------ DDP

def _ddp_class():
    t = sys.modules.get("torch")
    if t is None:
        return None
    try:
        return t.nn.parallel.DistributedDataParallel
    except AttributeError:
        return None


class _HookState:
    """The state our DDP hook is registered with: the DDP module (weakly: the group is
    reached through it, never held here; see _Group), and the user's hook (with its state)
    when the program registers one after us: ours then times theirs."""
    __slots__ = ("ddp", "delegate", "delegate_state", "lock", "pending", "done_max",
                 "wait_from", "__weakref__")

    def __init__(self, ddp):
        self.ddp = weakref.ref(ddp)
        self.delegate = None
        self.delegate_state = None
        # the end-of-backward wait (see _ddp_hook): buckets not complete yet, the latest
        # completion, and when the host began to wait (None: not yet)
        self.lock = threading.Lock()
        self.pending = 0
        self.done_max = 0
        self.wait_from = None

    @property
    def pg(self):
        m = self.ddp()
        return getattr(m, "process_group", None) if m is not None else None


def _ddp_hook(state, bucket):
    # DDP's default without a hook: each gradient multiplied by 1/world while copied into
    # the bucket, then an all-reduce SUM of the bucket. With a hook DDP copies the gradients
    # unscaled, so the hook scales: the same multiplication by the same float (bitwise the
    # same results), then the same all-reduce.
    torch = _torch()
    dist = torch.distributed
    t0 = _tp.now_ns()
    buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    g = None
    try:
        g = _group(dist, state.pg)
    except Exception:
        pass
    if state.delegate is not None:
        fut = state.delegate(state.delegate_state, bucket)
    else:
        pg = state.pg if state.pg is not None else dist.distributed_c10d._get_default_group()
        buf.mul_(1.0 / pg.size())
        orig = getattr(dist.distributed_c10d.all_reduce, "__wrapped__", dist.distributed_c10d.all_reduce)
        fut = orig(buf, group=pg, async_op=True).get_future().then(lambda f: f.value()[0])
    if g is None:
        return fut
    nbytes, count = _nbytes(buf)
    try:
        nccl = _runs_on(g, buf) == "nccl"
    except Exception:
        return fut
    if nccl:
        if not _tp._nccl_recording():  # else NCCL's profiler plugin records it
            _record(g, "AllReduce", _ALLREDUCE, t0, _tp.now_ns(), nbytes, count, -1, _F_ENQUEUE)
        return fut
    if not hasattr(fut, "add_done_callback"):
        return fut
    with state.lock:
        state.pending += 1

    def done(f):
        t1 = _tp.now_ns()
        _record(g, "AllReduce", _ALLREDUCE, t0, t1, nbytes, count, -1, _F_NONBLOCKING)
        with state.lock:
            state.pending -= 1
            if t1 > state.done_max:
                state.done_max = t1
            w = _take_wait(state)
        if w:
            _record_wait(g, *w)
    fut.add_done_callback(done)
    # The host's wait for the buckets: DDP's reducer queues its finalize (which waits for
    # every bucket's future) on the autograd engine when the last bucket is marked ready,
    # right after this hook returns for it; a callback queued here runs just before it, when
    # the backward graph is done, so the wait runs from then to the last completion.
    last = getattr(bucket, "is_last", None)
    if last is not None and last():
        try:
            engine = torch.autograd.Variable._execution_engine
            engine.queue_callback(lambda: _ddp_wait_starts(state, g))
        except Exception:  # not inside a backward pass, or another torch
            pass
    return fut


def _take_wait(state):
    """Under state.lock: the host's wait (t0, t1) once it began and every bucket completed,
    None while either is not so, or when it did not wait at all."""
    if state.wait_from is None or state.pending:
        return None
    t0 = state.wait_from
    t1 = max(t0, state.done_max)
    state.wait_from = None
    state.done_max = 0
    return (t0, t1) if t1 > t0 else None


def _ddp_wait_starts(state, g):
    # runs inside the autograd engine: it must never raise into the program's backward
    try:
        t = _tp.now_ns()
        with state.lock:
            state.wait_from = t
            w = _take_wait(state)
        if w:
            _record_wait(g, *w)
    except Exception:
        pass


def _install_ddp_hook(ddp):
    if getattr(ddp, "_trainprof_hook", None) is not None:
        return
    if getattr(ddp, "_trainprof_user_hook", False):
        return  # the program registered its own first: recorded by patching dist only
    st = _HookState(ddp)
    try:
        _ORIG_REGISTER[0](ddp, st, _ddp_hook)
    except Exception as e:  # e.g. a builtin hook already there
        warnings.warn("trainprof.torch: DDP gradient all-reduce not recorded (%s)" % e,
                      RuntimeWarning, stacklevel=3)
        return
    ddp._trainprof_hook = st


_ORIG_REGISTER = [None]


def _patch_ddp_class():
    ddp = _ddp_class()
    if ddp is None:
        return
    with _lock:
        if "DistributedDataParallel" in _S.patched:
            return
        _S.patched.add("DistributedDataParallel")
    orig_register = ddp.register_comm_hook
    _ORIG_REGISTER[0] = orig_register

    def register_comm_hook(self, state, hook):
        st = getattr(self, "_trainprof_hook", None)
        if st is None:
            self._trainprof_user_hook = True
            return orig_register(self, state, hook)
        if st.delegate is not None:  # DDP allows one hook: keep its rule
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only "
                               "be called once.")
        st.delegate, st.delegate_state = hook, state
        return None

    register_comm_hook.__wrapped__ = orig_register
    register_comm_hook.__doc__ = orig_register.__doc__
    ddp.register_comm_hook = register_comm_hook

    orig_builtin = getattr(ddp, "_register_builtin_comm_hook", None)
    if orig_builtin is not None:
        def _register_builtin_comm_hook(self, comm_hook_type):
            st = getattr(self, "_trainprof_hook", None)
            if st is None:
                self._trainprof_user_hook = True
                return orig_builtin(self, comm_hook_type)
            # a builtin hook cannot run inside ours: its Python twin does the same work
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            name = str(comm_hook_type).rsplit(".", 1)[-1]
            if name == "ALLREDUCE":
                return None  # what ours does already
            if name == "FP16_COMPRESS":
                return register_comm_hook(self, st.pg, default_hooks.fp16_compress_hook)
            return orig_builtin(self, comm_hook_type)
        ddp._register_builtin_comm_hook = _register_builtin_comm_hook

    orig_init = ddp.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        if _AUTO[0]:
            _instrument_module(self)

    __init__.__wrapped__ = orig_init
    ddp.__init__ = __init__


# ------------------------------------------------------------------------------ CUDA graphs

def _patch_cuda_graphs():
    """A training iteration captured once in a CUDA graph and replayed (torch.cuda.graphs,
    the "whole network capture" of PyTorch's CUDA graphs documentation): while a graph is
    captured nothing runs on the GPU, so the capture is a range ("cuda graph capture") and
    no step; a graph whose capture held an optimizer step is a step graph, and each of its
    replays on the training thread is one iteration ("cuda graph replay" range, the step
    ending at its return). Graphs of parts of a step (per-layer graphs, torch.compile's
    graph trees) hold no optimizer step and change nothing."""
    torch = _torch()
    try:
        cls = torch.cuda.graphs.CUDAGraph
        orig_begin, orig_end, orig_replay = cls.capture_begin, cls.capture_end, cls.replay
    except Exception:
        return
    with _lock:
        if "CUDAGraph" in _S.patched:
            return
        _S.patched.add("CUDAGraph")

    def on_train_thread():
        return _S.train_thread is None or _S.train_thread == threading.get_ident()

    def capture_begin(self, *args, **kwargs):
        r = orig_begin(self, *args, **kwargs)
        if on_train_thread():
            _tp.push("cuda graph capture")
            if not _S.capturing:
                _S.step_in_capture = False
            _S.capturing += 1
            self._trainprof_capturing = True
        return r

    def capture_end(self, *args, **kwargs):
        try:
            return orig_end(self, *args, **kwargs)
        finally:
            if getattr(self, "_trainprof_capturing", False):
                self._trainprof_capturing = False
                _S.capturing -= 1
                _tp.pop()
                if _S.step_in_capture:
                    self._trainprof_step_graph = True
                    _S.step_in_capture = False

    def replay(self, *args, **kwargs):
        if not getattr(self, "_trainprof_step_graph", False) or not on_train_thread():
            return orig_replay(self, *args, **kwargs)
        _ensure_step()
        _tp.push("cuda graph replay")
        try:
            return orig_replay(self, *args, **kwargs)
        finally:
            _tp.pop()
            _end_step()

    for name, fn, orig in (("capture_begin", capture_begin, orig_begin),
                           ("capture_end", capture_end, orig_end), ("replay", replay, orig_replay)):
        fn.__wrapped__ = orig
        fn.__doc__ = orig.__doc__
        setattr(cls, name, fn)


# ------------------------------------------------------------------------------ torch.profiler

def _patch_profiler():
    torch = _torch()
    try:
        import torch.profiler as tprof  # noqa: F401  (torch's own submodule)
        prof = torch.profiler.profile
    except Exception:
        return
    with _lock:
        if "profiler" in _S.patched:
            return
        _S.patched.add("profiler")
    # Kineto holds CUPTI from prepare_trace (warm-up or recording begins) to stop_trace, also
    # under profile(schedule=...), whose wait steps leave CUPTI alone: the hand-over follows
    # those two, so only the steps torch.profiler records go uncaptured. Older torch without
    # them: start and stop.
    cls = getattr(getattr(torch.profiler, "profiler", None), "_KinetoProfile", None)
    if cls is not None and hasattr(cls, "prepare_trace") and hasattr(cls, "stop_trace"):
        take, give = "prepare_trace", "stop_trace"
    else:
        cls, take, give = prof, "start", "stop"
    orig_take, orig_give = getattr(cls, take), getattr(cls, give)

    def uses_cuda(self):
        acts = getattr(self, "activities", None) or ()
        return any(str(a).endswith("CUDA") for a in acts)

    def taken(self, *args, **kwargs):
        now = False
        if uses_cuda(self) and not getattr(self, "_trainprof_paused", False):
            _tp.set_metadata("gpu_capture.pause_reason", "torch.profiler")
            now = self._trainprof_paused = _tp.gpu_capture_pause() == 0
        try:
            return orig_take(self, *args, **kwargs)
        except BaseException:
            # torch.profiler never reaches stop_trace after a failed start: capture comes
            # back now, or it would stay paused to the end of the run
            if now:
                self._trainprof_paused = False
                _tp.gpu_capture_resume()
            raise

    def given(self, *args, **kwargs):
        try:
            return orig_give(self, *args, **kwargs)
        finally:
            if getattr(self, "_trainprof_paused", False):
                self._trainprof_paused = False
                _tp.gpu_capture_resume()

    setattr(cls, take, taken)
    setattr(cls, give, given)


# ------------------------------------------------------------------------------ entry points

def instrument(model=None, optimizer=None, dataloader=None):
    """Record steps, phases, collectives and allocator statistics of a PyTorch loop.

    model: the top-level module called each step (forward pre/post hooks; a
    DistributedDataParallel module also gets the timed gradient all-reduce hook). optimizer:
    a ``torch.optim.Optimizer`` (or a list of them) whose ``step()`` ends each training
    step. dataloader: a ``torch.utils.data.DataLoader``; its fetches (and those of every
    DataLoader of the process) are the ``data`` range. Each may be None. Backward, the
    torch.distributed collectives and torch.profiler are patched process-wide at the first
    call. Calling it again with the same objects does nothing more. Not recording (no
    ``trainprof run``, no ``TRAINPROF_DIR``): returns False and changes nothing.
    """
    if not _tp.enabled():
        return False
    torch = _torch()
    if "trainprof.torch" not in _S.patched:
        _S.patched.add("trainprof.torch")
        _tp.set_metadata("trainprof.torch", "instrumented")  # the report's steps note
    _patch_backward()
    _patch_distributed()
    _patch_profiler()
    _patch_cuda_graphs()
    if "memory" not in _S.patched:
        _S.patched.add("memory")
        _mem_enable(torch)
    if dataloader is not None:
        if not isinstance(dataloader, torch.utils.data.DataLoader):
            warnings.warn("trainprof.torch: %r is not a torch DataLoader: its fetches are not "
                          "recorded" % type(dataloader).__name__, RuntimeWarning, stacklevel=2)
        else:
            _patch_dataloader()
    if optimizer is not None:
        for o in (optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]):
            _instrument_optimizer(o)
    if model is not None:
        _instrument_module(model)
    return True


# ---------------------------------------------------------------- zero code change (autostart)

_AUTO = [False]


def autostart():
    """Instrument whatever the program creates from now on: every optimizer (at its
    construction), every DataLoader, every DistributedDataParallel module, and, as the model,
    the first module called outside any other module whose parameters include all of an
    optimizer's parameters. Called by ``trainprof run --python`` when torch is imported."""
    if not _tp.enabled():
        return False
    torch = _torch()
    _AUTO[0] = True
    instrument()
    _patch_dataloader()
    opt_cls = torch.optim.Optimizer
    with _lock:
        if "Optimizer.__init__" in _S.patched:
            return True
        _S.patched.add("Optimizer.__init__")
    orig_init = opt_cls.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        _instrument_optimizer(self)

    __init__.__wrapped__ = orig_init
    opt_cls.__init__ = __init__
    _watch_top_module(torch)
    return True


_MAX_UNMATCHED = 10000  # top-level calls without an optimizer before the search stops


def _watch_top_module(torch):
    """Find the model without the program naming it: Module.__call__ is wrapped only until
    the model is found (then the original is put back, so nested modules never pay)."""
    module_cls = torch.nn.Module
    orig_call = module_cls.__call__
    tls = threading.local()
    seen = {}  # id(module) -> verdict, for modules called at the top
    calls = [0]

    def stop():
        if module_cls.__call__ is call:
            module_cls.__call__ = orig_call

    def is_model(m):
        if not _S.opt_param_ids:
            return False
        v = seen.get(id(m))
        if v is None:
            ids = {id(p) for p in m.parameters()}
            v = bool(ids) and any(o and o <= ids for o in _S.opt_param_ids)
            seen[id(m)] = v
        return v

    def call(self, *args, **kwargs):
        depth = getattr(tls, "depth", 0)
        if depth == 0:
            calls[0] += 1
            if is_model(self):
                stop()
                _instrument_module(self)  # its hooks run in the call below
                return orig_call(self, *args, **kwargs)
            if calls[0] > _MAX_UNMATCHED or len(seen) > 1000:
                stop()
        tls.depth = depth + 1
        try:
            return orig_call(self, *args, **kwargs)
        finally:
            tls.depth = depth

    call.__wrapped__ = orig_call
    module_cls.__call__ = call
