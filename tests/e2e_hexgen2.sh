#!/usr/bin/env bash
# e2e_hexgen2.sh - the HexGen-2 planner through the CLI: plan -> deployment
# JSON -> run replays it.  Checks: the plan writes prefill and decode
# replicas with kv_route; the same seed writes the same bytes; the replay
# with the audit on conserves requests and records both roles; the
# baselines plan; bad plan options fail with one line naming the key.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

d=$T/d.json
if hs_run 0 "plan hexgen2 on hexgen2-het1" plan --planner hexgen2 --model llama-2-70b \
        --cluster hexgen2-het1 --plan-opts in=512,out=128 --emit-deployment "$d" --quiet; then
    check_grep "deployment has prefill replicas" "$d" '"role":"prefill"'
    check_grep "deployment has decode replicas" "$d" '"role":"decode"'
    check_grep "prefill replicas carry kv_route" "$d" '"kv_route":\['
    check_grep "planner recorded" "$d" '"planner":"hexgen2"'
fi
if hs_run 0 "plan again, same seed" plan --planner hexgen2 --model llama-2-70b \
        --cluster hexgen2-het1 --plan-opts in=512,out=128 --emit-deployment "$T/d2.json" --quiet; then
    check_eq "same seed, same deployment" "$(cmp -s "$d" "$T/d2.json" && echo same)" same
fi

db=$T/r.db
if hs_run 0 "run replays the deployment (audit on)" run --deployment "$d" --router weighted \
        --db "$db" --requests 300 --rate 4 --set engine.audit=1 --quiet; then
    check_eq "arrivals" "$(q "$db" "select cast(value as int) from summary where run = 1 and metric = 'arrivals'")" 300
    check_eq "completed + dropped" \
        "$(q "$db" "select cast(sum(value) as int) from summary where run = 1 and metric in ('completed', 'dropped')")" 300
    check_num "prefill replicas stored" "$(q "$db" "select count(*) from replicas where run = 1 and role = 'prefill'")" 'x >= 1'
    check_num "decode replicas stored" "$(q "$db" "select count(*) from replicas where run = 1 and role = 'decode'")" 'x >= 1'
fi

for p in distserve splitwise hexgen; do
    if hs_run 0 "plan $p" plan --planner $p --model llama-2-70b --cluster hexgen2-homo-h100x8 \
            --plan-opts in=512,out=128,iters=10 --emit-deployment "$T/$p.json" --quiet; then
        hs_run 0 "run $p" run --deployment "$T/$p.json" --router weighted --db "$T/$p.db" \
            --requests 100 --rate 2 --quiet
    fi
done

if hs_run 2 "unknown search refused" plan --planner hexgen2 --model llama-2-70b \
        --cluster hexgen2-het1 --plan-opts search=annealing --quiet; then
    check_grep "message names the key" "$T/err" 'plan_opts: search'
    check_eq "one line" "$(wc -l <"$T/err")" 1
fi
e2e_finish
