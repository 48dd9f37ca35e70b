"""Two torch.distributed ranks over gloo on the CPU: trainprof.megatron's torch hook is
registered by itself (all_gather of the timer matrix, all_reduce for energy, barrier) and
the last rank prints the C formatter's golden lines for the two ranks' known values; and
trainprof.torch counts gloo's collectives (DDP's bucket all-reduce, an async all_reduce and
its wait, a blocking one) as communication, labelled gloo, with the time rank 0 waits for a
rank that sleeps. Exits 77 (skipped) when this interpreter has no torch."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

try:
    import torch.distributed as _dist  # noqa: F401
    assert _dist.is_available()
except Exception as e:  # noqa: BLE001
    print("SKIP: no torch with torch.distributed in %s (%s)" % (sys.executable, e))
    sys.exit(77)

SCRIPT = os.path.join(tphelp.HERE, "megatron_api_script.py")


def free_port():
    """Below the ephemeral range, which the ranks' own connections draw from (free_port.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import free_port as fp
    return fp.free_port()


# Rank 1 sleeps 100 ms before its backward and 50 ms before an async all_reduce in each of
# 5 steps, so rank 0 waits about that long for it: in DDP's end-of-backward wait for the
# gradient bucket, and in wait() on the async all_reduce.
GLOO_STEPS = r"""
import sys, time, torch, torch.distributed as dist
import trainprof.torch as tt
rank, init = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
torch.manual_seed(0)
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
assert tt.instrument(model=ddp, optimizer=opt)
for s in range(5):
    if rank == 1:
        time.sleep(0.1)
    ddp(torch.randn(8, 64)).sum().backward()
    t = torch.ones(1 << 16)
    if rank == 1:
        time.sleep(0.05)
    dist.all_reduce(t, async_op=True).wait()
    dist.all_reduce(t)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


class TorchGlooTest(unittest.TestCase):
    def run_ranks(self, option, outdir=None):
        port = free_port()
        procs = []
        for r in (0, 1):
            env = tphelp.child_env(RANK=r, LOCAL_RANK=r, WORLD_SIZE=2,
                                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            if outdir:
                env["TRAINPROF_DIR"] = outdir
            procs.append(subprocess.Popen([tphelp.PY, SCRIPT, option], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        outs = []
        for p in procs:
            o, e = p.communicate(timeout=180)
            self.assertEqual(p.returncode, 0, e)
            outs.append(o.splitlines())
        return outs

    def test_minmax_two_ranks(self):
        d = tphelp.workdir("gloo")
        r0, r1 = self.run_ranks("minmax", d)
        self.assertNotIn("(min, max) time across ranks (ms):", r0)  # the last rank logs
        i = r1.index("(min, max) time across ranks (ms):")
        self.assertEqual(r1[i:i + 4], [
            "(min, max) time across ranks (ms):",
            "    forward-compute ................................: (125.00, 200.00)",
            "    backward-compute ...............................: (300.00, 350.00)",
            "    batch-generator ................................: (5.00, 5.00)"])
        self.assertIn("[rank 1] add_scalar forward-compute-time 0.200000 100", r1)
        self.assertIn("[rank 1] add_scalar backward-compute-time 0.350000 100", r1)
        self.assertIn("[rank 1] add_scalar batch-generator-time 0.005000 100", r1)
        self.assertFalse(any("add_scalar" in line for line in r0))
        self.assertIn("Total training energy (GPU): 0.000 MJ", r0)
        # both ranks recorded their timers into their own files
        self.assertEqual(len(tphelp.rank_files(d)), 2)

    def test_gloo_collectives_are_communication(self):
        d = tphelp.workdir("gloo_comm")
        init = "file://" + os.path.join(d, "rendezvous")
        procs = [subprocess.Popen([tphelp.PY, "-c", GLOO_STEPS, str(r), init],
                                  env=tphelp.child_env(TRAINPROF_DIR=d, RANK=r, LOCAL_RANK=r,
                                                       WORLD_SIZE=2),
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for r in (0, 1)]
        for p in procs:
            o, e = p.communicate(timeout=180)
            self.assertEqual(p.returncode, 0, e)
        rep = tphelp.report(d)
        r0 = [r for r in rep["ranks"] if r["rank"] == 0][0]
        c = r0["communication"]
        x = c["exposure"]
        self.assertEqual(x["basis"], "host", x)
        self.assertEqual(x["windows"], 4)  # 5 optimizer steps, the first warm-up
        # rank 0 waits about 150 ms per step for rank 1: communication, and exposed
        self.assertGreater(x["comm_ms"]["mean"], 100.0, x)
        self.assertGreater(x["exposed_ms"]["mean"], 100.0, x)
        self.assertEqual(c["torch_backends"], ["gloo"])
        for cm in c["communicators"]:
            self.assertEqual((cm["source"], cm["backend"]), ("torch", "gloo"), cm)
        ops = {o["op"]: o for cm in c["communicators"] for o in cm["ops"]}
        self.assertEqual(ops["AllReduce"]["count"], 15)  # DDP's, the async and the blocking one
        self.assertGreaterEqual(ops["Wait"]["count"], 5)
        comm = [e for e in tphelp.chrome(d) if e.get("cat") == "comm"]
        self.assertTrue(comm)
        for e in comm:
            self.assertEqual((e["args"]["source"], e["args"]["backend"]), ("torch", "gloo"), e)

    def test_all_two_ranks(self):
        r0, r1 = self.run_ranks("all")
        i = r1.index("times across ranks (ms):")
        self.assertEqual(r1[i:i + 9], [
            "times across ranks (ms):",
            "  forward-compute:",
            "     rank  0: 125.00",
            "     rank  1: 200.00",
            "  backward-compute:",
            "     rank  0: 300.00",
            "     rank  1: 350.00",
            "  batch-generator:",
            "     rank  1: 5.00"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
