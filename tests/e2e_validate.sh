#!/usr/bin/env bash
# e2e_validate.sh - `hetsim validate` on a hand-made schedule and hand-made
# measurements, every figure checked against arithmetic done by hand:
#
#   step overhead 1 ms; request 0 (arrival 0, output 3), request 1 (arrival
#   0.5 ms, output 2)
#   it  predicted span   predicted compute  measured  |error|
#   0   0 -> 11 ms       10 ms              8 ms      25%
#   1   11 -> 16 ms       4 ms              5 ms      20%
#   2   16 -> 21 ms       4 ms              4 ms       0%
#   iteration error: median 20%, p90 24% (GSL quantile of 0, 20, 25), p99 24.9%
#   measured timeline (back to back, +1 ms overhead): ends 9, 15, 20 ms
#   TTFT: predicted 11, 15.5 -> p50 13.25; measured 9, 14.5 -> p50 11.75 (+12.77%)
#   TPOT: predicted 5, 5 -> 5; measured 5.5, 5 -> p50 5.25 (-4.76%)
#   E2E:  predicted 21, 20.5 -> 20.75; measured 20, 19.5 -> 19.75 (+5.06%)
set -u
source "$(dirname "$0")/fixtures/lib.sh"

cat >"$T/s.jsonl" <<'JSON'
{"type":"header","version":1,"replica":0,"model":"tiny-test","gpu":"a100-80g","perf_model":"roofline","tp":1,"pp":1,"bits":16,"kv_bits":16,"layers":2,"block_size":16,"kv_blocks":1000,"step_overhead_ns":1000000}
{"type":"request","replica":0,"id":0,"arrival_ns":0,"prompt":10,"output":3}
{"type":"iter","replica":0,"it":0,"start_ns":0,"end_ns":11000000,"preempted":[],"prefill":[[0,10,0]],"decode":[],"first":[0],"finished":[],"kv_blocks_used":1}
{"type":"request","replica":0,"id":1,"arrival_ns":500000,"prompt":5,"output":2}
{"type":"iter","replica":0,"it":1,"start_ns":11000000,"end_ns":16000000,"preempted":[],"prefill":[[1,5,0]],"decode":[[0,11]],"first":[1],"finished":[],"kv_blocks_used":2}
{"type":"iter","replica":0,"it":2,"start_ns":16000000,"end_ns":21000000,"preempted":[],"prefill":[],"decode":[[0,12],[1,6]],"first":[],"finished":[0,1],"kv_blocks_used":2}
JSON
cat >"$T/m.csv" <<'CSV'
# hetsim-exec replay: device=handmade, backend=cpu, model=tiny-test, replica=0, layers_run=2, scale=1, kv_blocks_capacity=900
it,measured_ns
0,8000000
1,5000000
2,4000000
CSV

hs_run 0 "a run to attach validations to" run --requests 5 --db "$T/v.db" --quiet
hs_run 0 "validate" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --db "$T/v.db"
cp "$T/out" "$T/report"
check_grep "iteration errors" "$T/report" 'median 20\.00%, p90 24\.00%, p99 24\.90%'
check_grep "TTFT p50" "$T/report" 'TTFT +p50 predicted +13\.250 ms measured +11\.750 ms \(\+12\.77%\)'
check_grep "TPOT p50" "$T/report" 'TPOT +p50 predicted +5\.000 ms measured +5\.250 ms \(-4\.76%\)'
check_grep "E2E p50" "$T/report" 'E2E +p50 predicted +20\.750 ms measured +19\.750 ms \(\+5\.06%\)'
check_grep "KV capacity" "$T/report" 'KV blocks: memory model 1000, executor 900 \(\+11\.11%\)'
# by kind: it 0 prefill alone (10 vs 8 ms: +25%), it 1 prefill + decode
# (4 vs 5: -20%), it 2 decode at batch 2 (4 vs 4: 0%); no other kind listed
check_grep "prefill alone" "$T/report" '^  prefill only +1 +25\.00% +\+25\.00%$'
check_grep "prefill with decodes" "$T/report" '^  prefill \+ decode +1 +20\.00% +-20\.00%$'
check_grep "decode by batch" "$T/report" '^  decode, batch 2-3 +1 +0\.00% +\+0\.00%$'
check_eq "only the kinds present" "$(grep -c '^  \(prefill\|decode\)' "$T/report")" "3"
# timeline: measured ends 9, 15, 20 against 11, 16, 21
check_grep "timeline drift" "$T/report" 'iteration ends: median -1\.000 ms, from -2\.000 to -1\.000 ms'
rows=$(q "$T/v.db" "select group_concat(iteration||':'||predicted_ns||':'||measured_ns, ' ') from (select * from validations where run = 1 and device = 'handmade' order by iteration)")
check_eq "validations rows" "$rows" "0:10000000:8000000 1:4000000:5000000 2:4000000:4000000"
# validating again replaces, never duplicates
hs_run 0 "validate twice" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --db "$T/v.db"
check_eq "no duplicate rows" "$(q "$T/v.db" "select count(*) from validations")" "3"

# malformed inputs: one line naming path:line, exit 2
printf 'it,measured_ns\n0,8000000\n1,abc\n' >"$T/bad.csv"
hs_run 2 "malformed measurement" validate --schedule "$T/s.jsonl" --measured "$T/bad.csv" --db "$T/v.db"
check_grep "names the line" "$T/err" 'bad\.csv:3:'
printf 'it,measured_ns\n0,8000000\n' >"$T/short.csv"
hs_run 2 "missing iterations" validate --schedule "$T/s.jsonl" --measured "$T/short.csv" --db "$T/v.db"
check_grep "says how many" "$T/err" '1 measured iterations, the schedule has 3'
sed 's/"end_ns":21000000/"end_ns":"x"/' "$T/s.jsonl" >"$T/bad.jsonl"
hs_run 2 "malformed schedule" validate --schedule "$T/bad.jsonl" --measured "$T/m.csv" --db "$T/v.db"
check_grep "names the schedule line" "$T/err" 'bad\.jsonl:6: end_ns'
# A back-to-back iteration that prefills a request which arrived during its
# predecessor cannot start, on the faster measured timeline, before that
# arrival: request 1 arrives at 50 ms, iteration 0 measures 10 ms, so
# iteration 1 runs 50-60 ms; TTFTs measured 10 and 10 ms (never negative).
cat >"$T/s2.jsonl" <<'JSON'
{"type":"header","version":1,"replica":0,"model":"tiny-test","gpu":"a100-80g","perf_model":"roofline","tp":1,"pp":1,"bits":16,"kv_bits":16,"layers":2,"block_size":16,"kv_blocks":1000,"step_overhead_ns":0}
{"type":"request","replica":0,"id":0,"arrival_ns":0,"prompt":10,"output":2}
{"type":"iter","replica":0,"it":0,"start_ns":0,"end_ns":100000000,"preempted":[],"prefill":[[0,10,0,10]],"decode":[],"first":[0],"finished":[],"kv_blocks_used":1}
{"type":"request","replica":0,"id":1,"arrival_ns":50000000,"prompt":10,"output":1}
{"type":"iter","replica":0,"it":1,"start_ns":100000000,"end_ns":200000000,"preempted":[],"prefill":[[1,10,0]],"decode":[[0,11]],"first":[1],"finished":[0,1],"kv_blocks_used":2}
JSON
printf '# hetsim-exec replay: device=hand2\nit,measured_ns\n0,10000000\n1,10000000\n' >"$T/m2.csv"
hs_run 0 "validate: arrival inside a back-to-back run" validate --schedule "$T/s2.jsonl" --measured "$T/m2.csv" --db "$T/v.db"
check_grep "measured TTFT waits for the arrival" "$T/out" 'TTFT +p50 predicted +125\.000 ms measured +10\.000 ms'
check_grep "measured E2E" "$T/out" 'E2E +p50 predicted +175\.000 ms measured +35\.000 ms'
hs_run 2 "non-numeric replica" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --db "$T/v.db" --replica abc
hs_run 2 "absent replica" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --db "$T/v.db" --replica 3
# --reprice: the same iterations priced again by a latency model, here the
# unit-test table (tiny-test on a100-80g).  The decode iteration (two
# sequences, 18 context tokens) must cost what `perf step` gives a decode
# step of 2 x 9 tokens (dense + head + attention: the stage time), so its
# signed error is that against the 4 ms measured; nothing is stored.
before=$(q "$T/v.db" "select count(*) from validations")
hs_run 0 "reprice on the unit-test table" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" \
    --reprice dgx-a100 --set perf.model=table --set "perf.tables=$FIX/perf/tables"
cp "$T/out" "$T/reprice"
check_grep "names the model and its source" "$T/reprice" '^repriced tiny-test, TP 1, 16-bit on dgx-a100: latency model table; a100-80g: measured table$'
check_eq "one line per kind present" "$(grep -c '^  \(prefill\|decode\)' "$T/reprice")" "3"
# requests on the schedule's batches: the measured side is the timeline
# worked out at the top (the repriced one runs on the model's times)
check_grep "reprice: request metrics follow" "$T/reprice" "^requests on the schedule's batches, repriced against measured:$"
check_grep "reprice: measured TTFT as by hand" "$T/reprice" '^TTFT +p50 predicted +[0-9.]+ ms measured +11\.750 ms .*; 2 requests$'
check_grep "reprice: measured TPOT as by hand" "$T/reprice" '^TPOT +p50 predicted +[0-9.]+ ms measured +5\.250 ms'
check_grep "reprice: measured E2E as by hand" "$T/reprice" '^E2E +p50 predicted +[0-9.]+ ms measured +19\.750 ms'
hs_run 0 "perf step for the same decode" perf step --model tiny-test --cluster dgx-a100 --tp 1 --batch 2 --context 9 \
    --set perf.model=table --set "perf.tables=$FIX/perf/tables"
want=$(awk '$1 == "decode" { printf "%.2f", (($4 + $5 + $6) / 4 - 1) * 100 }' "$T/out")
got=$(sed -n 's/^  decode, batch 2-3 .* \([-+][0-9.]*\)%$/\1/p' "$T/reprice")
check "decode error = perf step's stage time against 4 ms ($got% vs $want%)" \
    "$(python3 -c "import sys; print(int(abs(float(sys.argv[1] or 99) - float(sys.argv[2] or 0)) < 0.05))" "$got" "$want")" = 1
check_eq "reprice stores nothing" "$(q "$T/v.db" "select count(*) from validations")" "$before"
sed 's/"tp":1,/"tp":2,/' "$T/s.jsonl" >"$T/s-tp2.jsonl"
hs_run 2 "reprice of a TP-2 replica on one GPU" validate --schedule "$T/s-tp2.jsonl" --measured "$T/m.csv" \
    --reprice 1xh200 --set perf.model=roofline
check_grep "says it does not fit" "$T/err" 'TP 2, PP 1\) does not fit its 1 GPUs'
hs_run 2 "reprice on an unknown cluster" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --reprice no-such-cluster
check_grep "one line naming it" "$T/err" 'no-such-cluster'
hs_run 2 "reprice with a bad --set" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --reprice dgx-a100 --set gemm_eff=2
check_grep "expects perf.KEY=VALUE" "$T/err" 'expected perf\.KEY=VALUE'

e2e_finish
