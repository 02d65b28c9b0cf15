#!/usr/bin/env bash
# e2e_report_browser.sh - the report's HTML page in a real headless browser:
# Chromium loads index.html, every figure decodes (the page's own load
# check sets data-images="ok N"), no script error reaches the console, and
# a screenshot of the page is a real, non-blank image.  A page with a
# missing figure is reported broken, so the check can fail.  Skips (77)
# without matplotlib or without Chromium (Debian: apt-get install chromium;
# or HS_CHROMIUM=/path/to/chrome).
set -u
. "$(dirname "$0")/fixtures/lib.sh"

PY=${HS_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
    echo "SKIP: $PY cannot import matplotlib (install python3-matplotlib)"
    exit 77
fi
CHROME=${HS_CHROMIUM:-}
if [ -z "$CHROME" ]; then
    for c in chromium chromium-browser google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then CHROME=$(command -v "$c"); break; fi
    done
fi
if [ -z "$CHROME" ] || [ ! -x "$CHROME" ]; then
    echo "SKIP: no Chromium found (apt-get install chromium, or set HS_CHROMIUM)"
    exit 77
fi

# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
chrome() {
    timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$T/profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 "$@"
}

hs_run 0 "sweep" sweep --set workload.kind=azure --set "workload.path=$HS_ROOT/traces/azure-mini.csv" \
    --grid cluster=dgx-a100,h100x8 --grid workload.time_scale=1,2,4 --db "$T/b.db" -j 2 --name b
hs_run 0 "report" report --db "$T/b.db" --out "$T/rep" --sweep b
nimg=$(grep -o "<img " "$T/rep/index.html" | wc -l)
check_num "page has figures" "$nimg" 'x >= 4'

chrome --dump-dom "file://$T/rep/index.html" >"$T/dom.html" 2>"$T/console.txt"
check_grep "every figure decodes in the browser" "$T/dom.html" "data-images=\"ok $nimg\""
if grep -Eq "Uncaught|CONSOLE.*(Error|error)" "$T/console.txt"; then
    bad "no script errors" "$(grep -E 'Uncaught|CONSOLE' "$T/console.txt" | head -3)"
else
    ok "no script errors"
fi

chrome --screenshot="$T/shot.png" --window-size=1280,3000 "file://$T/rep/index.html" >/dev/null 2>&1
check "screenshot written" -s "$T/shot.png"
check_eq "screenshot is a PNG" "$(head -c 8 "$T/shot.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a
# Non-trivial: many colours (the plots' lines), a real share of non-white
# pixels; a blank or error page has a handful of colours.
stats=$("$PY" - "$T/shot.png" <<'PY'
import sys
import matplotlib.image as mpimg
a = mpimg.imread(sys.argv[1])[:, :, :3]
px = (a * 255).astype(int).reshape(-1, 3)
colours = len({tuple(p) for p in px[::7]})
ink = float((px.sum(axis=1) < 740).mean())
print(colours, "%.4f" % ink)
PY
)
check_num "screenshot: many colours ($stats)" "${stats%% *}" 'x > 100'
check_num "screenshot: not blank ($stats)" "${stats##* }" 'x > 0.02'

# The check is not vacuous: a missing figure is reported broken.
rm "$T/rep/pareto.png"
chrome --dump-dom "file://$T/rep/index.html" >"$T/dom2.html" 2>/dev/null
check_grep "a missing figure is reported" "$T/dom2.html" 'data-images="broken [^"]*pareto.png'
e2e_finish
