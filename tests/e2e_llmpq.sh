#!/usr/bin/env bash
# e2e_llmpq.sh - `hetsim llmpq`: plan (ILP) on one GPU writes a deployment
# that `llmpq simulate` and `hetsim run` both accept; the three planners
# are registered; the omega tool writes a file the planner reads; bad
# input is one error line with exit code 2.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

if hs_run 0 "llmpq plan c1" llmpq plan --model opt-13b --cluster llmpq-c1 --s 128 --n 20 --out "$T/plan.json" --simulate; then
    check_grep "plan line" "$T/out" '^planner=llmpq model=opt-13b cluster=llmpq-c1 order=v100-32g:40 '
    check_grep "plan simulated" "$T/out" 'latency_s=[0-9.]+ throughput=[0-9.]+'
    check_grep "deployment has layer_bits" "$T/plan.json" '"layer_bits"'
    check_grep "deployment says where its FP16 times came from" "$T/plan.json" '"latency":[[:space:]]*"v100-32g: transferred from '
    lat=$(grep -o 'latency_s=[0-9.]*' "$T/out" | cut -d= -f2)
    if hs_run 0 "llmpq simulate" llmpq simulate --model opt-13b --cluster llmpq-c1 --plan "$T/plan.json" --s 128 --n 20; then
        check_eq "simulate replays the same latency" "$(grep -o 'latency_s=[0-9.]*' "$T/out" | cut -d= -f2)" "$lat"
    fi
    # a scaled plan is not LLM-PQ's pipeline: refused, naming the field
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["replicas"][0]["latency_scale"]=2; json.dump(d,open(sys.argv[2],"w"))' \
        "$T/plan.json" "$T/plan-scaled.json"
    if hs_run 2 "llmpq simulate refuses a scaled plan" llmpq simulate --model opt-13b --cluster llmpq-c1 --plan "$T/plan-scaled.json"; then
        check_grep "names the scale" "$T/err" 'plan-scaled\.json: replicas\[0\]\.latency_scale'
    fi
    # online trace on the same deployment (stage bits: each stage's most
    # common bit-width), FasterTransformer-style static batches
    if hs_run 0 "hetsim run replays the deployment" run --model opt-13b --cluster llmpq-c1 \
        --deployment "$T/plan.json" --policy static --set workload.max_requests=20 \
        --set workload.rate=2 --set workload.prompt.mean=128 --set workload.output.mean=20 \
        --db "$T/r.db"; then
        check_eq "all 20 requests served" "$(sqlite3 "$T/r.db" "select cast(value as int) from summary where metric='completed'" 2>/dev/null || echo '?')" "20"
    fi
    # the phase-aware micro-batching policy on the same deployment
    if hs_run 0 "pq policy" run --model opt-13b --cluster llmpq-c1 --deployment "$T/plan.json" \
        --policy pq --set engine.prefill_seqs=2 --set engine.max_num_seqs=8 \
        --set workload.max_requests=20 --set workload.rate=2 --set workload.prompt.mean=128 \
        --set workload.output.mean=20 --db "$T/r.db"; then
        check_eq "pq: all 20 requests served" "$(sqlite3 "$T/r.db" "select cast(value as int) from summary where metric='completed' order by run desc limit 1" 2>/dev/null || echo '?')" "20"
    fi
fi
# The offline batch in the main engine (pq policy, B = 32 requests at t = 0,
# prompts fixed at 512, 100 tokens each) agrees with the offline pipeline
# simulation within 10%.  LLM-PQ's cost model has no serving-engine host
# cost, so the engine runs without one here (perf.engine none).
# offline_batch NAME PLAN DB [--set ...]: runs the plan's batch (eta, xi from
# the last `llmpq plan` output) and leaves its duration in $eng.
offline_batch() {
    local name=$1 plan=$2 db=$3; shift 3
    eng=
    hs_run 0 "$name" run --deployment "$plan" --policy pq --set engine.prefill_seqs="$eta" \
        --set engine.max_num_seqs="$xi" --set workload.preset= --set workload.arrival=constant \
        --set workload.rate=1e9 --set workload.max_requests=32 --set workload.prompt.kind=fixed \
        --set workload.prompt.mean=512 --set workload.output.kind=fixed --set workload.output.mean=100 \
        --set perf.engine=none --db "$db" "$@" || return 1
    eng=$(grep -o 'Benchmark duration (s): *[0-9.]*' "$T/out" | grep -o '[0-9.]*$')
}
plan_figures() {
    des=$(grep -o 'latency_s=[0-9.]*' "$T/out" | cut -d= -f2)
    eta=$(grep -o 'eta=[0-9]*' "$T/out" | cut -d= -f2)
    xi=$(grep -o 'xi=[0-9]*' "$T/out" | cut -d= -f2)
}
# An FP16 plan (both FP16 on the calibrated model).
if hs_run 0 "fp16 plan c6" llmpq plan --model opt-13b --cluster llmpq-c6 --bits 16 --heuristic --out "$T/p16.json" --simulate; then
    plan_figures
    if offline_batch "offline batch in the engine" "$T/p16.json" "$T/o.db"; then
        check_num "engine ($eng s) within 10% of the pipeline simulation ($des s)" "$eng" "x > 0.9 * $des && x < 1.1 * $des"
    fi
fi
# A plan that is (mostly) INT8 (all 48 layers at LLM-PQ's budget, on a V100
# and three P100s): the deployment names LLM-PQ's kernels, so the engine
# prices its LLM.int8 layers as the plan did (with the engine's own
# weight-only kernels it ran in 67 s against the plan's 131 s).
if hs_run 0 "int8 plan c4" llmpq plan --model opt-30b --cluster llmpq-c4 --heuristic --out "$T/p8.json" --simulate; then
    check_grep "mostly INT8" "$T/out" 'bits16/8/4/3=[0-9]+/4[0-9]/0/0 '
    check_grep "deployment names LLM-PQ's kernels" "$T/p8.json" '"quant_kernels":[[:space:]]*"lptorch"'
    plan_figures
    if offline_batch "int8 offline batch in the engine" "$T/p8.json" "$T/o8.db"; then
        check_num "int8: engine ($eng s) within 10% of the pipeline simulation ($des s)" "$eng" "x > 0.9 * $des && x < 1.1 * $des"
        lpt=$eng
        # the command line wins over the deployment's kernels
        if offline_batch "int8 batch on the model's own kernels" "$T/p8.json" "$T/o8m.db" --set perf.quant_kernels=model; then
            check_num "weight-only kernels ($eng s) well under LLM.int8's ($lpt s)" "$eng" "x < 0.7 * $lpt"
        fi
    fi
fi
# A one-GPU plan of INT8 and INT4 layers: its emitted schedule carries the
# kernels and the per-layer widths, so validate --reprice prices it as the
# run did ("measured" = the schedule's own GPU times); without them it was
# 77% off.
if hs_run 0 "one-GPU mixed plan" llmpq plan --model opt-30b --cluster llmpq-c1 --heuristic --s 128 --n 20 --out "$T/p1.json"; then
    check_grep "INT8 and INT4 layers" "$T/out" 'bits16/8/4/3=0/[1-9][0-9]*/[1-9][0-9]*/0 '
    if hs_run 0 "serve it, emitting the schedule" run --deployment "$T/p1.json" --requests 30 --rate 1 \
        --db "$T/p1.db" --emit-schedule "$T/p1.jsonl" --quiet; then
        check_grep "header names the kernels and widths" "$T/p1.jsonl" '"quant_kernels":"lptorch","layer_bits":\[[0-9,]+\]'
        sched_gpu_times "$T/p1.jsonl" "$T/p1m.csv"
        if hs_run 0 "reprice it" validate --schedule "$T/p1.jsonl" --measured "$T/p1m.csv" --reprice llmpq-c1; then
            med=$(grep -o 'absolute error per iteration: median [0-9.]*' "$T/out" | grep -o '[0-9.]*$')
            check_num "repriced as run (median error $med%)" "$med" "x < 1"
        fi
    fi
fi
# The FP16 layer is the calibrated model's, and the plan says where it came
# from: the T4's measured OPT-30B table, the transfer for the V100; the
# datasheet roofline on request; a bad key is one line naming it.
if hs_run 0 "c3 plan, calibrated" llmpq plan --model opt-30b --cluster llmpq-c3 --heuristic --limit 2; then
    check_grep "trust line names the T4 table and the V100 transfer" "$T/out" \
        '^trust   t4: measured table; v100-32g: transferred from .*; attention and embedding on the roofline'
    cal=$(grep -o 'est_s=[0-9.]*' "$T/out" | cut -d= -f2)
    if hs_run 0 "c3 plan, roofline" llmpq plan --model opt-30b --cluster llmpq-c3 --heuristic --limit 2 --set perf.model=roofline; then
        check_grep "roofline trust line" "$T/out" '^trust   datasheet roofline \(perf.model roofline\)'
        check_num "the T4s' measured FP16 is slower than their roofline ($cal vs $(grep -o 'est_s=[0-9.]*' "$T/out" | cut -d= -f2) s)" \
            "$cal" "x > $(grep -o 'est_s=[0-9.]*' "$T/out" | cut -d= -f2)"
    fi
fi
hs_run 2 "bad perf key" llmpq plan --model opt-13b --cluster llmpq-c1 --set perf.nope=1 &&
    check_grep "names the key" "$T/err" 'nope'
if hs_run 0 "list planners" list planners; then
    for p in llmpq pipeedge uniform-pp; do check_grep "planner $p listed" "$T/out" "^$p "; done
fi
if hs_run 0 "omega default" llmpq omega --default --model opt-13b --out "$T/omega.json"; then
    hs_run 0 "plan with omega file" llmpq plan --model opt-13b --cluster llmpq-c1 --s 128 --n 20 --omega "$T/omega.json" --heuristic
fi
hs_run 2 "omega for another model" llmpq plan --model opt-30b --cluster llmpq-c3 --omega "$T/omega.json" --heuristic &&
    check_grep "omega error names the file" "$T/err" 'omega.json: omega: expected 48 rows'
hs_run 2 "bad planner" llmpq plan --model opt-13b --cluster llmpq-c1 --planner nope &&
    check_grep "names the option" "$T/err" '^hetsim: --planner'
hs_run 2 "bad bits" llmpq plan --model opt-13b --cluster llmpq-c1 --bits 16,5
# The memory budget is an input: at LLM-PQ's budget (95% of the memory CUDA
# reports, less 1,930 MiB and the estimator's temporaries) cluster 10
# (4 x V100-32G, OPT-66B) fits PipeEdge at INT8 on all 64 layers, as the
# authors' logged PipeEdge run on it ran, by 12 MiB on its fullest GPU
# (17 layers of 1,661 MiB and a 698 MiB decode step in 28,947 MiB); 30 MiB
# more reserve drops it to 4 bits, and all of each GPU fits INT8 again.
if hs_run 0 "c10 pipeedge at the default budget" llmpq plan --model opt-66b --cluster llmpq-c10 --planner pipeedge; then
    check_grep "c10: pipeedge at 8 bits" "$T/out" 'bits16/8/4/3=0/64/0/0'
fi
# Each layer counts in whole MiB, rounded up, as the authors' ILP's M: 14 MiB
# more reserve leaves 28,235 MiB for the 17 layers, which 17 x 1,660.57 MiB
# would fit and 17 x 1,661 does not.
if hs_run 0 "c10 pipeedge, 14 MiB more reserve" llmpq plan --model opt-66b --cluster llmpq-c10 --planner pipeedge --reserve-mib 1944; then
    check_grep "c10: layers rounded up to whole MiB, 4 bits" "$T/out" 'bits16/8/4/3=0/0/64/0'
fi
if hs_run 0 "c10 pipeedge, 30 MiB more reserve" llmpq plan --model opt-66b --cluster llmpq-c10 --planner pipeedge --reserve-mib 1960; then
    check_grep "c10: pipeedge at 4 bits" "$T/out" 'bits16/8/4/3=0/0/64/0'
fi
hs_run 0 "c10 pipeedge, 30 MiB more reserve, all of each GPU" llmpq plan --model opt-66b --cluster llmpq-c10 --planner pipeedge --reserve-mib 1960 --mem-frac 1 &&
    check_grep "c10: 100% (1.6 GiB more per GPU) fits 8 bits" "$T/out" 'bits16/8/4/3=0/64/0/0'
# Cluster 8 (4 x V100-32G then 2 x A800-80G, BLOOM-176B) sits on the same
# edge: INT8 fits PipeEdge by 15 MiB on its first GPU (a V100 holding the
# embeddings, in the cluster's order), so 20 MiB more reserve drops it to 4
# bits, where the authors' logged PipeEdge run was.
if hs_run 0 "c8 pipeedge at the default budget" llmpq plan --model bloom-176b --cluster llmpq-c8 --planner pipeedge; then
    check_grep "c8: pipeedge at 8 bits, a V100 first" "$T/out" 'order=v100-32g:4,.*bits16/8/4/3=0/70/0/0'
fi
if hs_run 0 "c8 pipeedge, 20 MiB more reserve" llmpq plan --model bloom-176b --cluster llmpq-c8 --planner pipeedge --reserve-mib 1950; then
    check_grep "c8: pipeedge at 4 bits" "$T/out" 'bits16/8/4/3=0/0/70/0'
fi
# Device orders: the authors' code keeps each group of identical GPUs
# whole (cluster 5: 4 T4 then 2 V100, or the V100s first), --all-orders
# takes all 15 distinct orders; eta is each divisor of xi = 6 (1, 2, 3, 6).
if hs_run 0 "c5 llmpq, groups whole" llmpq plan --model opt-66b --cluster llmpq-c5 --heuristic; then
    check_grep "c5: 2 orders x 4 prefill micro-batches" "$T/out" ' instances=8 '
    check_grep "c5: the V100s together" "$T/out" 'order=(v100-32g:[0-9]+,v100-32g:[0-9]+(,t4:[0-9]+){4}|(t4:[0-9]+,){4}v100-32g:[0-9]+,v100-32g:[0-9]+) '
fi
if hs_run 0 "c5 llmpq, all orders" llmpq plan --model opt-66b --cluster llmpq-c5 --heuristic --all-orders; then
    check_grep "c5: 15 orders x 4" "$T/out" ' instances=60 '
fi
hs_run 2 "bad reserve" llmpq plan --model opt-13b --cluster llmpq-c1 --reserve-mib -1 &&
    check_grep "reserve error names the flag" "$T/err" '^hetsim: --reserve-mib'
hs_run 2 "bad fraction" llmpq plan --model opt-13b --cluster llmpq-c1 --mem-frac 1.5 &&
    check_grep "fraction error names the flag" "$T/err" '^hetsim: --mem-frac'
hs_run 2 "no fit" llmpq plan --model bloom-176b --cluster llmpq-c1 --heuristic &&
    check_grep "no-fit line" "$T/err" 'does not fit on cluster llmpq-c1'
e2e_finish
