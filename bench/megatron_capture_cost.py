"""megatron_capture_cost.py — what GPU capture costs a real launch-bound job, measured on
Megatron-LM's own pretrain_gpt.py (the configuration of bench/megatron_reference.sh), in
rotated rounds of one call, each mode against the bare run of the same round:

  bare       no profiler
  default    `trainprof run --python` as a user runs it (the default capture plan)
  window     `trainprof run --python --kernel-steps A-B`: GPU activity in steps A..B only
  plan       `trainprof run --python --gpu-capture PLAN` (--plan; the parts below are those of
             --window, the plan's first window)
  full       `trainprof run --python --gpu-capture all`: GPU activity in every step
  nocupti    `trainprof run --python` with TRAINPROF_CUPTI=0 (the CUPTI-off pace)
  plain      `trainprof run` (no --python) with TRAINPROF_CUPTI=0: injection, NVTX, NCCL
             plugin and the process sampler without the Python hooks
  torchprof  bare, with Megatron's own torch.profiler window (--profile
             --use-pytorch-profiler --profile-step-start A+1 --profile-step-end B+2)

Iteration times are Megatron's own ("elapsed time per iteration (ms)", --log-interval 1).
Trainprof's step k is Megatron's iteration k+1 (Megatron numbers from 1). For each run the
iterations are split into before the window (11..A), inside (A+1..B+1) and after (B+3..N:
the iteration after the window is left out, it holds torch.profiler's trace export and our
window's closing flush), and each part's median is divided by the same part of the bare run
of the same round. Per mode it prints the median ratio over the rounds with its spread and a
95 % interval (t distribution over the rounds), against the targets:

  default (all iterations 11..N)     <= 1.01 (95 % interval upper end <= 1.02)
  after / before (window, default)   within 1 %
  inside: window vs torchprof        window's slowdown <= torch.profiler's

A mode named MODE-NAME (default-nomem, nocupti-x, window-y) is MODE with the variables that
--mode-env gives it. --pair A/B prints each round's A over B of the same round (the memory
sampling's cost: default/default-nomem with --mode-env default-nomem:TRAINPROF_MEMORY=0).
--taskset CPUS pins every run, bare included, to the same CPUs: the reference configuration
is bound by the host's launch pace, and a run that lands on other cores than the previous one
moves by several per cent.

Most of a run's time is Megatron's start (about 22 s on an H200 host: 17 s of imports, then
initialisation), not its iterations. --direct starts pretrain_gpt.py as one process with the
launcher's variables set (torchrun's own start is about 4 s more); --no-compile sets
TORCH_COMPILE_DISABLE=1: with the configuration's fusions off, torch.compile serves only the
start-up warm-up of those fusions (megatron/training/initialize.py, _warmup_jit_function),
which costs 6.7 s per run and runs no step. Both apply to every mode alike. With them, four
rounds of the four modes fit one 10-minute call. --summarize ROWS_JSON prints the figures of
an earlier run's rows.json (a call cut short keeps every finished run there; the reports of
its window runs, which such a call never read, are read then).

  python3 bench/megatron_capture_cost.py MEGATRON_DIR OUTDIR [--rounds 4] [--iters 60]
      [--window 30-34] [--modes bare,default,window,torchprof] [--trainprof PATH]
      [--taskset CPUS] [--pair A/B] [--extra "MEGATRON ARGS"] [--direct] [--no-compile] [--warmup]
  python3 bench/megatron_capture_cost.py MEGATRON_DIR OUTDIR --summarize OUTDIR/rows.json
"""
import argparse
import json
import os
import random
import re
import statistics as st
import subprocess
import sys
import time

ITER = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+)")
# two-sided 95 % t quantiles by degrees of freedom (NIST/SEMATECH e-Handbook, table 1.3.6.7.2)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228}

# bench/megatron_args.txt: the configuration the other Megatron-LM benches run
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "megatron_args.txt")) as _f:
    ARGS = " ".join(l for l in _f if not l.startswith("#")).split()


def iterations(log):
    out = {}
    with open(log, errors="replace") as f:
        for line in f:
            m = ITER.search(line)
            if m:
                out[int(m.group(1))] = float(m.group(2))
    return out


def run(mode, a, b, args, outdir, tag):
    log = os.path.join(outdir, "%s.log" % tag)
    port = 29500 + random.randint(0, 999)
    if args.direct:  # one process, the launcher's variables set here (torchrun starts in ~4 s)
        cmd = [sys.executable, "pretrain_gpt.py"]
    else:
        cmd = ["torchrun", "--nproc_per_node=1", "--master_port=%d" % port, "pretrain_gpt.py"]
    cmd += ARGS + args.extra.split() + ["--train-iters", str(args.iters)]
    env = dict(os.environ)
    if args.direct:
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if args.no_compile:
        env["TORCH_COMPILE_DISABLE"] = "1"
    env.pop("TRAINPROF_GPU_CAPTURE", None)  # "default" is the plan of no setting
    env.pop("TRAINPROF_KERNEL_STEPS", None)
    env["PYTHONPATH"] = args.megatron + ":" + env.get("PYTHONPATH", "")
    pre = []
    if mode == "torchprof":
        cmd += ["--profile", "--use-pytorch-profiler", "--profile-step-start", str(a + 1),
                "--profile-step-end", str(b + 2), "--profile-ranks", "0",
                "--tensorboard-dir", os.path.join(outdir, tag + "-tb")]
    elif mode != "bare":
        pre = [args.trainprof, "run", "--no-report", "-o", os.path.join(outdir, tag)]
        if mode != "plain":
            pre.insert(2, "--python")
        if mode == "window" or mode.startswith("window-"):
            pre += ["--kernel-steps", "%d-%d" % (a, b)]
        elif mode == "plan" or mode.startswith("plan-"):
            pre += ["--gpu-capture", args.plan]
        elif mode == "full":
            pre += ["--gpu-capture", "all"]
        elif mode in ("nocupti", "plain") or mode.startswith("nocupti-"):
            env["TRAINPROF_CUPTI"] = "0"
        for kv in args.mode_env:  # MODE:VAR=VALUE, for variants of a mode
            m, _, assign = kv.partition(":")
            if m == mode:
                k, _, v = assign.partition("=")
                env[k] = v
        pre += ["--"]
    if args.taskset:
        pre = ["taskset", "-c", args.taskset] + pre
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(pre + cmd, cwd=args.megatron, env=env, stdout=f,
                             stderr=subprocess.STDOUT, timeout=args.timeout)
    return log, rc, time.time() - t0


def parts(it, a, b, n):
    """Megatron iteration numbers of before / inside / after the window (trainprof steps a..b)."""
    return {"before": [i for i in range(11, a + 1) if i in it],
            "inside": [i for i in range(a + 1, b + 2) if i in it],
            "after": [i for i in range(b + 3, n + 1) if i in it],
            "all": [i for i in range(11, n + 1) if i in it]}


def plan_windows(plan, n):
    """The trainprof steps of a plan "A-B[,C-D...]" or "A-B/N", as (a, b) pairs below n."""
    out = []
    for part in plan.split(","):
        rng, _, every = part.partition("/")
        a, b = (int(x) for x in rng.split("-"))
        step = int(every) if every else 0
        while a < n:
            out.append((a, b))
            if not step:
                break
            a, b = a + step, b + step
    return out


def in_run(it, windows, nbefore=4):
    """Each window's slowdown within its own run: the median of its iterations over the median
    of the iterations before it, as many as the window has and at least nbefore: the baseline
    the report's own capture cost takes (src/analysis/capture.c, cost_neighbours), so that the
    two differ by their clocks alone, Megatron's timer against trainprof's steps, not by which
    steps they sample (Megatron iteration = trainprof step + 1; iterations
    before 11 and the iteration after a window, which holds the window's closing flush or
    torch.profiler's trace export, are left out). Drift of the machine across a run moves both
    sides alike, which a comparison with another run cannot cancel."""
    out = []
    closed = set(b + 2 for _, b in windows)
    for a, b in windows:
        inside = [it[i] for i in range(a + 1, b + 2) if i in it]
        before = []
        i = a
        while i >= 11 and len(before) < max(nbefore, b - a + 1):
            if i in it and i not in closed and not any(x + 1 <= i <= y + 1 for x, y in windows):
                before.append(it[i])
            i -= 1
        if len(inside) >= 3 and len(before) >= 3:
            out.append(st.median(inside) / st.median(before))
    return out


def stated_cost(trainprof, rundir):
    """What the run's own report says capture cost ("gpu_capture.cost" of rank 0, its share of
    the step, docs/report-json.md), and whether it is flagged; None without one."""
    try:
        out = subprocess.run([trainprof, "report", rundir, "--format", "json"], capture_output=True,
                             text=True, timeout=300).stdout
        gc = json.loads(out)["ranks"][0].get("gpu_capture") or {}
    except Exception:
        return None
    for key, flagged in (("cost", False), ("cost_flagged", True)):
        if gc.get(key) and gc[key].get("share") is not None:
            return {"share": gc[key]["share"], "flagged": flagged}
    return None


def interval(v):
    if len(v) < 2:
        return (v[0], v[0]) if v else (None, None)
    m, s = st.mean(v), st.stdev(v)
    h = T95.get(len(v) - 1, 2.0) * s / len(v) ** 0.5
    return m - h, m + h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("megatron")
    ap.add_argument("outdir")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--window", default="30-34")
    ap.add_argument("--plan", default="30-34/100", help="the plan of mode plan")
    ap.add_argument("--modes", default="bare,default,window,torchprof")
    ap.add_argument("--trainprof", default="trainprof")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--mode-env", action="append", default=[],
                    help="MODE:VAR=VALUE, set for that mode's runs (modes nocupti-NAME and "
                         "window-NAME are variants of nocupti and window)")
    ap.add_argument("--budget", type=float, default=0, help="stop starting rounds after S s")
    ap.add_argument("--taskset", default="", help="CPUS: every run pinned to these (taskset -c)")
    ap.add_argument("--pair", action="append", default=[],
                    help="A/B: mode A over mode B of the same round, per round")
    ap.add_argument("--extra", default="", help="Megatron arguments after the configuration's")
    ap.add_argument("--direct", action="store_true",
                    help="run pretrain_gpt.py in one process with RANK, WORLD_SIZE, MASTER_ADDR "
                    "and MASTER_PORT set, instead of under torchrun")
    ap.add_argument("--no-compile", action="store_true",
                    help="TORCH_COMPILE_DISABLE=1 in every run (see the docstring)")
    ap.add_argument("--no-bare", action="store_true",
                    help="no bare run in each round (for the in-run figures alone: the window's "
                    "slowdown and the report's stated cost against it)")
    ap.add_argument("--warmup", action="store_true",
                    help="one bare run before the rounds, its figures left out: the call's first "
                    "run otherwise meets a cold GPU (higher boost clocks) and a cold page cache")
    ap.add_argument("--summarize", metavar="ROWS_JSON",
                    help="print the figures of an earlier run's rows.json, running nothing")
    args = ap.parse_args()
    args.megatron = os.path.abspath(args.megatron)
    os.makedirs(args.outdir, exist_ok=True)
    a, b = (int(x) for x in args.window.split("-"))
    modes = args.modes.split(",")
    if "bare" not in modes and not args.no_bare:
        modes.insert(0, "bare")
    if args.summarize:
        with open(args.summarize) as f:
            rows = json.load(f)
        seen = []
        for x in rows:
            if x["mode"] not in seen:
                seen.append(x["mode"])
        # a call cut short never read its window runs' reports: read them now, where they are
        for row in rows:
            if row.get("dir") and row.get("stated") is None and os.path.isdir(row["dir"]):
                row["stated"] = stated_cost(args.trainprof, row["dir"])
        # the modes that ran (bare among them only when it did: --no-bare rounds are complete
        # without it)
        summarize(rows, sorted(seen, key=lambda m: m != "bare"), args)
        return 0
    rows = []  # (round, mode, part medians)
    if args.warmup:
        log, rc, secs = run("bare", a, b, args, args.outdir, "warmup")
        print("warm-up   bare      rc %d %5.1f s %3d iterations (left out)" % (
            rc, secs, len(iterations(log))), flush=True)
    start = time.time()
    for r in range(args.rounds):
        if args.budget and time.time() - start > args.budget:
            print("stopped after %d rounds: time budget" % r)
            break
        order = modes[r % len(modes):] + modes[:r % len(modes)]  # rotated
        for mode in order:
            log, rc, secs = run(mode, a, b, args, args.outdir, "r%d-%s" % (r, mode))
            it = iterations(log)
            p = parts(it, a, b, args.iters)
            med = {k: (st.median([it[i] for i in v]) if v else None) for k, v in p.items()}
            if mode == "torchprof" or mode == "window" or mode.startswith("window-"):
                wins = [(a, b)]
            elif mode == "plan" or mode.startswith("plan-"):
                wins = plan_windows(args.plan, args.iters)
            else:
                wins = []
            inr = in_run(it, wins)
            rows.append({"round": r, "mode": mode, "rc": rc, "secs": round(secs, 1),
                         "iters": len(it), "median_ms": med, "in_run": inr, "stated": None,
                         "dir": os.path.join(args.outdir, "r%d-%s" % (r, mode))
                         if wins and mode != "torchprof" else None})
            with open(os.path.join(args.outdir, "rows.json"), "w") as f:
                json.dump(rows, f, indent=1)  # each run as it ends: a call cut short keeps them
            print("round %d %-9s rc %d %5.1f s %3d iterations: %s" % (
                r, mode, rc, secs, len(it),
                " ".join("%s %.2f" % (k, v) for k, v in med.items() if v is not None)),
                flush=True)
            if inr:
                print("    in-run slowdown per window: %s" % " ".join("x%.4f" % x for x in inr),
                      flush=True)
    # each window run's own report, read after the rounds so that they fit the call first
    for row in rows:
        if row["dir"]:
            row["stated"] = stated_cost(args.trainprof, row["dir"])
    with open(os.path.join(args.outdir, "rows.json"), "w") as f:
        json.dump(rows, f, indent=1)
    summarize(rows, modes, args)
    return 0


def summarize(rows, modes, args):
    """The figures and targets of the runs in rows (each run's dict, as rows.json holds)."""
    n_iters = max([x["iters"] for x in rows] or [0])
    print("rounds complete: %d (a round is complete when every mode ran in it)" % len(
        [r for r in set(x["round"] for x in rows)
         if set(modes) <= set(x["mode"] for x in rows if x["round"] == r)]))
    bare = {x["round"]: x["median_ms"] for x in rows if x["mode"] == "bare"}

    def ratios(mode, part, over="bare"):
        base_of = bare if over == "bare" else {
            x["round"]: x["median_ms"] for x in rows if x["mode"] == over}
        out = []
        for x in rows:
            base = base_of.get(x["round"], {}).get(part)
            v = x["median_ms"].get(part)
            if x["mode"] == mode and base and v:
                out.append(v / base)
        return out

    print("\nper mode, ms/iteration over bare of the same round (median of the rounds, "
          "min..max, 95 % interval of the mean):")
    for mode in modes:
        if mode == "bare":
            continue
        for part in ("all", "before", "inside", "after"):
            v = ratios(mode, part)
            if not v:
                continue
            lo, hi = interval(v)
            print("  %-9s %-6s x%.4f (%.4f..%.4f) 95%% [%.4f, %.4f] n=%d" % (
                mode, part, st.median(v), min(v), max(v), lo, hi, len(v)))
    for pair in args.pair:
        num, _, den = pair.partition("/")
        v = ratios(num, "all", den)
        if v:
            lo, hi = interval(v)
            print("  %s over %s, iterations 11-%d: x%.4f (%.4f..%.4f) 95%% [%.4f, %.4f] n=%d; "
                  "target <= 1.01: %s" % (num, den, n_iters, st.median(v), min(v), max(v), lo,
                                          hi, len(v), "PASS" if st.median(v) <= 1.01 else "MISS"))
    print("\ntargets:")
    d = ratios("default", "all")
    if d:
        lo, hi = interval(d)
        ok = st.median(d) <= 1.01 and hi <= 1.02
        print("  default mode, iterations 11-%d: x%.4f, 95 %% upper %.4f; target <= 1.01, "
              "upper <= 1.02: %s" % (n_iters, st.median(d), hi, "PASS" if ok else "MISS"))
    for mode in ("window", "default"):
        bef, aft = ratios(mode, "before"), ratios(mode, "after")
        if bef and aft:
            q = st.median(aft) / st.median(bef)
            print("  %s: after the window / before it: %.4f; target within 1 %%: %s" % (
                mode, q, "PASS" if abs(q - 1) <= 0.01 else "MISS"))
    for mode in ("window", "default", "plan"):
        # the same run's steps after the window against its steps before it: no run-to-run
        # variation in this one
        q = [x["median_ms"]["after"] / x["median_ms"]["before"] for x in rows
             if x["mode"] == mode and x["median_ms"].get("after") and x["median_ms"].get("before")]
        if q:
            lo, hi = interval(q)
            print("  %s: after / before within each run: x%.4f (%.4f..%.4f) 95%% [%.4f, %.4f] "
                  "n=%d" % (mode, st.median(q), min(q), max(q), lo, hi, len(q)))
    for mode in modes:
        if mode.startswith("window-"):
            bef, aft = ratios(mode, "before"), ratios(mode, "after")
            if bef and aft:
                print("  %s: after the window / before it: %.4f" % (
                    mode, st.median(aft) / st.median(bef)))
    print("\nin-run slowdown inside windows (window over the iterations before it in the same "
          "run; median over the mode's windows and rounds, min..max):")
    inrun = {}
    for mode in modes:
        v = [x for row in rows if row["mode"] == mode for x in row.get("in_run", [])]
        if v:
            inrun[mode] = st.median(v)
            print("  %-14s x%.4f (%.4f..%.4f) n=%d" % (mode, st.median(v), min(v), max(v), len(v)))
    tq = inrun.get("torchprof")
    for mode, q in inrun.items():
        if mode != "torchprof" and tq:
            print("  %s vs torch.profiler, in-run: x%.4f against x%.4f; target <= torch.profiler: "
                  "%s" % (mode, q, tq, "PASS" if q <= tq else "MISS"))
    # the report's own capture cost against what the same run measured (its in-run slowdown)
    for row in rows:
        st_ = row.get("stated")
        if st_ and row.get("in_run"):
            meas = st.median(row["in_run"]) - 1
            share = st_["share"] / 100 if st_["share"] > 1 else st_["share"]
            off = abs(share - meas) / meas if meas > 0 else float("inf")
            print("  round %d %s: report's capture cost %+.2f %%%s, measured in the run %+.2f %%: "
                  "%s; target within 25 %%: %s" % (
                      row["round"], row["mode"], 100 * share, " (flagged)" if st_["flagged"] else "",
                      100 * meas, "%.0f %% apart" % (100 * off) if off != float("inf") else "n/a",
                      "PASS" if off <= 0.25 else "MISS"))
    # over the rounds: each run's in-run figure is a few steps on each side, noisy by about
    # 0.5 % of the step on its own; the medians over the rounds are the mode's figures
    def share_of(stated):  # a fraction (older reports gave per cent)
        return stated["share"] / 100 if stated["share"] > 1 else stated["share"]

    pairs = [(st.median(row["in_run"]) - 1, share_of(row["stated"]))
             for row in rows if row.get("stated") and row.get("in_run")]
    if pairs:
        meas, share = st.median([m for m, _ in pairs]), st.median([s for _, s in pairs])
        off = abs(share - meas) / meas if meas > 0 else float("inf")
        print("  over the rounds: report's capture cost %+.2f %%, measured in the runs %+.2f %% "
              "(medians, n=%d): %s; target within 25 %%: %s" % (
                  100 * share, 100 * meas, len(pairs),
                  "%.0f %% apart" % (100 * off) if off != float("inf") else "n/a",
                  "PASS" if off <= 0.25 else "MISS"))
    w, t = ratios("window", "inside"), ratios("torchprof", "inside")
    if w and t:
        print("  inside the window: trainprof x%.4f, torch.profiler x%.4f; target trainprof <= "
              "torch.profiler: %s" % (st.median(w), st.median(t),
                                      "PASS" if st.median(w) <= st.median(t) else "MISS"))


if __name__ == "__main__":
    sys.exit(main())
