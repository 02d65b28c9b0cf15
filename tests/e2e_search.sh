#!/usr/bin/env bash
# e2e_search.sh - hetsim search on the simulator: the capacity found by
# bisection meets the target in the database while the next probe above it
# misses it, the stored probes are consistent with a monotone predicate,
# a repeated search reuses every stored probe; cheapest names the lowest-cost
# candidate that meets the target; pareto marks exactly the non-dominated
# candidates.  (The bisection itself is checked on a synthetic monotone
# function in tests/test_search.c.)
set -u
. "$(dirname "$0")/fixtures/lib.sh"

base=(--set workload.max_requests=300 --db "$T/s.db" --quiet)
if hs_run 0 "capacity search" search capacity "${base[@]}" --lo 0.5 --hi 32 --tol 0.05; then
    line=$(grep '^(base)' "$T/out")
    cap=$(echo "$line" | awk '{print $2}')
    fail=$(echo "$line" | awk '{print $3}')
    check_grep "capacity: found" "$T/out" 'found$'
    check_num "capacity: positive" "$cap" 'x > 0'
    check_num "capacity: bracket width <= 5%" "$(awk -v a="$cap" -v b="$fail" 'BEGIN{print (b-a)/b}')" 'x <= 0.0501'
    att() { q "$T/s.db" "select s.value from runs r join summary s on s.run = r.id and s.metric = 'slo_attainment'
                         where abs(json_extract(r.config, '$.workload.rate') - $1) < 1e-9"; }
    check_num "capacity: the answer meets slo_attainment >= 0.9" "$(att "$cap")" 'x >= 0.9'
    check_num "capacity: the bound above misses it" "$(att "$fail")" 'x < 0.9'
    # Monotone evidence: every passing probe is below every failing one.
    check_eq "capacity: probes consistent" "$(q "$T/s.db" "
        select count(*) from
          (select json_extract(r.config, '$.workload.rate') x, s.value v from runs r
             join summary s on s.run = r.id and s.metric = 'slo_attainment') p,
          (select json_extract(r.config, '$.workload.rate') x, s.value v from runs r
             join summary s on s.run = r.id and s.metric = 'slo_attainment') f
        where p.v >= 0.9 and f.v < 0.9 and p.x >= f.x")" 0
    check_eq "capacity: probes named search-capacity" \
        "$(q "$T/s.db" "select count(distinct sweep) || ' ' || min(sweep) from sweep_cases")" "1 search-capacity"
    n1=$(q "$T/s.db" "select count(*) from runs")
    hs_run 0 "capacity search again" search capacity "${base[@]}" --lo 0.5 --hi 32 --tol 0.05
    check_eq "repeat: no new probe" "$(q "$T/s.db" "select count(*) from runs")" "$n1"
    check_eq "repeat: same answer" "$(grep '^(base)' "$T/out" | awk '{print $2}')" "$cap"
fi

cand=(--set workload.max_requests=300 --set workload.rate=4 --grid cluster=dgx-a100,h100x8
      --grid max_replicas=1,2,4 --db "$T/c.db" --quiet -j 2)
if hs_run 0 "cheapest" search cheapest "${cand[@]}"; then
    want=$(q "$T/c.db" "select c.params from sweep_cases c join summary a on a.run = c.run and a.metric = 'slo_attainment'
                        join summary p on p.run = c.run and p.metric = 'cost_per_hour'
                        where a.value >= 0.9 order by p.value, c.idx limit 1")
    got=$(grep '^cheapest:' "$T/out")
    cl=$(echo "$want" | sed 's/.*"cluster":"\([^"]*\)".*/\1/')
    mr=$(echo "$want" | sed 's/.*"max_replicas":\([0-9]*\).*/\1/')
    check_eq "cheapest: the lowest cost meeting the target" "$got" \
        "$(echo "$got" | grep -F "cluster=$cl max_replicas=$mr " || echo "want cluster=$cl max_replicas=$mr")"
fi
hs_run 3 "cheapest: none meets (exit 3)" search cheapest "${cand[@]}" --need 'ttft_p99_ms<=1'
check_grep "cheapest: says none" "$T/out" "no case meets"
if hs_run 0 "pareto" search pareto "${cand[@]}"; then
    # Recompute the front in SQL: among the candidates meeting the target
    # (--need defaults to slo_attainment>=0.9), no other at most as costly
    # and at most as slow, strictly better in one.
    want=$(q "$T/c.db" "with m as (select c.idx i, p.value x, l.value y from sweep_cases c
                 join summary p on p.run = c.run and p.metric = 'cost_per_hour'
                 join summary l on l.run = c.run and l.metric = 'e2el_p99_ms'
                 join summary a on a.run = c.run and a.metric = 'slo_attainment' and a.value >= 0.9)
               select count(*) from m a where not exists (select 1 from m b where b.i != a.i
                 and b.x <= a.x and b.y <= a.y and (b.x < a.x or b.y < a.y))")
    check_grep "pareto: front size matches SQL ($want)" "$T/out" "^pareto: $want of 6 cases"
    check_eq "pareto: stars match" "$(grep -c ' \*$' "$T/out")" "$want"
fi
# pareto honours --need: nothing meets an impossible target, so no front
if hs_run 0 "pareto: --need honoured" search pareto "${cand[@]}" --need 'ttft_p99_ms<=1'; then
    check_grep "pareto: none on the front" "$T/out" "^pareto: 0 of 6 cases"
    check_eq "pareto: no star" "$(grep -c ' \*$' "$T/out")" 0
fi
hs_run 2 "bad --need" search capacity --need 'goodput=3' --db "$T/x.db"
check_grep "bad --need: says how" "$T/err" "METRIC>=VALUE"
check "bad --need: no database" ! -e "$T/x.db"
e2e_finish
