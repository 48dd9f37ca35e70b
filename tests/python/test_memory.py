"""trainprof.torch's memory capture against a scripted CUDA caching allocator (faketorch.py, a
stand-in for torch; no torch or GPU needed): the samples at each phase boundary with the
allocator's exact figures, none before the program initialises CUDA (which trainprof never
does), the job's max_memory_allocated untouched; the OOM post-mortem (mark, sample, metadata,
the largest live allocations with their frames, the snapshot pickle beside the rank file) in
the file of a process killed right after the OOM, the job's own error unchanged even when the
snapshot fails; TRAINPROF_MEMORY=0 writes nothing and attaches nothing."""
import json
import os
import pickle
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

MiB = 1 << 20

# Three steps of a loop whose allocations are known (faketorch.Allocator): weights 1 MiB at
# the first CUDA use; forward 3 MiB of activations; backward a 2 MiB temporary, 1 MiB of
# gradients the first time, the activations freed; the optimizer's 2 MiB state at its first
# step. OOM_AT: the batch whose forward asks for 100 MiB more (capacity 80 MiB); the process
# then prints the error it caught and is killed (SIGKILL: nothing of ours runs after).
LOOP = r"""
import os, signal, sys
sys.path.insert(0, %(here)r)
import faketorch
torch = faketorch.install(nested=%(nested)r)
A, MiB = torch.A, 1 << 20
import trainprof.torch as tt
F = [{"filename": "train.py", "line": 10 + i, "name": "fn%%d" %% i} for i in range(3)]
OOM_AT = %(oom_at)r

class Model(torch.nn.Module):
    def forward(self, x):
        A.alloc(3 * MiB, F)
        if x == OOM_AT:
            A.alloc(100 * MiB, F)
        return x

model = Model()
model.params = [object()]
opt = torch.optim.Optimizer(model.params)
state, grads = [], []
def do_step():
    if not state:
        A.alloc(2 * MiB)
        state.append(1)
opt.do_step = do_step
loader = torch.utils.data.DataLoader([0, 1, 2])
if %(broken_snapshot)r:
    def broken(device=None):
        raise RuntimeError("no snapshot here")
    torch.cuda.memory._snapshot = broken
assert tt.instrument(model=model, optimizer=opt, dataloader=loader)
it = iter(loader)
print("initialised by trainprof:", A.initialized, "is_available calls", A.available_calls)
torch.cuda.init()
A.alloc(1 * MiB)
def bw():
    A.alloc(2 * MiB)
    A.free(2 * MiB)
    if not grads:
        A.alloc(1 * MiB)
        grads.append(1)
    A.free(3 * MiB)
try:
    for x in it:
        model(x)
        torch.autograd.backward(bw)
        opt.step()
except torch.cuda.OutOfMemoryError as e:
    print("observers %%d" %% len(A.observers))
    print("caught %%s: %%s" %% (type(e).__name__, e), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
print("stats calls", A.stats_calls, "through torch._C", A.c_stats_calls)
print("max_memory_allocated", torch.cuda.max_memory_allocated(), "resets", A.resets,
      "observers", len(A.observers), "history", A.history)
"""

# per step: data end, forward begin, forward end, backward begin, backward end, optimizer
# begin, optimizer end, step end; then the data end of the fetch that ends the loader
ALLOCATED = [1, 1, 4, 4, 2, 2, 4, 4] + [4, 4, 7, 7, 4, 4, 4, 4] * 2 + [4]
PEAK = [1, 1, 4, 4, 6, 6, 6, 6] + [6, 6, 7, 7, 9, 9, 9, 9] + [9] * 9
RESERVED = [2, 2, 4, 4, 6, 6, 6, 6] + [6, 6, 8, 8, 10, 10, 10, 10] + [10] * 9
COUNTERS = ("cuda.memory_allocated_bytes", "cuda.memory_reserved_bytes",
            "cuda.max_memory_allocated_bytes", "cuda.max_memory_reserved_bytes",
            "cuda.memory_active_bytes", "cuda.memory_inactive_split_bytes",
            "cuda.memory_alloc_retries", "cuda.memory_allocations", "cuda.memory_frees",
            "cuda.memory_ooms")


def run(name, nested=True, oom_at=None, broken_snapshot=False, **env):
    d = tphelp.workdir(name)
    code = LOOP % {"here": tphelp.HERE, "nested": nested, "oom_at": oom_at,
                   "broken_snapshot": broken_snapshot}
    # no periodic flush: what the file holds was flushed on purpose; no step of the capture
    # plan, so no module detail: the samples are those of the phase boundaries
    env = dict({"TRAINPROF_COMPRESS": "0", "TRAINPROF_FLUSH_MS": "600000",
                "TRAINPROF_SAMPLE_HZ": "0", "TRAINPROF_GPU_CAPTURE": "off"}, **env)
    p = tphelp.run_child(code, d, env=env)
    files = tphelp.rank_files(d)
    recs = tphelp.rank_records(os.path.join(d, files[0])) if len(files) == 1 else None
    return d, p, files, recs


def series(recs, name):
    return [v for _, _, n, v in recs["counters"] if n == name]


class SamplesTest(unittest.TestCase):
    def check(self, nested):
        d, p, files, recs = run("memory-samples-%d" % nested, nested=nested)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.splitlines()
        # nor did it ask whether CUDA is available (the driver would be initialised)
        self.assertEqual(out[0], "initialised by trainprof: False is_available calls 0")
        # the job's peak as without trainprof (nothing reset it), no history asked for
        self.assertEqual(out[-1], "max_memory_allocated %d resets 0 observers 1 history None"
                         % (9 * MiB))
        self.assertEqual(len(files), 1)
        mib = lambda xs: [float(x * MiB) for x in xs]  # noqa: E731
        self.assertEqual(series(recs, "cuda.memory_allocated_bytes"), mib(ALLOCATED))
        self.assertEqual(series(recs, "cuda.memory_active_bytes"), mib(ALLOCATED))
        self.assertEqual(series(recs, "cuda.max_memory_allocated_bytes"), mib(PEAK))
        self.assertEqual(series(recs, "cuda.memory_reserved_bytes"), mib(RESERVED))
        self.assertEqual(series(recs, "cuda.max_memory_reserved_bytes"), mib(RESERVED))
        self.assertEqual(series(recs, "cuda.memory_inactive_split_bytes"),
                         mib([r - a for r, a in zip(RESERVED, ALLOCATED)]))
        # cumulative counts at each step's end (the 8th sample of each step)
        self.assertEqual(series(recs, "cuda.memory_allocations")[7::8], [5.0, 7.0, 9.0])
        self.assertEqual(series(recs, "cuda.memory_frees")[7::8], [2.0, 4.0, 6.0])
        self.assertEqual(set(series(recs, "cuda.memory_ooms")), {0.0})
        self.assertEqual(set(series(recs, "cuda.memory_alloc_retries")), {0.0})
        # one sample = the ten counters back to back, on the thread that ran the hook
        mem = [(t, n) for t, _, n, _ in recs["counters"] if n.startswith("cuda.memory")
               or n.startswith("cuda.max_memory")]
        self.assertEqual([n for _, n in mem], list(COUNTERS) * len(ALLOCATED))
        self.assertEqual(len({t for t, _ in mem}), 1)
        # one statistics call per sample, torch's C function itself where torch has it
        # (memory_stats_as_nested_dict only wraps it; memory_stats flattens its dict in Python)
        self.assertEqual(out[-2], "stats calls %d through torch._C %d"
                         % (len(ALLOCATED), len(ALLOCATED) if nested else 0))
        self.assertEqual(recs["meta"]["torch.cuda.device"], "0")
        self.assertNotIn("memory.history_entries", recs["meta"])
        self.assertEqual(recs["marks"], [])

    def test_nested_stats(self):
        self.check(True)

    def test_flat_memory_stats(self):
        self.check(False)

    def test_malformed_env(self):
        """A malformed TRAINPROF_MEMORY or TRAINPROF_MEMORY_HISTORY: one warning each, the
        default (sampling on, no history), the job's figures untouched."""
        d, p, files, recs = run("memory-malformed", TRAINPROF_MEMORY="abc",
                                TRAINPROF_MEMORY_HISTORY="-5")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([ln.split(": ", 1)[1] for ln in p.stderr.splitlines()], [
            "warning: ignoring TRAINPROF_MEMORY=abc: not a non-negative integer",
            "warning: ignoring TRAINPROF_MEMORY_HISTORY=-5: not a non-negative integer"])
        self.assertEqual(p.stdout.splitlines()[-1], "max_memory_allocated %d resets 0 "
                         "observers 1 history None" % (9 * MiB))
        self.assertEqual(len(series(recs, "cuda.memory_allocated_bytes")), len(ALLOCATED))
        self.assertNotIn("memory.history_entries", recs["meta"])

    def test_off(self):
        d, p, files, recs = run("memory-off", TRAINPROF_MEMORY="0",
                                TRAINPROF_MEMORY_HISTORY="1000")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[-1], "max_memory_allocated %d resets 0 "
                         "observers 0 history None" % (9 * MiB))
        self.assertEqual(len(files), 1)
        self.assertEqual([n for _, _, n, _ in recs["counters"] if n.startswith("cuda.")], [])
        self.assertFalse([k for k in recs["meta"] if k.startswith(("memory.", "torch.cuda"))])
        # an OOM: the job's error, nothing attached, nothing written
        d, p, files, recs = run("memory-off-oom", oom_at=1, TRAINPROF_MEMORY="0")
        self.assertEqual(p.returncode, -9, p.stderr)
        self.assertEqual(p.stdout.splitlines()[-2:], [
            "observers 0", "caught OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "%d bytes" % (100 * MiB)])
        self.assertEqual(written(d), [])


def run_plan(name, code, plan):
    """code (a template of %(here)s) run with the GPU capture plan `plan` (module detail in its
    steps), nothing flushed but on purpose; the run directory and the process."""
    d = tphelp.workdir(name)
    env = {"TRAINPROF_COMPRESS": "0", "TRAINPROF_FLUSH_MS": "600000",
           "TRAINPROF_SAMPLE_HZ": "0", "TRAINPROF_GPU_CAPTURE": plan}
    return d, tphelp.run_child(code % {"here": tphelp.HERE}, d, env=env)


def module_ranges(d):
    """The names after "nn.Module: " of the run's module ranges, in time order."""
    ev = sorted((e for e in tphelp.chrome(d) if e.get("ph") == "X"), key=lambda e: e["ts"])
    return [e["name"][len("nn.Module: "):] for e in ev if e["name"].startswith("nn.Module: ")]


def written(d):
    """The files of a run directory but the sessions' progress files (<host>-<pid>.step, which
    a killed process leaves behind: docs/format.md), sorted."""
    return sorted(f for f in os.listdir(d) if not f.endswith(".step"))


class OomTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d, cls.p, cls.files, cls.recs = run("memory-oom", oom_at=1,
                                                TRAINPROF_MEMORY_HISTORY="1000")

    def test_job_error_unchanged(self):
        self.assertEqual(self.p.returncode, -9, self.p.stderr)
        self.assertEqual(self.p.stdout.splitlines()[-1], "caught OutOfMemoryError: CUDA out "
                         "of memory. Tried to allocate %d bytes" % (100 * MiB))
        self.assertEqual(self.p.stderr, "")

    def test_metadata(self):
        m = self.recs["meta"]
        want = {"memory.oom.source": "torch", "memory.oom.request_bytes": str(100 * MiB),
                "memory.oom.device": "0", "memory.oom.free_bytes": str(72 * MiB),
                "memory.oom.total_bytes": str(80 * MiB),
                "memory.oom.allocated_bytes": str(7 * MiB),
                "memory.oom.reserved_bytes": str(8 * MiB),
                "memory.oom.largest_free_block_bytes": str(1 * MiB),
                "memory.oom.step": "1", "memory.oom.phase": "forward",
                "memory.oom.count": "1", "memory.history_entries": "1000"}
        self.assertEqual({k: m.get(k) for k in want}, want)
        frames = "train.py:10 fn0; train.py:11 fn1; train.py:12 fn2"
        self.assertEqual(json.loads(m["memory.oom.top"]), [
            {"bytes": 3 * MiB, "stream": 0, "frames": frames},
            {"bytes": 2 * MiB, "stream": 0, "frames": ""},
            {"bytes": 1 * MiB, "stream": 0, "frames": ""},
            {"bytes": 1 * MiB, "stream": 0, "frames": ""}])

    def test_mark_and_sample(self):
        (mark,) = self.recs["marks"]
        self.assertEqual(mark[2], "cuda.oom")
        after = [(n, v) for t, ts, n, v in self.recs["counters"] if ts >= mark[1]]
        self.assertEqual([n for n, _ in after], list(COUNTERS))
        self.assertEqual(dict(after)["cuda.memory_allocated_bytes"], 7.0 * MiB)
        self.assertEqual(dict(after)["cuda.memory_ooms"], 1.0)

    def test_snapshot(self):
        name = self.recs["meta"]["memory.oom.snapshot"]
        self.assertEqual(name, self.files[0][:-len(".tprof")] + ".oom-snapshot.pickle")
        self.assertEqual(written(self.d), sorted([name] + self.files))
        with open(os.path.join(self.d, name), "rb") as f:
            snap = pickle.load(f)
        (seg,) = snap["segments"]
        self.assertEqual(seg["total_size"], 8 * MiB)
        self.assertEqual([(b["size"], b["state"]) for b in seg["blocks"]],
                         [(1 * MiB, "active_allocated"), (1 * MiB, "active_allocated"),
                          (2 * MiB, "active_allocated"), (3 * MiB, "active_allocated"),
                          (1 * MiB, "inactive")])

    def test_broken_snapshot(self):
        d, p, files, recs = run("memory-oom-nosnap", oom_at=1, broken_snapshot=True)
        self.assertEqual(p.returncode, -9, p.stderr)
        self.assertEqual(p.stdout.splitlines()[-1], "caught OutOfMemoryError: CUDA out of "
                         "memory. Tried to allocate %d bytes" % (100 * MiB))
        m = recs["meta"]
        self.assertEqual((m.get("memory.oom.source"), m.get("memory.oom.phase")),
                         ("torch", "forward"))
        self.assertNotIn("memory.oom.snapshot", m)
        self.assertNotIn("memory.oom.top", m)
        self.assertEqual(written(d), files)


# Module detail: a wrapper (one child, no parameters: looked through) around a net of embed,
# blocks.0 and blocks.1 (each an mlp holding an fc, four names deep: below the depth) and head.
# Each leaf keeps 1 MiB of activations; in step 1 blocks.0's fc makes a 50 MiB transient (a
# new high of the allocator's peak, inside blocks.0.mlp); in step 2 head asks for 100 MiB
# more than the 80 MiB device has. The plan chooses step 1 only (TRAINPROF_GPU_CAPTURE=1-1).
MODULES = r"""
import os, signal, sys
sys.path.insert(0, %(here)r)
import faketorch
torch = faketorch.install(nested=True)
A, MiB = torch.A, 1 << 20
import trainprof.torch as tt
acts = []

class Leaf(torch.nn.Module):
    def __init__(self, peak=False, oom=False):
        self.peak, self.oom = peak, oom
    def forward(self, x):
        A.alloc(1 * MiB)
        acts.append(1)
        if self.peak and x == 1:
            A.alloc(50 * MiB)
            A.free(50 * MiB)
        if self.oom and x == 2:
            A.alloc(100 * MiB)
        return x

class Mlp(torch.nn.Module):
    def __init__(self, peak):
        self.fc = Leaf(peak=peak)
    def forward(self, x):
        return self.fc(x)

class Block(torch.nn.Module):
    def __init__(self, peak):
        self.mlp = Mlp(peak)
    def forward(self, x):
        return self.mlp(x)

class Blocks(torch.nn.Module):  # a container, never called itself (as nn.ModuleList)
    pass

class Net(torch.nn.Module):
    def __init__(self):
        self.params = [object()]
        self.embed = Leaf()
        self.blocks = Blocks()
        setattr(self.blocks, "0", Block(True))
        setattr(self.blocks, "1", Block(False))
        self.head = Leaf(oom=True)
    def forward(self, x):
        x = self.embed(x)
        x = getattr(self.blocks, "0")(x)
        x = getattr(self.blocks, "1")(x)
        return self.head(x)

class Wrapper(torch.nn.Module):
    def __init__(self, m):
        self.module = m
    def forward(self, x):
        return self.module(x)

model = Wrapper(Net())
opt = torch.optim.Optimizer(model.parameters())
opt.do_step = lambda: None
assert tt.instrument(model=model, optimizer=opt)
torch.cuda.init()
def bw():
    A.free(len(acts) * MiB)
    del acts[:]
try:
    for x in range(3):
        model(x)
        torch.autograd.backward(bw)
        opt.step()
except torch.cuda.OutOfMemoryError as e:
    print("caught", type(e).__name__, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


class ModuleDetailTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d, cls.p = run_plan("memory-modules", MODULES, "1-1")
        cls.files = tphelp.rank_files(cls.d)

    def test_job_error_unchanged(self):
        self.assertEqual(self.p.returncode, -9, self.p.stderr)
        self.assertEqual(self.p.stdout.splitlines()[-1], "caught OutOfMemoryError")

    def test_ranges_in_the_plans_step_only(self):
        # step 1 only (steps 0 and 2 ran the same modules), each module once, none deeper
        # than the depth (blocks.N.mlp.fc); the wrapper looked through, the net by its class
        self.assertEqual(module_ranges(self.d), ["Net", "embed", "blocks.0", "blocks.0.mlp",
                                                 "blocks.1", "blocks.1.mlp", "head"])

    def test_peak_module(self):
        rep = tphelp.report(self.d)
        (rank,) = rep["ranks"]
        steps = {s["step"]: s for s in rank["memory"]["steps"]}
        # step 1: the allocator's peak rose inside blocks.0.mlp (its fc is below the depth)
        self.assertEqual(steps[1]["peak_allocated_bound"], "exact")
        self.assertEqual(steps[1]["peak_allocated_bytes"], 52 * MiB)
        self.assertEqual(steps[1]["peak_phase"], "forward")
        self.assertEqual(steps[1]["peak_module"], "blocks.0.mlp")
        self.assertNotIn("peak_module", steps[0])
        self.assertNotIn("largest_sample", steps[0])

    def test_oom_module(self):
        m = tphelp.rank_records(os.path.join(self.d, self.files[0]))["meta"]
        self.assertEqual((m.get("memory.oom.step"), m.get("memory.oom.phase"),
                          m.get("memory.oom.module")), ("2", "forward", "head"))


# A KeyboardInterrupt inside a module's forward in the plan's step (1), which the loop catches
# before running the batch again: torch runs no forward hook for it (always_call hooks run for
# an Exception only), yet the interrupted forward's ranges end and a later OOM, in step 3's
# backward, is in no module.
INTERRUPT = r"""
import os, signal, sys
sys.path.insert(0, %(here)r)
import faketorch
torch = faketorch.install(nested=True)
A, MiB = torch.A, 1 << 20
import trainprof.torch as tt

class Leaf(torch.nn.Module):
    def __init__(self, ki=False):
        self.ki = ki
    def forward(self, x):
        A.alloc(1 * MiB); A.free(1 * MiB)
        if self.ki and x == 1:
            raise KeyboardInterrupt
        return x

class Net(torch.nn.Module):
    def __init__(self):
        self.params = [object()]
        self.embed = Leaf()
        self.mid = Leaf(ki=True)
        self.head = Leaf()
    def forward(self, x):
        return self.head(self.mid(self.embed(x)))

model = Net()
opt = torch.optim.Optimizer(model.parameters())
opt.do_step = lambda: None
assert tt.instrument(model=model, optimizer=opt)
torch.cuda.init()
def bw():
    if bw.n == 3:
        A.alloc(100 * MiB)
    bw.n += 1
bw.n = 0
try:
    for x in range(5):
        try:
            model(x)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            continue
        torch.autograd.backward(bw)
        opt.step()
except torch.cuda.OutOfMemoryError as e:
    print("caught", type(e).__name__, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


class InterruptedForwardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d, cls.p = run_plan("memory-interrupt", INTERRUPT, "1-1")

    def test_job_unchanged(self):
        self.assertEqual(self.p.returncode, -9, self.p.stderr)
        self.assertEqual(self.p.stdout.splitlines(), ["interrupted", "caught OutOfMemoryError"])
        self.assertNotIn("pop()", self.p.stderr)  # no more pops than pushes

    def test_interrupted_ranges_end(self):
        ev = sorted((e for e in tphelp.chrome(self.d) if e.get("ph") == "X"),
                    key=lambda e: e["ts"])
        fwd = [e for e in ev if e["name"] == "forward"]
        # steps 0, 1 (interrupted), 1 again, 2, 3: each forward its own range
        self.assertEqual(len(fwd), 5)
        self.assertLessEqual(fwd[1]["ts"] + fwd[1]["dur"], fwd[2]["ts"])
        self.assertEqual(module_ranges(self.d),
                         ["Net", "embed", "mid", "Net", "embed", "mid", "head"])
        # the interrupted call's ranges lie inside its forward
        for e in ev[ev.index(fwd[1]) + 1:ev.index(fwd[2])]:
            self.assertLessEqual(e["ts"] + e["dur"], fwd[2]["ts"], e)

    def test_oom_in_no_module(self):
        (f,) = tphelp.rank_files(self.d)
        m = tphelp.rank_records(os.path.join(self.d, f))["meta"]
        self.assertEqual((m.get("memory.oom.step"), m.get("memory.oom.phase")), ("3", "backward"))
        self.assertNotIn("memory.oom.module", m)


REUSE = r"""
import sys
sys.path.insert(0, %(here)r)
import faketorch
torch = faketorch.install(nested=True)
import trainprof.torch as tt

class Leaf(torch.nn.Module):
    def forward(self, x):
        return x

class NetA(torch.nn.Module):
    def __init__(self):
        self.params = [object()]
        self.a, self.b = Leaf(), Leaf()
    def forward(self, x):
        return self.b(self.a(x))

class NetB(torch.nn.Module):
    def __init__(self):
        self.params = [object()]
        self.c, self.d = Leaf(), Leaf()
    def forward(self, x):
        return self.d(self.c(x))

class Holder(torch.nn.Module):  # calls the modules of its list (a list registers none)
    def __init__(self):
        self.params = [object()]
        self.h = Leaf()
        self.extra = []
    def forward(self, x):
        for o in self.extra:
            o(x)
        return self.h(x)

def new(cls):
    # CPython gives a freed object's address to the next object of its size: the first of
    # these takes the last freed one (no iterator object between: it would take it first)
    made, i = [], 0
    while i < 100:
        o = cls()
        made.append(o)
        i += 1
    return made

torch.cuda.init()
opt = torch.optim.Optimizer([])
opt.do_step = lambda: None
k = Holder()
m = NetA()
assert tt.instrument(model=m, optimizer=opt) and tt.instrument(model=k)
m(0)
opt.step()
root = id(m)
del m
n = new(NetB)[0]  # the new model at the old one's address
tt.instrument(model=n)
n(1)
opt.step()
old = {id(n), id(n.c), id(n.d)}
del n
k.extra = [o for o in new(Leaf) if id(o) in old]  # modules of no instrumented model
print(root in old, len(k.extra))
k(2)
opt.step()
"""


class IdReuseTest(unittest.TestCase):
    """Module names belong to the modules named, not to their id(): a model deleted and a new
    one created at its address gets its own names, and modules of no instrumented model
    created at the old modules' addresses get no range."""

    def test_new_objects_at_old_ids(self):
        d, p = run_plan("memory-idreuse", REUSE, "all")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["True", "3"])  # the addresses were reused
        self.assertEqual(module_ranges(d), ["NetA", "a", "b", "NetB", "c", "d", "Holder", "h"])


ODD_NAMES = r"""
import sys
sys.path.insert(0, %(here)r)
import faketorch
torch = faketorch.install(nested=True)
import trainprof.torch as tt

class Leaf(torch.nn.Module):
    def forward(self, x):
        return x

class Net(torch.nn.Module):  # children named as a ModuleDict keyed by undecodable file names
    def __init__(self):
        self.params = [object()]
        setattr(self, "task_\udcff", Leaf())
        setattr(self, "a\x00b", Leaf())
    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x

torch.cuda.init()
opt = torch.optim.Optimizer([])
opt.do_step = lambda: None
m = Net()
assert tt.instrument(model=m, optimizer=opt)
m(0)
opt.step()
print("done")
"""


class OddNamesTest(unittest.TestCase):
    """A module whose name is no valid UTF-8 (a lone surrogate, as surrogateescape decodes
    an undecodable file name) or holds a NUL: the job's forward runs as without trainprof,
    and the range carries the name escaped, whole."""

    def test_escaped(self):
        d, p = run_plan("memory-oddnames", ODD_NAMES, "all")
        self.assertEqual((p.returncode, p.stdout), (0, "done\n"), p.stderr)
        self.assertEqual(module_ranges(d), ["Net", "task_\\udcff", "a\\x00b"])


class SnapshotWriteTest(unittest.TestCase):
    """The snapshot's write interrupted (a KeyboardInterrupt while pickling, as a Ctrl-C
    during a long write) or failing leaves no file: not under the final name, and not the
    temporary one."""

    def test_interrupted(self):
        import types
        import trainprof.torch as tt
        d = tphelp.workdir("memory-snapwrite")

        class Interrupt:
            def __reduce__(self):
                raise KeyboardInterrupt

        saved = tt._tp
        tt._tp = types.SimpleNamespace(output_path=lambda: os.path.join(d, "h-7.tprof"))
        try:
            with self.assertRaises(KeyboardInterrupt):
                tt._write_snapshot({"segments": [Interrupt()]})
            self.assertEqual(os.listdir(d), [])
            self.assertIsNone(tt._write_snapshot({"segments": [lambda: 0]}))  # unpicklable
            self.assertEqual(os.listdir(d), [])
            self.assertEqual(tt._write_snapshot({"segments": []}), "h-7.oom-snapshot.pickle")
            self.assertEqual(os.listdir(d), ["h-7.oom-snapshot.pickle"])
        finally:
            tt._tp = saved


class TopTest(unittest.TestCase):
    """memory.oom.top under its bound: frames cut at frame boundaries to an equal share, a
    frame longer than its share halved until it fits (escaped characters included)."""

    def test_cut(self):
        import trainprof.torch as tt
        frame = "/very/long/path/to/the/model/file_%02d.py:%d forward_\u00e9\"q\""
        top = [(1000 - i, 0, "; ".join(frame % (i, k) for k in range(30))) for i in range(10)]
        top.append((5, 7, "x" * 5000))
        v = tt._oom_top(top[:10])
        self.assertLess(len(v.encode()), 3500)
        got = json.loads(v)
        self.assertEqual([e["bytes"] for e in got], [1000 - i for i in range(10)])
        for i, e in enumerate(got):
            self.assertTrue(e["frames"].startswith(frame % (i, 0)), e["frames"])
            self.assertTrue(("; ".join(frame % (i, k) for k in range(30)) + "; ").startswith(
                e["frames"] + "; "))
        (one,) = json.loads(tt._oom_top([top[10]]))
        self.assertEqual(one["frames"], "x" * 2500)  # 5000 halved once fits
        self.assertLess(len(tt._oom_top([top[10]]).encode()), 3500)
        # one frame of non-ASCII characters: 6 bytes each once escaped, halved until it fits
        (wide,) = json.loads(tt._oom_top([(5, 0, "\u00e9" * 3000)]))
        self.assertEqual(wide["frames"], "\u00e9" * 375)
        small = [(10, 1, "a.py:1 f")]
        self.assertEqual(json.loads(tt._oom_top(small)),
                         [{"bytes": 10, "stream": 1, "frames": "a.py:1 f"}])


if __name__ == "__main__":
    unittest.main(verbosity=2)
