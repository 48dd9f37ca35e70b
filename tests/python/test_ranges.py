"""trainprof ranges from Python, read back from the rank file: a known sleep, nesting,
names, the decorator, exceptions, mismatched pops, marks, counters, steps and threads."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402

CHILD = r'''
import json, threading, time, warnings, trainprof
assert trainprof.enabled()
out = {}
t0 = time.perf_counter_ns()
with trainprof.range("sleep20"):
    t1 = time.perf_counter_ns()
    time.sleep(0.020)
    out["inner_ns"] = time.perf_counter_ns() - t1
out["sleep_ns"] = time.perf_counter_ns() - t0
with trainprof.range("outer"):
    with trainprof.range("inner"):
        time.sleep(0.002)
    with trainprof.range("inner2"):
        pass

@trainprof.range("decorated")
def work(x, y=1):
    """doc"""
    time.sleep(0.003)
    return x + y

class Model:
    @trainprof.range("method")
    def forward(self, v):
        return (self, v)

out["work"] = work(2, y=3)
out["work_name"] = work.__name__
out["work_doc"] = work.__doc__
m = Model()
out["method_self"] = m.forward(7)[0] is m
try:
    with trainprof.range("raises"):
        time.sleep(0.001)
        raise ValueError("inside")
except ValueError as e:
    out["exc"] = str(e)
try:
    work(None)
except TypeError:
    out["deco_exc"] = True
out["depth_after_exc"] = trainprof._trainprof._depth()
with trainprof.range("after"):
    pass
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    trainprof.pop()
    out["warning"] = [str(x.message) for x in w]
trainprof.push("manual")
trainprof.pop()
with trainprof.range("dom", domain="mydomain", category=3):
    pass
trainprof.mark("a-mark")
trainprof.counter("loss", 2.5)
for i in range(3):
    with trainprof.step():
        with trainprof.range("train_work"):
            time.sleep(0.001)
def thread_main():
    trainprof.name_thread("worker")
    with trainprof.range("in-thread"):
        time.sleep(0.001)
th = threading.Thread(target=thread_main)
th.start(); th.join()
cached = trainprof.range("cached")
for _ in range(5):
    with cached:
        pass
trainprof.set_metadata("python.test", "yes")
print(json.dumps(out))
'''


class RangesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tphelp.workdir("ranges")
        p = tphelp.run_child(CHILD, cls.dir)
        assert p.returncode == 0, p.stderr
        import json
        cls.out = json.loads(p.stdout.strip().splitlines()[-1])
        cls.stderr = p.stderr
        cls.ev = tphelp.chrome(cls.dir)

    def test_one_rank_file(self):
        self.assertEqual(len(tphelp.rank_files(self.dir)), 1)

    def test_sleep_20ms(self):
        (e,) = tphelp.complete(self.ev, "sleep20")
        dur_ms = e["dur"] / 1000.0
        measured_ms = self.out["sleep_ns"] / 1e6
        inner_ms = self.out["inner_ns"] / 1e6
        self.assertGreaterEqual(dur_ms, 20.0)
        # the range lies between what the program measured inside it and around it (a loaded
        # machine can stretch both; the cost of the calls is bench/python_ranges.py's)
        self.assertGreaterEqual(dur_ms, inner_ms - 0.01)
        self.assertLessEqual(dur_ms, measured_ms + 0.01)

    def test_nesting(self):
        (o,) = tphelp.complete(self.ev, "outer")
        (i,) = tphelp.complete(self.ev, "inner")
        (i2,) = tphelp.complete(self.ev, "inner2")
        for c in (i, i2):
            self.assertEqual(c["tid"], o["tid"])
            self.assertGreaterEqual(c["ts"], o["ts"])
            self.assertLessEqual(c["ts"] + c["dur"], o["ts"] + o["dur"] + 0.001)
        self.assertGreaterEqual(i2["ts"], i["ts"] + i["dur"])
        self.assertGreaterEqual(i["dur"], 2000)

    def test_decorator(self):
        self.assertEqual(self.out["work"], 5)
        self.assertEqual(self.out["work_name"], "work")
        self.assertEqual(self.out["work_doc"], "doc")
        self.assertTrue(self.out["method_self"])
        d = tphelp.complete(self.ev, "decorated")
        self.assertEqual(len(d), 2)  # the good call and the one that raised
        self.assertGreaterEqual(max(x["dur"] for x in d), 3000)
        self.assertEqual(len(tphelp.complete(self.ev, "method")), 1)

    def test_exception_closes_range(self):
        self.assertEqual(self.out["exc"], "inside")
        self.assertTrue(self.out["deco_exc"])
        self.assertEqual(self.out["depth_after_exc"], 0)
        (r,) = tphelp.complete(self.ev, "raises")
        (a,) = tphelp.complete(self.ev, "after")
        self.assertGreaterEqual(r["dur"], 1000)
        # "after" is not inside "raises": the range was closed by the exception
        self.assertGreaterEqual(a["ts"], r["ts"] + r["dur"])

    def test_mismatched_pop_warns(self):
        self.assertEqual(len(self.out["warning"]), 1)
        self.assertIn("pop() with no range open", self.out["warning"][0])
        self.assertEqual(len(tphelp.complete(self.ev, "manual")), 1)

    def test_domain_mark_counter(self):
        self.assertEqual(len(tphelp.complete(self.ev, "dom")), 1)
        marks = [e for e in self.ev if e.get("ph") == "i" and e.get("name") == "a-mark"]
        self.assertEqual(len(marks), 1)
        c = [e for e in self.ev if e.get("ph") == "C" and e.get("name") == "loss"]
        self.assertEqual(c[0]["args"]["value"], 2.5)

    def test_steps(self):
        rep = tphelp.report(self.dir)
        (r,) = rep["ranks"]
        self.assertEqual(r["steps"]["count"], 3)
        steps = [e for e in self.ev if e.get("ph") == "X"
                 and e.get("name", "").startswith("ProfilerStep#")]
        self.assertEqual(sorted(e["name"] for e in steps),
                         ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"])

    def test_thread(self):
        (t,) = tphelp.complete(self.ev, "in-thread")
        (o,) = tphelp.complete(self.ev, "outer")
        self.assertNotEqual(t["tid"], o["tid"])
        names = [e["args"]["name"] for e in self.ev
                 if e.get("ph") == "M" and e.get("name") == "thread_name" and e["tid"] == t["tid"]]
        self.assertEqual(names, ["worker"])

    def test_cached_range_reused(self):
        self.assertEqual(len(tphelp.complete(self.ev, "cached")), 5)


class NoSessionTest(unittest.TestCase):
    def test_disabled_is_noop(self):
        p = tphelp.run_child(r'''
            import trainprof, warnings
            assert not trainprof.enabled()
            with trainprof.range("x"):
                trainprof.mark("m"); trainprof.counter("c", 1)
            assert trainprof.output_path() is None
            assert trainprof.flush() is False
            assert trainprof.range_start("a") == 0
            print("ok")
        ''')
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout.strip(), "ok")

    def test_errors(self):
        import trainprof
        with self.assertRaises(TypeError):
            trainprof.range(3)
        with self.assertRaises(TypeError):
            trainprof.range("x", bogus=1)
        with self.assertRaises(TypeError):
            trainprof.push(None)
        with self.assertRaises(TypeError):
            trainprof.range("x")(1)
        self.assertEqual(trainprof.strerror(-12), "a configured limit was reached")


if __name__ == "__main__":
    unittest.main(verbosity=2)
