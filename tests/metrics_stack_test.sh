#!/bin/sh
# The stacks of trainprof's own threads (src/core/threads.c): every thread the library starts
# asks for an explicit size, and uses at most half of it. Measured by a preloaded
# pthread_create (tests/metrics_stack_depth.c) that paints each new stack and reports the
# deepest byte written, over the busiest paths we can run without a GPU:
#   - `trainprof serve` with the fake libnvidia-ml at 50 Hz, the process sampler at 10 Hz,
#     40 scrapes (text and OpenMetrics), malformed requests and 40 idle connections;
#   - `trainprof run --metrics-port` with char_lm (steps, metrics scan, rank file, its node
#     sampler on the fake NVML), scraped while it runs.
# Usage: metrics_stack_test.sh TRAINPROF SHIM FAKE_NVML CHAR_LM DIR
set -eu
TP=$1 SHIM=$2 FAKE=$3 LM=$4 DIR=$5
rm -rf "$DIR"
mkdir -p "$DIR"
unset TRAINPROF_DIR TRAINPROF_METRICS_PORT TRAINPROF_METRICS_TOKEN TRAINPROF_METRICS_NODE_PORT || true
OUT=$DIR/depth.txt
free_port() { python3 "$(dirname "$0")/free_port.py"; } # below the ephemeral range

cat > "$DIR/hammer.py" <<'PY'
import socket, sys, time, urllib.request
port, seconds = int(sys.argv[1]), float(sys.argv[2])
url = "http://127.0.0.1:%d/metrics" % port
end = time.time() + 30
while time.time() < end:  # the endpoint comes up
    try:
        urllib.request.urlopen(url, timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
idle = []
for _ in range(40):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.send(b"GET /metr")
    idle.append(s)
for junk in (b"GARBAGE\r\n\r\n", b"\x16\x03\x01\x00\xff" * 50, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n"):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    try:
        s.sendall(junk)
        s.recv(100)
    except OSError:
        pass
    s.close()
n, end = 0, time.time() + seconds
while time.time() < end or n < 40:
    req = urllib.request.Request(url)
    if n % 2:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    urllib.request.urlopen(req, timeout=5).read()
    n += 1
    time.sleep(0.02)
for s in idle:
    s.close()
print("%d scrapes" % n)
PY

# 1. serve
PORT=$(free_port)
STACK_DEPTH_OUT=$OUT LD_PRELOAD=$SHIM TRAINPROF_NVML_LIB=$FAKE \
    "$TP" serve --listen "127.0.0.1:$PORT" --nvml-hz 50 --sample-hz 10 2> "$DIR/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
python3 "$DIR/hammer.py" "$PORT" 1.5
kill -TERM $pid
wait $pid
trap - EXIT

# 2. run, with its node sampler on the fake NVML; the job must outlast the hammer (the endpoint
# comes up, 40 idle connections, the malformed requests, 1 s of scrapes): 4000 steps, 2 s on
# an idle machine, ended before the idle connections were made
PORT=$(free_port)
STACK_DEPTH_OUT=$OUT LD_PRELOAD=$SHIM TRAINPROF_NVML_LIB=$FAKE RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
    "$TP" run --quiet -o "$DIR/run" --metrics-port "$PORT" --tokens-per-step 4096 \
    -- "$LM" --steps 20000 --log-every 0 > "$DIR/run.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
python3 "$DIR/hammer.py" "$PORT" 1.0
wait $pid # the job ends by itself, so that its threads end and report (a signal would not)
trap - EXIT

cat "$OUT"
python3 - "$OUT" <<'PY'
import re, sys
lib = []
for ln in open(sys.argv[1]):
    m = dict(re.findall(r"(\w+)=(\S+)", ln))
    if m.get("name", "").startswith(("trainprof-", "MHD-")):
        lib.append(m)
names = [m["name"] for m in lib]
# serve, the job's rank and trainprof run's node sampler: a flusher and a server thread each
assert names.count("trainprof-flush") == 3 and sum(n.startswith("MHD-") for n in names) == 3, names
for m in lib:
    asked, used, tls = int(m["asked_kib"]), int(m["used_kib"]), int(m["tls_kib"])
    assert asked > 0, "%s: the default stack (no size asked)" % m["name"]
    assert used * 2 <= asked - tls, "%s: %d KiB used of %d KiB (%d KiB TLS)" % (m["name"], used, asked, tls)
print("stacks: %s" % ", ".join("%s %s/%s KiB" % (m["name"], m["used_kib"], m["asked_kib"]) for m in lib))
PY
