#!/bin/sh
# `trainprof serve` (docs/cli.md): a node exporter with no training process. On an ephemeral
# loopback port, without NVML (host metrics, one line saying GPU metrics are unavailable) and
# with the fake libnvidia-ml (GPU series of both fake GPUs): /metrics is well-formed
# Prometheus text (and OpenMetrics when asked), holds the build info and the process
# metrics, passes `promtool check metrics` when promtool is installed; /healthz answers;
# SIGTERM and SIGINT end it with status 0 within 2 s; it leaves no file anywhere (its working
# directory and TMPDIR stay empty). Usage errors: 2; a port already taken: 1. Bound beyond
# loopback without TRAINPROF_METRICS_TOKEN, it says so in one warning line. Among 160 slow
# clients (slowloris) it answers 8 of 8 scrapes.
set -eu
TP=$1 FAKE=$2 DIR=$3
rm -rf "$DIR"
mkdir -p "$DIR/cwd" "$DIR/tmp" "$DIR/logs"
export TMPDIR="$DIR/tmp"
unset TRAINPROF_DIR TRAINPROF_METRICS_PORT TRAINPROF_METRICS_TOKEN FAKE_NVML_GPUS || true

# serve NAME SIGNAL [env...]: start, check its scrapes with python, stop with SIGNAL
serve() {
    name=$1 sig=$2
    shift 2
    (cd "$DIR/cwd" && exec env "$@" "$TP" serve --listen 127.0.0.1:0 --nvml-hz 20 \
        2> "$DIR/logs/$name.err") &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT # never leave a server holding ctest's pipes
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' \
                   "$DIR/logs/$name.err" 2>/dev/null || true)
        [ -n "$port" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "serve ($name) did not report its port:" >&2
        cat "$DIR/logs/$name.err" >&2
        kill $pid 2>/dev/null || true
        exit 1
    fi
    echo "$port" > "$DIR/logs/$name.port"
    python3 "$DIR/check.py" "$name" "$port" "$DIR/logs" || { kill $pid; exit 1; }
    if [ "$name" = nogpu ]; then
        # a second exporter on the same port: one error, status 1
        rc=0
        (cd "$DIR/cwd" && "$TP" serve --listen "127.0.0.1:$port" --nvml-hz 0) \
            > /dev/null 2> "$DIR/logs/taken.err" || rc=$?
        [ $rc -eq 1 ] || { echo "port taken: status $rc, want 1" >&2; cat "$DIR/logs/taken.err" >&2; exit 1; }
    fi
    t0=$(date +%s%N)
    kill -s "$sig" $pid
    rc=0
    wait $pid || rc=$?
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    [ $rc -eq 0 ] || { echo "serve ($name): status $rc after SIG$sig" >&2; cat "$DIR/logs/$name.err" >&2; exit 1; }
    [ $ms -le 2000 ] || { echo "serve ($name): took $ms ms to stop" >&2; exit 1; }
    trap - EXIT
    grep -q "stopped" "$DIR/logs/$name.err"
    echo "serve ($name): SIG$sig -> status 0 in $ms ms"
}

cat > "$DIR/check.py" <<'PY'
import re, shutil, subprocess, sys, time, urllib.request

name, port, logs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = "http://127.0.0.1:%d" % port

def get(path, accept=None):
    req = urllib.request.Request(base + path)
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))

def parse(text, openmetrics=False):
    """{name: [(labels, value)]}; asserts the text format's shape."""
    series, types = {}, {}
    lines = text.split("\n")
    assert lines[-1] == "", "no final newline"
    lines = lines[:-1]
    if openmetrics:
        assert lines[-1] == "# EOF", lines[-3:]
        lines = lines[:-1]
    for ln in lines:
        if ln.startswith("# HELP ") or ln.startswith("# TYPE "):
            parts = ln.split(" ", 3)
            assert re.fullmatch(NAME, parts[2]), ln
            if parts[1] == "TYPE":
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped",
                                    "unknown"), ln
                assert parts[2] not in types, "TYPE twice: " + ln
                types[parts[2]] = parts[3]
            continue
        assert not ln.startswith("#"), ln
        m = SAMPLE.match(ln)
        assert m, "malformed sample line: %r" % ln
        v = float(m.group(3))  # Inf, NaN and numbers all parse
        fam = m.group(1)
        base_fam = re.sub(r"_(total|bucket|sum|count|created)$", "", fam)
        assert fam in types or base_fam in types, "sample before its TYPE: " + ln
        series.setdefault(fam, []).append((m.group(2) or "", v))
    return series, types

# every series is there from the first scrape: the "listening" line comes after one
# flusher pass, and the process sampler takes a sample as soon as the endpoint is on; the
# NVML sampler's first sample may fall a period (50 ms) after it
for attempt in range(20):
    ta0 = time.monotonic()
    st, ctype, text = get("/metrics")
    ta1 = time.monotonic()
    assert st == 200 and ctype.startswith("text/plain; version=0.0.4"), (st, ctype)
    s, types = parse(text)
    if "process_cpu_seconds_total" not in s:
        raise SystemExit("no process metrics on the first scrape:\n" + text)
    if name == "nogpu" or ("trainprof_gpu_power_watts" in s and
                           len(s.get("trainprof_gpu_memory_busy_seconds_total", [])) == 2):
        break
    time.sleep(0.05)
bi = s.get("trainprof_build_info")
assert bi and 'version="' in bi[0][0] and bi[0][1] == 1, bi
for m in ("process_cpu_seconds_total", "process_resident_memory_bytes",
          "trainprof_process_threads", "process_start_time_seconds"):
    assert m in s, (m, sorted(s))
assert s["process_resident_memory_bytes"][0][1] > 0, s["process_resident_memory_bytes"]
assert s["process_cpu_seconds_total"][0][1] > 0
assert types["process_cpu_seconds_total"] == "counter"
# the node's own figures, checked against /proc read here
import socket as _socket
meminfo = dict(l.split(":", 1) for l in open("/proc/meminfo"))
total = int(meminfo["MemTotal"].split()[0]) * 1024
assert s["trainprof_host_memory_total_bytes"][0][1] == total, (s["trainprof_host_memory_total_bytes"], total)
assert 'host="%s"' % _socket.gethostname() in s["trainprof_host_memory_total_bytes"][0][0]
assert 0 < s["trainprof_host_memory_available_bytes"][0][1] <= total
assert "trainprof_host_load1" in s and s["trainprof_host_load1"][0][1] >= 0
modes = {re.search(r'mode="(\w+)"', lab).group(1): v for lab, v in s["trainprof_host_cpu_seconds_total"]}
assert set(modes) == {"user", "nice", "system", "idle", "iowait"}, modes
assert modes["idle"] > 0 and types["trainprof_host_cpu_seconds_total"] == "counter"
# network and disk counters per device, between two reads of /proc around the scrape
VIRTUAL = ("veth", "docker", "br-", "virbr", "cali", "flannel", "cni", "weave", "cilium",
           "lxc", "vxlan", "tunl", "kube-ipvs", "ifb", "tap", "vnet")
def proc_net():
    out = {}
    for ln in open("/proc/net/dev").readlines()[2:]:
        name, rest = ln.split(":", 1)
        f = rest.split()
        # loopback and the container/overlay interfaces the exporter leaves out
        if name.strip() != "lo" and not name.strip().startswith(VIRTUAL):
            out[name.strip()] = (int(f[0]), int(f[8]))
    return out
def proc_disk():
    out = {}
    for ln in open("/proc/diskstats"):
        f = ln.split()
        if not f[2].startswith(("loop", "ram", "zram")) and os.path.exists("/sys/block/" + f[2]):
            out[f[2]] = (int(f[5]) * 512, int(f[9]) * 512)
    return out
import os
n0, d0 = proc_net(), proc_disk()
time.sleep(1.3)  # serve's process sampler, which reads these, runs at 1 Hz
tb0 = time.monotonic()
st, ctype, text = get("/metrics")
tb1 = time.monotonic()
n1, d1 = proc_net(), proc_disk()
s2, _ = parse(text)
def per_dev(fam):
    return {re.search(r'device="([^"]+)"', lab).group(1): v for lab, v in s2.get(fam, [])}
for fams, before, after in ((("trainprof_host_network_receive_bytes_total",
                             "trainprof_host_network_transmit_bytes_total"), n0, n1),
                            (("trainprof_host_disk_read_bytes_total",
                             "trainprof_host_disk_written_bytes_total"), d0, d1)):
    want = set(list(before)[:16])
    for k, fam in enumerate(fams):
        got = per_dev(fam)
        assert set(got) == want, (fam, sorted(got), sorted(want))
        # the sampler read /proc between the test's two reads (a sampler period apart)
        for dev, v in got.items():
            assert before[dev][k] <= v <= after[dev][k], (fam, dev, before[dev][k], v, after[dev][k])
        assert types[fam] == "counter", fam
print("host devices: %d interfaces, %d disks" % (len(n0), len(d0)))
# a node exporter: no rank labels, no step series
assert not any('rank="' in lab for v in s.values() for lab, _ in v), "rank labels"
assert "trainprof_steps_total" not in s or s["trainprof_steps_total"][0][1] == 0
gpu = {k: v for k, v in s.items() if k.startswith("trainprof_gpu_")}
err = open("%s/%s.err" % (logs, name)).read()
if name == "nogpu":
    assert not gpu, sorted(gpu)
    assert err.count("GPU metrics unavailable") == 1, err
else:
    assert "GPU metrics of 2 GPUs" in err, err
    for m in ("trainprof_gpu_power_watts", "trainprof_gpu_energy_joules_total",
              "trainprof_gpu_utilization_ratio", "trainprof_gpu_memory_used_bytes",
              "trainprof_gpu_memory_total_bytes", "trainprof_gpu_temperature_celsius"):
        assert m in gpu, (m, sorted(gpu))
        gpus = sorted(re.search(r'gpu="(\d+)"', lab).group(1) for lab, _ in gpu[m])
        assert gpus == ["0", "1"], (m, gpu[m])
        for lab, _ in gpu[m]:
            assert 'uuid="' in lab and 'host="' in lab, lab
    p0 = [v for lab, v in gpu["trainprof_gpu_power_watts"] if 'gpu="0"' in lab]
    assert p0 == [250.0], gpu["trainprof_gpu_power_watts"]
    u0 = [v for lab, v in gpu["trainprof_gpu_utilization_ratio"] if 'gpu="0"' in lab]
    assert abs(u0[0] - 0.95) < 1e-9, u0
    assert types["trainprof_gpu_energy_joules_total"] == "counter"
    # busy-time counters beside the utilisation gauges: between the two scrapes they grow
    # by the fake's utilisation (GPU 0 95 %, GPU 1 60 %; memory 40 %, 20 %) times the time
    # between the samples each scrape saw, which lies within the scrapes' bounds widened by
    # a few sampler periods (20 Hz here; a loaded machine delays the flusher)
    slack = 0.25
    lo, hi = tb0 - ta1 - slack, tb1 - ta0 + slack
    for fam, want in (("trainprof_gpu_busy_seconds_total", {"0": 0.95, "1": 0.60}),
                      ("trainprof_gpu_memory_busy_seconds_total", {"0": 0.40, "1": 0.20})):
        assert types.get(fam) == "counter", (fam, types.get(fam))
        v1 = {re.search(r'gpu="(\d+)"', lab).group(1): v for lab, v in s[fam]}
        v2 = {re.search(r'gpu="(\d+)"', lab).group(1): v for lab, v in s2[fam]}
        assert sorted(v2) == ["0", "1"], (fam, s2[fam])
        for g, ratio in want.items():
            d = v2[g] - v1[g]
            assert ratio * lo <= d <= ratio * hi, (fam, g, d, ratio, lo, hi)
        print("%s: +%.3f s, +%.3f s over %.2f-%.2f s" % (fam, v2["0"] - v1["0"],
              v2["1"] - v1["1"], lo + slack, hi - slack))
# OpenMetrics by negotiation
st, ctype, om = get("/metrics", "application/openmetrics-text; version=1.0.0")
assert ctype.startswith("application/openmetrics-text"), ctype
parse(om, openmetrics=True)
st, _, h = get("/healthz")
assert st == 200 and h.strip() == "ok", (st, h)

# slow and hostile clients (slowloris): 160 connections on loopback, half silent, half
# sending a request one byte every 100 ms that never ends, each reopened when closed; 8
# scrapes among them must each be answered within 2 s. Bounded: 30 s at most.
import errno, select, socket, threading
def slowloris(stop, stats, n=160):
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
    socks, pos = [None] * n, [0] * n
    end = time.monotonic() + 30
    while not stop.is_set() and time.monotonic() < end:
        for i in range(n):
            s_ = socks[i]
            if s_ is not None:
                try:
                    if s_.recv(256) == b"":
                        raise ConnectionError
                except BlockingIOError:
                    pass
                except OSError:
                    s_.close()
                    socks[i] = s_ = None
                    stats["closed"] += 1
            if s_ is None:
                s_ = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s_.setblocking(False)
                if s_.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
                    s_.close()
                    continue
                socks[i], pos[i] = s_, 0
                stats["opened"] += 1
            if i % 2:
                b = req[pos[i]:pos[i] + 1] or b"a"
                pos[i] += 1
                try:
                    s_.send(b)
                except OSError:
                    pass
        time.sleep(0.1)
    for s_ in socks:
        if s_ is not None:
            s_.close()
stop, stats = threading.Event(), {"opened": 0, "closed": 0}
th = threading.Thread(target=slowloris, args=(stop, stats))
th.start()
try:
    time.sleep(1.5)
    times = []
    for k in range(8):
        t0 = time.monotonic()
        st, _, body = get("/metrics")
        times.append(time.monotonic() - t0)
        assert st == 200 and "trainprof_build_info" in body, (k, st)
        assert times[-1] <= 2.0, ("scrape %d under slow clients took %.2f s" % (k, times[-1]))
        time.sleep(0.1)
finally:
    stop.set()
    th.join()
print("serve (%s): 8/8 scrapes among 160 slow connections (%d opened, %d closed by the "
      "server), the slowest %.3f s" % (name, stats["opened"], stats["closed"], max(times)))
if shutil.which("promtool"):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    note = "promtool check metrics ok"
else:
    note = "promtool not installed: check skipped"
print("serve (%s): %d families, %d GPU series; %s" % (name, len(types),
      sum(len(v) for v in gpu.values()), note))
PY

serve nogpu TERM TRAINPROF_NVML_LIB=/nonexistent/libnvidia-ml.so.1
serve fakegpu INT TRAINPROF_NVML_LIB="$FAKE" FAKE_NVML_GPUS=2 LOCAL_RANK=3 RANK=7

# exposure: beyond loopback without a token, one warning line that names the token variable;
# none with a token, none on loopback (the two runs above)
exposed() {
    name=$1 listen=$2 token=$3 want=$4
    (cd "$DIR/cwd" && exec env TRAINPROF_METRICS_TOKEN="$token" "$TP" serve --listen "$listen" \
        --nvml-hz 0 2> "$DIR/logs/$name.err") &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 100); do
        grep -q "listening on" "$DIR/logs/$name.err" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    sleep 0.2 # the warning follows the listening line
    kill -s TERM $pid; wait $pid || true
    trap - EXIT
    if [ "$name" = v6any ] && grep -q "cannot serve" "$DIR/logs/$name.err"; then
        echo "serve --listen $listen: no IPv6 here, skipped"; return 0
    fi
    grep -q "listening on" "$DIR/logs/$name.err" || { cat "$DIR/logs/$name.err" >&2; exit 1; }
    n=$(grep -c "warning: listening on .* with no token" "$DIR/logs/$name.err" || true)
    [ "$n" -eq "$want" ] || { echo "serve --listen $listen (token '$token'): $n warnings, want $want" >&2
                              cat "$DIR/logs/$name.err" >&2; exit 1; }
    [ "$want" -eq 0 ] || grep -q "TRAINPROF_METRICS_TOKEN" "$DIR/logs/$name.err"
    echo "serve --listen $listen, token '${token}': $n warning line(s)"
}
exposed any 0.0.0.0:0 "" 1
exposed any_token 0.0.0.0:0 s3cret 0
exposed v6any "[::]:0" "" 1
exposed loop2 127.0.0.2:0 "" 0
for f in nogpu fakegpu; do
    ! grep -q "no token" "$DIR/logs/$f.err" || { echo "warning on loopback ($f)" >&2; exit 1; }
done

# usage errors
rc=0; "$TP" serve --listen 127.0.0.1:70000 2>/dev/null || rc=$?
[ $rc -eq 2 ] || { echo "bad port: status $rc, want 2" >&2; exit 1; }
rc=0; "$TP" serve --bogus 2>/dev/null || rc=$?
[ $rc -eq 2 ] || { echo "bad option: status $rc, want 2" >&2; exit 1; }
"$TP" serve --help | grep -q "usage: trainprof serve"

# nothing left behind: no rank file, no temporary file
left=$(find "$DIR/cwd" "$DIR/tmp" -mindepth 1 | head -5)
[ -z "$left" ] || { echo "files left behind: $left" >&2; exit 1; }
echo "serve ok"
