#!/bin/sh
# A real Prometheus server (Debian's `prometheus` package) scrapes `trainprof run
# --metrics-port` around a running char_lm every second, from a generated configuration;
# its HTTP query API then answers trainprof_step_duration_seconds_count with a value > 0
# and the rank's labels. Skipped (77) where the prometheus binary is absent (CI). ~10 s.
set -eu
TP=$1 LM=$2 DIR=$3
command -v prometheus > /dev/null 2>&1 || { echo "prometheus not installed: skipped"; exit 77; }
rm -rf "$DIR"
mkdir -p "$DIR/tsdb"
unset TRAINPROF_METRICS_PORT TRAINPROF_METRICS_TOKEN TRAINPROF_METRICS_NODE_PORT || true
export TRAINPROF_NVML_HZ=0 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0
# two distinct ports below the ephemeral range (free_port.py says why)
JOBPORT=$(python3 "$(dirname "$0")/free_port.py") PROMPORT=$JOBPORT
while [ "$PROMPORT" = "$JOBPORT" ]; do PROMPORT=$(python3 "$(dirname "$0")/free_port.py"); done
cat > "$DIR/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: trainprof
    static_configs:
      - targets: ["127.0.0.1:$JOBPORT"]
        labels: {node: "test"}
YML
promtool check config "$DIR/prometheus.yml" > "$DIR/promtool.log" 2>&1 || {
    cat "$DIR/promtool.log" >&2; exit 1; }
"$TP" run --quiet -o "$DIR/run" --metrics-port "$JOBPORT" \
    -- "$LM" --steps 1000000 --log-every 0 > "$DIR/run.log" 2>&1 &
job=$!
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
    --web.listen-address="127.0.0.1:$PROMPORT" --log.level=warn > "$DIR/prometheus.log" 2>&1 &
prom=$!
cleanup() {
    kill -TERM $job $prom 2>/dev/null || true
    wait $job 2>/dev/null || true
    wait $prom 2>/dev/null || true
}
trap cleanup EXIT
python3 - "$PROMPORT" <<'PY'
import json, sys, time, urllib.parse, urllib.request
base = "http://127.0.0.1:%s/api/v1/" % sys.argv[1]

def api(path, **q):
    with urllib.request.urlopen(base + path + "?" + urllib.parse.urlencode(q), timeout=3) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return d["data"]

t0 = time.time()
res, last = [], None
while time.time() - t0 < 25:
    try:
        res = api("query", query="trainprof_step_duration_seconds_count")["result"]
        if res and float(res[0]["value"][1]) > 0:
            break
    except OSError as e:  # Prometheus still starting
        last = e
    time.sleep(0.5)
else:
    try:
        targets = api("targets")
    except OSError as e:
        targets = e
    raise SystemExit("no step-duration series after 25 s: %r %r targets=%s" % (res, last, targets))
r = res[0]
m = r["metric"]
assert m["__name__"] == "trainprof_step_duration_seconds_count", m
assert m["job"] == "trainprof" and m["rank"] == "0" and m["node"] == "test", m
n = float(r["value"][1])
# the histogram as a whole: a quantile over the scraped buckets
q = api("query", query="histogram_quantile(0.5, trainprof_step_duration_seconds_bucket)")["result"]
assert q and 0 < float(q[0]["value"][1]) < 10, q
up = api("query", query='up{job="trainprof"}')["result"]
assert up and up[0]["value"][1] == "1", up
print("prometheus: trainprof_step_duration_seconds_count = %d after %.1f s, median step %.2f ms"
      % (n, time.time() - t0, 1e3 * float(q[0]["value"][1])))
PY
echo "prometheus_scrape ok"
