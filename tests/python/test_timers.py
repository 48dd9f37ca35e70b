"""trainprof.Timers and EnergyMonitor from Python: Megatron-LM's exact text (the goldens of
tests/test_timers.c, through a fake 4-rank collectives hook written in Python), elapsed and
reset semantics, log levels, write() for a TensorBoard-style writer, the trace ranges, and
the EnergyMonitor without NVML."""
import io
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

import trainprof  # noqa: E402
from trainprof import megatron  # noqa: E402

NAMES = ["forward-compute", "backward-compute", "optimizer", "batch-generator"]
# seconds per rank; this process is rank 3 and sends its own row (tests/test_timers.c)
OTHER = [[1.5, 3.0, 0, 0], [1.25, 3.5, 0, 0], [2.0, 0, 0, 0.05], [0, 0, 0, 0]]


class FakeWorld:
    """A 4-rank world in one process: the other ranks' rows are made up."""

    def __init__(self, rank=3, world=4):
        self.rank, self.world = rank, world
        self.gathers = self.barriers = 0
        self.reduces = []

    def all_gather(self, block):
        self.gathers += 1
        n = len(block) // 8
        out = b""
        for r in range(self.world):
            if r == self.rank:
                out += block
            else:
                row = [struct.unpack("f", struct.pack("f", OTHER[r][i]))[0] if i < 4 else 0.0
                       for i in range(n)]
                out += struct.pack("%dd" % n, *row)
        return out

    def all_reduce(self, values, op):
        self.reduces.append((list(values), op))
        return [v * self.world for v in values] if op == "sum" else list(values)

    def barrier(self):
        self.barriers += 1

    def install(self):
        trainprof.set_collectives(self.rank, self.world, self.all_gather, self.all_reduce,
                                  self.barrier)


def make(option, cls=trainprof.Timers):
    t = cls(2, option)
    t("forward-compute", log_level=2).set_elapsed(1.75)
    t("backward-compute", log_level=2).set_elapsed(3.25)
    t("optimizer", log_level=1)
    t("batch-generator", log_level=2)
    return t


class GoldenTest(unittest.TestCase):
    def setUp(self):
        self.world = FakeWorld()
        self.world.install()

    def tearDown(self):
        self.assertTrue(trainprof.clear_collectives())

    def test_minmax(self):
        t = make("minmax")
        self.assertEqual(
            t.get_all_timers_string(NAMES, normalizer=10.0, reset=False),
            "(min, max) time across ranks (ms):\n"
            "    forward-compute ................................: (125.00, 200.00)\n"
            "    backward-compute ...............................: (300.00, 350.00)\n"
            "    batch-generator ................................: (5.00, 5.00)")
        self.assertEqual(self.world.gathers, 1)

    def test_max(self):
        t = make("max")
        self.assertEqual(
            t.get_all_timers_string(NAMES, 10.0, False),
            "max time across ranks (ms):\n"
            "    forward-compute ................................: 200.00\n"
            "    backward-compute ...............................: 350.00\n"
            "    batch-generator ................................: 5.00")

    def test_all(self):
        t = make("all")
        self.assertEqual(
            t.get_all_timers_string(NAMES, 10.0, False),
            "times across ranks (ms):\n"
            "  forward-compute:\n"
            "     rank  0: 150.00\n"
            "     rank  1: 125.00\n"
            "     rank  2: 200.00\n"
            "     rank  3: 175.00\n"
            "  backward-compute:\n"
            "     rank  0: 300.00\n"
            "     rank  1: 350.00\n"
            "     rank  3: 325.00\n"
            "  batch-generator:\n"
            "     rank  2: 5.00")

    def test_log_prints_on_last_rank_only(self):
        t = make("minmax")
        buf = io.StringIO()
        t.log(NAMES, normalizer=10.0, reset=False, file=buf)  # rank 3 of 4 = the last
        self.assertTrue(buf.getvalue().startswith("(min, max) time across ranks (ms):\n"))
        self.assertTrue(buf.getvalue().endswith(": (5.00, 5.00)\n"))
        buf = io.StringIO()
        t.log(NAMES, rank=0, normalizer=10.0, reset=False, file=buf)
        self.assertEqual(buf.getvalue(), "")
        with self.assertRaises(trainprof.Error) as cm:
            t.log(NAMES, rank=4)
        self.assertEqual(cm.exception.code, trainprof.ERR_INVALID_ARG)
        self.assertIn("invalid argument", str(cm.exception))

    def test_write_max_seconds(self):
        t = make("minmax")

        class Writer:
            calls = []

            def add_scalar(self, tag, value, step):
                self.calls.append((tag, round(value, 6), step))

        w = Writer()
        t.write(NAMES, w, 7, normalizer=10.0)
        self.assertEqual(w.calls, [("forward-compute-time", 0.2, 7),
                                   ("backward-compute-time", 0.35, 7),
                                   ("batch-generator-time", 0.005, 7)])
        # reset=False by default: values are still there
        self.assertAlmostEqual(t("forward-compute").elapsed(reset=False), 1.75)

    def test_elapsed_all_ranks(self):
        t = make("minmax")
        names, rows = t.elapsed_all_ranks(NAMES, reset=True)
        self.assertEqual(names, NAMES)
        self.assertEqual(len(rows), 4)
        self.assertEqual(rows[3], [1.75, 3.25, 0.0, 0.0])
        self.assertEqual(rows[1][1], 3.5)
        self.assertEqual(t("forward-compute").elapsed(), 0.0)  # reset

    def test_barrier_goes_through_hook(self):
        t = trainprof.Timers(2, "minmax")
        t("x").start(barrier=True)
        t("x").stop(barrier=True)
        self.assertEqual(self.world.barriers, 2)

    def test_callback_exception_propagates(self):
        def bad(block):
            raise KeyError("from the hook")
        trainprof.set_collectives(3, 4, bad)
        t = make("minmax")
        with self.assertRaises(KeyError):
            t.get_all_timers_string(NAMES)

    def test_energy_sums_through_hook(self):
        e = trainprof.EnergyMonitor()
        e.setup()
        e.resume()
        self.assertEqual(e.lap(), 0.0)
        self.assertEqual(e.lap(per_rank=True), (0.0, 0.0))
        self.assertEqual(e.get_total(), 0.0)
        self.assertEqual([op for _, op in self.world.reduces], ["sum", "sum", "sum"])
        e.shutdown()


class SemanticsTest(unittest.TestCase):
    def test_elapsed_reset(self):
        t = trainprof.Timers(2, "minmax")
        tm = t("work")
        self.assertIs(t("work"), tm)  # cached
        tm.start()
        time.sleep(0.02)
        running = tm.elapsed(reset=False)  # safe while running: stop, read, restart
        self.assertGreaterEqual(running, 0.02)
        self.assertLess(running, 0.1)
        time.sleep(0.01)
        tm.stop()
        total = tm.elapsed(reset=True)
        self.assertGreaterEqual(total, 0.03)
        self.assertEqual(tm.elapsed(), 0.0)  # reset above
        self.assertGreaterEqual(tm.active_time(), total)  # reset keeps active time
        tm.start()
        time.sleep(0.005)
        tm.stop()
        tm.reset()
        self.assertEqual(tm.elapsed(), 0.0)
        self.assertGreaterEqual(tm.active_time(), total + 0.005)
        with t("ctx"):
            time.sleep(0.002)
        self.assertGreaterEqual(t("ctx").elapsed(), 0.002)

    def test_log_levels(self):
        t = trainprof.Timers(1, "minmax")
        d = t("fine-grained", log_level=2)
        self.assertTrue(d.is_dummy)
        d.start()
        time.sleep(0.001)
        d.stop()
        self.assertEqual(d.elapsed(), 0.0)
        self.assertFalse(t("coarse", log_level=1).is_dummy)
        self.assertFalse(t("interval", log_level=0).is_dummy)
        self.assertTrue(t("default-level").is_dummy)  # a new timer without a level gets 2
        t("coarse").set_elapsed(0.004)
        t("interval").set_elapsed(0.5)
        self.assertEqual(t.get_all_timers_string(),
                         "(min, max) time across ranks (ms):\n"
                         "    coarse .........................................: (4.00, 4.00)\n"
                         "    interval .......................................: (500.00, 500.00)")
        self.assertIsNone(t.get_all_timers_string())  # reset: nothing to print
        with self.assertRaises(trainprof.Error):
            t("coarse", log_level=0)  # a level is fixed at first use
        with self.assertRaises(trainprof.Error):
            t("x", log_level=3)
        with self.assertRaises(ValueError):
            trainprof.Timers(2, "median")
        with self.assertRaises(ValueError):
            t.get_all_timers_string(normalizer=0)

    def test_megatron_strictness(self):
        t = megatron.Timers(0, "max")
        d = t("forward-compute", log_level=2)
        self.assertTrue(d.is_dummy)
        d.start()
        d.stop()
        with self.assertRaises(Exception) as cm:
            d.elapsed()
        self.assertIn("dummy timer", str(cm.exception))
        t("interval-time", log_level=0)
        with self.assertRaises(AssertionError):
            t("interval-time", log_level=1)
        with self.assertRaises(AssertionError):
            megatron.Timers(2, "median")
        with self.assertRaises(TypeError):
            megatron.Timers(2)  # Megatron's constructor takes both

    def test_trace_ranges(self):
        d = tphelp.workdir("timers_trace")
        p = tphelp.run_child(r'''
            import time, trainprof
            t = trainprof.Timers(2, "minmax")
            for _ in range(3):
                t("fwd").start(); time.sleep(0.005); t("fwd").stop()
            print(round(t("fwd").elapsed() * 1000, 3))
        ''', d)
        self.assertEqual(p.returncode, 0)
        ev = tphelp.chrome(d)
        b = [e for e in ev if e.get("ph") == "b" and e.get("name") == "fwd"]
        e = [e for e in ev if e.get("ph") == "e" and e.get("name") == "fwd"]
        self.assertEqual(len(b), 3)
        self.assertEqual(len(e), 3)
        self.assertEqual(b[0]["args"]["category"], "timers")
        trace_ms = sum(y["ts"] - x["ts"] for x, y in zip(b, e)) / 1000.0
        self.assertAlmostEqual(trace_ms, float(p.stdout.strip()), delta=0.1)
        self.assertGreaterEqual(trace_ms, 15.0)


@unittest.skipUnless(os.environ.get("FAKE_CUDA"), "FAKE_CUDA (tests/fake_cuda.c) not built")
class CudaEventsTest(unittest.TestCase):
    """'cuda_events' against the scripted driver (tests/fake_cuda.c, loaded as a CUDA program
    loads libcuda.so.1): each stream has its own GPU clock, advanced by fake_cuda_work; an
    interval is the work of the stream its events went on."""

    def test_current_stream(self):
        p = tphelp.run_child(r'''
            import ctypes, os, sys, types
            cuda = ctypes.CDLL(os.environ["FAKE_CUDA"], mode=ctypes.RTLD_GLOBAL)
            cuda.cuInit(0)
            cuda.fake_cuda_set_context(1)
            cuda.fake_cuda_work.argtypes = [ctypes.c_void_p, ctypes.c_double]
            cuda.fake_cuda_events_on.argtypes = [ctypes.c_void_p]
            import trainprof

            def interval(t, stream, ms):
                t.start(); cuda.fake_cuda_work(stream, ms); t.stop()
                return round(t.elapsed() * 1e3, 3)

            # a callable names the stream at each start and stop
            cur = [1001]
            ts = trainprof.Timers(2, "max")
            ts.set_timing("cuda_events", cuda_stream=lambda: cur[0])
            a = interval(ts("fwd"), 1001, 20.0)
            cur[0] = 2002
            b = interval(ts("fwd"), 2002, 5.0)
            # a fixed stream sees only its own work
            tf = trainprof.Timers(2, "max")
            tf.set_timing("cuda_events", cuda_stream=1001)
            c = interval(tf("fwd"), 2002, 5.0)
            # the default: torch's current stream (a stand-in torch with CUDA initialised)
            torch = types.SimpleNamespace(
                cuda=types.SimpleNamespace(is_initialized=lambda: True),
                _C=types.SimpleNamespace(_cuda_getDevice=lambda: 0,
                                         _cuda_getCurrentRawStream=lambda dev: 3003))
            sys.modules["torch"] = torch
            td = trainprof.Timers(2, "max")
            td.set_timing("cuda_events")
            d = interval(td("fwd"), 3003, 7.0)
            del sys.modules["torch"]  # no torch: the legacy default stream (0)
            e = interval(td("fwd"), None, 3.0)
            # a source that raises: shown once, then the legacy default stream
            def bad():
                raise ValueError("no stream here")
            tb = trainprof.Timers(2, "max")
            tb.set_timing("cuda_events", cuda_stream=bad)
            f = interval(tb("fwd"), None, 2.0)
            g = interval(tb("fwd"), None, 2.0)
            print(a, b, c, d, e, f, g, cuda.fake_cuda_events_on(3003))
        ''')
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout.split(), ["20.0", "5.0", "0.0", "7.0", "3.0", "2.0", "2.0", "2"])
        self.assertEqual(p.stderr.count("no stream here"), 1)

    def test_registry_freed_while_raising(self):
        # a running timer's registry freed while an exception propagates: the source is not
        # called from the destructor, and the exception reaches its handler
        p = tphelp.run_child(r'''
            import ctypes, os
            cuda = ctypes.CDLL(os.environ["FAKE_CUDA"], mode=ctypes.RTLD_GLOBAL)
            cuda.cuInit(0)
            cuda.fake_cuda_set_context(1)
            import trainprof

            def mk():
                ts = trainprof.Timers(2, "max")
                ts.set_timing("cuda_events", cuda_stream=lambda: 5)
                ts("x").start()
                return ts

            def f(a, b):
                pass

            try:
                f(mk(), 1 / 0)
            except ZeroDivisionError:
                print("caught")
            ts = trainprof.Timers(2, "max")
            src = lambda: 5
            for _ in range(10):
                try:
                    ts.set_timing("bogus", cuda_stream=src)
                except ValueError:
                    pass
            import sys
            print(sys.getrefcount(src))
        ''')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["caught", "2"])
        self.assertEqual(p.stderr, "")

    def test_source_cycle_collected(self):
        # an object whose Timers ask its own method for the stream: the cycle is collected,
        # with the running timer's events
        p = tphelp.run_child(r'''
            import ctypes, gc, os, weakref
            cuda = ctypes.CDLL(os.environ["FAKE_CUDA"], mode=ctypes.RTLD_GLOBAL)
            cuda.cuInit(0)
            cuda.fake_cuda_set_context(1)
            import trainprof

            class Trainer:
                def __init__(self):
                    self.timers = trainprof.Timers(2, "max")
                    self.timers.set_timing("cuda_events", cuda_stream=self.stream)
                    self.timers("fwd").start()

                def stream(self):
                    return 7

            refs = [weakref.ref(Trainer()) for _ in range(3)]
            gc.collect()
            print(sum(r() is not None for r in refs), cuda.fake_cuda_count(ord("e")))
        ''')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["0", "0"])


class EnergyTest(unittest.TestCase):
    def test_without_nvml(self):
        # no GPU here (and a bogus library name to be sure): zeros, no exception
        p = tphelp.run_child(r'''
            from trainprof.megatron import EnergyMonitor
            import trainprof
            e = EnergyMonitor()
            e.setup(); e.resume(); e.pause(); e.resume()
            print(e.lap(), e.get_total(), e.has_nvml, e.gpus())
            e.shutdown()
            print(e.lap())
            print(trainprof.joules_per_step(100.0, 4), trainprof.avg_watts(50.0, 2_000_000_000),
                  trainprof.wh_per_sample(7200.0, 2))
        ''', env={"TRAINPROF_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"})
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout.split("\n")[:3],
                         ["0.0 0.0 False []", "0.0", "25.0 25.0 1.0"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
