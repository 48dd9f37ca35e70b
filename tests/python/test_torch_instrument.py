"""trainprof.torch on one CPU process: instrument(model, optimizer, dataloader) gives steps at
optimizer steps and the data/forward/backward/optimizer ranges, an async torch.distributed
collective is recorded when its work is waited for (bytes, group, backend), with the wait, losses are
bitwise identical with and without it, the autostart sitecustomize chains to the one it
hides, and the GPU-capture pause answers TPROF_ERR_UNAVAILABLE without CUPTI.
Exits 77 (skipped) when this interpreter has no torch."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

try:
    import torch  # noqa: F401
except Exception as e:  # noqa: BLE001
    print("SKIP: no torch in %s (%s)" % (sys.executable, e))
    sys.exit(77)

# The programs below that make a process group are one rank each: they rendezvous through an
# in-process store (dist.HashStore), not TCP, whose free-port probe raced the other tests'
# connections for the port (EADDRINUSE at bind).
LOOP = r"""
import os, torch, torch.distributed as dist
INSTRUMENT = %r
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(3)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randn(64, 4))
loader = torch.utils.data.DataLoader(data, batch_size=8)
if INSTRUMENT:
    import trainprof.torch as tt
    assert tt.instrument(model=model, optimizer=opt, dataloader=loader)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
t = torch.ones(1000)
w = dist.all_reduce(t, async_op=True)
w.wait()
dist.barrier()
print("loss", float(loss.item()).hex())
dist.destroy_process_group()
"""


ITERATIONS = ("training iterations of trainprof.torch, from one iteration's first data fetch, "
              "forward or backward to the next")

# A Megatron-LM-like loop: backward by calling the autograd engine directly, as
# megatron/core/pipeline_parallel/schedules.py (custom_backward) does; a reentrant
# activation checkpoint, whose backward runs a backward inside the backward; and 40 ms of
# work after the optimizer step (Megatron's parameter copy, loss reduction and logging).
ENGINE_LOOP = r"""
import time, torch, torch.utils.checkpoint as ckpt
from torch.autograd.variable import Variable
import trainprof.torch as tt
torch.manual_seed(3)
lin1, lin2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
model = torch.nn.Sequential(lin1, torch.nn.GELU(), lin2)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
assert tt.instrument(model=model, optimizer=opt)
for i in range(6):
    x = torch.randn(8, 16, requires_grad=True)
    h = ckpt.checkpoint(lambda t: torch.nn.functional.gelu(lin1(t)), x)
    loss = model(x).sum() + lin2(h).sum()
    Variable._execution_engine.run_backward(
        tensors=(loss,), grad_tensors=(torch.ones_like(loss),), keep_graph=False,
        create_graph=False, inputs=tuple(), allow_unreachable=True, accumulate_grad=True)
    opt.step()
    time.sleep(0.04)
    opt.zero_grad()
assert "autograd engine" in tt.instrumented()["patched"]
"""


# An optimizer whose step runs another optimizer's step: torch's ZeroRedundancyOptimizer (an
# Optimizer) steps its local SGD inside its own step. Both are instrumented, as autostart
# instruments every optimizer it sees constructed. 4 iterations.
NESTED_OPT_LOOP = r"""
import torch, torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
import trainprof.torch as tt
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(3)
model = torch.nn.Linear(8, 1)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
tt.instrument(model=model, optimizer=[opt, opt.optim])  # False when not recording
for i in range(4):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss", loss.item().hex())
dist.destroy_process_group()
# Torch's gloo process group can abort the interpreter's teardown afterwards (std::terminate,
# "terminate called without an active exception", about 1 run in 20 on Debian's torch 1.13,
# recording or not): the child closes its rank file and leaves without that teardown, so the
# test checks the steps, not torch's exit.
import os, sys, trainprof
trainprof.shutdown()
sys.stdout.flush()
os._exit(0)
"""

# A training step captured once in a CUDA graph and replayed, as PyTorch's CUDA graphs
# documentation shows it (warm-up iterations, one capture, replays into static tensors).
# This CPU build has no CUDA graphs, so a stand-in class takes torch.cuda.graphs.CUDAGraph's
# place before instrument(): the capture runs the iteration's Python (as a real capture does,
# recording instead of launching), each replay takes 20 ms (the GPU running the graph).
GRAPH_LOOP = r"""
import time, torch
import torch.cuda.graphs as graphs


class Graph:
    def capture_begin(self, *a, **k):
        pass

    def capture_end(self):
        pass

    def replay(self):
        time.sleep(0.02)


graphs.CUDAGraph = torch.cuda.CUDAGraph = Graph
import trainprof.torch as tt
torch.manual_seed(3)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
assert tt.instrument(model=model, optimizer=opt)
static_x = torch.randn(8, 16)
for i in range(2):  # warm-up, eager
    model(static_x).sum().backward()
    opt.step()
    opt.zero_grad()
part = Graph()  # a graph of part of a step (no optimizer step in it): no step of its own
part.capture_begin(); model(static_x); part.capture_end()
g = Graph()
g.capture_begin()
model(static_x).sum().backward()
opt.step()
g.capture_end()
for i in range(5):
    static_x.copy_(torch.randn(8, 16))
    part.replay()
    g.replay()
"""


# A process group named as Megatron-LM names its groups (torch 2.4+ takes group_desc; this
# torch does not, so a stand-in accepts it, as the newer new_group does)
NAMED_GROUP = r"""
import os, torch, torch.distributed as dist
orig = dist.new_group
def new_group(*args, group_desc=None, **kwargs):
    return orig(*args, **kwargs)
dist.new_group = dist.distributed_c10d.new_group = new_group
import trainprof.torch as tt
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
assert tt.instrument()
tp = dist.new_group(ranks=[0], group_desc="TENSOR_MODEL_PARALLEL_GROUP")
dist.all_reduce(torch.ones(8), group=tp)
dist.destroy_process_group()
"""


# What the program does with its model must not see trainprof: torch.save of the whole
# model, loaded by an interpreter without trainprof, and torch.jit.script of the model
SAVE_AND_SCRIPT = r"""
import sys, torch
import trainprof.torch as tt
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
assert tt.instrument(model=model, optimizer=opt)
for i in range(3):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
assert not model._forward_pre_hooks and not model._forward_hooks
torch.save(model, sys.argv[1])
scripted = torch.jit.script(model)
print("scripted", float(scripted(torch.ones(1, 4)).sum()) == float(model(torch.ones(1, 4)).sum()))
"""


# Megatron-LM's ChainedOptimizer shape: one optimizer per parameter group, stepped one after
# the other with nothing between: one iteration each time, not two
CHAINED = r"""
import time, torch
import trainprof.torch as tt
torch.manual_seed(3)
a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
model = torch.nn.Sequential(a, b)
opts = [torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.Adam(b.parameters(), lr=0.1)]
assert tt.instrument(model=model, optimizer=opts)
for i in range(4):
    model(torch.randn(3, 4)).sum().backward()
    for o in opts:
        o.step()
    time.sleep(0.02)
    for o in opts:
        o.zero_grad()
"""


class TorchInstrumentTest(unittest.TestCase):
    def test_group_named_as_megatron_names_it(self):
        d = tphelp.workdir("torch_named_group")
        p = tphelp.run_child(NAMED_GROUP, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        comms = tphelp.report(d)["communication"]["communicators"]
        named = [c for c in comms if c.get("group_names") == "TENSOR_MODEL_PARALLEL_GROUP"]
        self.assertEqual(len(named), 1, comms)
        self.assertEqual(named[0]["role_guess"], "tensor parallel")
        self.assertTrue(named[0]["role_named"])

    def test_model_saved_and_scripted_without_trainprof_in_it(self):
        d = tphelp.workdir("torch_save_script")
        path = os.path.join(d, "model.pt")
        code = SAVE_AND_SCRIPT.replace("sys.argv[1]", repr(path))
        p = tphelp.run_child(code, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("scripted True", p.stdout)
        # a plain interpreter, trainprof nowhere on its path, loads the checkpoint
        env = tphelp.child_env()
        env.pop("PYTHONPATH", None)
        q = subprocess.run([tphelp.PY, "-c", "import sys, torch; m = torch.load(%r); "
                            "assert 'trainprof' not in sys.modules; print(type(m).__name__)"
                            % path], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertIn("Sequential", q.stdout)
        rep = tphelp.report(d, "--warmup", "0")
        names = {x["name"] for x in rep["ranks"][0]["ranges"]["top_inclusive"]}
        self.assertIn("forward", names)

    def test_chained_optimizers_are_one_iteration(self):
        d = tphelp.workdir("torch_chained")
        p = tphelp.run_child(CHAINED, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = tphelp.report(d, "--warmup", "0")["ranks"][0]
        self.assertEqual(r["steps"]["count"], 4)
        self.assertGreaterEqual(r["steps"]["p50_ms"], 20)  # each holds its 20 ms tail but the last
        opt = [x for x in r["ranges"]["top_inclusive"] if x["name"] == "optimizer"]
        self.assertEqual(opt[0]["count"], 8)

    def test_no_optimizer_step_says_where_steps_come_from(self):
        d = tphelp.workdir("torch_noopt")
        p = tphelp.run_child("import torch, trainprof.torch as tt\n"
                             "m = torch.nn.Linear(2, 2)\n"
                             "assert tt.instrument(model=m)\n"
                             "for i in range(3): m(torch.ones(1, 2)).sum().backward()\n",
                             outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        q = subprocess.run([tphelp.CLI, "report", d], capture_output=True, text=True,
                           timeout=120)
        self.assertIn("steps: none found: trainprof.torch makes a step of each optimizer step",
                      q.stdout)

    def test_cuda_graph_replays_are_the_steps(self):
        d = tphelp.workdir("torch_graph")
        p = tphelp.run_child(GRAPH_LOOP, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        rep = tphelp.report(d, "--warmup", "0")
        r = rep["ranks"][0]
        self.assertEqual(r["steps"]["count"], 7)  # 2 eager iterations and 5 replays
        ev = tphelp.chrome(d)
        self.assertEqual(len(tphelp.complete(ev, "cuda graph capture")), 2)
        self.assertEqual(len(tphelp.complete(ev, "cuda graph replay")), 5)
        steps = sorted((e for e in ev if e.get("ph") == "X" and
                        str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
        rep_ev = sorted(tphelp.complete(ev, "cuda graph replay"), key=lambda e: e["ts"])
        # each replay in its own step: steps 2..6 (the first replay's step also holds the
        # part graph's replay, and the step before it the captures)
        for s, e in zip(steps[2:], rep_ev):
            self.assertLessEqual(s["ts"], e["ts"])
            self.assertGreaterEqual(s["ts"] + s["dur"], e["ts"] + e["dur"] - 0.01)
            self.assertGreaterEqual(s["dur"], 20000)

    def test_nested_optimizer_step_is_one_iteration(self):
        d = tphelp.workdir("torch_nested_opt")
        p = tphelp.run_child(NESTED_OPT_LOOP, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        q = tphelp.run_child(NESTED_OPT_LOOP)  # not recording: nothing instrumented
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertEqual(p.stdout.split(), q.stdout.split())  # bitwise: float.hex
        rep = tphelp.report(d, "--warmup", "0")
        self.assertEqual(rep["ranks"][0]["steps"]["count"], 4)
        ev = tphelp.chrome(d)
        opt = [e for e in ev if e.get("name") == "optimizer" and e.get("ph") == "X"]
        self.assertEqual(len(opt), 4, opt)  # the inner step is inside the outer's range

    def test_backward_through_the_engine_and_iteration_steps(self):
        d = tphelp.workdir("torch_engine")
        p = tphelp.run_child(ENGINE_LOOP, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        rep = tphelp.report(d, "--warmup", "0")
        r = rep["ranks"][0]
        self.assertEqual(r["steps"]["source"], ITERATIONS)
        self.assertEqual(r["steps"]["count"], 6)
        ev = tphelp.chrome(d)
        bw = [e for e in ev if e.get("name") == "backward" and e.get("ph") == "X"]
        # one per iteration: the checkpoint's backward inside it is not a second phase
        self.assertEqual(len(bw), 6, bw)
        steps = sorted((e for e in ev if e.get("ph") == "X" and
                        str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
        self.assertEqual(len(steps), 6)
        for a, b in zip(steps, steps[1:]):  # boundary to boundary: the 40 ms tail is inside
            self.assertAlmostEqual(a["ts"] + a["dur"], b["ts"], places=2)
            self.assertGreaterEqual(a["dur"], 40000)
        self.assertLess(steps[-1]["dur"], 40000)  # the last ends at its optimizer step

    def test_steps_phases_collectives_and_identical_loss(self):
        d = tphelp.workdir("torch_instrument")
        p = tphelp.run_child(LOOP % True, outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        q = tphelp.run_child(LOOP % False)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertEqual(p.stdout.split(), q.stdout.split())  # bitwise: float.hex
        rep = tphelp.report(d)
        r = rep["ranks"][0]
        self.assertEqual(r["steps"]["count"], 8)  # 64 samples / batch 8 = 8 optimizer steps
        self.assertEqual(r["steps"]["source"], ITERATIONS)
        names = {x["name"] for x in r["breakdown"]["ranges"]}
        self.assertTrue({"data", "forward", "backward", "optimizer"} <= names, names)
        comm = r["communication"]
        self.assertEqual(comm["torch_ops"], 3)  # the async all_reduce, its wait, the barrier
        c = comm["communicators"][0]
        self.assertEqual(c["torch_group"], "backend=gloo size=1 ranks=0")
        self.assertEqual((c["source"], c["backend"]), ("torch", "gloo"))
        ops = {o["op"]: o for o in c["ops"]}
        self.assertEqual(ops["AllReduce"]["bytes"], 4000)
        self.assertEqual(ops["Wait"]["count"], 1)
        self.assertEqual(ops["Barrier"]["count"], 1)

    def test_not_recording_changes_nothing(self):
        p = tphelp.run_child("import torch, trainprof.torch as tt\n"
                             "m = torch.nn.Linear(2, 2)\n"
                             "assert tt.instrument(model=m) is False\n"
                             "assert tt.instrumented()['patched'] == []\n")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_gpu_capture_pause_without_cupti(self):
        d = tphelp.workdir("torch_pause")
        p = tphelp.run_child("import trainprof as t\n"
                             "assert t.gpu_capture_pause() == -11, t.gpu_capture_pause()\n"
                             "assert t.gpu_capture_resume() == -11\n", outdir=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = tphelp.run_child("import trainprof as t\nassert t.gpu_capture_pause() == -8\n")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_autostart_chains_sitecustomize(self):
        d = tphelp.workdir("torch_chain")
        user = os.path.join(d, "user")
        os.makedirs(user)
        with open(os.path.join(user, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.USER_SITECUSTOMIZE = 1\n")
        code = ("import builtins, torch, trainprof.torch as tt\n"
                "assert builtins.USER_SITECUSTOMIZE == 1\n"
                "assert 'Optimizer.__init__' in tt.instrumented()['patched'], tt.instrumented()\n"
                "print('ok')\n")
        env = tphelp.child_env(PYTHONPATH=os.environ.get("PYTHONPATH", "") + ":" + user)
        out = os.path.join(d, "run")
        p = subprocess.run([tphelp.CLI, "run", "--python", "--quiet", "-o", out, "--",
                            tphelp.PY, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok", p.stdout)


if __name__ == "__main__":
    unittest.main()
