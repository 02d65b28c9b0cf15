#!/usr/bin/env bash
# e2e_list.sh - `hetsim list` and `hetsim trace stats`: the catalogues name
# the shipped models, GPUs, clusters, policies and planners; every shipped
# JSON file loads (no "(invalid" line); trace stats counts requests.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

if hs_run 0 "list" list; then
    for w in llama-2-70b a100-80g dgx-a100x2 vllm sarathi static uniform; do
        check_grep "list names $w" "$T/out" "^$w( |$)"
    done
    for h in models gpus clusters policies planners routers 'latency models'; do
        check_grep "list has section $h" "$T/out" "^== $h =="
    done
    check_eq "list: no invalid entries" "$(grep -c '(invalid' "$T/out")" 0
fi

# list CATEGORY: each shows its own entries only.
list_has() {
    local cat=$1; shift
    hs_run 0 "list $cat" list "$cat" || return
    check_eq "list $cat: no section headers" "$(grep -c '^==' "$T/out")" 0
    check_eq "list $cat: no invalid entries" "$(grep -c '(invalid' "$T/out")" 0
    for w in "$@"; do check_grep "list $cat names $w" "$T/out" "^$w( |$)"; done
}
list_has models llama-2-70b llama-2-7b tiny-test
list_has gpus a100-80g v100-32g
list_has clusters dgx-a100x2 default a100x16 llmpq-c1
list_has policies vllm sarathi static
list_has planners uniform
list_has routers rr lor lot weighted
list_has perf roofline

# Every model / GPU / cluster file in the source tree is listed.
for pair in models:models gpus:profiles/gpus clusters:profiles/clusters; do
    cat=${pair%%:*} dir=${pair#*:}
    "$HS" list "$cat" >"$T/list-$cat" 2>/dev/null
    missing=""
    for f in "$HS_ROOT/$dir"/*.json; do
        n=$(basename "$f" .json)
        grep -Eq "^$n( |\$)" "$T/list-$cat" || missing="$missing $n"
    done
    check_eq "list $cat covers $dir/*.json" "$missing" ""
done

if hs_run 2 "list nonsense" list nonsense; then
    check_grep "list nonsense: message" "$T/err" 'unknown category "nonsense"'
    check_eq "list nonsense: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
fi
hs_run 0 "list --help" list --help

# trace stats on the shipped fixtures (counts from traces/README.md).
if hs_run 0 "trace stats azure-mini.csv" trace stats "$HS_ROOT/traces/azure-mini.csv"; then
    check_grep "azure-mini: 50 requests" "$T/out" '^requests +50$'
    check_grep "azure-mini: 24.5 s" "$T/out" '^duration +24\.5 s'
fi
if hs_run 0 "trace stats azure-mini-2024.csv" trace stats "$HS_ROOT/traces/azure-mini-2024.csv"; then
    check_grep "azure-mini-2024: 20 requests" "$T/out" '^requests +20$'
fi
if hs_run 0 "trace stats sharegpt-mini.csv" trace stats "$HS_ROOT/traces/sharegpt-mini.csv"; then
    check_grep "sharegpt-mini.csv: 20 requests" "$T/out" '^requests +20$'
fi
if hs_run 0 "trace stats sharegpt-mini.json" trace stats "$HS_ROOT/traces/sharegpt-mini.json"; then
    check_grep "sharegpt-mini.json: 5 usable exchanges" "$T/out" '^requests +5$'
fi
if hs_run 0 "trace stats with a window" trace stats "$HS_ROOT/traces/azure-mini.csv" --set workload.window_end=10; then
    check_grep "azure-mini, first 10 s: 20 requests" "$T/out" '^requests +20$'
fi
hs_run 2 "trace without stats" trace "$HS_ROOT/traces/azure-mini.csv"
hs_run 2 "trace stats: missing file" trace stats "$T/none.csv"

# The real Azure 2023 conversation trace, when ../shared/data is there.
conv=${HS_SHARED_DATA:+$HS_SHARED_DATA/traces/AzureLLMInferenceTrace_conv.csv}
if [ -n "$conv" ] && [ -f "$conv" ]; then
    if hs_run 0 "trace stats AzureLLMInferenceTrace_conv.csv" trace stats "$conv"; then
        check_grep "Azure conv: 19366 requests" "$T/out" '^requests +19366$'
    fi
else
    echo "SKIP: ../shared/data absent (Azure conv trace stats not checked)"
fi

e2e_finish
