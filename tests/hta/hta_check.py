"""Runs Holistic Trace Analysis' public API on a directory of per-rank Chrome traces
(`trainprof export RUN --format chrome --per-rank DIR`) and checks its figures against the
traces' own events, computed here without HTA:

- kernel breakdown: each kernel name's total time per rank = the sum of its events;
- temporal breakdown (hta/analyzers/breakdown_analysis.py): kernel time = last kernel end -
  first kernel start, compute time = the union of compute kernels, non-compute = the union of
  communication/memory kernels outside it, idle = the rest;
- comm/comp overlap: the share of communication kernel time overlapped by compute kernels;
- idle time breakdown: one row set per GPU stream of the rank;
- critical path on rank 0's second step and the straggler call across ranks run.
HTA rounds event times to whole µs (start up, end down); so do the expectations here.

usage: hta_check.py DIR [--synthetic]   (--synthetic: also tests/hta_run.h's exact figures)
"""
import glob
import gzip
import json
import math
import re
import sys
import warnings

warnings.filterwarnings("ignore")
import logging  # noqa: E402

logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402

NCCL = re.compile(r"^nccl.*Kernel")
MEM = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(u):
    return sum(e - s for s, e in u)


def intersect(a, b):
    i = j = 0
    n = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            n += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return n


def expected(doc):
    ks = []
    for e in doc["traceEvents"]:
        # HTA's rule for GPU work (its trace parser): a stream and a correlation id >= 0,
        # whatever the category, so copies and memsets count with the kernels
        a = e.get("args") or {}
        if e.get("ph") == "X" and a.get("stream", -1) >= 0 and a.get("correlation", -1) >= 0:
            s = math.ceil(e["ts"])
            ks.append((e["name"], s, math.floor(e["ts"] + e["dur"]), e["args"]["stream"]))
    comp = union([[s, t] for n, s, t, _ in ks if not NCCL.match(n) and not MEM.match(n)])
    other = union([[s, t] for n, s, t, _ in ks if NCCL.match(n) or MEM.match(n)])
    comm = union([[s, t] for n, s, t, _ in ks if NCCL.match(n)])
    span = max(t for _, _, t, _ in ks) - min(s for _, s, _, _ in ks)
    sums = {}
    for n, s, t, _ in ks:
        sums[n] = sums.get(n, 0) + (t - s)
    return {
        "kernel_time": span,
        "compute": length(comp),
        "non_compute": length(other) - intersect(other, comp),
        "overlap_pct": 100.0 * intersect(comm, comp) / length(comm) if comm else 0.0,
        "sums": sums,
        "streams": {st for *_, st in ks},
    }


def close(got, want, what, tol=1.0):
    if abs(float(got) - float(want)) > tol:
        sys.exit("hta_check: %s: HTA says %s, the trace holds %s" % (what, got, want))


def main():
    d = sys.argv[1]
    synthetic = "--synthetic" in sys.argv[2:]
    files = sorted(glob.glob(d + "/*.json") + glob.glob(d + "/*.json.gz"))
    exp = {}
    for p in files:
        doc = load(p)
        exp[int(doc["distributedInfo"]["rank"])] = expected(doc)
    ranks = sorted(exp)
    a = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    if sorted(a.t.get_ranks()) != ranks:
        sys.exit("hta_check: HTA found ranks %s, the files hold %s" % (a.t.get_ranks(), ranks))

    tb = a.get_temporal_breakdown(visualize=False)
    for _, row in tb.iterrows():
        x = exp[int(row["rank"])]
        r = int(row["rank"])
        close(row["kernel_time(us)"], x["kernel_time"], "rank %d kernel time" % r)
        close(row["compute_time(us)"], x["compute"], "rank %d compute time" % r)
        close(row["non_compute_time(us)"], x["non_compute"], "rank %d non-compute time" % r)
        close(row["idle_time(us)"], x["kernel_time"] - x["compute"] - x["non_compute"],
              "rank %d idle time" % r)
        print("rank %d: kernel %.0f us, compute %.0f, non-compute %.0f, idle %.0f" % (
            r, row["kernel_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"],
            row["idle_time(us)"]))

    _, per_kernel = a.get_gpu_kernel_breakdown(visualize=False)
    for _, row in per_kernel.iterrows():
        if row["name"] == "others":  # HTA's row for the kernels past its top ones, by type
            continue
        close(row["sum (us)"], exp[int(row["rank"])]["sums"][row["name"]],
              "rank %d %s total" % (int(row["rank"]), row["name"]))

    ov = a.get_comm_comp_overlap(visualize=False)
    for _, row in ov.iterrows():
        close(row["comp_comm_overlap_pctg"], exp[int(row["rank"])]["overlap_pct"],
              "rank %d comm/comp overlap %%" % int(row["rank"]), tol=0.01)

    for r in ranks:
        idle = a.get_idle_time_breakdown(ranks=[r], visualize=False)[0]
        if set(idle["stream"]) != exp[r]["streams"]:
            sys.exit("hta_check: rank %d idle time streams %s, kernels on %s" % (
                r, sorted(set(idle["stream"])), sorted(exp[r]["streams"])))

    cp, ok = a.critical_path_analysis(rank=ranks[0], annotation="ProfilerStep", instance_id=1)
    if not ok:
        sys.exit("hta_check: critical path analysis failed")
    bound = cp.summary()
    print("critical path (rank %d, 2nd step): %s" % (ranks[0], dict(bound)))

    # HTA 0.5.0 takes communication kernels named ncclKernel* (hta/analyzers/straggler.py),
    # NCCL's names before 2.19; newer NCCL's ncclDevKernel* leave it nothing to compare
    names = set().union(*(x["sums"] for x in exp.values()))
    if any(n.startswith("ncclKernel") for n in names):
        strag = a.get_potential_stragglers(num_candidates=1)
        print("potential stragglers: %s" % strag)
    else:
        strag = None
        print("stragglers: not asked (HTA 0.5.0 reads only ncclKernel* kernels)")

    if synthetic:  # tests/hta_run.h
        sums0, sums1 = exp[0]["sums"], exp[1]["sums"]
        want0 = {"gemm_fwd": 6000, "gemm_bwd": 9000, "adam": 1500,
                 "ncclKernel_AllReduce_RING_LL_Sum_float": 3000}
        want1 = dict(want0, gemm_fwd=7500, ncclKernel_AllReduce_RING_LL_Sum_float=2700)
        if sums0 != want0 or sums1 != want1:
            sys.exit("hta_check: the export's kernels are not the run's: %s %s" % (sums0, sums1))
        want = {0: (27500, 16500, 2400, 8600), 1: (27500, 18000, 2100, 7400)}
        for _, row in tb.iterrows():
            w = want[int(row["rank"])]
            got = (row["kernel_time(us)"], row["compute_time(us)"],
                   row["non_compute_time(us)"], row["idle_time(us)"])
            if tuple(float(v) for v in got) != tuple(float(v) for v in w):
                sys.exit("hta_check: rank %d temporal breakdown %s, the run's %s" % (
                    int(row["rank"]), got, w))
        if list(strag) != [1]:
            sys.exit("hta_check: stragglers %s, the run's straggler is rank 1" % list(strag))
    print("hta_check: %d rank file(s) agree with HTA" % len(ranks))


if __name__ == "__main__":
    main()
