#!/usr/bin/env python3
"""gpu_records_bound.py — the comparisons of gpu_records_bound.sh: a real job's report bounded
in GPU records (--gpu-records) against the whole report of the same files.

  gpu_records_bound.py steps WHOLE BOUNDED FROM_SUMS
      per-step GPU figures, top kernels, communication and findings side by side
  gpu_records_bound.py nosteps WHOLE BOUNDED FROM_SUMS STEPPED_WHOLE
      the same files with no measured step: totals over the span held against the run's
"""
import json
import sys


def strip(x):
    """The document less what names its directory and files."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("dir", "file", "path")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def dev(r):
    return ((r.get("gpu") or {}).get("devices") or [{}])[0]


def steps(w, b, s):
    print("report from the summaries equals the bounded report from the files:",
          strip(b) == strip(s))
    for rw, rb in zip(w["ranks"], b["ranks"]):
        if not rw.get("gpu"):
            continue
        cap = rb.get("gpu_capture") or {}
        bound = cap.get("gpu_records_bound") or {}
        print("rank %s: bounded GPU figures over %s of %s measured steps %s; held %s, left out %s,"
              " span %.1f-%.1f s" % (rw.get("rank"), cap.get("captured_steps"),
                                     cap.get("measured_steps"), cap.get("steps"), bound.get("held"),
                                     bound.get("left_out"), bound.get("from_s", 0),
                                     bound.get("to_s", 0)))
        dw, db = dev(rw), dev(rb)
        for key in ("busy_share", "kernels", "kernel_ms"):
            a, c = dw.get(key), db.get(key)
            if isinstance(a, (int, float)) and isinstance(c, (int, float)):
                print("  %-12s whole %10.4f  bounded %10.4f  (%+.2f %%)" %
                      (key, a, c, 100 * (c - a) / a if a else 0))
        for cls, a in (dw.get("kernel_ms_by_class") or {}).items():
            c = (db.get("kernel_ms_by_class") or {}).get(cls)
            if a:
                print("  class %-18s whole %8.4f ms  bounded %8.4f ms" % (cls, a, c or 0))
        tw = [(k["name"][:50], k["count_per_unit"]) for k in rw["gpu"].get("top_kernels", [])[:5]]
        tb = [(k["name"][:50], k["count_per_unit"]) for k in rb["gpu"].get("top_kernels", [])[:5]]
        print("  top 5 kernels (name, per step) equal:", tw == tb)
        if tw != tb:
            print("    whole  ", tw)
            print("    bounded", tb)
        cw = dict(rw.get("communication") or {})
        cb = dict(rb.get("communication") or {})
        cw.pop("exposure", None)
        cb.pop("exposure", None)
        print("  communication (less exposure, over the captured steps) equal:", cw == cb,
              "(ops: %s)" % cw.get("ops"))
        print("  after_last_step: whole %s, bounded %s" % (rw["gpu"].get("after_last_step"),
                                                            rb["gpu"].get("after_last_step")))
    fw = [(f.get("id"), f.get("rank")) for f in w.get("findings", [])]
    fb = [(f.get("id"), f.get("rank")) for f in b.get("findings", [])]
    print("findings whole:  ", fw)
    print("findings bounded:", fb)


def nosteps(w, b, s, stepped):
    print("no steps: report from the summaries equals the bounded report from the files:",
          strip(b) == strip(s))
    for rw, rb, rs in zip(w["ranks"], b["ranks"], stepped["ranks"]):
        if not rw.get("gpu"):
            continue
        bound = (rb.get("gpu_capture") or {}).get("gpu_records_bound") or {}
        span = bound.get("to_s", 0) - bound.get("from_s", 0)
        dw, db = dev(rw), dev(rb)
        print("rank %s: per whole %s, bounded %s; held %s, left out %s, span %.2f-%.2f s (%.2f s)" %
              (rw.get("rank"), rw["gpu"].get("per"), rb["gpu"].get("per"), bound.get("held"),
               bound.get("left_out"), bound.get("from_s", 0), bound.get("to_s", 0), span))
        print("  kernels: whole %s (run), bounded %s (span); kernel ms whole %.1f, bounded %.1f" %
              (dw.get("kernels"), db.get("kernels"), dw.get("kernel_ms", 0),
               db.get("kernel_ms", 0)))
        print("  busy share: bounded %s of the span; the stepped whole report's %s of the step" %
              (db.get("busy_share"), dev(rs).get("busy_share")))
        xw = (rw.get("communication") or {}).get("exposure") or {}
        xb = (rb.get("communication") or {}).get("exposure") or {}
        print("  exposure: whole per %s window %.1f ms exposed %.1f ms; bounded per %s window %.1f "
              "ms exposed %.1f ms (share %.4f; stepped %.4f)" %
              (xw.get("per"), xw.get("window_ms", 0), (xw.get("exposed_ms") or {}).get("mean", 0),
               xb.get("per"), xb.get("window_ms", 0), (xb.get("exposed_ms") or {}).get("mean", 0),
               xb.get("exposed_share", 0),
               ((rs.get("communication") or {}).get("exposure") or {}).get("exposed_share", 0)))
        cw = dict(rw.get("communication") or {})
        cb = dict(rb.get("communication") or {})
        cw.pop("exposure", None)
        cb.pop("exposure", None)
        print("  communication (less exposure) equal:", cw == cb, "(ops: %s)" % cw.get("ops"))


if __name__ == "__main__":
    docs = [json.load(open(p)) for p in sys.argv[2:]]
    {"steps": steps, "nosteps": nosteps}[sys.argv[1]](*docs)
