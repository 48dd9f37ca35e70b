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


# A stand-in for megatron/core/timers.py with Megatron-LM's registry rules: a timer above the
# log level is one shared dummy whose start/stop do nothing; a real one keeps its level.
FAKE_TIMERS = r"""
import time


class DummyTimer:
    def start(self, barrier=False):
        pass

    def stop(self, barrier=False):
        pass

    def elapsed(self, reset=True, barrier=False):
        raise Exception("dummy timer should not be used to calculate elapsed time")


class Timer:
    def __init__(self, name):
        self.name, self.t0, self.total = name, None, 0.0

    def start(self, barrier=False):
        assert self.t0 is None, "timer has already been started"
        self.t0 = time.time()

    def stop(self, barrier=False):
        assert self.t0 is not None, "timer is not started"
        self.total += time.time() - self.t0
        self.t0 = None

    def elapsed(self, reset=True, barrier=False):
        return self.total


class Timers:
    def __init__(self, log_level, log_option):
        self._log_level, self._timers, self._dummy = log_level, {}, DummyTimer()

    def __call__(self, name, log_level=None):
        if name in self._timers:
            return self._timers[name]
        if (2 if log_level is None else log_level) > self._log_level:
            return self._dummy
        self._timers[name] = Timer(name)
        return self._timers[name]
"""

# Megatron's training loop shape at --timing-log-level 0: forward-backward (level 1) is a
# dummy, optimizer (level 0) a real timer
TIMED_LOOP = r"""
import time
from megatron.core.timers import Timers
timers = Timers(0, "max")
for i in range(3):
    timers("forward-backward", log_level=1).start(barrier=False)
    time.sleep(0.03)
    timers("forward-backward").stop()
    timers("optimizer", log_level=0).start(barrier=False)
    time.sleep(0.01)
    timers("optimizer").stop()
assert timers("optimizer").elapsed() > 0.029
print("ok")
"""


class MegatronOwnTimersTest(unittest.TestCase):
    def test_own_timers_recorded_under_run_python(self):
        d = tphelp.workdir("megatron_own_timers")
        pkg = os.path.join(d, "pkg", "megatron", "core")
        os.makedirs(pkg)
        for init in (os.path.join(d, "pkg", "megatron"), pkg):
            open(os.path.join(init, "__init__.py"), "w").close()
        with open(os.path.join(pkg, "timers.py"), "w") as f:
            f.write(FAKE_TIMERS)
        env = tphelp.child_env(PYTHONPATH=os.environ.get("PYTHONPATH", "") + ":" +
                               os.path.join(d, "pkg"))
        out = os.path.join(d, "run")
        p = subprocess.run([tphelp.CLI, "run", "--python", "--quiet", "-o", out, "--",
                            tphelp.PY, "-c", TIMED_LOOP], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok", p.stdout)
        rows = {r["name"]: r for r in tphelp.report(out)["ranks"][0]["timers"]["rows"]}
        self.assertEqual(set(rows), {"forward-backward", "optimizer"})
        self.assertEqual(rows["forward-backward"]["count"], 3)
        self.assertEqual(rows["optimizer"]["count"], 3)
        self.assertGreaterEqual(rows["forward-backward"]["ms"], 90)
        self.assertLess(rows["forward-backward"]["ms"], 90 + 60)
        self.assertGreaterEqual(rows["optimizer"]["ms"], 30)
        self.assertLess(rows["optimizer"]["ms"], 30 + 60)


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
