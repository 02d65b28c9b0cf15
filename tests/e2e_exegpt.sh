#!/usr/bin/env bash
# e2e_exegpt.sh - the exegpt planner through the CLI: `hetsim plan` writes a
# deployment that names its policy (rra/waa) and engine settings, `hetsim
# run --deployment` replays it with that policy, the command line still
# overrides the deployment's settings, and bad planner input is one clear
# line.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

common=(--model opt-13b --cluster exegpt-a40x4 --planner exegpt --set workload.preset=S --quiet)

if hs_run 0 "plan exegpt, S, 5.9 s" plan "${common[@]}" --set slo.e2el_ms=5900 --emit-deployment "$T/d.json"; then
    check_grep "deployment names its policy" "$T/d.json" '"policy":"(rra|waa)"'
    check_grep "deployment carries B_E" "$T/d.json" '"exegpt_be":[0-9]+'
    check_grep "deployment carries the prediction" "$T/d.json" '"summary":"(RRA|WAA)'
    pol=$(grep -Eo '"policy":"(rra|waa)"' "$T/d.json" | cut -d'"' -f4)
    if hs_run 0 "run the planned deployment" run --deployment "$T/d.json" --set workload.preset=S \
        --requests 400 --rate 40 --db "$T/r.db"; then
        check_grep "run uses the planned policy" "$T/out" "^policy +$pol,"
        check_grep "all requests served" "$T/out" "^Successful requests: +400$"
    fi
    # --policy on the command line wins over the deployment's.
    if hs_run 0 "run with --policy vllm" run --deployment "$T/d.json" --policy vllm \
        --set workload.preset=S --requests 200 --db "$T/r2.db"; then
        check_grep "command line policy wins" "$T/out" "^policy +vllm,"
    fi
    # --set engine.K wins over the deployment's engine settings.
    if hs_run 0 "run with --set engine.exegpt_be" run --deployment "$T/d.json" --set engine.exegpt_be=3 \
        --set workload.preset=S --requests 100 --db "$T/r3.db" --set db=$T/r3.db; then
        check_grep "stored config has B_E 3" <(sqlite3 "$T/r3.db" "select config from runs") '"exegpt_be": *3[,}]'
    fi
fi

# --policy rra restricts the search to RRA (one colocated replica).
if hs_run 0 "plan exegpt restricted to rra" plan "${common[@]}" --policy rra --emit-deployment "$T/r.json"; then
    check_grep "rra deployment" "$T/r.json" '"policy":"rra"'
    check_eq "one replica" "$(grep -o '"role":' "$T/r.json" | wc -l)" 1
    check_grep "colocated" "$T/r.json" '"role":"colocated"'
fi

# Encoder-decoder: T5-11B planned and replayed (encoder and decoder layers
# placed per stage in the deployment).
if hs_run 0 "plan exegpt, T5-11B, S, 3 s" plan --model t5-11b --cluster exegpt-a40x8 --planner exegpt \
    --set workload.preset=S --set slo.e2el_ms=3000 --quiet --emit-deployment "$T/t5.json"; then
    check_grep "T5 deployment places encoder layers" "$T/t5.json" '"enc_layers":[1-9]'
    if hs_run 0 "run the T5 deployment" run --deployment "$T/t5.json" --set workload.preset=S \
        --requests 300 --rate 30 --db "$T/t5.db"; then
        check_grep "all T5 requests served" "$T/out" "^Successful requests: +300$"
    fi
fi
hs_run 2 "sarathi refuses T5" run --model t5-11b --cluster exegpt-a40x8 --policy sarathi --requests 5 --quiet \
    --db "$T/bad.db" &&
    check_grep "says encoder-decoder" "$T/err" "does not run encoder-decoder models" &&
    check_eq "no database left" "$(test -e "$T/bad.db" && echo yes || echo no)" no

# Impossible bound, unknown SLA form: exit 2, one line.
hs_run 2 "bound no schedule meets" plan "${common[@]}" --set slo.e2el_ms=1 &&
    check_grep "names slo.e2el_ms" "$T/err" "slo.e2el_ms"
hs_run 2 "bad sla option" plan "${common[@]}" --plan-opts sla=median &&
    check_grep "names the sla option" "$T/err" "^hetsim: plan_opts: sla"
check_eq "errors are one line" "$(wc -l < "$T/err")" 1

e2e_finish
