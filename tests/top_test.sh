#!/bin/sh
# top_test.sh — `trainprof top`, run by ctest as
#     sh top_test.sh job|offline TRAINPROF CHAR_LM FAKE_SERVER_PY
# job:     char_lm --steps 3000 under `trainprof run --metrics-port P` (a free port); polls
#          `trainprof top --endpoints 127.0.0.1:P --once` until the step count is > 0, checks
#          the row shows rank 0 and a plausible step time, then lets the run finish.
# offline: an endpoint that does not answer gives exit 1 and a clear line; a fake server
#          (top_fake_server.py) serving hostile, malformed, oversized, slow and truncated
#          responses never crashes `top --once`, which always ends within its timeouts.
set -u
MODE=${1:?usage: top_test.sh job|offline TRAINPROF CHAR_LM FAKE_SERVER_PY}
TP=${2:?}
CHAR_LM=${3:?}
FAKE=${4:?}
ROOT=${TPROF_TEST_TMP:-/tmp}
mkdir -p "$ROOT"
T=$(mktemp -d "$ROOT/top-XXXXXX") || exit 1
for v in $(env | sed -n 's/^\(TRAINPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD RANK WORLD_SIZE LOCAL_RANK || true

fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT

# a port P with P free and nothing listening (the bind is released at once)
free_port() { python3 "$(dirname "$0")/free_port.py"; } # below the ephemeral range

if [ "$MODE" = job ]; then
    P=$(free_port)
    TRAINPROF_METRICS_NODE_PORT=0 "$TP" run --quiet -o "$T/run" --metrics-port "$P" \
        --tokens-per-step 512 --flops-per-step 3e11 -- "$CHAR_LM" --steps 3000 >"$T/run.out" 2>&1 &
    RUN=$!
    PIDS="$RUN"
    ok=0
    i=0
    while [ $i -lt 200 ]; do
        i=$((i + 1))
        "$TP" top --endpoints "127.0.0.1:$P" --once --interval 0.3 >"$T/top.out" 2>"$T/top.err"
        rc=$?
        # ENDPOINT RANK STEP LAST_MS MEAN_MS TOKENS/S TFLOP/S ...
        row=$(awk -v ep="127.0.0.1:$P" '$1 == ep' "$T/top.out")
        step=$(echo "$row" | awk '{print $3}')
        if [ $rc = 0 ] && [ -n "$step" ] && [ "$step" != "-" ] && [ "$step" -gt 0 ] 2>/dev/null; then
            ok=1
            break
        fi
        kill -0 $RUN 2>/dev/null || break
        sleep 0.1
    done
    cat "$T/top.out"
    if [ $ok != 1 ]; then
        fail "top never showed a step > 0 (last status $rc)"
        cat "$T/top.err" "$T/run.out" >&2
    else
        echo "$row" | awk '
            $2 != "0" { print "FAIL: rank is " $2 ", not 0"; bad = 1 }
            { for (k = 4; k <= 5; k++) if ($k == "-" || $k + 0 < 0.05 || $k + 0 > 200) {
                  print "FAIL: step time column " k " is " $k " ms, not plausible"; bad = 1 } }
            $6 == "-" || $6 + 0 <= 0 { print "FAIL: no tokens/s: " $6; bad = 1 }
            # TFLOP/s = 3e11 FLOPs x steps/s and tokens/s = 512 x steps/s: their ratio is fixed
            $7 == "-" || $6 + 0 < 1000 || ($7 / $6 * 1e12) / (3e11 / 512) < 0.8 || ($7 / $6 * 1e12) / (3e11 / 512) > 1.25 {
                print "FAIL: TFLOP/s " $7 " does not match tokens/s " $6 " x 3e11 / 512"; bad = 1 }
            $NF != "ok" { print "FAIL: status " $NF; bad = 1 }
            END { exit bad }' >&2 || fails=$((fails + 1))
        grep -q '^trainprof top: endpoints 1/1 up' "$T/top.out" || fail "no summary line"
    fi
    # seen what it needed: end the job (SIGTERM, forwarded by run) rather than wait for its
    # 3000 steps (a minute under ASan)
    kill -TERM $RUN 2>/dev/null
    wait $RUN
    rc=$?
    PIDS=""
    [ $rc = 0 ] || [ $rc = 143 ] || fail "the run ended with $rc"
    # the run is over: its endpoint no longer answers
    "$TP" top --endpoints "127.0.0.1:$P" --once >"$T/after.out" 2>"$T/after.err"
    [ $? = 1 ] || fail "top on a finished run's port did not exit 1"
else
    # ---- an endpoint that does not answer (nothing listens on a fresh free port)
    P=$(free_port)
    "$TP" top --endpoints "127.0.0.1:$P" --once >"$T/dead.out" 2>"$T/dead.err"
    rc=$?
    cat "$T/dead.out" "$T/dead.err"
    [ $rc = 1 ] || fail "dead endpoint: exit $rc, not 1"
    grep -q "^127.0.0.1:$P .*no answer: Connection refused" "$T/dead.out" ||
        fail "dead endpoint: no clear line"
    grep -q 'no endpoint answered' "$T/dead.err" || fail "dead endpoint: no message on stderr"
    grep -q 'endpoints 0/1 up' "$T/dead.out" || fail "dead endpoint: summary"
    # one dead, one unresolvable, with --port-range too: still 1, one row each
    "$TP" top --port-range "127.0.0.1:$P:2" --endpoints "no-such-host.invalid:1" --once \
        >"$T/dead2.out" 2>/dev/null
    [ $? = 1 ] || fail "dead endpoints: not 1"
    [ "$(grep -c 'no answer' "$T/dead2.out")" = 3 ] || fail "dead endpoints: not 3 rows"
    # usage errors: 2
    for args in "" "--once" "--endpoints x --once" "--endpoints 1.2.3.4:0 --once" \
        "--port-range 5:0 --once" "--endpoints 127.0.0.1:1 --interval 0 --once" "--bogus"; do
        # shellcheck disable=SC2086
        "$TP" top $args >/dev/null 2>"$T/usage.err"
        rc=$?
        [ $rc = 2 ] || fail "'top $args': exit $rc, not 2"
        [ -s "$T/usage.err" ] || fail "'top $args': no message"
    done
    # without a terminal, the live view refuses (2) instead of drawing garbage
    "$TP" top --endpoints "127.0.0.1:$P" </dev/null >/dev/null 2>&1
    [ $? = 2 ] || fail "live view without a terminal: not 2"

    # ---- the summary line sums the right columns: step 42 on a rank endpoint, two GPUs of
    # 250 W and 100 W on a node endpoint
    python3 - "$T/port2" <<'PY' &
import http.server, sys
BODY = (b"trainprof_step_number 42\ntrainprof_steps_total 42\n"
        b"trainprof_model_flops_per_second 2.5e12\n"
        b'trainprof_gpu_power_watts{gpu="0",uuid="GPU-a"} 250\n'
        b'trainprof_gpu_power_watts{gpu="1",uuid="GPU-b"} 100\n')
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.timeout = 20
for _ in range(6):
    s.handle_request()
PY
    SP=$!
    i=0
    while [ ! -s "$T/port2" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
    "$TP" top --endpoints "127.0.0.1:$(cat "$T/port2")" --once --interval 0.1 >"$T/sum.out" 2>&1
    grep -q "steps 42\.\.42 " "$T/sum.out" || fail "summary: steps 42..42 missing: $(head -2 "$T/sum.out")"
    grep -q "| 2.5 TFLOP/s per GPU |" "$T/sum.out" || fail "summary: TFLOP/s is not 2.5: $(head -2 "$T/sum.out")"
    grep -q "power 350.0 W" "$T/sum.out" || fail "summary: power is not 250 + 100 W: $(head -2 "$T/sum.out")"
    kill $SP 2>/dev/null
    wait $SP 2>/dev/null

    # ---- a hostile server
    python3 "$FAKE" "$T/port" &
    PIDS="$!"
    i=0
    while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do
        i=$((i + 1))
        sleep 0.1
    done
    FP=$(cat "$T/port" 2>/dev/null)
    [ -n "$FP" ] || fail "fake server did not start"
    k=0
    while [ -n "$FP" ] && [ $k -lt 24 ]; do
        k=$((k + 1))
        t0=$(date +%s)
        "$TP" top --endpoints "127.0.0.1:$FP,127.0.0.1:$FP" --once --interval 0.1 \
            >"$T/fake.out" 2>"$T/fake.err"
        rc=$?
        t1=$(date +%s)
        if [ $rc != 0 ] && [ $rc != 1 ]; then
            fail "hostile server, run $k: exit $rc"
            cat "$T/fake.out" "$T/fake.err" >&2
        fi
        [ $((t1 - t0)) -le 12 ] || fail "hostile server, run $k: took $((t1 - t0)) s"
        # nothing from the server reaches the terminal raw: no ESC or BEL
        if LC_ALL=C grep -q "$(printf '[\033\007]')" "$T/fake.out"; then
            fail "hostile server, run $k: control characters in the output"
        fi
        [ "$(wc -l <"$T/fake.out")" -ge 4 ] || fail "hostile server, run $k: no table"
    done
    sed -n 1,12p "$T/fake.out"
fi
[ $fails = 0 ] && rm -rf "$T"
echo "top_test $MODE: $fails failure(s)"
[ $fails = 0 ]
