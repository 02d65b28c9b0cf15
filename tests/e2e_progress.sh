#!/usr/bin/env bash
# e2e_progress.sh - planners' progress lines (core/progress.h): with
# HS_PROGRESS=<seconds> forced onto a non-terminal stderr they print
# "<planner> search: <t> s, ..." lines, with HS_PROGRESS=0 none, and the
# plan on stdout (and the deployment file) is the same either way.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# name | planner arguments (each planner long enough for a few clock reads)
cases=(
    # one GPU: its ILPs finish inside their CPU-time limits, so the plan does
    # not depend on the machine's speed (c3's stop at them under load)
    "llmpq|--planner llmpq --model opt-13b --cluster llmpq-c1"
    "pipeedge|--planner pipeedge --model opt-30b --cluster llmpq-c3"
    "exegpt|--planner exegpt --model opt-13b --cluster exegpt-a40x4 --set workload.preset=S"
    "hetis|--planner hetis --model llama-2-70b --cluster hetis-mixed12"
    "hetis-hexgen|--planner hetis-hexgen --model llama-2-70b --cluster hetis-mixed12"
)
for c in "${cases[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    HS_PROGRESS=0 hs_run 0 "$name, progress off" plan "${args[@]}" --emit-deployment "$T/$name-off.json" || continue
    mv "$T/out" "$T/$name-off.out"
    check_eq "$name, off: no progress line" "$(grep -c ' search: ' "$T/err")" 0
    # 1 us: every clock read is past the interval, so a line per check
    HS_PROGRESS=0.000001 hs_run 0 "$name, progress forced" plan "${args[@]}" --emit-deployment "$T/$name-on.json" ||
        continue
    check_num "$name, forced: progress lines" "$(grep -cE "^$name search: [0-9.]+ s, " "$T/err")" 'x >= 1'
    check_eq "$name, forced: every line ends" "$(grep -c $'\r' "$T/err")" 0
    check_eq "$name: the same plan printed" "$(cmp -s "$T/out" "$T/$name-off.out" && echo same)" same
    check_eq "$name: the same deployment" "$(cmp -s "$T/$name-on.json" "$T/$name-off.json" && echo same)" same
done

# a malformed HS_PROGRESS is ignored (progress is a courtesy, not input)
HS_PROGRESS=soon hs_run 0 "HS_PROGRESS=soon is ignored" plan --planner llmpq --model opt-30b --cluster llmpq-c3
check_eq "HS_PROGRESS=soon: no progress off a terminal" "$(grep -c ' search: ' "$T/err")" 0

e2e_finish
