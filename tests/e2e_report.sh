#!/usr/bin/env bash
# e2e_report.sh - a 200-case sweep completes, and hetsim report draws every
# figure from its database
# (non-empty PNG files, real images by their signature, linked from
# index.html), SVG on request, the predicted-vs-measured figure when the
# database has validations, and skips cleanly without matplotlib.  From
# report.json (the numbers behind the figures): time_scale is a rate axis,
# series are named by --label or the varying keys only, SLO targets come
# from --slo-* or the runs, Pareto panels never mix rates.  The runs table
# has a readable column per key that varies (what all runs share is said
# once); runs from a planner's deployment file are labelled by the planner
# (runs.planner), not the configuration's default.  Skips
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
    check_eq "runs table: a column per swept key, readable" \
        "$(/usr/bin/python3 -c 'import json,sys; print(sorted(json.load(open(sys.argv[1]))["runs_table"]["columns"]))' "$T/rep/report.json")" \
        "['max replicas', 'policy', 'rate (req/s)', 'seed']"
    check_grep "runs table: readable headers" "$T/rep/index.html" "<th>run</th><th>[a-z (/s)]+</th>.*<th>TTFT p99 \(ms\)</th>"
    check_eq "runs table: no raw key=value settings" "$(grep -c "<td class='l'>[^<]*=" "$T/rep/index.html")" 0
    check_eq "runs table: no dotted keys" "$(grep -c 'workload\.rate' "$T/rep/index.html")" 0
    check_grep "runs table: what all runs share, once" "$T/rep/index.html" "^<p>All runs: model llama-2-70b, cluster default"
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
    check_eq "runs table: cluster, time scale and the offered rate it makes" \
        "$(jq 'sorted(d["runs_table"]["columns"])')" "['cluster', 'offered (req/s)', 'time scale']"
    check_eq "runs table: the trace is shared, by its base name" "$(jq 'd["runs_table"]["shared"]["trace"]')" "azure-mini"
fi
# A planner's deployment file replayed beside a plain run: its series and
# its row name the planner that made it (runs.planner), not "uniform".
hs_run 0 "plan distserve for the report" plan --planner distserve --model llama-2-70b --cluster hexgen2-homo-h100x8 \
    --plan-opts in=512,out=128,iters=10 --emit-deployment "$T/dep.json" --quiet
hs_run 0 "run the deployment" run --deployment "$T/dep.json" --router weighted --requests 60 --rate 2 --db "$T/pl.db" --quiet
hs_run 0 "a plain run beside it" run --cluster hexgen2-homo-h100x8 --requests 60 --rate 2 --db "$T/pl.db" --quiet
if hs_run 0 "report of the planner runs" report --db "$T/pl.db" --out "$T/pl"; then
    J="$T/pl/report.json"
    check_eq "planner: series named by the deployment's planner" \
        "$(jq '" | ".join(sorted(d["cdf"]))')" "deployment=dep, planner=distserve, router=weighted | planner=uniform, router=lor"
    check_grep "planner: the row says distserve" "$T/pl/index.html" "^<tr><td>1</td><td class='l'>dep</td><td class='l'>distserve</td>"
    # a database from before runs.planner (whose configuration kept the
    # default planner name): the deployment run claims no planner
    sqlite3 "$T/pl.db" "update runs set planner = null, config = json_set(config, '$.planner', 'uniform')"
    hs_run 0 "report without runs.planner" report --db "$T/pl.db" --out "$T/pl0"
    check_eq "no runs.planner: no planner claimed for the deployment" \
        "$(J=$T/pl0/report.json jq '" | ".join(sorted(d["cdf"]))')" "deployment=dep, router=weighted | planner=uniform, router=lor"
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
