#!/usr/bin/env bash
# e2e_run.sh - `hetsim run` end to end: what reaches the results database.
# Checks: one run per invocation (appending), request conservation
# (completed + dropped = arrivals, in rows and in the summary), --no-requests,
# every runtime policy, --tp placement, deployment emit/replay, --config with
# --set overrides, and run --help.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# Request conservation in run RUN of DB: N rows, each finished or dropped,
# and the summary agrees.
conserved() {
    local db=$1 run=$2 n=$3 tag=$4
    check_eq "$tag: request rows" "$(q "$db" "select count(*) from requests where run = $run")" "$n"
    check_eq "$tag: every row finished or dropped" \
        "$(q "$db" "select count(*) from requests where run = $run and
                    ((dropped = 1 and e2e is null) or (dropped = 0 and e2e is not null and ttft is not null))")" "$n"
    check_eq "$tag: summary arrivals" "$(q "$db" "select cast(value as int) from summary where run = $run and metric = 'arrivals'")" "$n"
    check_eq "$tag: summary completed + dropped" \
        "$(q "$db" "select cast(sum(value) as int) from summary where run = $run and metric in ('completed', 'dropped')")" "$n"
}

# 1. A plain run.
db=$T/a.db
if hs_run 0 "run --requests 200" run --db "$db" --requests 200 --quiet; then
    check_eq "quiet run prints nothing" "$(wc -c <"$T/out")" 0
    check_eq "one run row" "$(q "$db" "select count(*) from runs")" 1
    check_eq "run committed (wall_s, events set)" \
        "$(q "$db" "select count(*) from runs where wall_s is not null and events > 0")" 1
    conserved "$db" 1 200 "run 1"
    check_eq "rows: dropped + finished = 200" \
        "$(q "$db" "select sum(dropped) + sum(dropped = 0) from requests where run = 1")" 200
    check_num "summary ttft_p99_ms > 0" "$(metric "$db" 1 ttft_p99_ms)" 'x > 0'
    check_num "replicas rows" "$(q "$db" "select count(*) from replicas where run = 1")" 'x >= 1'
fi

# 2. Again into the same database: run 2 is appended, run 1 untouched.
if hs_run 0 "second run appends" run --db "$db" --requests 200 --quiet; then
    check_eq "two run rows" "$(q "$db" "select group_concat(id) from (select id from runs order by id)")" "1,2"
    conserved "$db" 2 200 "run 2"
    check_eq "run 1 still has its rows" "$(q "$db" "select count(*) from requests where run = 1")" 200
fi

# 3. --no-requests: a summary, no request rows.
db=$T/nr.db
if hs_run 0 "run --no-requests" run --db "$db" --requests 50 --no-requests --quiet; then
    check_eq "--no-requests: no request rows" "$(q "$db" "select count(*) from requests")" 0
    check_num "--no-requests: summary stored" "$(q "$db" "select count(*) from summary")" 'x > 10'
    check_eq "--no-requests: arrivals in summary" "$(q "$db" "select cast(value as int) from summary where metric = 'arrivals'")" 50
    check_eq "--no-requests: config says so" \
        "$(q "$db" "select json_extract(config, '\$.write_requests') from runs")" 0
fi

# 4. Every runtime policy finishes or drops every request.
db=$T/pol.db
run=0
for p in vllm sarathi static; do
    if hs_run 0 "run --policy $p" run --db "$db" --requests 100 --policy $p --quiet; then
        run=$((run + 1))
        check_eq "$p: policy recorded" "$(q "$db" "select json_extract(config, '\$.policy') from runs where id = $run")" "$p"
        conserved "$db" $run 100 "$p"
    fi
done

# 5. --tp 4 on two DGX nodes: four TP4 replicas, each inside one node.
db=$T/tp.db
if hs_run 0 "run --tp 4 --cluster dgx-a100x2" run --db "$db" --cluster dgx-a100x2 --tp 4 --requests 50 --quiet; then
    check_eq "tp4: four replicas" "$(q "$db" "select count(*) from replicas")" 4
    check_eq "tp4: all tp=4, pp=1" "$(q "$db" "select count(*) from replicas where tp = 4 and pp = 1")" 4
    check_eq "tp4: 16 distinct GPUs" \
        "$(q "$db" "select gpus from replicas order by id" | sed 's/^[^:]*://' | tr ',' '\n' | sort -un | wc -l)" 16
    conserved "$db" 1 50 "tp4"
fi

# 6. --emit-deployment then --deployment reproduces the run.
db=$T/dep.db
dep=$T/dep.json
if hs_run 0 "run --emit-deployment" run --db "$db" --requests 100 --seed 7 --emit-deployment "$dep" --quiet; then
    if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["replicas"]' "$dep" 2>/dev/null; then
        ok "emitted deployment is JSON with replicas"
    else
        bad "emitted deployment is JSON with replicas" "$(head -c 300 "$dep" 2>&1)"
    fi
    if hs_run 0 "run --deployment" run --db "$db" --requests 100 --seed 7 --deployment "$dep" --quiet; then
        check_eq "replayed deployment: same summary values" \
            "$(q "$db" "select metric, value from summary where run = 1 order by metric")" \
            "$(q "$db" "select metric, value from summary where run = 2 order by metric")"
        check_eq "replayed deployment: same replicas" \
            "$(q "$db" "select id, role, gpus, tp, pp, bits, kv_blocks from replicas where run = 1 order by id")" \
            "$(q "$db" "select id, role, gpus, tp, pp, bits, kv_blocks from replicas where run = 2 order by id")"
        check_eq "replayed deployment: same request rows" \
            "$(q "$db" "select id, arrival, prompt, output, replica, ttft, tpot, e2e, dropped from requests where run = 1 order by id")" \
            "$(q "$db" "select id, arrival, prompt, output, replica, ttft, tpot, e2e, dropped from requests where run = 2 order by id")"
    fi
fi

# 7. --config FILE plus --set: the flag wins, the rest of the file applies.
db=$T/cfg.db
if hs_run 0 "run --config --set engine.block_size=32" run --config "$FIX/run-small.json" \
        --set engine.block_size=32 --db "$db" --quiet; then
    check_eq "config: block_size from --set" "$(q "$db" "select json_extract(config, '\$.engine.block_size') from runs")" 32
    check_eq "config: label and max_requests from file" \
        "$(q "$db" "select label, json_extract(config, '\$.label'), json_extract(config, '\$.workload.max_requests') from runs")" \
        "from-config|from-config|30"
    check_eq "config: seed from file" "$(q "$db" "select seed from runs")" 5
    check_eq "config: 30 request rows" "$(q "$db" "select count(*) from requests")" 30
    # The block size reaches the engine: 32-token blocks give half as many.
    if hs_run 0 "run --config (block_size 16)" run --config "$FIX/run-small.json" --db "$db" --quiet; then
        check_eq "config: kv_blocks halve with block_size 32" \
            "$(q "$db" "select round(1.0 * b.kv_blocks / a.kv_blocks) from replicas a join replicas b
                        on a.id = b.id where a.run = 1 and b.run = 2 and a.id = 0")" 2.0
    fi
fi

# 8. disaggregated prefill/decode: roles in the replicas table, every
#    request ends on a decode replica (or, single-token, on its prefill one).
db=$T/disagg.db
if hs_run 0 "run --set prefill_replicas=3" run --model llama-2-7b --set prefill_replicas=3 \
        --requests 200 --rate 8 --db "$db" --quiet; then
    check_eq "three prefill replicas" "$(q "$db" "select count(*) from replicas where role = 'prefill'")" 3
    check_eq "five decode replicas" "$(q "$db" "select count(*) from replicas where role = 'decode'")" 5
    check_eq "multi-token requests end on decode replicas" \
        "$(q "$db" "select count(*) from requests where dropped = 0 and output > 1 and replica < 3")" 0
    check_eq "all 200 accounted for" "$(q "$db" "select count(*) from requests")" 200
fi
hs_run 2 "emit-schedule refuses a prefill replica" run --model llama-2-7b --set prefill_replicas=3 \
    --requests 20 --db "$T/x.db" --emit-schedule "$T/x.jsonl" --quiet
check_grep "names the role" "$T/err" 'only colocated replicas can be emitted'

# 9. run --help.
if hs_run 0 "run --help" run --help; then
    check_grep "run --help mentions --set" "$T/out" '--set'
    check_grep "run --help lists engine.block_size" "$T/out" 'engine\.block_size'
fi

e2e_finish
