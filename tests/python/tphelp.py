"""Helpers of the Python module's tests (tests/python.cmake): child interpreters under a
session, and the rank files read back through the trainprof command."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

CLI = os.environ.get("TPROF_CLI", "trainprof")
PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))


def workdir(name):
    base = os.environ.get("TPROF_TEST_TMP") or "/tmp"
    d = os.path.join(base, "python", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def child_env(**extra):
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("TRAINPROF_")]:
        del env[k]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_child(code, outdir=None, under_run=False, env=None, timeout=120):
    """Runs `code` in a child interpreter, recording into outdir: through TRAINPROF_DIR
    (the lazy session) or under `trainprof run` (the preloaded library)."""
    code = textwrap.dedent(code)
    env = child_env(**(env or {}))
    if under_run:
        cmd = [CLI, "run", "--quiet", "-o", outdir, "--", PY, "-c", code]
    else:
        cmd = [PY, "-c", code]
        if outdir:
            env["TRAINPROF_DIR"] = outdir
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write("child failed (%d)\nstdout:\n%s\nstderr:\n%s\n"
                         % (p.returncode, p.stdout, p.stderr))
    return p


def rank_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".tprof"))


def chrome(d, name="trace.json"):
    """The run's events through `trainprof export --format chrome` (ts/dur in us)."""
    out = os.path.join(d, name)
    subprocess.run([CLI, "export", d, "--format", "chrome", "-o", out], check=True,
                   capture_output=True)
    with open(out) as f:
        return json.load(f)["traceEvents"]


def report(d, *args):
    p = subprocess.run([CLI, "report", d, "--format", "json", *args], check=True,
                       capture_output=True, text=True)
    return json.loads(p.stdout)


def complete(events, name):
    return [e for e in events if e.get("ph") == "X" and e.get("name") == name]
