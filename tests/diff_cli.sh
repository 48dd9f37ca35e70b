#!/bin/sh
# diff_cli.sh TRAINPROF TEST_DIFF — `trainprof diff` end to end: a run whose GEMM kernel is
# 20 % slower is named, in text and JSON; a run against itself changes nothing; a directory
# holding only a report.json is compared without noise; unreadable runs fail clearly.
set -u
TP=$1 GEN=$2
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/diffcli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/a" "$tmp/b" "$tmp/jsononly"
"$GEN" --write "$tmp/a" 5.0 1 || fail "writing run a"
"$GEN" --write "$tmp/b" 6.0 2 || fail "writing run b"
"$TP" diff "$tmp/a" "$tmp/b" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "diff exit $?: $(cat "$tmp/err.txt")"
grep -q "changed beyond noise:" "$tmp/out.txt" || fail "no change named: $(cat "$tmp/out.txt")"
grep -q "kernel ampere_sgemm_128x64_nn" "$tmp/out.txt" || fail "the slower kernel is not named"
"$TP" diff "$tmp/a" "$tmp/b" --format json -o "$tmp/out.json" || fail "json diff"
python3 - "$tmp/out.json" <<'PY' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "trainprof.diff" and d["schema_version"] == 1
k = [r for r in d["sections"]["kernels"] if r["key"] == "ampere_sgemm_128x64_nn"][0]
assert k["significant"] and abs(k["delta_rel"] - 0.2) < 0.01, k
assert any(s["section"] == "kernels" for s in d["significant"])
PY
"$TP" diff "$tmp/a" "$tmp/a" >"$tmp/same.txt" || fail "self diff"
grep -q "no change beyond noise" "$tmp/same.txt" || fail "a run differs from itself"
"$TP" report "$tmp/b" --format json -o "$tmp/jsononly/report.json" || fail "report json"
"$TP" diff "$tmp/a" "$tmp/jsononly" >"$tmp/j.txt" || fail "diff against report.json"
grep -q "changed beyond noise:" "$tmp/j.txt" || fail "report.json side: no change named"
grep -q "noise unknown" "$tmp/j.txt" || fail "report.json side: noise should be unknown"
"$TP" diff "$tmp/a" "$tmp/jsononly/report.json" >/dev/null || fail "diff against a report.json file"
"$TP" diff "$tmp/a" "$tmp/nonexistent" >/dev/null 2>"$tmp/e1.txt"
[ $? -eq 1 ] || fail "a missing run must exit 1"
grep -q "cannot read" "$tmp/e1.txt" || fail "unclear error: $(cat "$tmp/e1.txt")"
mkdir "$tmp/empty"
"$TP" diff "$tmp/empty" "$tmp/a" >/dev/null 2>"$tmp/e2.txt"
[ $? -eq 1 ] || fail "an empty directory must exit 1"
grep -q "cannot read run" "$tmp/e2.txt" || fail "unclear error: $(cat "$tmp/e2.txt")"
"$TP" diff "$tmp/a" >/dev/null 2>&1
[ $? -eq 2 ] || fail "one run is a usage error"
"$TP" diff "$tmp/a" "$tmp/jsononly" --noise-k 2.5 --min-change 0.5 >/dev/null ||
    fail "fractional --noise-k / --min-change"
"$TP" diff "$tmp/a" "$tmp/jsononly" --noise-k x >/dev/null 2>&1
[ $? -eq 2 ] || fail "--noise-k x must be a usage error"
echo "diff_cli: OK"
