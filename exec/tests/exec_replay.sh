#!/usr/bin/env bash
# exec_replay.sh - `hetsim-exec replay` on the CPU backend with tiny-test:
# a hand-written schedule (chunked prefill, decodes, a preemption and its
# recompute, finishes, a second replica) gives one positive row per
# iteration and KV books (--check) equal to the ceil(tokens / block_size)
# sums worked out below, at block sizes 16 and 32; --replica, --layers,
# --repeats and --out; a generated 300-iteration schedule runs in seconds;
# malformed files and impossible requests give one line and exit code 2.
# --clocks FILE against a stand-in NVML library (optional second argument).
# usage: exec_replay.sh PATH/TO/hetsim-exec [PATH/TO/fake libnvidia-ml]
set -u
bin=${1:?usage: exec_replay.sh hetsim-exec [fake-nvml.so]}
fake_nvml=${2:-}
. "$(dirname "$0")/lib.sh"

# check_csv NAME FILE ROWS LAYERS_RUN SCALE REPLICA [PAD]: the comment line,
# the header, ROWS rows numbered 0.. with positive times.
check_csv() {
    local name=$1 f=$2 rows=$3 k=$4 scale=$5 replica=$6 pad=${7:-1}
    head -1 "$f" | grep -qE "^# hetsim-exec replay: device=cpu-[a-z0-9-]+, backend=cpu, model=tiny-test, replica=$replica, layers_run=$k, scale=$scale, pad_tokens=$pad, kv_blocks_capacity=[1-9][0-9]*$" ||
        fail "$name: comment line: $(head -1 "$f")"
    [ "$(sed -n 2p "$f")" = "it,measured_ns" ] || fail "$name: header: $(sed -n 2p "$f")"
    [ "$(($(wc -l <"$f") - 2))" -eq "$rows" ] || fail "$name: $(($(wc -l <"$f") - 2)) rows, expected $rows"
    awk -F, 'NR > 2 && ($1 != NR - 3 || !($2 > 0) || NF != 2) { bad++ } END { exit bad > 0 }' "$f" ||
        fail "$name: a row is out of order or not positive"
}

hdr() {   # hdr REPLICA TP BITS BLOCK_SIZE MODEL
    echo "{\"type\":\"header\",\"version\":1,\"replica\":$1,\"model\":\"${5:-tiny-test}\",\"gpu\":\"a100-80g\",\"perf_model\":\"roofline\",\"tp\":$2,\"pp\":1,\"bits\":$3,\"kv_bits\":16,\"layers\":2,\"block_size\":$4,\"kv_blocks\":64,\"step_overhead_ns\":300000}"
}
req() { echo "{\"type\":\"request\",\"replica\":$1,\"id\":$2,\"arrival_ns\":0,\"prompt\":$3,\"output\":$4}"; }
iter() {  # iter REPLICA IT PREEMPTED PREFILL DECODE FIRST FINISHED KV_BLOCKS_USED
    echo "{\"type\":\"iter\",\"replica\":$1,\"it\":$2,\"start_ns\":$(($2 * 1000)),\"end_ns\":$(($2 * 1000 + 1000)),\"preempted\":[$3],\"prefill\":[$4],\"decode\":[$5],\"first\":[$6],\"finished\":[$7],\"kv_blocks_used\":$8}"
}

# The hand-written schedule of replica 0 (tiny-test, block size BS), with
# replica 1's records interleaved.  Requests: 1 (prompt 40, output 3),
# 2 (prompt 20, output 5), 3 (prompt 16, output 2).
#   it 0  prefill 1: 32 of 40; 2: 20 of 20 (samples)              tokens 52
#   it 1  decode 2 at ctx 21; prefill 1: 8 after 32 (samples), 3: 16 tokens 25
#   it 2  decode 1, 2, 3 at 41, 22, 17; 3 finishes                 tokens 3
#   it 3  2 preempted (generated 3: recompute 23); decode 1 at 42; 1 finishes
#   it 4  prefill 2: 16 of 23 (no sample)                          tokens 16
#   it 5  prefill 2: 7 after 16 (samples)                          tokens 7
#   it 6  decode 2 at 24; 2 finishes
schedule() {  # schedule BS
    hdr 0 1 16 "$1"
    hdr 1 2 8 "$1"
    req 0 1 40 3
    req 0 2 20 5
    req 1 9 30 2
    iter 0 0 "" "[1,32,0],[2,20,0]" "" "2" "" 5
    iter 1 0 "" "[9,30,0]" "" "9" "" 2
    req 0 3 16 2
    iter 0 1 "" "[1,8,32],[3,16,0]" "[2,21]" "1,3" "" 6
    iter 1 1 "" "" "[9,31]" "" "9" 2
    iter 0 2 "" "" "[1,41],[2,22],[3,17]" "" "3" 7
    iter 0 3 "2" "" "[1,42]" "" "1" 3
    iter 0 4 "" "[2,16,0]" "" "" "" 2
    iter 0 5 "" "[2,7,16]" "" "" "" 2
    iter 0 6 "" "" "[2,24]" "" "2" 2
}
schedule 16 >"$tmp/s16.jsonl"
schedule 32 >"$tmp/s32.jsonl"

# Expected books: "it tokens samples decode prefill blocks after", blocks
# = sum of ceil(tokens held / block size) during the iteration, after =
# once the finished requests are released.
#   block size 16: it 0  1:32->2, 2:20->2            = 4
#                  it 1  1:40->3, 2:21->2, 3:16->1    = 6
#                  it 2  1:41->3, 2:22->2, 3:17->2    = 7, 3 released -> 5
#                  it 3  2 dropped; 1:42->3           = 3, 1 released -> 0
#                  it 4  2:16->1; it 5 2:23->2; it 6 2:24->2, released -> 0
cat >"$tmp/want16" <<'W'
0 52 1 0 2 4 4
1 25 3 1 2 6 6
2 3 3 3 0 7 5
3 1 1 1 0 3 0
4 16 0 0 1 1 1
5 7 1 0 1 2 2
6 1 1 1 0 2 0
end 0 7 7
W
#   block size 32: it 0  1:32->1, 2:20->1 = 2; it 1  1:40->2, 2:21->1, 3:16->1 = 4;
#                  it 2  2 + 1 + 1 = 4 -> 3; it 3  1:42->2 -> 0; it 4..6  1 each
cat >"$tmp/want32" <<'W'
0 52 1 0 2 2 2
1 25 3 1 2 4 4
2 3 3 3 0 4 3
3 1 1 1 0 2 0
4 16 0 0 1 1 1
5 7 1 0 1 1 1
6 1 1 1 0 1 0
end 0 4 7
W

books() {   # books STDERR_FILE: the check lines as "it tokens samples decode prefill blocks after"
    sed -n 's/^check it=\([0-9]*\) tokens=\([0-9]*\) samples=\([0-9]*\) decode=\([0-9]*\) prefill=\([0-9]*\) blocks=\([0-9]*\) sched_blocks=[0-9]* after=\([0-9]*\)$/\1 \2 \3 \4 \5 \6 \7/p;
            s/^check end blocks=\([0-9]*\) peak=\([0-9]*\) pool=\([0-9]*\)$/end \1 \2 \3/p' "$1"
}

for bs in 16 32; do
    if "$bin" replay "$tmp/s$bs.jsonl" --backend cpu --check --out "$tmp/m$bs.csv" >"$tmp/out" 2>"$tmp/err"; then
        check_csv "block size $bs" "$tmp/m$bs.csv" 7 2 2/2 0
        books "$tmp/err" >"$tmp/got$bs"
        if diff "$tmp/want$bs" "$tmp/got$bs" >"$tmp/diff"; then
            echo "ok: block size $bs: KV books as computed by hand"
        else
            fail "block size $bs: KV books differ (want / got): $(cat "$tmp/diff")"
        fi
        [ -s "$tmp/out" ] && fail "block size $bs: --out given but stdout not empty"
        ls "$tmp" | grep -q '\.tmp$' && fail "block size $bs: temporary left behind"
    else
        fail "replay block size $bs: $(cat "$tmp/err")"
    fi
done
cat "$tmp/m16.csv"

# stdout, --replica, --layers, --repeats.
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --replica 1 --quiet >"$tmp/r1.csv" 2>"$tmp/err"; then
    check_csv "--replica 1" "$tmp/r1.csv" 2 2 2/2 1
    [ -s "$tmp/err" ] && fail "--quiet: stderr not empty: $(cat "$tmp/err")"
else
    fail "--replica 1: $(cat "$tmp/err")"
fi
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --layers 1 --repeats 3 --quiet >"$tmp/l1.csv" 2>"$tmp/err"; then
    check_csv "--layers 1 --repeats 3" "$tmp/l1.csv" 7 1 2/1 0
else
    fail "--layers 1: $(cat "$tmp/err")"
fi
# --pad-tokens: the GEMMs on the rows rounded up (steps of 52, 25, 3, 16
# and 7 tokens run 56, 32, 8, 16 and 8 rows); the buffers hold the padded
# rows (the ASan build checks that no kernel reads past them).
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --pad-tokens 8 --repeats 2 --quiet >"$tmp/p8.csv" 2>"$tmp/err"; then
    check_csv "--pad-tokens 8" "$tmp/p8.csv" 7 2 2/2 0 8
else
    fail "--pad-tokens 8: $(cat "$tmp/err")"
fi
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --pad-tokens 64 --quiet >"$tmp/p64.csv" 2>"$tmp/err"; then
    check_csv "--pad-tokens 64 (wider than every step)" "$tmp/p64.csv" 7 2 2/2 0 64
else
    fail "--pad-tokens 64: $(cat "$tmp/err")"
fi
echo "ok: --pad-tokens"
hdr 0 1 16 16 >"$tmp/empty.jsonl"
if "$bin" replay "$tmp/empty.jsonl" --backend cpu --quiet >"$tmp/e.csv" 2>"$tmp/err"; then
    check_csv "no iterations" "$tmp/e.csv" 0 2 2/2 0
else
    fail "no iterations: $(cat "$tmp/err")"
fi
echo "ok: --replica, --layers, --repeats, stdout, a replica without iterations"

# --clocks FILE: a row per iteration, the measured CSV's iteration numbers,
# the stand-in's readings over each iteration's timed runs.
if [ -n "$fake_nvml" ]; then
    if HS_NVML_LIB=$fake_nvml "$bin" replay "$tmp/s16.jsonl" --backend cpu --repeats 2 --quiet \
            --clocks "$tmp/clk.csv" --out "$tmp/mc.csv" 2>"$tmp/err"; then
        [ "$(head -1 "$tmp/clk.csv")" = "it,samples,sm_mhz_mean,sm_mhz_min,sm_mhz_max,power_w_mean,power_w_max,reasons" ] ||
            fail "--clocks: header: $(head -1 "$tmp/clk.csv")"
        diff <(tail -n +3 "$tmp/mc.csv" | cut -d, -f1) <(tail -n +2 "$tmp/clk.csv" | cut -d, -f1) >/dev/null ||
            fail "--clocks: iterations differ from the measured CSV's"
        awk -F, 'NR > 1 && !($2 >= 2 && $3 == 1980 && $6 == 700 && $8 == "sw_power_cap") { bad++ } END { exit bad > 0 }' \
            "$tmp/clk.csv" || fail "--clocks: a row without the stand-in's readings"
        [ -e "$tmp/clk.csv.tmp" ] && fail "--clocks: temporary left behind"
        echo "ok: replay --clocks, $(($(wc -l <"$tmp/clk.csv") - 1)) iterations"
    else
        fail "replay --clocks: $(cat "$tmp/err")"
    fi
    # refused before the replay runs: nothing measured is lost to a bad path
    export HS_NVML_LIB=$fake_nvml
    expect_error "--clocks not writable" "--clocks /nonexistent/c\.csv: cannot write" \
        replay "$tmp/s16.jsonl" --backend cpu --quiet --clocks /nonexistent/c.csv --out "$tmp/m9.csv"
    [ -e "$tmp/m9.csv" ] && fail "--clocks not writable: --out written anyway"
    expect_error "--clocks = --out" "--clocks .*: the same file as --out" \
        replay "$tmp/s16.jsonl" --backend cpu --quiet --clocks "$tmp/same.csv" --out "$tmp/same.csv"
    unset HS_NVML_LIB
fi

# --stamps FILE (no monitor needed): a row per iteration, the measured CSV's
# iteration numbers, host start before end, each iteration after the last.
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --repeats 2 --quiet --stamps "$tmp/st.csv" \
        --out "$tmp/ms.csv" 2>"$tmp/err"; then
    [ "$(head -1 "$tmp/st.csv")" = "it,start_ns,end_ns" ] || fail "--stamps: header: $(head -1 "$tmp/st.csv")"
    diff <(tail -n +3 "$tmp/ms.csv" | cut -d, -f1) <(tail -n +2 "$tmp/st.csv" | cut -d, -f1) >/dev/null ||
        fail "--stamps: iterations differ from the measured CSV's"
    awk -F, 'NR > 1 && !($2 > 0 && $3 > $2 && $2 >= last) { bad++ } NR > 1 { last = $3 } END { exit bad > 0 }' \
        "$tmp/st.csv" || fail "--stamps: a row out of order: $(head -5 "$tmp/st.csv")"
    [ -e "$tmp/st.csv.tmp" ] && fail "--stamps: temporary left behind"
    echo "ok: replay --stamps, $(($(wc -l <"$tmp/st.csv") - 1)) iterations"
else
    fail "replay --stamps: $(cat "$tmp/err")"
fi
# --op-times FILE: every iteration run once more, the end of each op
# marked: the ops of a transformer step (prefill attention where the
# iteration prefills, decode attention where it decodes), times not
# negative, summing over the run to the order of the measured times (a
# loaded machine times the two runs differently).
if "$bin" replay "$tmp/s16.jsonl" --backend cpu --quiet --repeats 3 --op-times "$tmp/ops.csv" --out "$tmp/mo.csv" \
        2>"$tmp/err"; then
    [ "$(head -1 "$tmp/ops.csv")" = "it,op,time_ns" ] || fail "--op-times: header: $(head -1 "$tmp/ops.csv")"
    diff <(tail -n +3 "$tmp/mo.csv" | cut -d, -f1) <(tail -n +2 "$tmp/ops.csv" | cut -d, -f1 | uniq) >/dev/null ||
        fail "--op-times: iterations differ from the measured CSV's"
    awk -F, 'NR > 1 && !($2 ~ /^(emb|norm|qkv|rope|kv_write|attn_decode|attn_prefill|attn_out|add|mlp_up|act|mlp_down|head)$/ && $3 >= 0) { bad++ }
             END { exit bad > 0 }' "$tmp/ops.csv" || fail "--op-times: an unknown op or a negative time"
    # every iteration has the dense ops; attention by what the schedule says it ran
    python3 - "$tmp/s16.jsonl" "$tmp/ops.csv" <<'PY' || fail "--op-times: an iteration's ops are not the ones it ran"
import csv, json, sys
its = {}
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j["type"] == "iter" and j["replica"] == 0:
        its[j["it"]] = j
ops = {}
for r in csv.DictReader(open(sys.argv[2])):
    ops.setdefault(int(r["it"]), set()).add(r["op"])
base = {"emb", "norm", "qkv", "kv_write", "attn_out", "add", "mlp_up", "act", "mlp_down"}
for i, it in its.items():
    want = set(base) | ({"attn_decode"} if it["decode"] else set()) | ({"attn_prefill"} if it["prefill"] else set())
    got = ops.get(i, set()) - {"rope", "head"}
    if got != want:
        sys.exit(f"iteration {i}: {sorted(got)}, want {sorted(want)}")
PY
    # over the run, the ops against the measured times: same order of magnitude
    awk -F, 'FNR == 1 { f++ } f == 1 && FNR > 2 { m += $2 } f == 2 && FNR > 1 { s += $3 }
             END { exit !(s > 0.25 * m && s < 4 * m) }' \
        "$tmp/mo.csv" "$tmp/ops.csv" || fail "--op-times: the ops' sum far from the measured times"
    echo "ok: replay --op-times, $(($(wc -l <"$tmp/ops.csv") - 1)) op rows"
else
    fail "replay --op-times: $(cat "$tmp/err")"
fi
expect_error "--op-times = --stamps" "--op-times .*: the same file as --stamps" \
    replay "$tmp/s16.jsonl" --backend cpu --quiet --stamps "$tmp/so.csv" --op-times "$tmp/so.csv" --out "$tmp/m6.csv"
[ -e "$tmp/m6.csv" ] && fail "--op-times = --stamps: --out written anyway"
expect_error "--stamps not writable" "--stamps /nonexistent/s\.csv: cannot write" \
    replay "$tmp/s16.jsonl" --backend cpu --quiet --stamps /nonexistent/s.csv --out "$tmp/m8.csv"
[ -e "$tmp/m8.csv" ] && fail "--stamps not writable: --out written anyway"
expect_error "--stamps = --out" "--stamps .*: the same file as --out" \
    replay "$tmp/s16.jsonl" --backend cpu --quiet --stamps "$tmp/same.csv" --out "$tmp/same.csv"
if [ -n "$fake_nvml" ]; then   # without a monitor --clocks warns first
    export HS_NVML_LIB=$fake_nvml
    expect_error "--stamps = --clocks" "--stamps .*: the same file as --clocks" \
        replay "$tmp/s16.jsonl" --backend cpu --quiet --stamps "$tmp/sc.csv" --clocks "$tmp/sc.csv" --out "$tmp/m7.csv"
    [ -e "$tmp/m7.csv" ] && fail "--stamps = --clocks: --out written anyway"
    unset HS_NVML_LIB
fi

# A generated schedule: 300 iterations, 8 requests at a time, whole-prompt
# prefills of 48 tokens joining a decode batch, outputs of 20..59 tokens.
awk -v N=300 -v P=48 '
function blocks(t) { return int((t + 15) / 16) }
BEGIN {
    print "{\"type\":\"header\",\"version\":1,\"replica\":0,\"model\":\"tiny-test\",\"gpu\":\"a100-80g\",\"perf_model\":\"roofline\",\"tp\":1,\"pp\":1,\"bits\":16,\"kv_bits\":16,\"layers\":2,\"block_size\":16,\"kv_blocks\":4096,\"step_overhead_ns\":300000}"
    next_id = 0; nact = 0
    for (it = 0; it < N; it++) {
        while (nact < 8) {
            id = next_id++; out[id] = 20 + (id * 7) % 40
            printf "{\"type\":\"request\",\"replica\":0,\"id\":%d,\"arrival_ns\":%d,\"prompt\":%d,\"output\":%d}\n", id, it * 1000, P, out[id]
            act[nact++] = id; ctx[id] = 0; gen[id] = 0
        }
        pre = ""; dec = ""; first = ""; fin = ""; used = 0; keep = 0
        for (k = 0; k < nact; k++) {
            id = act[k]
            if (ctx[id] == 0) { pre = pre (pre == "" ? "" : ",") "[" id "," P ",0]"; ctx[id] = P; first = first (first == "" ? "" : ",") id }
            else { ctx[id]++; dec = dec (dec == "" ? "" : ",") "[" id "," ctx[id] "]" }
            gen[id]++; used += blocks(ctx[id])
            if (gen[id] >= out[id]) fin = fin (fin == "" ? "" : ",") id; else act2[keep++] = id
        }
        for (k = 0; k < keep; k++) act[k] = act2[k]
        nact = keep
        printf "{\"type\":\"iter\",\"replica\":0,\"it\":%d,\"start_ns\":%d,\"end_ns\":%d,\"preempted\":[],\"prefill\":[%s],\"decode\":[%s],\"first\":[%s],\"finished\":[%s],\"kv_blocks_used\":%d}\n", it, it * 1000, it * 1000 + 1000, pre, dec, first, fin, used
    }
}' >"$tmp/big.jsonl"
start=$(date +%s.%N)
if "$bin" replay "$tmp/big.jsonl" --backend cpu --check --out "$tmp/big.csv" >"$tmp/out" 2>"$tmp/err"; then
    secs=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
    check_csv "300 iterations" "$tmp/big.csv" 300 2 2/2 0
    # books equal the generator's kv_blocks_used (whole prompts, no chunking)
    awk '/^check it=/ { split($7, b, "="); split($8, s, "="); if (b[2] != s[2]) bad++ } END { exit bad > 0 }' "$tmp/err" ||
        fail "300 iterations: books differ from kv_blocks_used"
    grep -q '^check end blocks=' "$tmp/err" || fail "300 iterations: no end line"
    echo "ok: 300 iterations in $secs s ($(grep '^check end' "$tmp/err"))"
else
    fail "300 iterations: $(cat "$tmp/err")"
fi

# Errors: one line, exit 2.
expect_error "no file" "no schedule file" replay --backend cpu
expect_error "missing file" "no-such\.jsonl" replay "$tmp/no-such.jsonl" --backend cpu
{ hdr 0 1 16 16; req 0 1 40 3; echo '{"type":"iter", this is not json'; } >"$tmp/bad1.jsonl"
expect_error "malformed line" "bad1\.jsonl:3: " replay "$tmp/bad1.jsonl" --backend cpu
{ hdr 0 1 16 16; iter 0 0 "" "" "" "" "" 0; } >"$tmp/bad2.jsonl"
expect_error "empty iteration" "bad2\.jsonl:2: " replay "$tmp/bad2.jsonl" --backend cpu
{ hdr 0 1 16 16; echo '{"type":"iter","replica":0,"it":0,"start_ns":0,"end_ns":5,"preempted":[],"prefill":[[1,4]],"decode":[],"first":[],"finished":[],"kv_blocks_used":1}'; } >"$tmp/bad3.jsonl"
expect_error "short prefill tuple" "bad3\.jsonl:2: " replay "$tmp/bad3.jsonl" --backend cpu
expect_error "replica absent" "replica 7 is not in" replay "$tmp/s16.jsonl" --backend cpu --replica 7
{ hdr 0 1 16 16 no-such-model; iter 0 0 "" "[1,4,0]" "" "" "" 1; } >"$tmp/bad4.jsonl"
expect_error "unknown model" "no-such-model" replay "$tmp/bad4.jsonl" --backend cpu
{ hdr 0 1 16 16; iter 0 0 "" "[1,4,0]" "" "" "" 100000000; } >"$tmp/huge.jsonl"
expect_error "KV pool too big" "KV pool of 100000000 blocks" replay "$tmp/huge.jsonl" --backend cpu --out "$tmp/huge.csv"
[ -e "$tmp/huge.csv" ] || [ -e "$tmp/huge.csv.tmp" ] && fail "a failed replay left an --out file"
{ hdr 0 1 16 8; iter 0 0 "" "[1,4,0]" "" "" "" 1; } >"$tmp/bs8.jsonl"
expect_error "block size 8" "block_size 8" replay "$tmp/bs8.jsonl" --backend cpu
{ hdr 0 3 16 16; iter 0 0 "" "[1,4,0]" "" "" "" 1; } >"$tmp/tp3.jsonl"
expect_error "tp not dividing heads" "tp 3" replay "$tmp/tp3.jsonl" --backend cpu
expect_error "--layers above the model's" "--layers 3" replay "$tmp/s16.jsonl" --backend cpu --layers 3
expect_error "--repeats 0" "--repeats 0" replay "$tmp/s16.jsonl" --backend cpu --repeats 0
expect_error "--pad-tokens 0" "--pad-tokens" replay "$tmp/s16.jsonl" --backend cpu --pad-tokens 0
expect_error "--pad-tokens 1000" "--pad-tokens" replay "$tmp/s16.jsonl" --backend cpu --pad-tokens 1000
expect_error "unknown option" "unknown option" replay "$tmp/s16.jsonl" --frob
expect_error "unwritable --out" "--out" replay "$tmp/s16.jsonl" --backend cpu --out /proc/hetsim-exec-test.csv

finish
