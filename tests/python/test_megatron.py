"""A script written against Megatron-LM's Timers/EnergyMonitor API runs unchanged with
trainprof.megatron and prints the C formatter's lines (the goldens of tests/test_timers.c).
One rank here; test_torch_gloo.py runs it on two torch.distributed ranks."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

SCRIPT = os.path.join(tphelp.HERE, "megatron_api_script.py")


class MegatronScriptTest(unittest.TestCase):
    def run_script(self, option):
        env = tphelp.child_env()
        env.pop("WORLD_SIZE", None)
        p = subprocess.run([tphelp.PY, SCRIPT, option], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.splitlines()

    def test_minmax(self):
        out = self.run_script("minmax")
        i = out.index("(min, max) time across ranks (ms):")
        self.assertEqual(out[i:i + 3], [
            "(min, max) time across ranks (ms):",
            "    forward-compute ................................: (125.00, 125.00)",
            "    backward-compute ...............................: (300.00, 300.00)"])
        self.assertEqual(len(out), i + 4, out)  # no batch-generator value on rank 0
        self.assertEqual(out[i + 3], "Total training energy (GPU): 0.000 MJ")
        self.assertEqual(out[1:3], ["[rank 0] add_scalar forward-compute-time 0.125000 100",
                                    "[rank 0] add_scalar backward-compute-time 0.300000 100"])
        self.assertRegex(out[0], r"^\[rank 0\] measured [0-9.]+ ms per iteration, energy 0.0 J$")

    def test_max_and_all(self):
        out = self.run_script("max")
        i = out.index("max time across ranks (ms):")
        self.assertEqual(out[i + 1], "    forward-compute ................................: 125.00")
        out = self.run_script("all")
        i = out.index("times across ranks (ms):")
        self.assertEqual(out[i:i + 5], ["times across ranks (ms):", "  forward-compute:",
                                        "     rank  0: 125.00", "  backward-compute:",
                                        "     rank  0: 300.00"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
