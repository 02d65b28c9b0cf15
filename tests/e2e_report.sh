#!/usr/bin/env bash
# e2e_report.sh - a 200-case sweep completes, and hetsim report draws every
# figure from its database
# (non-empty PNG files, real images by their signature, linked from
# index.html), SVG on request, the predicted-vs-measured figure when the
# database has validations, and skips cleanly without matplotlib.  Skips
# (77) when /usr/bin/python3 cannot import matplotlib.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

PY=${HS_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
    echo "SKIP: $PY cannot import matplotlib (install python3-matplotlib)"
    exit 77
fi

# A 200-case sweep in CI size (100 requests per case).
hs_run 0 "200-case sweep for the report" sweep --set workload.max_requests=100 --grid max_replicas=1,2 \
    --grid policy=vllm,sarathi --grid workload.rate=1:10:1 --grid seed=1:5:1 --db "$T/r.db" -j 2 --name demo
check_eq "sweep: 200 cases stored" "$(q "$T/r.db" "select count(*) from sweep_cases where sweep = 'demo' and run is not null")" 200
check_grep "sweep: throughput reported" "$T/err" "200 cases run \(0 failed\).*cases/min"
# A validations row set, as `hetsim validate` writes them, for run 1.
q "$T/r.db" "select 1" >/dev/null
sqlite3 "$T/r.db" "insert into validations (run, device, iteration, predicted_ns, measured_ns)
    with recursive i(n) as (select 0 union all select n + 1 from i where n < 199)
    select 1, 'cpu', n, 1000000 + n * 5000, 1000000 + n * 5200 + (n % 7) * 3000 from i"
if hs_run 0 "report" report --db "$T/r.db" --out "$T/rep" --sweep demo; then
    for f in latency_cdf rate_latency rate_goodput pareto timeseries validation; do
        check "report: $f.png non-empty" -s "$T/rep/$f.png"
        check_eq "report: $f.png is a PNG" "$(head -c 8 "$T/rep/$f.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a
        check_grep "report: index.html links $f.png" "$T/rep/index.html" "src='$f.png'"
    done
    check_eq "report: run table lists the 200 runs" "$(grep -c '^<tr><td>' "$T/rep/index.html")" 200
fi
hs_run 0 "report as SVG" report --db "$T/r.db" --out "$T/svg" --format svg
check_grep "svg: an SVG file" "$T/svg/rate_goodput.svg" "<svg"
hs_run 2 "report: unknown sweep" report --db "$T/r.db" --out "$T/none" --sweep nosuch
check_grep "unknown sweep: says so" "$T/err" "no committed runs in sweep nosuch"
hs_run 2 "report: missing database" report --db "$T/missing.db" --out "$T/none"
check "missing database: not created" ! -e "$T/missing.db"
# Without matplotlib: a notice, exit 0 (3 with --require), no files.
HS_PYTHON=/bin/false hs_run 0 "no matplotlib: skipped" report --db "$T/r.db" --out "$T/skip"
check_grep "no matplotlib: notice" "$T/err" "report skipped"
check "no matplotlib: no output folder" ! -e "$T/skip"
HS_PYTHON=/bin/false hs_run 3 "no matplotlib with --require" report --db "$T/r.db" --out "$T/skip" --require
e2e_finish
