#!/bin/sh
# html_browser.sh TRAINPROF TEST_HTML MODE — the HTML report of test_html's synthetic run,
# rendered through the CLI, then checked:
#   MODE=structure: python3 tests/html_check.py (html.parser; runs everywhere);
#   MODE=browser:   headless Chromium (Debian's `chromium`): the page renders (--dump-dom and
#                   a screenshot), the browser logs no console message or script error (the
#                   page has no script at all), and the DOM it built holds the known figures.
#                   Skipped (77) when no chromium is installed: it is not in
#                   scripts/install-deps.sh (several hundred MB); apt-get install chromium.
set -eu
TP=$1 GEN=$2 MODE=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/html-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
"$GEN" --write "$tmp/run"
"$TP" report "$tmp/run" --format html -o "$tmp/report.html"
case $MODE in
structure)
    python3 "$here/html_check.py" "$tmp/report.html"
    ;;
browser)
    browser=""
    for b in chromium chromium-browser google-chrome; do
        command -v "$b" >/dev/null 2>&1 && { browser=$b; break; }
    done
    [ -n "$browser" ] || { echo "SKIP: no chromium (apt-get install chromium)"; exit 77; }
    flags="--headless --disable-gpu --no-sandbox --no-first-run --disable-extensions
           --user-data-dir=$tmp/profile --enable-logging=stderr --v=0"
    # shellcheck disable=SC2086
    timeout 120 "$browser" $flags --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>"$tmp/log.txt" || {
        cat "$tmp/log.txt"; echo "FAIL: chromium could not render the page"; exit 1; }
    # shellcheck disable=SC2086
    timeout 120 "$browser" $flags --window-size=1200,2000 --screenshot="$tmp/shot.png" \
        "file://$tmp/report.html" >/dev/null 2>"$tmp/log2.txt" || true
    [ -s "$tmp/shot.png" ] || { cat "$tmp/log2.txt"; echo "FAIL: no screenshot"; exit 1; }
    # console messages and uncaught errors are logged as "INFO:CONSOLE" / "Uncaught" lines
    if grep -E "CONSOLE[(:]|Uncaught|SyntaxError|Refused to" "$tmp/log.txt" "$tmp/log2.txt"; then
        echo "FAIL: the browser logged a script or console message"; exit 1
    fi
    fail=0
    check() { grep -q -- "$1" "$tmp/dom.html" || { echo "FAIL: DOM lacks $2"; fail=1; }; }
    check '<td class="n">35.000</td>' "rank 0's mean step time 35.000 ms"
    check '<td class="n">38.500</td>' "rank 1's mean step time 38.500 ms"
    check 'rank 0, step 4: 50.000 ms' "the heatmap cell of rank 0 step 4 (50 ms)"
    check 'data-label="rank 1" data-points="4"' "rank 1's step-time line of 4 points"
    check 'data-label="GPU 0" data-points="12"' "the 12-sample power curve"
    check '&lt;script&gt;alert' "the hostile kernel name as text"
    n=$(grep -o '<rect class="cell"' "$tmp/dom.html" | wc -l)
    [ "$n" -eq 8 ] || { echo "FAIL: $n heatmap cells in the DOM, expected 8"; fail=1; }
    if grep -qi '<script' "$tmp/dom.html"; then echo "FAIL: a script element in the DOM"; fail=1; fi
    [ $fail -eq 0 ] && echo "html_browser: $browser rendered the report; figures found; no console output"
    exit $fail
    ;;
esac
