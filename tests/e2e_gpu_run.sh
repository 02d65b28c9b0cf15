#!/usr/bin/env bash
# e2e_gpu_run.sh - tools/gpu-run, the one command a GPU machine runs, as a
# dry run on the CPU backend with tiny-test: every step completes and
# reports (info, profile, compare -- skipped for want of a datasheet --,
# the fidelity loop, fingerprints); `hetsim perf compare` on the unit-test
# table; and the arguments both refuse.
set -u
source "$(dirname "$0")/fixtures/lib.sh"
if [ ! -x "$HS_BIN/exec/hetsim-exec" ]; then echo "SKIP: hetsim-exec not built"; exit 77; fi

HS_BIN=$HS_BIN "$HS_ROOT/tools/gpu-run" --backend cpu --quick --models tiny-test --requests 24 --rate 4 \
    --out "$T/g" >"$T/out" 2>&1
check_eq "gpu-run exits 0" "$?" "0"
s=$T/g/summary.txt
check_grep "kernels checked on the device" "$s" "checks passed, 0 failed"
check_grep "ceilings measured" "$s" '^gemm: [0-9.]+ TFLOP/s'
check_grep "table profiled" "$s" '[0-9]+ dense, [0-9]+ decode, [0-9]+ prefill lines'
dev=$(sed -n 's/^profile name: //p' "$T/g/info.txt")
check "table written under profiles/<device>/<model>" -f "$T/g/profiles/$dev/tiny-test/dense.csv"
check_grep "compare skipped without a datasheet" "$s" "skipped: no datasheet profiles/gpus/$dev.json"
check_grep "fidelity validated" "$s" 'absolute error per iteration: median [0-9.]+%'
check_grep "fingerprints compared" "$s" 'output 16: latency extrapolated [0-9.]+ ms, measured [0-9.]+ ms'
check_grep "summary ends done" "$s" '^tools/gpu-run: done;'
HS_BIN=$HS_BIN "$HS_ROOT/tools/gpu-run" --backend tpu >"$T/out" 2>&1
check_eq "bad backend refused" "$?" "2"
HS_BIN=$HS_BIN "$HS_ROOT/tools/gpu-run" --out "$T/h" --backend cpu compare >"$T/out" 2>&1
check_eq "compare before profile fails" "$?" "1"
check_grep "and says why" "$T/h/summary.txt" 'FAILED: no table at .* \(run the profile step first\)'

# perf compare on the unit-test fixture (tiny-test on a100-80g)
tab=$FIX/perf/tables/a100-80g/tiny-test
hs_run 0 "perf compare" perf compare "$tab" && {
    check_grep "datasheet named" "$T/out" '^roofline: datasheet 312.0 TFLOP/s and 2039 GB/s'
    check_grep "qkv row" "$T/out" '^qkv +[0-9]+ \| +[0-9.]+ +[0-9.]+ +[-+][0-9.]+$'
    check_grep "decode attention row" "$T/out" '^attn_decode +12 \|'
    check_grep "layer row" "$T/out" '^layer +[0-9]+ \|'
}
hs_run 0 "perf compare on measured ceilings" perf compare "$tab" --tflops 100 --gbs 1000 &&
    check_grep "ceilings used" "$T/out" 'given ceilings 100.0 TFLOP/s and 1000 GB/s .*gemm_eff 1.00, mem_eff 1.00'
hs_run 2 "fit on the target's own GPU only" perf compare "$tab" --fit "$FIX/perf/tables" &&
    check_grep "names the GPU" "$T/err" 'no table of a GPU other than a100-80g to fit on'
hs_run 2 "no table" perf compare
hs_run 2 "bad ceiling" perf compare "$tab" --gbs fast &&
    check_grep "names the option" "$T/err" '--gbs "fast": expected a positive number'
hs_run 2 "missing table" perf compare "$T/none" &&
    check_grep "names the file" "$T/err" "$T/none/meta.json"
e2e_finish
