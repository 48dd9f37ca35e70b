#!/bin/sh
# html_shot.sh TRAINPROF TEST_HTML — the HTML report of a 30,000-step run (test_html
# --write-long) through the CLI: no dead in-page link (tests/html_check.py --generic), then
# its heatmap painted by headless Chromium (Debian's `chromium`) shows the run's structure
# (tests/html_shot.py). Skipped (77) when no chromium is installed (scripts/install-deps.sh
# --test-extras installs it).
set -eu
TP=$1 GEN=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/html-shot-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
"$GEN" --write-long "$tmp/run"
"$TP" report "$tmp/run" --format html -o "$tmp/report.html"
python3 "$here/html_check.py" --generic "$tmp/report.html"
browser=""
for b in chromium chromium-browser google-chrome; do
    command -v "$b" >/dev/null 2>&1 && { browser=$b; break; }
done
[ -n "$browser" ] || { echo "SKIP: no chromium (scripts/install-deps.sh --test-extras)"; exit 77; }
python3 "$here/html_shot.py" "$tmp/report.html" "$browser" "$tmp"
