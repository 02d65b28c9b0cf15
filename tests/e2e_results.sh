#!/usr/bin/env bash
# e2e_results.sh - what a run leaves besides its rows (issue 20):
#   - a run replaying a deployment written by `hetsim plan` stores the
#     deployment's content (not its path) and the planner that made it;
#   - summary_wide, one row per run in vLLM benchmark_serving names, shows
#     the summary table's values; requests_ms is requests in milliseconds;
#   - --json-out writes those keys (and run, config, deployment) with the
#     same values, parsed back with python3's json;
#   - --emit-trace writes a Chrome trace: valid JSON, one complete event per
#     iteration the run counted, KV hand-overs paired, lanes named;
#   - bad output paths and values are one error line, exit 2, and leave no
#     database or half file; `plan` refuses the run-only outputs;
#   - hetsim-exec replay --progress prints its progress line (when built).
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# 1. a disaggregated deployment from a planner, replayed
dep=$T/dep.json
hs_run 0 "plan distserve" plan --planner distserve --model llama-2-70b --cluster hexgen2-homo-h100x8 \
    --plan-opts in=512,out=128,iters=10 --emit-deployment "$dep" --quiet
hs_run 0 "run the deployment with --json-out and --emit-trace" run --deployment "$dep" --router weighted \
    --requests 100 --rate 2 --db "$T/r.db" --json-out "$T/r.json" --emit-trace "$T/t.json" --quiet
db=$T/r.db
check_eq "runs.planner is the deployment's planner" "$(q "$db" "select planner from runs where id = 1")" "distserve"
check_eq "the config records it too" "$(q "$db" "select json_extract(config, '$.planner') from runs where id = 1")" "distserve"
check_eq "summary_wide shows it" "$(q "$db" "select planner from summary_wide where run = 1")" "distserve"
python3 - "$dep" "$db" >"$T/dep.cmp" 2>&1 <<'PY'
import json, sqlite3, sys
stored = sqlite3.connect(sys.argv[2]).execute("select deployment from runs where id = 1").fetchone()[0]
print("same" if json.loads(stored) == json.load(open(sys.argv[1])) else "differs: " + stored[:200])
PY
check_eq "runs.deployment is the deployment file's content" "$(cat "$T/dep.cmp")" "same"

# 2. summary_wide = summary, under the vLLM names
pairs="completed:completed duration:duration_s request_throughput:request_throughput
request_goodput:goodput output_throughput:output_token_throughput total_token_throughput:total_token_throughput
mean_ttft_ms:ttft_mean_ms median_ttft_ms:ttft_p50_ms p99_ttft_ms:ttft_p99_ms mean_tpot_ms:tpot_mean_ms
median_tpot_ms:tpot_p50_ms p99_tpot_ms:tpot_p99_ms mean_itl_ms:itl_mean_ms median_itl_ms:itl_p50_ms
p99_itl_ms:itl_p99_ms mean_e2el_ms:e2el_mean_ms median_e2el_ms:e2el_p50_ms p99_e2el_ms:e2el_p99_ms
num_prompts:arrivals iterations:iterations slo_attainment:slo_attainment"
for p in $pairs; do
    w=${p%%:*} s=${p#*:}
    check_eq "summary_wide.$w = summary $s" \
        "$(q "$db" "select w.$w = s.value from summary_wide w join summary s on s.run = w.run and s.metric = '$s'")" "1"
done
check_eq "one row per run" "$(q "$db" "select count(*) from summary_wide")" "1"
check_num "std_ttft_ms from the requests rows" "$(q "$db" "select std_ttft_ms from summary_wide")" 'x > 0'
check_eq "requests_ms is requests in ms" \
    "$(q "$db" "select count(*) from requests q join requests_ms m using (run, id) where m.e2el_ms is 1000 * q.e2e and m.ttft_ms is 1000 * q.ttft")" \
    "$(q "$db" "select count(*) from requests")"

# 3. the JSON result file
python3 - "$T/r.json" "$db" >"$T/json.out" 2>&1 <<'PY'
import json, sqlite3, sys
j = json.load(open(sys.argv[1]))
con = sqlite3.connect(sys.argv[2])
cur = con.execute("select * from summary_wide where run = 1")
row = cur.fetchone()
cols = [d[0] for d in cur.description]
bad = [c for c, v in zip(cols, row) if j.get(c, "absent") != v]
need = ["request_throughput", "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms",
        "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
        "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms", "request_goodput",
        "completed", "duration", "total_input_tokens", "total_output_tokens"]
missing = [k for k in need if not isinstance(j.get(k), (int, float))]
ok = (not bad and not missing and j["run"] == 1 and isinstance(j["config"], dict)
      and j["config"]["planner"] == "distserve" and j["deployment"]["planner"] == "distserve"
      and isinstance(j["completed"], int))
print("ok" if ok else "bad: differ %s missing %s" % (bad, missing))
PY
check_eq "--json-out has the view's keys and values" "$(cat "$T/json.out")" "ok"

# 4. the Chrome trace
python3 - "$T/t.json" "$db" >"$T/trace.out" 2>&1 <<'PY'
import json, sqlite3, sys
t = json.load(open(sys.argv[1]))
con = sqlite3.connect(sys.argv[2])
iters = int(con.execute("select value from summary where run = 1 and metric = 'iterations'").fetchone()[0])
nrep = con.execute("select count(*) from replicas where run = 1").fetchone()[0]
ev = t["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
b = {e["id"] for e in ev if e["ph"] == "b"}
e_ = {e["id"] for e in ev if e["ph"] == "e"}
names = [e for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
lanes = {}
overlap = 0
for e in x:
    k = (e["pid"], e["tid"])
    if e["ts"] < lanes.get(k, 0):
        overlap += 1
    lanes[k] = e["ts"] + e["dur"]
fields = all({"ts", "dur", "pid", "tid", "name", "args"} <= set(e) and "decode_seqs" in e["args"] for e in x)
print(len(x), iters, len(b) > 0 and b == e_, len(names) == nrep, overlap, fields)
PY
read -r nx niters paired named overlap fields <"$T/trace.out" || true
check_eq "one complete event per iteration" "$nx" "$niters"
check_eq "KV hand-overs begin and end" "$paired" "True"
check_eq "a named process per replica" "$named" "True"
check_eq "a lane's iterations do not overlap" "$overlap" "0"
check_eq "iteration events carry their batch" "$fields" "True"
[ "$nx" = "$niters" ] || cat "$T/trace.out"

# 5. bad outputs: one line, exit 2, nothing left behind
hs_run 2 "--json-out into a missing folder" run --requests 20 --db "$T/bad1.db" --json-out "$T/nodir/r.json" --quiet
check_grep "names the file" "$T/err" 'json_out: .*/nodir/r\.json: cannot create it: folder'
check "no database from it" ! -e "$T/bad1.db"
hs_run 2 "--emit-trace into a missing folder" run --requests 20 --db "$T/bad2.db" --emit-trace "$T/nodir/t.json" --quiet
check_grep "names the file" "$T/err" 'emit_trace: .*/nodir/t.json.tmp: cannot create'
check "no database from it" ! -e "$T/bad2.db"
hs_run 2 "--emit-trace-limit must be a count" run --requests 20 --db "$T/bad3.db" --emit-trace "$T/t3.json" \
    --emit-trace-limit many --quiet
check_grep "names the flag" "$T/err" '^hetsim: --emit-trace-limit: "many" is not a count'
check "no trace from it" ! -e "$T/t3.json"
hs_run 2 "plan refuses --json-out" plan --json-out "$T/p.json" --quiet
check_grep "says why" "$T/err" 'hetsim plan runs nothing'
# a run that fails mid-way (bad trace line) leaves neither file
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\nbroken\n' >"$T/bad.csv"
hs_run 2 "a trace that breaks mid-run" run --trace "$T/bad.csv" --db "$T/bad4.db" --json-out "$T/b4.json" \
    --emit-trace "$T/b4t.json" --quiet
check "no JSON result" ! -e "$T/b4.json"
check "no trace nor its temporary" "$(ls "$T" | grep -c '^b4')" = 0

# 6. --emit-trace-limit cuts and says so
hs_run 0 "--emit-trace-limit 50" run --requests 60 --db "$T/l.db" --emit-trace "$T/l.json" --emit-trace-limit 50 --quiet
check_grep "notes the cut" "$T/err" 'holds the first 50 iterations'
check_eq "50 iterations written" "$(python3 -c 'import json,sys; print(sum(e["ph"] == "X" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$T/l.json")" "50"

# 7. hetsim-exec replay --progress (CPU backend)
EXEC="$HS_BIN/exec/hetsim-exec"
if [ -x "$EXEC" ]; then
    hs_run 0 "a tiny schedule" run --model tiny-test --cluster dgx-a100 --tp 1 --requests 12 --rate 4 \
        --set engine.max_model_len=512 --set workload.prompt.max=200 --set workload.output.max=20 \
        --db "$T/s.db" --emit-schedule "$T/s.jsonl" --quiet
    n=$(grep -c '"type":"iter"' "$T/s.jsonl")
    "$EXEC" replay "$T/s.jsonl" --backend cpu --progress --quiet --out "$T/m.csv" 2>"$T/rerr" </dev/null
    check_eq "replay exits 0" "$?" "0"
    check_grep "progress reaches every iteration" "$T/rerr" "replay: [0-9.]+ s, $n/$n iterations \(100\.0%\), ETA"
    "$EXEC" replay "$T/s.jsonl" --backend cpu --quiet --out "$T/m2.csv" 2>"$T/rerr2" </dev/null
    check "no progress off a terminal unless asked" ! -s "$T/rerr2"
else
    echo "skip: $EXEC not built (replay progress)"
fi
e2e_finish
