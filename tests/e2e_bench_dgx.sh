#!/usr/bin/env bash
# e2e_bench_dgx.sh - tools/bench-dgx, the end-to-end check against the
# shipped Splitwise DGX measurements (profiles/reference/splitwise-dgx.csv):
#  1. --fit reproduces the dispatch floors profiles/engines/vllm-eager.json
#     ships (a stale profile fails here), one per DGX host;
#  2. a short replay (--rows 6) runs every configuration under all three
#     latency models and prints the error table and the TP 4 -> 8 section;
#  3. an unknown argument is refused with the usage line.
set -u
source "$(dirname "$0")/fixtures/lib.sh"
B=$HS_ROOT/tools/bench-dgx
export HS

# 1. the shipped floors are the fit of the shipped data
if HS=$HS "$B" --fit >"$T/fit" 2>"$T/err"; then
    ok "bench-dgx --fit exits 0"
    check_eq "one floor per DGX host" "$(grep -c '^dispatch floor ' "$T/fit")" 2
    for g in a100-80g h100-sxm-80g; do
        got=$(sed -n "s/^dispatch floor $g: \([0-9.]*\) us per operator.*/\1/p" "$T/fit")
        want=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([e['op_us'] for e in d['dispatch'] if e['gpu']==sys.argv[2]][0])" \
            "$HS_ROOT/profiles/engines/vllm-eager.json" "$g")
        check_num "vllm-eager ships the fitted floor of $g ($got us per operator)" "$want" "(x - $got)^2 < 0.0001"
    done
else
    bad "bench-dgx --fit exits 0" "$(head -c 300 "$T/err")"
fi

# 2. a short replay under the three models
if HS=$HS "$B" --rows 6 >"$T/out" 2>"$T/err"; then
    ok "bench-dgx --rows 6 exits 0"
    check_grep "every row replayed" "$T/out" '^6 configurations replayed, 0 could not run'
    check_grep "error table, all rows, token" "$T/out" \
        '^all +token +\| +[0-9.]+ +[0-9.]+ +[-+][0-9.]+ +6 +\| +[0-9.]+ +[0-9.]+ +[-+][0-9.]+ +6 +\| +[0-9.]+'
    check_grep "the TP scaling section" "$T/out" '^decode speed-up from TP 4 to TP 8'
else
    bad "bench-dgx --rows 6 exits 0" "$(head -c 300 "$T/err")"
fi

# 3. a bad argument
HS=$HS "$B" --frobnicate >"$T/out" 2>"$T/err"
check_eq "unknown argument: exit 2" "$?" 2
check_grep "usage line" "$T/err" '^usage: tools/bench-dgx'

e2e_finish
