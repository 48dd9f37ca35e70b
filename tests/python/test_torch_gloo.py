"""trainprof.megatron on two torch.distributed (gloo, CPU) ranks: the torch hook is
registered by itself (all_gather of the timer matrix, all_reduce for energy, barrier) and
the last rank prints the C formatter's golden lines for the two ranks' known values.
Exits 77 (skipped) when this interpreter has no torch."""
import os
import socket
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
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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
