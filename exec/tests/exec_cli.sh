#!/usr/bin/env bash
# exec_cli.sh - hetsim-exec's command line on the CPU backend: help, info,
# a quick profile of tiny-test (all four files, exact headers, positive
# times, every op), and one-line errors with exit code 2.
# --clocks against a stand-in NVML library (FAKE_NVML, optional).
# usage: exec_cli.sh PATH/TO/hetsim-exec [PATH/TO/fake libnvidia-ml]
set -u
bin=${1:?usage: exec_cli.sh hetsim-exec [fake-nvml.so]}
fake_nvml=${2:-}
. "$(dirname "$0")/lib.sh"

for args in "--help" "profile --help" "info --help" "replay --help"; do
    # shellcheck disable=SC2086
    "$bin" $args >"$tmp/out" 2>&1 || fail "$args: exit $?"
    grep -q usage "$tmp/out" || fail "$args: no usage text"
done

# info on the CPU: positive GEMM and copy figures.
if "$bin" info --backend cpu >"$tmp/info" 2>"$tmp/err"; then
    cat "$tmp/info"
    awk '/^gemm:/ { ok = $2 > 0 } END { exit !ok }' "$tmp/info" || fail "info: gemm TFLOP/s not positive"
    awk '/^copy:/ { ok = $2 > 0 } END { exit !ok }' "$tmp/info" || fail "info: copy GB/s not positive"
else
    fail "info --backend cpu: $(cat "$tmp/err")"
fi

# A quick profile of tiny-test at two TP degrees and three weight widths.
out=$tmp/prof
start=$(date +%s)
if "$bin" profile --model tiny-test --tp 1,2 --bits 16,8,4 --backend cpu --quick --out "$out" \
        >"$tmp/out" 2>"$tmp/err"; then
    echo "profile: $(cat "$tmp/out") in $(( $(date +%s) - start )) s"
    [ "$(head -1 "$out/dense.csv")" = "op,tp,bits,tokens,time_us" ] || fail "dense.csv header"
    [ "$(head -1 "$out/attn_decode.csv")" = "tp,batch,context,time_us" ] || fail "attn_decode.csv header"
    [ "$(head -1 "$out/attn_prefill.csv")" = "tp,chunk,prefix,time_us" ] || fail "attn_prefill.csv header"
    for f in dense attn_decode attn_prefill; do
        rows=$(($(wc -l <"$out/$f.csv") - 1))
        [ "$rows" -gt 0 ] || fail "$f.csv: no rows"
        awk -F, 'NR > 1 && !($NF > 0) { bad++ } END { exit bad > 0 }' "$out/$f.csv" ||
            fail "$f.csv: a time is not positive"
        echo "ok: $f.csv, $rows rows"
    done
    for op in emb norm qkv rope attn_out mlp_up act mlp_down add lm_head; do
        for tp in 1 2; do
            grep -q "^$op,$tp,16," "$out/dense.csv" || fail "dense.csv: no $op rows at tp $tp"
        done
    done
    for op in qkv attn_out mlp_up mlp_down; do
        for bits in 8 4; do
            grep -q "^$op,1,$bits," "$out/dense.csv" || fail "dense.csv: no $op rows at $bits bits"
        done
    done
    if grep -qE '^(emb|norm|rope|act|add|lm_head),[0-9]+,(8|4),' "$out/dense.csv"; then
        fail "dense.csv: a non-GEMM op has quantised rows"
    fi
    for key in '"gpu": "cpu-' '"model": "tiny-test"' '"backend": "cpu"' '"dtype": "fp32"' \
               '"source": "hetsim-exec profile"' '"created": "' '"mem_total_bytes": ' \
               '"mem_usable_bytes": ' '"kv_block_size": 16' '"kv_blocks": ' '"timing": "alone"'; do
        grep -qF "$key" "$out/meta.json" || fail "meta.json: no $key"
    done
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["kv_blocks"] > 0 and m["mem_usable_bytes"] > 0' \
        "$out/meta.json" 2>/dev/null || { command -v python3 >/dev/null && fail "meta.json: not valid JSON or no KV blocks"; }
    ls "$out" | grep -q '\.tmp$' && fail "temporary files left behind"
else
    fail "profile: $(cat "$tmp/err")"
fi

# --clocks: clocks.csv has one row per table row, keyed as the tables, each
# with the stand-in's clock, power and reason over at least the begin and
# end samples; meta.json names the monitor; a summary on stderr.  Without
# NVML: a warning, the tables, no clocks.csv.
if [ -n "$fake_nvml" ]; then
    if HS_NVML_LIB=$fake_nvml "$bin" profile --model tiny-test --bits 16,8 --backend cpu --quick --clocks \
            --out "$tmp/clk" >"$tmp/out" 2>"$tmp/err"; then
        c=$tmp/clk/clocks.csv
        [ "$(head -1 "$c")" = "op,tp,x,y,samples,sm_mhz_mean,sm_mhz_min,sm_mhz_max,power_w_mean,power_w_max,reasons" ] ||
            fail "clocks.csv header: $(head -1 "$c")"
        want=$(cat "$tmp/clk/dense.csv" "$tmp/clk/attn_decode.csv" "$tmp/clk/attn_prefill.csv" | grep -cv '^[a-z_]*,*tp,')
        [ "$(($(wc -l <"$c") - 1))" -eq "$want" ] || fail "clocks.csv: $(($(wc -l <"$c") - 1)) rows, tables have $want"
        # the same keys in the same order: dense op,tp,bits,tokens; attention tp,x,y
        diff <(tail -n +2 "$tmp/clk/dense.csv" | cut -d, -f1-4; tail -n +2 "$tmp/clk/attn_decode.csv" |
               sed 's/^/attn_decode,/' | cut -d, -f1-4; tail -n +2 "$tmp/clk/attn_prefill.csv" |
               sed 's/^/attn_prefill,/' | cut -d, -f1-4) <(tail -n +2 "$c" | cut -d, -f1-4) >/dev/null ||
            fail "clocks.csv: keys differ from the tables'"
        awk -F, 'NR > 1 && !($5 >= 2 && $6 == 1980 && $7 == 1980 && $9 == 700 && $11 == "sw_power_cap") { bad++ }
                 END { exit bad > 0 }' "$c" || fail "clocks.csv: a row without the stand-in's readings"
        grep -qF '"clock_monitor": "NVML (driver 999.1), FakeGPU"' "$tmp/clk/meta.json" || fail "meta.json: no clock_monitor"
        grep -q "clocks: GEMMs < 512 tokens  *SM 1980 MHz" "$tmp/err" || fail "no clocks summary: $(cat "$tmp/err")"
        grep -q "clocks.csv" "$tmp/out" || fail "profile --clocks: clocks.csv not named: $(cat "$tmp/out")"
        echo "ok: profile --clocks, $want rows"
        # profiled again without --clocks: the old clocks.csv would describe other rows
        "$bin" profile --model tiny-test --bits 16 --backend cpu --quick --quiet --out "$tmp/clk" >/dev/null 2>&1 ||
            fail "profile over a --clocks table failed"
        [ -e "$tmp/clk/clocks.csv" ] && fail "a stale clocks.csv survived a profile without --clocks"
    else
        fail "profile --clocks: $(cat "$tmp/err")"
    fi
else
    echo "no stand-in NVML given: profile --clocks with NVML not tested"
fi
if HS_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$bin" profile --model tiny-test --backend cpu --quick --clocks --quiet \
        --out "$tmp/noclk" >"$tmp/out" 2>"$tmp/err"; then
    grep -q "^hetsim-exec: warning: --clocks: .*/nonexistent/libnvidia-ml.so.1.*measuring without clocks$" "$tmp/err" ||
        fail "--clocks without NVML: no warning: $(cat "$tmp/err")"
    [ -e "$tmp/noclk/clocks.csv" ] && fail "--clocks without NVML: clocks.csv written"
    [ -s "$tmp/noclk/dense.csv" ] || fail "--clocks without NVML: no tables"
    echo "ok: profile --clocks without NVML"
else
    fail "profile --clocks without NVML: $(cat "$tmp/err")"
fi

# --timing cold (every op queued behind a cache-flushing write) and stream
# (a burst of read+op pairs minus the reads): each table says how it was
# timed (test_table checks the simulator's reader takes it) and every time
# is positive.
for mode in cold stream; do
    if "$bin" profile --model tiny-test --bits 16,8 --backend cpu --quick --timing $mode --out "$tmp/$mode" \
            >"$tmp/out" 2>"$tmp/err"; then
        grep -qF "\"timing\": \"$mode\"" "$tmp/$mode/meta.json" || fail "meta.json: no \"timing\": \"$mode\""
        for f in dense attn_decode attn_prefill; do
            awk -F, 'NR > 1 && !($NF > 0) { bad++ } END { exit bad > 0 }' "$tmp/$mode/$f.csv" ||
                fail "$mode $f.csv: a time is not positive"
        done
        echo "ok: --timing $mode"
    else
        fail "profile --timing $mode: $(cat "$tmp/err")"
    fi
done
# --kv-pool-gib: the attention rows run over a pool at least that large,
# and meta.json says how large (without it: what the grid needs, smaller).
if "$bin" profile --model tiny-test --bits 16 --backend cpu --quick --kv-pool-gib 0.05 --quiet --out "$tmp/pool" \
        >"$tmp/out" 2>"$tmp/err"; then
    big=$(sed -n 's/.*"kv_pool_bytes": \([0-9]*\).*/\1/p' "$tmp/pool/meta.json")
    small=$(sed -n 's/.*"kv_pool_bytes": \([0-9]*\).*/\1/p' "$tmp/stream/meta.json")
    [ -n "$big" ] && [ "$big" -ge 53687091 ] || fail "meta.json: kv_pool_bytes $big under 0.05 GiB"
    [ -n "$small" ] && [ "$small" -gt 0 ] && [ "$small" -lt "$big" ] || fail "kv_pool_bytes: $small without the option, $big with it"
    echo "ok: --kv-pool-gib ($small -> $big bytes)"
else
    fail "profile --kv-pool-gib: $(cat "$tmp/err")"
fi
# --rest: meta.json says how long each row rested (0 by default on the CPU)
grep -qE '"rest": 0$' "$tmp/pool/meta.json" || fail "meta.json: no \"rest\": 0 on the CPU by default"
if "$bin" profile --model tiny-test --bits 16 --backend cpu --quick --rest 0.5 --quiet --out "$tmp/rest" \
        >"$tmp/out" 2>"$tmp/err"; then
    grep -qE '"rest": 0\.5$' "$tmp/rest/meta.json" || fail "meta.json: no \"rest\": 0.5"
    echo "ok: --rest"
else
    fail "profile --rest: $(cat "$tmp/err")"
fi
expect_error "bad --rest" "--rest -1: must be a number in \[0, 10\]" profile --model tiny-test --rest -1 --backend cpu
expect_error "bad --kv-pool-gib" "--kv-pool-gib 0: must be a number of GiB in" profile --model tiny-test --kv-pool-gib 0 --backend cpu
# grid_option OPT LIST FILE AWK-PROGRAM WANT: a profile with OPT LIST has
# its rows (as AWK-PROGRAM prints them from FILE) at exactly WANT
grid_option() {
    local opt=$1 list=$2 file=$3 prog=$4 want=$5 got
    if "$bin" profile --model tiny-test --bits 16 --backend cpu --quick "$opt" "$list" --quiet --out "$tmp/grid" \
            >"$tmp/out" 2>"$tmp/err"; then
        got=$(awk -F, "$prog" "$tmp/grid/$file")
        [ "$got" = "$want" ] || fail "$opt $list: rows at $got, want $want"
        echo "ok: $opt"
    else
        fail "profile $opt: $(cat "$tmp/err")"
    fi
    rm -rf "$tmp/grid"
}
# --tokens: the dense rows at exactly those token counts, unaligned ones too
grid_option --tokens 7,8,9,33 dense.csv 'NR > 1 && $1 == "mlp_up" { printf "%s ", $4 }' "7 8 9 33 "
expect_error "--tokens not increasing" "--tokens 8,7: must be increasing" profile --model tiny-test --tokens 8,7 --backend cpu
expect_error "--tokens 0" "--tokens 0: expected integers" profile --model tiny-test --tokens 0 --backend cpu
expect_error "--tokens without --out" "--tokens needs --out DIR" profile --model tiny-test --tokens 8,9 --backend cpu
# --chunks: the prefill attention rows (no prefix) at exactly those chunk lengths
grid_option --chunks 9,16,17 attn_prefill.csv 'NR > 1 && $3 == 0 { printf "%s ", $2 }' "9 16 17 "
expect_error "--chunks not increasing" "--chunks 16,9: must be increasing" profile --model tiny-test --chunks 16,9 --backend cpu
expect_error "--chunks without --out" "--chunks needs --out DIR" profile --model tiny-test --chunks 9 --backend cpu
expect_error "--chunks past the context" "--chunks 4096: over tiny-test's context of 2048 tokens" \
    profile --model tiny-test --chunks 16,4096 --backend cpu --out "$tmp/chk-big"
[ -e "$tmp/chk-big" ] && fail "--chunks past the context: left $tmp/chk-big behind"

# (That a bigger op costs more in a stream is test_exec_kernels' check, on
# sizes far apart; tiny-test's quick grid is too small for it under ASan.)

# Errors: one line, exit 2.
expect_error "no command" "no command given"
expect_error "unknown command" "unknown command \"frobnicate\"" frobnicate
expect_error "unknown option" "unknown option \"--frob\"" profile --model tiny-test --frob
expect_error "missing --model" "--model is required" profile --backend cpu
expect_error "bad --model" "unknown model \"no-such-model\"" profile --model no-such-model --backend cpu --quick --out "$tmp/x"
expect_error "--tp not dividing heads" "does not divide the 4 attention heads" profile --model tiny-test --tp 3 --backend cpu --quick --out "$tmp/x"
expect_error "bad --tp" "--tp 0" profile --model tiny-test --tp 0 --backend cpu
expect_error "bad --bits" "--bits 3" profile --model tiny-test --bits 3 --backend cpu
expect_error "bad --timing" "--timing warm: must be alone, cold or stream" profile --model tiny-test --timing warm --backend cpu
expect_error "unwritable --out" "cannot create /proc/hetsim-exec-test" profile --model tiny-test --backend cpu --quick --out /proc/hetsim-exec-test
expect_error "bad --backend" "unknown backend" info --backend tpu
expect_error "cpu in bf16" "fp32 only" info --backend cpu --dtype bf16
[ -e "$tmp/x" ] && fail "a failed profile created its --out folder"

# --backend cuda without a GPU (or without the toolkit): one line, exit 2.
if "$bin" info --backend cuda >/dev/null 2>&1; then
    echo "skip: a CUDA device is present, not checking the no-device error"
else
    # a binary built without the toolkit (-DHS_CUDA=OFF) says so instead
    nodev="no CUDA device|built without the CUDA toolkit"
    expect_error "--backend cuda without a device" "$nodev" info --backend cuda
    expect_error "profile --backend cuda without a device" "$nodev" profile --model tiny-test --backend cuda --quick --out "$tmp/y"
fi

finish
