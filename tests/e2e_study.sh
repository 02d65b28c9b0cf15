#!/usr/bin/env bash
# e2e_study.sh - the capacity-study UX: cluster shorthand through run, plan
# and a deployment round trip; "did you mean" on misspelt names; search
# grouping and metric errors; sweep membership of reused cases (and the
# migration of a database without it); a configuration error shared by
# every case reported once before anything runs; repeated failures summed
# up; plan --trace deriving the workload's lengths and showing roles.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# ---- shorthand -----------------------------------------------------------
if hs_run 0 "run on a shorthand cluster" run --model llama-3-8b --cluster 2x2xa100-80g --requests 30 \
        --db "$T/sh.db" --quiet; then
    check_eq "shorthand: recorded as the cluster" \
        "$(q "$T/sh.db" "select json_extract(config, '$.cluster') from runs")" "2x2xa100-80g"
fi
if hs_run 0 "plan on a mixed shorthand" plan --planner uniform --model llama-3-8b \
        --cluster 1x2xh100-sxm-80g+1x2xa100-80g --emit-deployment "$T/d.json"; then
    check_grep "plan: deployment names the shorthand" "$T/d.json" '"cluster": *"1x2xh100-sxm-80g\+1x2xa100-80g"'
    hs_run 0 "replay the shorthand deployment" run --deployment "$T/d.json" --requests 20 --db "$T/d.db" --quiet
fi
hs_run 2 "shorthand: misspelt GPU" run --cluster 4x8xh100 --requests 5 --db "$T/x.db"
check_grep "shorthand: did you mean" "$T/err" 'unknown GPU "h100" \(did you mean "h100-sxm-80g"\?\)'
check_eq "shorthand: one line" "$(wc -l <"$T/err")" 1
check "shorthand: no database" ! -e "$T/x.db"
hs_run 2 "shorthand: bad form" run --cluster 4x8x --requests 5 --db "$T/x.db"
check_grep "shorthand: says the form" "$T/err" 'NODESxGPUSxGPU'

# ---- did you mean, everywhere a name is looked up ---------------------
dym() {  # dym NAME PATTERN ARGS...
    local name=$1 pat=$2; shift 2
    hs_run 2 "$name" "$@" --requests 5 --db "$T/x.db" && check_grep "$name: suggests" "$T/err" "$pat"
}
dym "model" 'did you mean "llama-3-8b"' run --model llama-3-8
dym "cluster" 'did you mean "dgx-a100"' run --cluster dgx-a10
dym "policy" 'did you mean "vllm"' run --policy vlm
dym "planner" 'did you mean "hexgen2"' run --planner hexgen3
dym "router" 'did you mean "weighted"' run --set router=weightd
dym "config key" 'did you mean "block_size"' run --set engine.blok_size=16
dym "section" 'did you mean "workload"' run --set wrkload.rate=1
dym "slo key" 'did you mean "ttft_ms"' run --set slo.ttf_ms=1

# ---- search: metric errors and grouping -------------------------------
hs_run 2 "search: misspelt --need" search cheapest --need 'ttft_p99<=2000' --db "$T/s.db"
check_grep "search: did you mean ttft_p99_ms" "$T/err" 'unknown metric "ttft_p99" \(did you mean "ttft_p99_ms"\?\)'
check "search: nothing run" ! -e "$T/s.db"
hs_run 2 "pareto: misspelt --y" search pareto --y e2el_p99 --db "$T/s.db"
check_grep "pareto: names --y" "$T/err" '^hetsim: --y: unknown metric'
grid=(--set model=llama-3-8b --set workload.max_requests=60 --grid workload.rate=1,40
      --grid cluster=1xa100-80g,2xa100-80g,dgx-a100 --set max_replicas=1 --db "$T/s.db" --quiet -j 2)
if hs_run 3 "cheapest per rate (the 40 req/s group has none)" search cheapest "${grid[@]}" --top 2; then
    check_grep "cheapest: grouped by rate" "$T/out" '^groups: by workload.rate'
    check_eq "cheapest: one verdict per group" "$(grep -c '^cheapest \[workload.rate=' "$T/out")" 2
    # every case here is one TP1 replica on an A100 ($1.69/h): a three-way tie, shown
    check_grep "cheapest: the tie is visible" "$T/out" '^  1= '
    check_grep "cheapest: the tie is explained" "$T/out" '^  tie: 3 cases cost 1.69; ranked by e2el_p99_ms'
    check_grep "cheapest: --top 2 leaves one" "$T/out" '1 more meet'
    check_grep "cheapest: no answer at 40 req/s" "$T/out" '^cheapest \[workload.rate=40\]: no case meets'
fi
hs_run 2 "cheapest: misspelt --by" search cheapest "${grid[@]}" --by workload.rte
check_grep "misspelt --by: did you mean" "$T/err" '^hetsim: --by: "workload.rte" is not a key the cases set \(did you mean "workload.rate"\?\)'
check_eq "misspelt --by: one line" "$(wc -l <"$T/err")" 1
hs_run 0 "pareto per group, honouring --need" search pareto "${grid[@]}" --x cost_per_hour --y ttft_p99_ms
check_grep "pareto: the 40 req/s group has no front" "$T/out" '^pareto \[workload.rate=40\]: 0 of 3'

# ---- sweeps: membership of reused cases -------------------------------
base=(--set model=llama-3-8b --set workload.max_requests=30 --db "$T/m.db" --quiet -j 2)
hs_run 0 "sweep a" sweep "${base[@]}" --grid workload.rate=1,2 --name a
hs_run 0 "sweep b reuses a's rate 2" sweep "${base[@]}" --grid workload.rate=2,3 --name b
check_eq "membership: 3 cases stored once" "$(q "$T/m.db" "select count(*) from sweep_cases")" 3
check_eq "membership: b has both its cases" "$(q "$T/m.db" "select count(*) from sweep_members where sweep = 'b'")" 2
check_eq "membership: the shared case is in both" \
    "$(q "$T/m.db" "select count(*) from sweep_members group by case_key order by 1 desc limit 1")" 2
# a database from before the table: migrated on the next sweep
sqlite3 "$T/m.db" "drop table sweep_members" 2>/dev/null || python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('drop table sweep_members'); c.commit()" "$T/m.db"
hs_run 0 "sweep c on the old database" sweep "${base[@]}" --grid workload.rate=1 --name c
check_eq "migration: every stored case has its storing sweep" \
    "$(q "$T/m.db" "select count(*) from sweep_cases c join sweep_members m on m.case_key = c.case_key and m.sweep = c.sweep")" 3
check_eq "migration: and c's reused case" "$(q "$T/m.db" "select count(*) from sweep_members where sweep = 'c'")" 1

# ---- sweeps: a configuration error is one line, before anything runs ---
hs_run 2 "sweep: every case names an unknown policy" sweep --set policy=vlm --grid workload.rate=1,2,3 \
    --db "$T/f.db" -j 2
check_eq "config error: one line" "$(wc -l <"$T/err")" 1
check_grep "config error: says so once" "$T/err" '^hetsim: every case \(3\): policy: unknown policy "vlm" \(did you mean "vllm"\?\)'
check "config error: no database" ! -e "$T/f.db"
hs_run 2 "sweep: every case has an unsupported bits" sweep --set bits=5 --grid workload.rate=1,2 --db "$T/f.db"
check_grep "bad bits: said once, before running" "$T/err" '^hetsim: every case \(2\): bits: 5 is not 16, 8, 4 or 3$'
check "bad bits: no database" ! -e "$T/f.db"
# a database in a folder that is not there: one line, exit 2, for each command
for cmd in "run" "sweep --grid workload.rate=1,2" "search pareto --grid workload.rate=1,2"; do
    # shellcheck disable=SC2086
    hs_run 2 "$cmd: no database folder" $cmd --set workload.max_requests=5 --db "$T/none/x.db" --quiet
    check_eq "$cmd: no database folder: one line" "$(wc -l <"$T/err")" 1
    check_grep "$cmd: no database folder: says so" "$T/err" "^hetsim: $T/none/x.db: cannot create the database: folder"
done
# a bad value in a case is named by the case, one colon
hs_run 2 "sweep: bad grid value" sweep --grid workload.rate=1:2 --db "$T/f.db"
check_grep "bad grid value: names the case" "$T/err" '^hetsim: case 1: workload: rate: "1:2" is not a number$'
check "bad grid value: no database" ! -e "$T/f.db"
# some cases fail the same way: printed once, counted at the end
hs_run 3 "sweep: repeated failures" sweep --grid cluster=dgx-a100,llmpq-c1 --grid workload.rate=1,2,3 \
    --set model=llama-2-70b --set workload.max_requests=10 --db "$T/f.db" -j 2
check_eq "repeated failure printed once" "$(grep -Ec '^hetsim sweep: case [0-9]+ .* failed: llama-2-70b does not fit' "$T/err")" 1
check_grep "repeated failure summed up" "$T/err" '^hetsim sweep: 3 cases failed: llama-2-70b does not fit .*\(first: case 4;'

# ---- plan reads the workload ------------------------------------------
if hs_run 0 "plan --trace" plan --planner distserve --model llama-3-8b --cluster 4xa100-80g \
        --trace "$HS_ROOT/traces/azure-mini.csv" --emit-deployment "$T/p.json"; then
    # azure-mini.csv: 50 requests, prompt mean 516.5 p99 1049, output mean 114.5 p50 105
    check_grep "plan: lengths from the trace" "$T/err" \
        '^plan: workload lengths \(50 requests\): prompt mean 516 p50 [0-9]+ p90 [0-9]+ p99 1049; output mean 114 p50 105 '
    check_grep "plan: roles per replica" "$T/err" '^replica 0: (prefill|decode), '
    check_grep "plan: role counts" "$T/err" '^plan: roles: [0-9]+ (prefill|decode) \+ [0-9]+ (prefill|decode)$'
fi
if hs_run 0 "plan: a target its estimate misses" plan --planner distserve --model llama-3-8b --cluster 4xa100-80g \
        --trace "$HS_ROOT/traces/azure-mini.csv" --set slo.tpot_ms=0.5 --emit-deployment "$T/p2.json"; then
    check_grep "plan: warns estimate vs target" "$T/err" '^distserve: warning: estimated TPOT [0-9.]+ ms .*misses the 0.5 ms target'
fi
e2e_finish
