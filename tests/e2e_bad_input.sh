#!/usr/bin/env bash
# e2e_bad_input.sh - bad input is refused cleanly: exit code 2, exactly one
# line on stderr naming the file (and line) or field and the problem, and no
# database left behind; a run that fails part-way through its trace leaves an
# existing database exactly as it was.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# refused NAME ERE ARGS...: `hetsim run ARGS --db FRESH` exits 2 with one
# stderr line matching ERE and creates no database (nor journal).
refused() {
    local name=$1 re=$2 db=$T/fresh.db; shift 2
    rm -f "$db"*
    hs_run 2 "$name" run "$@" --db "$db" --quiet
    check_eq "$name: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
    check_grep "$name: message" "$T/err" "^hetsim: .*$re"
    check_eq "$name: no database left" "$(ls "$db"* 2>/dev/null)" ""
    check_eq "$name: nothing on stdout" "$(wc -c <"$T/out")" 0
}

refused "malformed Azure row" 'azure-bad-line5\.csv:5: .*91x' --trace "$FIX/azure-bad-line5.csv"
refused "negative token count" 'azure-negative\.csv:3: .*negative' --trace "$FIX/azure-negative.csv"
refused "unknown model" 'model.*"nope"' --model nope
refused "unknown GPU in cluster file" 'cluster-unknown-gpu\.json: .*GPU "nope"' --cluster "$FIX/cluster-unknown-gpu.json"
refused "unknown policy" 'policy.*"nope".*\(see hetsim list policies\)$' --policy nope
refused "unknown router" 'router.*"nope".*\(see hetsim list routers\)$' --router nope
refused "unknown planner" 'planner: unknown planner "hexgen3" \(did you mean "hexgen2"\?\) \(see hetsim list planners\)$' --planner hexgen3
refused "model does not fit" 'llama-2-70b does not fit' --model llama-2-70b --cluster llmpq-c1 --tp 1
refused "two nodes, no link" 'cluster-no-link\.json: .*link' --cluster "$FIX/cluster-no-link.json"
refused "unknown --set key" 'engine.*unknown key "nope"' --set engine.nope=3
refused "unknown --set top-level key" 'unknown key "nope"' --set nope=1
refused "unknown --set section" 'foo\.bar.*unknown section' --set foo.bar=1
refused "malformed --config JSON" 'run-malformed\.json:3: ' --config "$FIX/run-malformed.json"
refused "non-numeric --tp" '--tp: .*"four" is not a number' --tp four
refused "--tp with trailing junk" '--tp: .*"4x" is not a number' --tp 4x
refused "--tp not dividing heads" 'tp: 3 does not divide' --tp 3
refused "negative --requests" 'max_requests: -3' --requests -3
refused "non-finite --rate" 'rate.*finite' --rate nan
refused "missing trace file" 'no-such-trace\.csv: cannot open' --trace "$T/no-such-trace.csv"
refused "unknown option" 'unknown option "--bogus"' --bogus 1
refused "deployment file missing" 'no-such-dep\.json' --deployment "$T/no-such-dep.json"

# Broken deployment files, made from a good emitted one.
if hs_run 0 "emit a deployment" plan --requests 1 --emit-deployment "$T/dep.json" --quiet; then
    python3 - "$T" <<'PY2'
import json, sys
t = sys.argv[1]
def edit(name, f):
    d = json.load(open(t + "/dep.json"))
    f(d)
    json.dump(d, open(t + "/" + name, "w"))
edit("dep-dup.json", lambda d: d["replicas"][1]["stages"][0].update(gpus=d["replicas"][0]["stages"][0]["gpus"]))
edit("dep-range.json", lambda d: d["replicas"][0]["stages"][0]["gpus"].__setitem__(0, 99))
edit("dep-layers.json", lambda d: d["replicas"][0]["stages"][0].update(layers=70))
edit("dep-scale.json", lambda d: d["replicas"][1].update(latency_scale=0))
edit("dep-kernels.json", lambda d: d["replicas"][0].update(quant_kernels="awq"))
PY2
    refused "deployment: GPU used twice" 'dep-dup\.json: replicas\[1\].*used twice' --deployment "$T/dep-dup.json"
    refused "deployment: GPU out of range" 'dep-range\.json: .*GPU 99' --deployment "$T/dep-range.json"
    refused "deployment: layers do not add up" 'dep-layers\.json: .*70 layers' --deployment "$T/dep-layers.json"
    refused "deployment: latency_scale out of range" 'dep-scale\.json: replicas\[1\]: latency_scale' --deployment "$T/dep-scale.json"
    refused "deployment: unknown quant_kernels" 'dep-kernels\.json: replicas\[0\]\.quant_kernels: "awq"' --deployment "$T/dep-kernels.json"
    refused "unknown perf.quant_kernels" 'perf\.quant_kernels: "awq"' --set perf.quant_kernels=awq
fi

# A run that fails mid-trace must not touch an existing database.
db=$T/keep.db
if hs_run 0 "first run into keep.db" run --db "$db" --requests 40 --quiet; then
    before=$(q "$db" "select 'runs', count(*) from runs; select 'requests', count(*) from requests;
                      select 'summary', count(*) from summary; select 'replicas', count(*) from replicas")
    cp "$db" "$T/keep-copy.db"
    hs_run 2 "bad row mid-trace" run --db "$db" --trace "$FIX/azure-bad-midfile.csv" --quiet
    check_eq "mid-trace: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
    check_grep "mid-trace: message names line 62" "$T/err" '^hetsim: .*azure-bad-midfile\.csv:62: '
    check_eq "mid-trace: database unchanged" \
        "$(q "$db" "select 'runs', count(*) from runs; select 'requests', count(*) from requests;
                    select 'summary', count(*) from summary; select 'replicas', count(*) from replicas")" "$before"
    check_eq "mid-trace: run 1 rows identical" \
        "$(q "$db" "select * from requests order by id")" "$(q "$T/keep-copy.db" "select * from requests order by id")"
    check_eq "mid-trace: no journal left" "$(ls "$db"-* 2>/dev/null)" ""
    # The next good run gets id 2: the failed one left no trace.
    if hs_run 0 "good run after the failed one" run --db "$db" --requests 10 --quiet; then
        check_eq "next run is run 2" "$(q "$db" "select group_concat(id) from (select id from runs order by id)")" "1,2"
    fi
fi

# The same mid-trace failure into a fresh database leaves no file.
rm -f "$T/fresh.db"*
hs_run 2 "bad row mid-trace, fresh db" run --db "$T/fresh.db" --trace "$FIX/azure-bad-midfile.csv" --quiet
check_eq "mid-trace, fresh db: no database left" "$(ls "$T/fresh.db"* 2>/dev/null)" ""

# Usage errors of the other commands.
hs_run 2 "unknown command" frobnicate
check_eq "unknown command: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
hs_run 2 "trace stats on a malformed file" trace stats "$FIX/azure-bad-line5.csv"
check_grep "trace stats: message names line 5" "$T/err" '^hetsim: .*azure-bad-line5\.csv:5: '
hs_run 2 "plan with unknown model" plan --model nope
check_eq "plan: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1

# A deployment read, then a bad option: one line, exit 2, and (under
# AddressSanitizer in CI, where a leak changes the exit code) nothing leaked.
if hs_run 0 "a deployment to read" plan --model llama-2-13b --cluster llmpq-c7 --emit-deployment "$T/d.json"; then
    for bad in "--policy bogus" "--router bogus" "--set perf.model=bogus" "--set perf.engine=bogus"; do
        # shellcheck disable=SC2086
        hs_run 2 "plan --deployment with $bad" plan --deployment "$T/d.json" $bad
        check_eq "plan --deployment with $bad: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
    done
fi

e2e_finish
