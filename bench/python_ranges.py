#!/usr/bin/env python3
"""Cost of trainprof's Python API against plain Python measured in the same run.

  with trainprof.range(...)   vs   with <an empty Python context manager>
  timer.start(); timer.stop() vs   <an empty Python object>.start(); .stop()

Each figure is nanoseconds per iteration (enter+exit, or start+stop, including the loop),
the median of REPS batches of N iterations timed with the thread's CPU clock, the batches of
each pair interleaved so a noisy machine moves both. The session records (TRAINPROF_DIR is a
temporary directory, 64 MiB rings, flushed between batches outside the timed region); with
--disabled it does not (no TRAINPROF_DIR). Targets: at most 300 ns and at most 3x
the empty Python equivalent.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_ranges.py [--disabled] [-n N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--disabled", action="store_true", help="no recording session")
    ap.add_argument("-n", type=int, default=100_000, help="iterations per batch")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not a.child:
        # a fresh process whose session starts from the environment we set here
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
        tmp = None
        if not a.disabled:
            tmp = tempfile.mkdtemp(prefix="tprof-pybench-")
            env.update(TRAINPROF_DIR=tmp, TRAINPROF_RING_KB="65536", TRAINPROF_SAMPLE_HZ="0")
        cmd = [sys.executable, __file__, "--child", "-n", str(a.n), "--reps", str(a.reps)]
        if a.disabled:
            cmd.append("--disabled")
        rc = subprocess.call(cmd, env=env)
        if tmp:
            subprocess.call(["rm", "-rf", tmp])
        sys.exit(rc)
    run(a)


class Empty:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self, barrier=False):
        pass

    def stop(self, barrier=False):
        pass


class EmptyRegistry:
    def __init__(self):
        self.t = {}

    def __call__(self, name, log_level=None):
        t = self.t.get(name)
        if t is None:
            t = self.t[name] = Empty()
        return t


def run(a):
    import trainprof

    n, reps = a.n, a.reps
    recording = trainprof.enabled()
    if recording == a.disabled:
        sys.exit("bench: expected the session to be %s" % ("off" if a.disabled else "on"))

    def with_cached(cm, n):
        for _ in range(n):
            with cm:
                pass

    def with_new_range(n):
        r = trainprof.range
        for _ in range(n):
            with r("forward"):
                pass

    def with_new_empty(n):
        for _ in range(n):
            with Empty():
                pass

    def start_stop(t, n):
        for _ in range(n):
            t.start()
            t.stop()

    def megatron_shape(timers, n):
        for _ in range(n):
            timers("forward-compute").start()
            timers("forward-compute").stop()

    timers = trainprof.Timers(2, "minmax")
    empty_reg = EmptyRegistry()
    pairs = [
        ("with range (cached object)", lambda: with_cached(trainprof.range("forward"), n),
         "with Empty() (cached object)", lambda: with_cached(Empty(), n)),
        ("with trainprof.range('forward')", lambda: with_new_range(n),
         "with Empty()", lambda: with_new_empty(n)),
        ("timer.start(); timer.stop()", lambda: start_stop(timers("fwd"), n),
         "empty.start(); empty.stop()", lambda: start_stop(Empty(), n)),
        ("timers('x').start(); timers('x').stop()", lambda: megatron_shape(timers, n),
         "same on a dict-backed Python registry", lambda: megatron_shape(empty_reg, n)),
    ]
    print("python_ranges: %s, %s, %d x %d iterations, median ns per iteration (CPU time)"
          % (sys.version.split()[0], "recording" if recording else "not recording (disabled)",
             reps, n))
    ok = True
    for name, fn, ref_name, ref in pairs:
        fn()
        ref()  # warm-up: rings touched, caches filled
        ts, rs = [], []
        for _ in range(reps):
            t0 = time.thread_time_ns()
            fn()
            t1 = time.thread_time_ns()
            ref()
            t2 = time.thread_time_ns()
            ts.append((t1 - t0) / n)
            rs.append((t2 - t1) / n)
            if recording:
                trainprof.flush()  # outside the timed region
        t, r = statistics.median(ts), statistics.median(rs)
        ratio = t / r
        verdict = "PASS" if t <= 300 and ratio <= 3.0 else "MISS"
        ok &= verdict == "PASS"
        print("  %-42s %7.1f ns   %-38s %7.1f ns   ratio %.2fx" % (name, t, ref_name, r, ratio))
        print("    target: <= 300 ns and <= 3x: %s" % verdict)
    if recording:
        trainprof.flush()
        path = trainprof.output_path()
        print("  rank file: %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6))
    print("python_ranges: %s" % ("all targets PASS" if ok else "some targets MISS"))


if __name__ == "__main__":
    main()
