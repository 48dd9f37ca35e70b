"""megatron_compare.py — trainprof's figures on a Megatron-LM run against Megatron's own log
lines of the same run (bench/megatron_reference.sh). Prints one line per figure with its
target, PASS or MISS; a missed target does not change the exit status.

Megatron-LM's iteration line (megatron/training/training.py, training_log) holds, per
iteration with --log-interval 1: "elapsed time per iteration (ms)", "throughput per GPU
(TFLOP/s/GPU)" (--log-throughput: model FLOPs / (time x 1e12 x world size)) and
"energy per GPU (J/iter/GPU)" (--log-energy: NVML's energy counter, summed over the GPUs,
per iteration and GPU). Iterations 11..N are compared (the report's --warmup 10)."""
import argparse
import gzip
import json
import os
import re
import statistics as st

ITER = re.compile(r"iteration\s+(\d+)/\s*\d+ \|")
FIELDS = {"ms": r"elapsed time per iteration \(ms\): ([0-9.]+)",
          "tflops": r"throughput per GPU \(TFLOP/s/GPU\): ([0-9.]+)",
          "energy": r"energy per GPU \(J/iter/GPU\): ([0-9.]+)",
          "loss": r"lm loss: ([0-9.E+-]+)"}


def megatron_lines(path, first=11):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = ITER.search(line)
            if not m or int(m.group(1)) < first:
                continue
            row = {"iter": int(m.group(1))}
            for k, rx in FIELDS.items():
                v = re.search(rx, line)
                if v:
                    row[k] = v.group(1) if k == "loss" else float(v.group(1))
            out.append(row)
    return out


def mean(rows, k):
    v = [r[k] for r in rows if k in r]
    return st.mean(v) if v else None


def line(name, ours, theirs, tol, unit=""):
    if ours is None or theirs is None or not theirs:
        print("  %-34s trainprof %-12s Megatron %-12s target within %.1f %%: MISS (missing)"
              % (name, ours, theirs, tol * 100))
        return
    d = (ours - theirs) / theirs
    print("  %-34s trainprof %10.3f%s  Megatron %10.3f%s  %+6.2f %%  target within %.1f %%: %s"
          % (name, ours, unit, theirs, unit, d * 100, tol * 100,
             "PASS" if abs(d) <= tol else "MISS"))


def phases(rank):
    """Per-step ms (means) of each phase of the rank's "phases" section (the host's top-level
    ranges of the step thread: data, forward, backward, optimizer, Megatron's timers in the
    gaps) and of the time outside any phase."""
    ph = rank.get("phases")
    if not ph:
        return {}, None
    rows = {r["name"] + (" [%s]" % r["domain"] if "domain" in r else ""): r["ms"]["mean"]
            for r in ph.get("ranges", [])}
    return rows, ph.get("ms", {}).get("untracked", {}).get("mean")


def profiler_kernel_ms(path, active):
    """Kernel time per iteration in a torch.profiler Chrome trace: the "kernel" events' sum
    over the profiled iterations (the schedule's active steps)."""
    try:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            ev = json.load(f)["traceEvents"]
    except Exception as e:  # noqa: BLE001
        print("  torch.profiler trace %s: not read (%s)" % (path, e))
        return None
    return sum(e.get("dur", 0) for e in ev if e.get("cat") == "kernel") / 1e3 / active


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--bare", required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--trace", help="Megatron's torch.profiler trace of rank 0 (bare run)")
    ap.add_argument("--active", type=int, default=5, help="iterations in that trace")
    a = ap.parse_args()
    bare = megatron_lines(a.bare)
    print("== %s: Megatron-LM pretrain_gpt.py, %d GPU(s), iterations 11-%d"
          % (a.layout, a.world, bare[-1]["iter"] if bare else 0))
    findings = []
    ratios = []
    prof_ms = profiler_kernel_ms(a.trace, a.active) if a.trace else None
    for r in range(1, a.runs + 1):
        log = os.path.join(a.dir, "%s-tp%d.log" % (a.layout, r))
        rj = os.path.join(a.dir, "%s-run%d.json" % (a.layout, r))
        meg = megatron_lines(log)
        try:
            with open(rj) as f:
                rep = json.load(f)
        except Exception as e:  # noqa: BLE001
            print("run %d: no report (%s)" % (r, e))
            continue
        print("run %d (trainprof run --python; Megatron's figures from the same run's log):" % r)
        ranks = [x for x in rep.get("ranks", [])]
        step = st.mean(x["steps"]["mean_ms"] for x in ranks if "mean_ms" in x.get("steps", {}))
        line("step time = iteration (ms)", step, mean(meg, "ms"), 0.01)
        # the rank's own GPU(s): NVML's per-GPU energy over the measured steps
        en = [g["energy_per_step_j"] for x in ranks for g in x.get("nvml", {}).get("gpus", [])
              if "energy_per_step_j" in g and "cuda_device" in g]
        line("energy per iteration and GPU (J)", st.mean(en) if en else None,
             mean(meg, "energy"), 0.03)
        tput = rep.get("throughput", {})
        fl = tput.get("flops_per_step")
        # Megatron's FLOPs per iteration of one GPU: its TFLOP/s x its own iteration time
        mf = [x["tflops"] * 1e12 * x["ms"] / 1e3 for x in meg if "tflops" in x and "ms" in x]
        line("model FLOPs per iteration per GPU", fl / 1e12 if fl else None,
             st.mean(mf) / 1e12 if mf else None, 0.005, " T")
        if prof_ms is not None:
            r0 = next((x for x in ranks if x["rank"] == 0), None)
            dev = (r0 or {}).get("gpu", {}).get("devices", [])
            line("kernel time per iteration (ms)", dev[0]["kernel_ms"] if dev else None,
                 prof_ms, 0.01)
        for x in ranks:
            ph, outside = phases(x)
            if ph:
                tot = sum(ph.values()) + (outside or 0)
                print("  rank %s phases per step (ms): %s, outside any phase %.2f; sum %.2f vs "
                      "step %.2f; backward %.1f %% of the step"
                      % (x["rank"], ", ".join("%s %.2f" % kv for kv in ph.items()),
                         outside or 0, tot, x["steps"]["mean_ms"],
                         100 * ph.get("backward", 0) / x["steps"]["mean_ms"]))
            else:
                print("  rank %s: no phases section in the report" % x["rank"])
        r0 = ranks[0] if ranks else {}
        tm = [(t["name"], round(t["ms"], 2)) for t in r0.get("timers", {}).get("rows", [])]
        print("  Megatron's own timers (rank %s, ms per step): %s" % (r0.get("rank"), tm or "none"))
        dev = r0.get("gpu", {}).get("devices", [{}])[0]
        print("  kernel time by class (ms per step): %s" % dev.get("kernel_ms_by_class"))
        print("  processes: %s" % ", ".join(p.get("label", "?") for p in rep.get("processes", [])))
        nv = rep.get("capabilities", {}).get("nvml", {})
        print("  capability nvml: %s (%s)" % ("yes" if nv.get("found") else "no", nv.get("status")))
        ids = sorted("%s%s" % (f["id"], ":%s" % f["rank"] if "rank" in f else "")
                     for f in rep.get("findings", []))
        findings.append(ids)
        print("  findings: %s" % (", ".join(ids) or "none"))
        losses_same = [x.get("loss") for x in meg] == [x.get("loss") for x in bare]
        print("  losses of iterations 11-: %s the bare run's"
              % ("bit-identical to" if losses_same and meg else "DIFFERENT from"))
        b, t = mean(bare, "ms"), mean(meg, "ms")
        if b and t:
            ratios.append(t / b)
    if ratios:
        print("  iteration time under trainprof / bare, per run: %s (median %.3f)"
              % (", ".join("%.3f" % x for x in ratios), st.median(ratios)))
    same = all(f == findings[0] for f in findings) if findings else False
    print("  findings of %d identical runs the same: %s" % (len(findings), "PASS" if same else "MISS"))


if __name__ == "__main__":
    main()
