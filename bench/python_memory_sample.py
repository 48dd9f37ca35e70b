#!/usr/bin/env python3
"""Cost of one memory sample of trainprof.torch (the ten allocator counters of
docs/format.md, "Memory", read from one statistics call) on CPU, against the scripted
allocator of tests/python/faketorch.py, with the session recording (TRAINPROF_DIR a temporary
directory, 64 MiB rings). Prints nanoseconds per sample (median of REPS batches of N, the
batches flushed in between) and, apart, what the fake's own statistics call costs in it, for
the nested statistics (torch's memory_stats_as_nested_dict) and the flat ones (memory_stats).
With real torch the statistics call is torch's instead (torch._C._cuda_memoryStats).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_memory_sample.py [-n N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(n, reps):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    import faketorch
    import trainprof
    for nested in (True, False):
        torch = faketorch.install(nested=nested)
        torch.A.initialized = True
        import trainprof.torch as tt
        tt._M.__init__()
        tt._M.on = True
        tt._mem_sample()
        per = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                tt._mem_sample()
            per.append((time.perf_counter_ns() - t0) / n)
            trainprof.flush()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            tt._stats(0)
        stats = (time.perf_counter_ns() - t0) / n
        print("%-6s %8.0f ns per sample (of which the fake's statistics call %.0f ns)"
              % ("nested" if nested else "flat", statistics.median(per), stats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.n, a.reps)
        return
    tmp = tempfile.mkdtemp(prefix="tprof-membench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    env.update(TRAINPROF_DIR=tmp, TRAINPROF_RING_KB="65536", TRAINPROF_SAMPLE_HZ="0")
    rc = subprocess.call([sys.executable, __file__, "--child", "-n", str(a.n), "--reps",
                          str(a.reps)], env=env)
    subprocess.call(["rm", "-rf", tmp])
    sys.exit(rc)


if __name__ == "__main__":
    main()
