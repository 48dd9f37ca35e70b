"""Compares trainprof's NCCL all-reduce timings (tests/gpu/comm_dump output) with the CUDA
event timings tests/gpu/nccl_loop.cu wrote, per size, on rank 0 (medians over the timed ops):

  events        the loop's event pair around each op
  net           the same less the event pair's own cost: the median pair around an empty
                kernel (its two writes and the GPU's launch of a kernel), nccl_loop's
                "empty_kernel_ms"
  b2b           the same ops back to back inside one event pair, per op (as nccl-tests times)
  reported      the interval trainprof's report times each op by (tp_comm_resolve: the CUPTI
                NCCL kernel matched to the op, else the kernel-channel interval), with its
                source
  channels      the op record's own GPU interval (NCCL kernel-channel events)
  CUPTI kernel  the NCCL kernel that overlaps the op's channel interval the most

and where each op's channel interval lies against that kernel: as the plugin placed it (its
calibration of NCCL's GPU timer to host time), and after the report's check against CUPTI
(comm.c moves it by the placement error it measured on the matched kernels). Exit status 0
when `reported` is within 5 % of `events` at every size (the acceptance criterion, with the
event pair's cost left in).

    python3 tests/gpu/allreduce_compare.py DUMP.csv TIMES.json
"""
import collections
import json
import statistics
import sys

dump, times = sys.argv[1], json.load(open(sys.argv[2]))
world = times["world"]
ops, kernels, meta = [], [], {}
for line in open(dump):
    f = line.rstrip("\n").split(",")
    if f[0] == "op" and f[1] == "0" and f[2] == "AllReduce":
        o = {"bytes": int(f[3]), "g0": int(f[9]), "g1": int(f[10]), "flags": int(f[11])}
        if len(f) >= 15:
            o.update(r0=int(f[12]), r1=int(f[13]), src=f[14])
        o["shift"] = int(f[15]) if len(f) >= 16 else 0
        ops.append(o)
    elif f[0] == "kernel" and f[1] == "0" and "AllReduce" in f[6]:
        kernels.append((int(f[4]), int(f[5])))
    elif f[0] == "meta":
        meta[(f[1], f[2])] = ",".join(f[3:])
print("plugin:", meta.get(("0", "capability.nccl")), "| offset:", meta.get(("0", "nccl.gpu_timer_offset_ns")))
kernels.sort()
pair = statistics.median(times["empty_kernel_ms"]) if times.get("empty_kernel_ms") else None
if pair is not None:
    print("event pair around an empty kernel: median %.4f ms (n=%d)" % (pair, len(times["empty_kernel_ms"])))
fac = 2 * (world - 1) / world


def busbw(nbytes, ms):
    return nbytes / (ms / 1e3) / 1e9 * fac


def pct(x, ref):
    return "%+.2f %%" % (100 * (x - ref) / ref)


worst = worst_net = 0.0
print("%10s %4s | %9s %9s %9s | %9s %-12s %9s %9s | %8s %8s | %8s %8s %8s | %s" % (
    "bytes", "ops", "events", "net", "b2b", "reported", "(source)", "channels", "CUPTI k",
    "rep/ev", "rep/net", "bus ev", "bus net", "bus rep", "channel start - kernel start"))
for sz in times["sizes"]:
    n = len(sz["ms"])
    mine = [o for o in ops if o["bytes"] == sz["bytes"]]
    # the loop's order per size: warm-up, the n event-timed ops, then (b2b_ms) n more back
    # to back inside one event pair
    timed = mine[-2 * n:-n] if "b2b_ms" in sz else mine[-n:]
    if len(timed) < n:
        print("size %d: only %d records" % (sz["bytes"], len(timed)))
        worst = 1e9
        continue
    ev = statistics.median(sz["ms"])
    net = ev - pair if pair is not None else None
    chan = [(o["g1"] - o["g0"]) / 1e6 for o in timed if o["flags"] & 2]
    rep = [(o["r1"] - o["r0"]) / 1e6 for o in timed if "r0" in o]
    srcs = collections.Counter(o.get("src") for o in timed if "src" in o)
    place, placed, kdur = [], [], []
    for o in timed:
        if not o["flags"] & 2:
            continue
        best = None
        g0, g1 = o["g0"] - o["shift"], o["g1"] - o["shift"]
        for k0, k1 in kernels:  # the kernel the moved interval overlaps most
            ov = min(k1, g1) - max(k0, g0)
            if ov > 0 and (best is None or ov > best[0]):
                best = (ov, k0, k1)
        if best:
            place.append((o["g0"] - best[1]) / 1e3)
            placed.append((g0 - best[1]) / 1e3)
            kdur.append((best[2] - best[1]) / 1e6)
    r = statistics.median(rep) if rep else statistics.median(chan)
    worst = max(worst, abs(r - ev) / ev)
    if net:
        worst_net = max(worst_net, abs(r - net) / net)
    print("%10d %4d | %9.4f %9s %9s | %9.4f %-12s %9s %9s | %8s %8s | %8.1f %8s %8.1f | %s" % (
        sz["bytes"], n, ev, "%.4f" % net if net else "-", "%.4f" % sz["b2b_ms"] if "b2b_ms" in sz else "-",
        r, "(" + ",".join("%s %d" % kv for kv in srcs.most_common()) + ")" if srcs else "(channels)",
        "%.4f" % statistics.median(chan) if chan else "-", "%.4f" % statistics.median(kdur) if kdur else "-",
        pct(r, ev), pct(r, net) if net else "-", busbw(sz["bytes"], ev),
        "%.1f" % busbw(sz["bytes"], net) if net else "-", busbw(sz["bytes"], r),
        "plugin %+.1f us, checked %+.1f us (medians, n=%d)" % (
            statistics.median(place), statistics.median(placed), len(place)) if place else "-"))
print("largest difference, reported against events: %.2f %% (target 5 %%)" % (100 * worst))
if pair is not None:
    print("largest difference, reported against events less the event pair's own cost: %.2f %%" % (100 * worst_net))
sys.exit(0 if worst <= 0.05 else 1)
