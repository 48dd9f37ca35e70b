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


def rank_records(path):
    """The counters, marks and metadata of a rank file written plain (TRAINPROF_COMPRESS=0),
    read as docs/format.md lays it out: {"counters": [(thread, ts, name, value)], "marks":
    [(thread, ts, name)], "meta": {key: last value}}, each list in file order."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"TPROFRK\n", path
    off = struct.unpack_from("<I", data, 12)[0]
    strings = {}  # (thread, id) -> name
    out = {"counters": [], "marks": [], "meta": {}}
    while off + 32 <= len(data):
        magic, plen, _crc, thread, _tid, flags, _drop = struct.unpack_from("<IIIIIIQ", data, off)
        assert magic == 0x48435054 and not flags & 1, "chunk at %d" % off
        p, end = off + 32, off + 32 + plen
        while p + 16 <= end:
            kind, size, arg, ts = struct.unpack_from("<HHIQ", data, p)
            if size == 0:
                break
            body = data[p + 16:p + size]

            def name_at(rest):
                if arg == 0xFFFFFFFF:
                    return rest.split(b"\0", 1)[0].decode()
                return strings.get((thread, arg))
            if kind == 1:
                strings[(thread, arg)] = body.split(b"\0", 1)[0].decode()
            elif kind == 7:
                out["counters"].append((thread, ts, name_at(body[8:]),
                                        struct.unpack_from("<d", body)[0]))
            elif kind == 6:
                out["marks"].append((thread, ts, name_at(body[8:])))
            elif kind == 10:
                k, v = body.split(b"\0")[:2]
                out["meta"][k.decode()] = v.decode()
            p += size
        off = end
    return out
