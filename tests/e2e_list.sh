#!/usr/bin/env bash
# e2e_list.sh - `hetsim list` and `hetsim trace stats`: the catalogues name
# the shipped models, GPUs, clusters, policies and planners; every shipped
# JSON file loads (no "(invalid" line); trace stats counts requests.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

if hs_run 0 "list" list; then
    for w in llama-2-70b a100-80g dgx-a100x2 vllm sarathi static uniform; do
        check_grep "list names $w" "$T/out" "^$w( |$)"
    done
    for h in models gpus clusters policies planners routers 'latency models'; do
        check_grep "list has section $h" "$T/out" "^== $h =="
    done
    check_eq "list: no invalid entries" "$(grep -c '(invalid' "$T/out")" 0
fi

# list CATEGORY: each shows its own entries only.
list_has() {
    local cat=$1; shift
    hs_run 0 "list $cat" list "$cat" || return
    check_eq "list $cat: no section headers" "$(grep -c '^==' "$T/out")" 0
    check_eq "list $cat: no invalid entries" "$(grep -c '(invalid' "$T/out")" 0
    for w in "$@"; do check_grep "list $cat names $w" "$T/out" "^$w( |$)"; done
}
list_has models llama-2-70b llama-2-7b tiny-test
list_has gpus a100-80g v100-32g
list_has clusters dgx-a100x2 default a100x16 llmpq-c1
list_has policies vllm sarathi static
list_has planners uniform
list_has routers rr lor lot weighted
list_has perf roofline

# Every model / GPU / cluster file in the source tree is listed.
for pair in models:models gpus:profiles/gpus clusters:profiles/clusters; do
    cat=${pair%%:*} dir=${pair#*:}
    "$HS" list "$cat" >"$T/list-$cat" 2>/dev/null
    missing=""
    for f in "$HS_ROOT/$dir"/*.json; do
        n=$(basename "$f" .json)
        grep -Eq "^$n( |\$)" "$T/list-$cat" || missing="$missing $n"
    done
    check_eq "list $cat covers $dir/*.json" "$missing" ""
done

# list clusters teaches the shorthand: its grammar, an example, and every
# GPU it takes (each of which then works as a one-node cluster); list gpus
# shows the links a shorthand gives (node and network per GPU).
if hs_run 0 "list clusters: shorthand" list clusters; then
    cp "$T/out" "$T/clusters.out"  # hs_run below overwrites $T/out
    check_grep "list clusters: the grammar" "$T/out" 'NODESxGPUSxGPU\[\+\.\.\.\]'
    check_grep "list clusters: an example" "$T/out" '^  4x8xh100-sxm-80g '
    gpuline=$(grep -A1 'GPU is one of:' "$T/clusters.out" | tail -n 1)
    missing=""
    for f in "$HS_ROOT"/profiles/gpus/*.json; do
        g=$(basename "$f" .json)
        case " $gpuline " in *" $g "*) ;; *) missing="$missing $g" ;; esac
    done
    check_eq "list clusters: names every GPU file" "$missing" ""
    for g in $gpuline; do
        hs_run 0 "shorthand 1x2x$g from the list works" plan --model tiny-test --cluster "1x2x$g" --quiet ||
            break
    done
    # the listed examples are clusters as written
    for ex in $(grep -oE '^  [0-9x]+[a-z0-9x+-]+ ' "$T/clusters.out"); do
        hs_run 0 "listed example $ex works" plan --model tiny-test --cluster "$ex" --quiet
    done
fi
if hs_run 0 "list gpus: link defaults" list gpus; then
    check_grep "list gpus: link columns" "$T/out" '^gpu .* node GB/s +node us +net GB/s +net us +latency model$'
    # h100-sxm-80g.json: NVLink 450 GB/s, 3 us; 400 Gb/s = 50 GB/s, 10 us
    check_grep "list gpus: h100 links" "$T/out" '^h100-sxm-80g .* 450\.0 +3\.0 +50\.0 +10\.0  '
    # a GPU file without intra_*/inter_*: PCIe, 5 us; 12.5 GB/s, 20 us
    check_grep "list gpus: l40s default links" "$T/out" '^l40s .* 32\.0 +5\.0 +12\.5 +20\.0  '
    # the latency model a run gets by default, as its trust line says:
    # the shipped calibration's entry, the same chip's, or the transfer
    check_grep "list gpus: a100 measured" "$T/out" '^a100-80g .*  measured: [0-9]+ models, a new model \+-[0-9]+%$'
    check_grep "list gpus: a800 borrows its chip" "$T/out" '^a800-80g .*  as a100-80g \(same chip\), \+-[0-9]+%$'
    check_grep "list gpus: h200 ops and its chip" "$T/out" '^h200 .*  some ops of [a-z0-9,.-]+ measured; rest as h100-sxm-80g \(same chip\), \+-[0-9]+%$'
    check_grep "list gpus: l40 transferred" "$T/out" '^l40 .*  transferred, \+-[0-9]+% \([0-9]+-[0-9]+% by GPU\)$'
    check_grep "list gpus: p100, no tensor cores" "$T/out" '^p100-12g .*  transferred, \+-[0-9]+% \([0-9]+-[0-9]+% by GPU\); no tensor cores: extrapolated$'
    check_grep "list gpus: one table, not cross-validated" "$T/out" '^rtx-3090 .*  measured: 1 model \(llama-2-7b\), not cross-validated$'
fi
# A data root without calibration.json lists the roofline; a broken one
# lists too, with one line on stderr naming the file.
mkdir -p "$T/root/profiles" && cp -r "$HS_ROOT/profiles/gpus" "$T/root/profiles/" && cp -r "$HS_ROOT/models" "$T/root/"
if HETSIM_ROOT="$T/root" hs_run 0 "list gpus, no calibration" list gpus; then
    check_grep "no calibration: roofline" "$T/out" '^l40 .*  datasheet roofline \(no calibration\)$'
    check_eq "no calibration: nothing on stderr" "$(wc -c <"$T/err")" 0
fi
mkdir "$T/root/profiles/calibration.json"   # not a regular file: as a run, no calibration
if HETSIM_ROOT="$T/root" hs_run 0 "list gpus, calibration.json a directory" list gpus; then
    check_grep "calibration a directory: roofline" "$T/out" '^a100-80g .*  datasheet roofline \(no calibration\)$'
    check_eq "calibration a directory: nothing on stderr" "$(wc -c <"$T/err")" 0
fi
rmdir "$T/root/profiles/calibration.json"
echo '{"source": "x", "entries": 3}' >"$T/root/profiles/calibration.json"
if HETSIM_ROOT="$T/root" hs_run 2 "list gpus, broken calibration" list gpus; then
    check_grep "broken calibration: still lists, roofline" "$T/out" '^a100-80g .*  datasheet roofline \(no calibration\)$'
    check_grep "broken calibration: names the file" "$T/err" 'calibration\.json'
    check_eq "broken calibration: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
fi
# The shipped calibration with other GPU files, the way a run would choose:
# an A30 on the A100's chip still has its own one-table entry; an H200
# with no chip named takes the ops it lacks from the transfer; a transfer
# entry without by-GPU figures gives its pooled error.
python3 - "$HS_ROOT/profiles/calibration.json" "$T/root/profiles" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for e in c["entries"]:
    if e["gpu"] == "":
        for k in ("gpu_fold_median_ape", "gpu_fold_min_ape", "gpu_fold_max_ape", "gpu_folds"):
            e["cv"].pop(k, None)
# a P100 entry of some ops only (a copy of the H200's GEMMs): the rest
# comes from the tensor-core transfer
p100 = json.loads(json.dumps([e for e in c["entries"] if e["gpu"] == "h200"][0]))
p100["gpu"] = "p100-12g"
c["entries"].append(p100)
json.dump(c, open(sys.argv[2] + "/calibration.json", "w"))
for name, edit in (("a30", {"same_chip_as": "a100-80g"}), ("h200", {"same_chip_as": None})):
    p = sys.argv[2] + "/gpus/%s.json" % name
    g = json.load(open(p))
    for k, v in edit.items():
        if v is None: g.pop(k, None)
        else: g[k] = v
    json.dump(g, open(p, "w"))
PY
if HETSIM_ROOT="$T/root" hs_run 0 "list gpus, edited calibration and GPU files" list gpus; then
    check_grep "a30 on the a100 chip: its own table" "$T/out" '^a30 .*  measured: 1 model \(llama-2-7b\), not cross-validated$'
    check_grep "h200 without its chip: rest transferred" "$T/out" '^h200 .*  some ops of [a-z0-9,.-]+ measured; rest transferred, \+-[0-9]+%$'
    check_grep "transfer without by-GPU figures: pooled" "$T/out" '^l40 .*  transferred, \+-[0-9]+%$'
    check_grep "p100 ops measured, rest extrapolated" "$T/out" '^p100-12g .*  some ops of [a-z0-9,.-]+ measured; rest transferred, \+-[0-9]+%; no tensor cores: extrapolated$'
fi

if hs_run 2 "list nonsense" list nonsense; then
    check_grep "list nonsense: message" "$T/err" 'unknown category "nonsense"'
    check_eq "list nonsense: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1
fi
hs_run 0 "list --help" list --help

# trace stats on the shipped fixtures (counts from traces/README.md).
if hs_run 0 "trace stats azure-mini.csv" trace stats "$HS_ROOT/traces/azure-mini.csv"; then
    check_grep "azure-mini: 50 requests" "$T/out" '^requests +50$'
    check_grep "azure-mini: 24.5 s" "$T/out" '^duration +24\.5 s'
fi
if hs_run 0 "trace stats azure-mini-2024.csv" trace stats "$HS_ROOT/traces/azure-mini-2024.csv"; then
    check_grep "azure-mini-2024: 20 requests" "$T/out" '^requests +20$'
fi
if hs_run 0 "trace stats sharegpt-mini.csv" trace stats "$HS_ROOT/traces/sharegpt-mini.csv"; then
    check_grep "sharegpt-mini.csv: 20 requests" "$T/out" '^requests +20$'
fi
if hs_run 0 "trace stats sharegpt-mini.json" trace stats "$HS_ROOT/traces/sharegpt-mini.json"; then
    check_grep "sharegpt-mini.json: 5 usable exchanges" "$T/out" '^requests +5$'
fi
if hs_run 0 "trace stats with a window" trace stats "$HS_ROOT/traces/azure-mini.csv" --set workload.window_end=10; then
    check_grep "azure-mini, first 10 s: 20 requests" "$T/out" '^requests +20$'
fi
hs_run 2 "trace without stats" trace "$HS_ROOT/traces/azure-mini.csv"
hs_run 2 "trace stats: missing file" trace stats "$T/none.csv"

# The real Azure 2023 conversation trace, when ../shared/data is there.
conv=${HS_SHARED_DATA:+$HS_SHARED_DATA/traces/AzureLLMInferenceTrace_conv.csv}
if [ -n "$conv" ] && [ -f "$conv" ]; then
    if hs_run 0 "trace stats AzureLLMInferenceTrace_conv.csv" trace stats "$conv"; then
        check_grep "Azure conv: 19366 requests" "$T/out" '^requests +19366$'
    fi
else
    echo "SKIP: ../shared/data absent (Azure conv trace stats not checked)"
fi

e2e_finish
