#!/usr/bin/env bash
# e2e_iserve.sh - `hetsim iserve`: the estimate covers the paper's 180
# configurations; fingerprints written by --emit-fingerprints (the format
# hetsim-exec would fill on a GPU) read back to the same estimate; bad
# fingerprint files and options are one-line errors with exit 2; a small
# multi-model run deploys every model and conserves requests, in FCFS and
# batched serving; the iserve planner's deployment runs.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

if hs_run 0 "estimate llama-2-70b" iserve estimate --model llama-2-70b --emit-fingerprints "$T/llama-2-70b.csv"; then
    check_grep "180 configurations" "$T/out" "configs=180 "
    cp "$T/out" "$T/est1"
    check_grep "fingerprint file header" "$T/llama-2-70b.csv" "^model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib$"
fi
if hs_run 0 "estimate from the fingerprint file" iserve estimate --model llama-2-70b --fingerprints "$T"; then
    check_eq "same estimate from the file" "$(sed 's/ profile_gpu_s.*//' "$T/out")" "$(sed 's/ profile_gpu_s.*//' "$T/est1")"
fi
mkdir -p "$T/bad"; sed "3s/,fp16,/,fp12,/" "$T/llama-2-70b.csv" >"$T/bad/llama-2-70b.csv"
if hs_run 2 "bad fingerprint row" iserve estimate --model llama-2-70b --fingerprints "$T/bad"; then
    check_grep "error names file and line" "$T/err" "llama-2-70b.csv:3: unknown variant"
    check_eq "one error line" "$(wc -l <"$T/err")" 1
fi
hs_run 2 "unknown intent" iserve rank --model llama-2-7b --intent fastest
hs_run 2 "unknown model" iserve run --models llama-2-7b,no-such-model
hs_run 2 "rate out of range" iserve run --models llama-2-7b --rate 1.5
# INT4's measured speed drives the INT4 deployments min-memory picks: at
# FP16's speed (ratio 1) the same run is slower; a ratio out of range is one line
if hs_run 0 "min-memory, INT4 as measured" iserve run --models llama-2-7b,llama-2-13b --preset azure-code \
    --duration 300 --intent min-memory; then
    p41=$(sed -n 's/.* p50_s=\([0-9.]*\).*/\1/p' "$T/out")
    if hs_run 0 "min-memory, INT4 at FP16's speed" iserve run --models llama-2-7b,llama-2-13b --preset azure-code \
        --duration 300 --intent min-memory --int4-ratio 1; then
        check_num "INT4 at FP16's speed is slower ($p41 s, then $(sed -n 's/.* p50_s=\([0-9.]*\).*/\1/p' "$T/out") s)" \
            "$(sed -n 's/.* p50_s=\([0-9.]*\).*/\1/p' "$T/out")" "x > $p41"
    fi
fi
hs_run 2 "int4 ratio out of range" iserve run --models llama-2-7b --int4-ratio 0 &&
    check_grep "naming the range" "$T/err" 'ratio must be in \(0, 10\]'
hs_run 2 "alpha out of range" iserve run --models llama-2-7b --alpha 4.5 && check_grep "naming the range" "$T/err" "alpha 4.5 must be in \[0, 4\]"

if hs_run 0 "rank min-memory" iserve rank --model llama-2-7b --intent min-memory --top 1; then
    check_grep "lowest memory is (1,1) at 4 bits" "$T/out" "^  1 tp1-pp1-(int4|gptq4)"
fi

for sv in fcfs vllm; do
    if hs_run 0 "run 3 models ($sv)" iserve run --models llama-2-7b,gpt-j-6b,llama-2-13b --preset azure-code \
        --duration 600 --rate 0.5 --deploy-every 60 --serving $sv --verbose; then
        line=$(grep '^result' "$T/out")
        check_grep "all deployed ($sv)" "$T/out" " deployed=3 "
        kept=$(sed -n 's/.* kept=\([0-9]*\).*/\1/p' <<<"$line")
        served=$(sed -n 's/.* served=\([0-9]*\).*/\1/p' <<<"$line")
        uns=$(sed -n 's/.* unserved=\([0-9]*\).*/\1/p' <<<"$line")
        check_eq "kept == served + unserved ($sv)" "$kept" "$((served + uns))"
        check_num "served some ($sv)" "$served" 'x > 50'
        check_eq "one line per instance ($sv)" "$(grep -c '^  instance' "$T/out")" 3
    fi
done

if hs_run 0 "run stored in a database" iserve run --models llama-2-7b,gpt-j-6b --preset azure-code --duration 300 --db "$T/i.db"; then
    if command -v sqlite3 >/dev/null; then
        check_eq "one runs row" "$(sqlite3 "$T/i.db" 'select count(*) from runs')" 1
        check_eq "one replicas row per instance" "$(sqlite3 "$T/i.db" 'select count(*) from replicas')" 2
        check_num "summary has the p50" "$(sqlite3 "$T/i.db" "select value from summary where metric='e2el_p50_ms'")" 'x > 0'
        kept=$(sed -n 's/.* kept=\([0-9]*\).*/\1/p' "$T/out")
        check_eq "one requests row per kept arrival" "$(sqlite3 "$T/i.db" 'select count(*) from requests')" "$kept"
        check_eq "rows name their instance" "$(sqlite3 "$T/i.db" 'select count(*) from requests where replica not in (select id from replicas)')" 0
        # the calibrated model by default: the A6000 priced as its chip, the A40,
        # with that entry's expected error, on every instance
        check_grep "the run records INT4's ratio" <(sqlite3 "$T/i.db" 'select config from runs') '"int4_ratio":0.4086'
        check_eq "instances on the calibrated model, A6000 as the A40's chip" \
            "$(sqlite3 "$T/i.db" "select count(*) from replicas where perf_model = 'auto' and calibration like 'rtx-a6000: fitted on a40 (same chip)%' and expected_err_pct > 0")" 2
        check_eq "rows' SLO agrees with the summary" \
            "$(sqlite3 "$T/i.db" "select printf('%.4f', avg(slo_met)) from requests")" \
            "$(sed -n 's/.* slo_attainment=\([0-9.]*\).*/\1/p' "$T/out")"
        check_eq "rows' median e2e is the summary's" \
            "$(sqlite3 "$T/i.db" "select printf('%.3f', avg(e2e)) from (select e2e from requests order by e2e
                              limit 2 - (select count(*) % 2 from requests) offset (select (count(*) - 1) / 2 from requests))")" \
            "$(sed -n 's/.* p50_s=\([0-9.]*\).*/\1/p' "$T/out")"
    fi
    # The default interference is the shipped co-location measurement's
    # least-squares alpha (slowdown = 1 + alpha (k - 1) over k >= 2), not a
    # number of its own: refitting the file must give the run's alpha.
    fit=$(awk -F, 'NR > 1 && $2 > 1 { x = $2 - 1; n += ($5 - 1) * x; d += x * x }
                   END { if (d > 0) printf "%.2f", n / d }' "$HS_ROOT/profiles/exec/colocate/h200-llama-2-7b.csv")
    check_num "the co-location measurement fits an alpha over 1 ($fit)" "${fit:-0}" 'x > 1'
    check_eq "the run's default alpha is that fit" "$(sed -n 's/.* alpha=\([0-9.]*\).*/\1/p' "$T/out" | awk '{ printf "%.2f", $1 }')" "$fit"
    check_grep "trust line" "$T/out" '^trust   rtx-a6000: fitted on a40 \(same chip\)'
    hs_run 0 "report reads the iserve rows" report --db "$T/i.db" --out "$T/rep"
fi
if hs_run 0 "capacity search" iserve run --models llama-2-7b,gpt-j-6b --preset azure-code --duration 600 --capacity 0.9; then
    cap=$(sed -n 's/^capacity .* rate=\([0-9.]*\).*/\1/p' "$T/out")
    check_num "capacity found" "$cap" 'x > 0 && x <= 1'
    check_grep "run at the capacity" "$T/out" "^result .* rate=$cap "
    att=$(sed -n 's/.* slo_attainment=\([0-9.]*\).*/\1/p' "$T/out")
    check_num "attainment met at the capacity" "$att" 'x >= 0.9'
    if [ "$cap" != "1.00000" ] && hs_run 0 "just above the capacity" iserve run --models llama-2-7b,gpt-j-6b \
        --preset azure-code --duration 600 --rate "$(awk -v c="$cap" 'BEGIN { print c + 1 / 1024 }')"; then
        check_num "attainment missed above it" "$(sed -n 's/.* slo_attainment=\([0-9.]*\).*/\1/p' "$T/out")" 'x < 0.9'
    fi
fi
hs_run 2 "capacity out of range" iserve run --models llama-2-7b --capacity 1.5
if hs_run 0 "estimate against measured tables" iserve estimate --model llama-2-7b --cluster dgx-a100 --reference auto; then
    check_grep "reference named" "$T/out" " reference=auto "
fi
hs_run 1 "unwritable database" iserve run --models llama-2-7b --preset azure-code --duration 60 --db /nonexistent/dir/x.db

if hs_run 0 "iserve planner" plan --planner iserve --model llama-2-13b --cluster iserve-a6000x8 --emit-deployment "$T/d.json"; then
    check_grep "planner recorded" "$T/d.json" '"planner":"iserve"'
    # its 4-bit format runs at the measured ratio: a scale on the replica
    check_grep "format ratio as a latency scale" "$T/d.json" '"latency_scale":0\.[0-9]'
    hs_run 0 "run the iserve deployment" run --deployment "$T/d.json" --requests 100 --db "$T/r.db" \
        --emit-schedule "$T/s.jsonl"
    check_grep "the run says it scales" "$T/out" '^scaled    replica 0: every iteration x[0-9.]+ '
    check_grep "the schedule records the scale" "$T/s.jsonl" '"latency_scale":[0-9.]+'
    # "measured" = the schedule's own GPU times: repriced on the same cluster
    # and latency model, the scaled schedule must come back exactly
    sched_gpu_times "$T/s.jsonl" "$T/m.csv"
    if hs_run 0 "reprice the scaled schedule" validate --schedule "$T/s.jsonl" --measured "$T/m.csv" --reprice iserve-a6000x8; then
        check_grep "reprice applies the scale" "$T/out" "x[0-9.]+ \(the deployment's latency_scale\)"
        check_grep "repriced exactly" "$T/out" 'absolute error per iteration: median 0\.00%, p90 0\.00%'
    fi
fi
e2e_finish
