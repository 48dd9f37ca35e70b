"""Compares trainprof's NCCL all-reduce records (tests/gpu/comm_dump output) with the CUDA
event timings allreduce_loop.py wrote: per size, the median duration and busbw of the timed
ops (the last --iters all-reduces of that size on rank 0), trainprof's GPU interval (kernel-
channel events) against the program's own events, and trainprof's placement of each op's
GPU start against CUPTI's record of the same NCCL kernel when present.

    python3 tests/gpu/allreduce_compare.py DUMP.csv TIMES.json
"""
import json
import statistics
import sys

dump, times = sys.argv[1], json.load(open(sys.argv[2]))
world = times["world"]
ops, kernels, meta = [], [], {}
for line in open(dump):
    f = line.rstrip("\n").split(",")
    if f[0] == "op" and f[1] == "0" and f[2] == "AllReduce":
        ops.append({"bytes": int(f[3]), "start": int(f[7]), "end": int(f[8]),
                    "g0": int(f[9]), "g1": int(f[10]), "flags": int(f[11])})
    elif f[0] == "kernel" and f[1] == "0" and "AllReduce" in f[6]:
        kernels.append((int(f[4]), int(f[5])))
    elif f[0] == "meta":
        meta[(f[1], f[2])] = ",".join(f[3:])
print("plugin:", meta.get(("0", "capability.nccl")), "| offset:", meta.get(("0", "nccl.gpu_timer_offset_ns")))
kernels.sort()
worst = 0.0
for sz in times["sizes"]:
    n = len(sz["ms"])
    mine = [o for o in ops if o["bytes"] == sz["bytes"]]
    timed = mine[-n:]
    if len(timed) < n:
        print("size %d: only %d records" % (sz["bytes"], len(timed)))
        worst = 1e9
        continue
    with_gpu = [o for o in timed if o["flags"] & 2]
    tp_ms = [(o["g1"] - o["g0"]) / 1e6 for o in with_gpu]
    ev_ms = sz["ms"]
    tp_med, ev_med = statistics.median(tp_ms), statistics.median(ev_ms)
    fac = 2 * (world - 1) / world
    bus_tp = sz["bytes"] / (tp_med / 1e3) / 1e9 * fac
    bus_ev = sz["bytes"] / (ev_med / 1e3) / 1e9 * fac
    diff = (tp_med - ev_med) / ev_med
    worst = max(worst, abs(diff))
    # the CUPTI kernel that overlaps each op's GPU interval the most: its start against the
    # op's (placement) and its duration
    place, kdur = [], []
    for o in with_gpu:
        best = None
        for k0, k1 in kernels:
            ov = min(k1, o["g1"]) - max(k0, o["g0"])
            if ov > 0 and (best is None or ov > best[0]):
                best = (ov, k0, k1)
        if best:
            place.append((o["g0"] - best[1]) / 1e3)
            kdur.append((best[2] - best[1]) / 1e6)
    kinfo = ""
    if kdur:
        k_med = statistics.median(kdur)
        kinfo = " | CUPTI kernel median %.3f ms (%+.2f %% vs events)" % (k_med, 100 * (k_med - ev_med) / ev_med)
    if "batch_ms" in sz:
        kinfo += " | one event pair around all: %.3f ms per op" % sz["batch_ms"]
    print("size %10d: %2d ops (%2d with GPU time)  trainprof kernel-channel median %.3f ms busbw %.1f GB/s | "
          "CUDA events median %.3f ms busbw %.1f GB/s | diff %+.2f %%%s%s"
          % (sz["bytes"], n, len(with_gpu), tp_med, bus_tp, ev_med, bus_ev, 100 * diff, kinfo,
             "" if not place else " | GPU start - CUPTI kernel start: median %+.1f us (n=%d)"
             % (statistics.median(place), len(place))))
print("largest median difference: %.2f %% (target 5 %%)" % (100 * worst))
sys.exit(0 if worst <= 0.05 else 1)
