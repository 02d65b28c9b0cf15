#!/usr/bin/env bash
# e2e_report.sh - a 200-case sweep completes, and hetsim report draws every
# figure from its database
# (non-empty PNG files, real images by their signature, linked from
# index.html), SVG on request, the predicted-vs-measured figure when the
# database has validations, and skips cleanly without matplotlib.  From
# report.json (the numbers behind the figures): time_scale is a rate axis,
# series are named by --label or the varying keys only, SLO targets come
# from --slo-* or the runs, Pareto panels never mix rates.  Skips
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
    check "report: report.json written" -s "$T/rep/report.json"
    for f in latency_cdf rate_latency rate_goodput pareto timeseries validation; do
        check "report: $f.png non-empty" -s "$T/rep/$f.png"
        check_eq "report: $f.png is a PNG" "$(head -c 8 "$T/rep/$f.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a
        check_grep "report: index.html links $f.png" "$T/rep/index.html" "src='$f.png'"
    done
    check_eq "report: run table lists the 200 runs" "$(grep -c '^<tr><td>' "$T/rep/index.html")" 200
fi
# A timed trace sped up by time_scale is a rate axis: offered rate = the
# fixture's 2 req/s x scale; series labelled by the varying key only.
hs_run 0 "time_scale sweep" sweep --set workload.kind=azure --set "workload.path=$HS_ROOT/traces/azure-mini.csv" \
    --grid cluster=dgx-a100,h100x8 --grid workload.time_scale=1,2,4 --db "$T/ts.db" -j 2 --name ts
if hs_run 0 "report of the time_scale sweep" report --db "$T/ts.db" --out "$T/ts" --sweep ts --slo-ttft 1500; then
    J="$T/ts/report.json"
    jq() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$J"; }
    check_eq "time_scale: series are the clusters, named by the varying key only" \
        "$(jq '" ".join(sorted(d["vs_rate"]["ttft_p99_ms"]))')" "cluster=dgx-a100 p99 cluster=h100x8 p99"
    check_eq "time_scale: x = 2 req/s x scale" \
        "$(jq '" ".join("%g" % x for x, _ in d["vs_rate"]["ttft_p99_ms"]["cluster=h100x8 p99"])')" "2 4 8"
    check_eq "CDF: no rate or path in labels of runs at one rate" "$(jq '" ".join(sorted(d["cdf"]))')" \
        "cluster=dgx-a100 cluster=h100x8"
    check_eq "SLO: --slo-ttft overrides, TPOT from the runs" "$(jq '"%g %g" % (d["slo_ms"]["ttft"], d["slo_ms"]["tpot"])')" \
        "1500 100"
    check_eq "pareto: one panel per rate, each with both clusters" \
        "$(jq '" ".join("%s:%d" % (p["rate"], len(p["points"])) for p in d["pareto"])')" "2:2 4:2 8:2"
    check_grep "pareto: caption explains overloaded points" "$T/ts/index.html" "overloaded \(queueing delay"
    check_grep "SLO stated on the page" "$T/ts/index.html" "SLO targets drawn: TTFT 1500 ms, TPOT 100 ms"
fi
# Plain runs: --label names the series; the rate appears only where runs differ.
for c in dgx-a100 h100x8; do
    hs_run 0 "labelled run on $c" run --cluster $c --rate 2 --requests 60 --db "$T/lab.db" --label "study $c"
done
hs_run 0 "second rate" run --cluster dgx-a100 --rate 4 --requests 60 --db "$T/lab.db" --label "study dgx-a100"
if hs_run 0 "report of labelled runs" report --db "$T/lab.db" --out "$T/lab" --slo-tpot 0; then
    J="$T/lab/report.json"
    check_eq "labels: --label names the series" "$(jq '" ".join(sorted(d["vs_rate"]["goodput"]))')" \
        "study dgx-a100 study h100x8"
    check_eq "labels: no file paths, no cluster key" "$(jq 'any(".json" in k or "cluster=" in k for k in d["cdf"])')" False
    check_eq "SLO: --slo-tpot 0 draws none" "$(jq 'd["slo_ms"]["tpot"]')" None
fi
hs_run 2 "report: bad --slo-ttft" report --db "$T/lab.db" --out "$T/none" --slo-ttft fast
check_grep "bad --slo-ttft: one line naming it" "$T/err" "^hetsim: --slo-ttft: \"fast\" is not a number"
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
