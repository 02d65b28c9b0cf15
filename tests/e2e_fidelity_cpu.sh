#!/usr/bin/env bash
# e2e_fidelity_cpu.sh - the whole fidelity loop on the CPU backend, as CI
# can run it: profile -> simulate with the measured tables -> emit the
# schedule -> replay it on the executor -> validate.  It asserts that every
# stage completes, that the simulator used the measured table, and that the
# validations table is complete (one row per emitted iteration); the error
# arithmetic itself is checked on a hand-made case in e2e_validate.sh.
set -u
source "$(dirname "$0")/fixtures/lib.sh"
EXEC="$HS_BIN/exec/hetsim-exec"
if [ ! -x "$EXEC" ]; then echo "SKIP: $EXEC not built"; exit 77; fi

# 1. profile tiny-test on the CPU
"$EXEC" profile --model tiny-test --tp 1 --backend cpu --quick --out "$T/prof" >"$T/out" 2>"$T/err"
check_eq "profile exits 0" "$?" "0"
gpu=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpu"])' "$T/prof/meta.json")
# the memory the executor found usable, so both sides size the KV cache alike
mem=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mem_usable_bytes"] / 2**30)' "$T/prof/meta.json")
check "profile names its device" -n "$gpu"
mkdir -p "$T/tables/$gpu"
mv "$T/prof" "$T/tables/$gpu/tiny-test"

# 2. a one-device "cluster" of that CPU (datasheet figures unused by the table model
#    except memory, which is the executor's usable memory)
cat >"$T/$gpu.json" <<JSON
{"name": "$gpu", "display": "CPU profiled by hetsim-exec", "fp16_tflops": 0.1, "bf16": false,
 "int8_tops": 0, "mem_gib": $mem, "mem_bw_gbs": 20, "nvlink_gbs": 0, "pcie_gbs": 1, "tdp_w": 100,
 "price_per_hour": 0.1, "price_source": "test fixture"}
JSON
cat >"$T/cpu1.json" <<JSON
{"name": "cpu1", "description": "one CPU", "nodes": [{"name": "n0", "gpu": "$T/$gpu.json", "count": 1}]}
JSON

# 3. simulate with the measured table and emit the schedule
hs_run 0 "simulate on the measured table" run --model tiny-test --cluster "$T/cpu1.json" --tp 1 \
    --set perf.model=table --set "perf.tables=$T/tables" --set perf.step_overhead_us=0 \
    --set engine.max_model_len=512 --set engine.max_num_seqs=16 --set engine.gpu_mem_util=1 \
    --set workload.prompt.max=300 --set workload.output.max=40 \
    --requests 24 --rate 4 --db "$T/f.db" --emit-schedule "$T/s.jsonl"
check_eq "replica used the table" "$(q "$T/f.db" "select perf_model from replicas where run = 1")" "table"
iters=$(grep -c '"type":"iter"' "$T/s.jsonl")
check_num "schedule has iterations" "$iters" 'x > 10'

# 4. replay on the CPU executor
"$EXEC" replay "$T/s.jsonl" --backend cpu --out "$T/m.csv" >"$T/out" 2>"$T/err"
rc=$?
check_eq "replay exits 0" "$rc" "0"
[ "$rc" = 0 ] || cat "$T/err"
check_eq "one measurement per iteration" "$(grep -c '^[0-9]' "$T/m.csv")" "$iters"

# 5. validate
hs_run 0 "validate" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --db "$T/f.db"
cat "$T/out"
check_grep "iteration error reported" "$T/out" 'absolute error per iteration: median [0-9.]+%, p90 [0-9.]+%, p99 [0-9.]+%'
check_grep "TTFT compared" "$T/out" '^TTFT +p50 predicted'
check_grep "KV compared" "$T/out" '^KV blocks: memory model [0-9]+, executor [0-9]+'
kv=$(sed -n 's/^KV blocks: memory model [0-9]*, executor [0-9]* (\(.*\)%)$/\1/p' "$T/out")
check_num "KV capacity within 5% of the executor's" "$kv" 'x < 5 && x > -5'
check_eq "validations complete" "$(q "$T/f.db" "select count(*) from validations where run = 1")" "$iters"
check_eq "no empty measurement" "$(q "$T/f.db" "select count(*) from validations where measured_ns <= 0 or predicted_ns <= 0")" "0"
e2e_finish
