#!/usr/bin/env python3
"""Holistic Trace Analysis (HTA, HolisticTraceAnalysis on PyPI; tests/hta/requirements.txt
pins it) on two directories of per-rank Chrome traces, rank 0, side by side: temporal
breakdown, kernel-type shares and the critical path's boundedness of the second step.

    hta_compare.py NAME=DIR NAME=DIR [NAME=DIR ...]

Typical: trainprof's per-rank export of a run (`trainprof export RUN --format chrome
--per-rank DIR --steps A-B`), torch.profiler's trace of the same steps of the same job in
another run (one directory holding rank-0.json.gz), and the round trip of that trace
through trainprof (`trainprof export TRACE --format chrome --per-rank DIR`: the same run, so
every figure must agree). Prints each figure and, against the second directory, whether it
is within the target: 2 % of the value for times, 2 points for shares.
"""
import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def figures(d):
    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    r = ta.get_temporal_breakdown(visualize=False).iloc[0]
    kb = ta.get_gpu_kernel_breakdown(visualize=False)
    kt = kb[0] if isinstance(kb, tuple) else kb
    out = {"compute_ms": r["compute_time(us)"] / 1e3,
           "non_compute_ms": r["non_compute_time(us)"] / 1e3,
           "kernel_span_ms": r["kernel_time(us)"] / 1e3,
           "idle_share_pct": r["idle_time_pctg"], "compute_share_pct": r["compute_time_pctg"]}
    for _, row in kt.iterrows():
        out["kernel_type_pct " + row["kernel_type"]] = float(row["percentage"])
    cp, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=1)
    if ok:
        s = cp.summary()
        for k, v in (s.to_dict() if hasattr(s, "to_dict") else dict(s)).items():
            if k:
                out["critical_path_pct " + k] = float(v)
    return out


def main():
    runs = [a.split("=", 1) for a in sys.argv[1:]]
    if len(runs) < 2 or any(len(r) != 2 for r in runs):
        sys.exit(__doc__)
    got = {name: figures(d) for name, d in runs}
    ref = runs[1][0]
    keys = sorted({k for v in got.values() for k in v})
    print("%-40s" % "figure" + "".join("%16s" % n for n, _ in runs))
    for k in keys:
        print("%-40s" % k + "".join("%16.2f" % got[n].get(k, float("nan")) for n, _ in runs))
    for name, _ in runs:
        if name == ref:
            continue
        for k in keys:
            a, b = got[name].get(k), got[ref].get(k)
            if a is None or b is None:
                continue
            share = k.endswith("_pct") or " " in k
            ok = abs(a - b) <= 2.0 if share else abs(a - b) <= 0.02 * abs(b)
            print("  %s against %s, %s: %.2f / %.2f: %s" % (
                name, ref, k, a, b, "within target" if ok else "NOT within target"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
