#!/usr/bin/env bash
# e2e_azure_full.sh - replays the whole Azure 2023 conversation trace
# (19,366 requests, one hour) on 16 A100s as four TP4 replicas of
# llama-2-70b and checks request conservation and sane headline numbers.
# Needs ../shared/data (exit 77, skipped, without it).
set -u
conv=${HS_SHARED_DATA:+$HS_SHARED_DATA/traces/AzureLLMInferenceTrace_conv.csv}
if [ -z "$conv" ] || [ ! -f "$conv" ]; then
    echo "SKIP: ../shared/data absent"
    exit 77
fi
. "$(dirname "$0")/fixtures/lib.sh"

db=$T/az.db
if hs_run 0 "replay Azure conv trace" run --trace "$conv" --model llama-2-70b --cluster a100x16 \
        --tp 4 --db "$db" --quiet; then
    check_eq "one run" "$(q "$db" "select count(*) from runs")" 1
    check_eq "arrivals = 19366" "$(q "$db" "select cast(value as int) from summary where metric = 'arrivals'")" 19366
    check_eq "completed + dropped = 19366" \
        "$(q "$db" "select cast(sum(value) as int) from summary where metric in ('completed', 'dropped')")" 19366
    check_eq "request rows = 19366" "$(q "$db" "select count(*) from requests")" 19366
    check_eq "rows: completed / dropped agree with the summary" \
        "$(q "$db" "select sum(dropped = 0), sum(dropped) from requests")" \
        "$(q "$db" "select cast(c.value as int), cast(d.value as int) from summary c, summary d
                    where c.metric = 'completed' and d.metric = 'dropped'")"
    check_eq "every dropped row has a reason" \
        "$(q "$db" "select count(*) from requests where dropped = 1 and (drop_reason is null or drop_reason = '')")" 0
    check_eq "four TP4 replicas" "$(q "$db" "select count(*) from replicas where tp = 4")" 4
    check_num "ttft_p50_ms > 0" "$(metric "$db" 1 ttft_p50_ms)" 'x > 0'
    check_num "ttft_p50_ms <= ttft_p99_ms" "$(metric "$db" 1 ttft_p50_ms) $(metric "$db" 1 ttft_p99_ms)" \
        'split(x, v, " ") == 2 && v[1] <= v[2]'
    check_num "request_throughput in [1, 10] req/s" "$(metric "$db" 1 request_throughput)" 'x >= 1 && x <= 10'
    check_num "simulated time covers the hour" "$(metric "$db" 1 simulated_s)" 'x >= 3500'
fi

e2e_finish
