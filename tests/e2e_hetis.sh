#!/usr/bin/env bash
# e2e_hetis.sh - Hetis through the CLI: `hetsim plan --planner hetis` emits
# attention workers (the paper's roles for Llama-2-70B: P100s), `hetsim run
# --policy hetis` replays the deployment and reports the dispatcher (and
# the workers' GPU on the trust line), the
# baselines plan on the same cluster, and attention workers under another
# policy are refused with one line.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

common=(--model llama-2-70b --cluster hetis-mixed12)
hs_run 0 "plan hetis" plan --planner hetis "${common[@]}" --emit-deployment "$T/d.json" --quiet
# the P100s (GPUs 8-11) serve attention; which stage each helps follows the latency model
check_grep "attention workers in the deployment" "$T/d.json" '"attention":\[\{"replica":0,"stage":[0-9]+,"gpu":8\}'
check_eq "the four P100s are attention workers" \
    "$(grep -o '"stage":[0-9]*,"gpu":[0-9]*' "$T/d.json" | sed 's/.*"gpu"://' | sort -n | tr '\n' ' ')" "8 9 10 11 "
hs_run 0 "run hetis" run --deployment "$T/d.json" --policy hetis "${common[@]}" --rate 1.5 --requests 60 \
    --db "$T/r.db"
check_grep "dispatcher report" "$T/err" '^hetis: [0-9]+ dispatches'
check_grep "an attention worker" "$T/err" 'attention GPU 8: cap'
check_grep "summary" "$T/out" 'Successful requests: +60'
# the trust line and the replicas row name the workers' GPU too: the P100s,
# transferred and flagged as without tensor cores
check_grep "trust line names the P100 workers" "$T/out" '^trust .*p100-12g: transferred from .*no tensor cores \(extrapolated\)'
check_eq "replicas row too" "$(q "$T/r.db" "select count(*) from replicas where calibration like '%p100-12g: transferred%'")" \
    "$(q "$T/r.db" "select count(*) from replicas")"
check_grep "and the run warns of it" "$T/err" '^hetsim: warning: .*p100-12g.*uncalibrated'
hs_run 2 "attention workers need policy hetis" run --deployment "$T/d.json" --policy vllm "${common[@]}" \
    --requests 5 --db "$T/r2.db" --quiet
check_grep "one-line refusal" "$T/err" '^hetsim: deployment: 4 attention workers need a policy that offloads attention \(hetis; policy is vllm\)'
for p in hetis-splitwise hetis-hexgen; do
    hs_run 0 "plan $p" plan --planner "$p" "${common[@]}" --emit-deployment "$T/$p.json" --quiet
done
check_grep "splitwise has prefill and decode" "$T/hetis-splitwise.json" '"role":"prefill".*"role":"decode"'
e2e_finish
