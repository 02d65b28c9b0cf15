#!/usr/bin/env bash
# e2e_calibration.sh - where a run's numbers come from, end to end: the
# shipped calibration and engine profile as `hetsim run` reports them (the
# trust line, the one warning, the replicas table), `perf fit-overhead` and
# `perf calibrate` writing files that runs accept, the shipped
# profiles/calibration.json against the table folders shipped beside it, and
# workload.fit_context.
# Checks:
#  1. the default run (Llama-2-70B on 8 A100s): "trust     a100-80g: measured
#     table", "engine vllm", no warning; replicas rows say so, with no
#     expected error;
#  2. --cluster 1x8xl40s: one "hetsim: warning:" line naming l40s and
#     "uncalibrated"; replicas rows "transferred from ..., uncalibrated" with
#     the expected error of the shipped transfer entry;
#     --cluster 1x2xp100-12g: "..., uncalibrated, no tensor cores
#     (extrapolated)" on the trust line and in replicas (the L40S's lacks it);
#     --cluster h100x8: no warning, "measured table" (shipped H100 tables);
#     --cluster 1x8xa100-40g: "fitted on a100-80g (same chip)" with
#     a100-80g's expected error (same_chip_as in its GPU file);
#  3. --set perf.engine=no-such: exit 2, one line naming perf.engine, no
#     database created and an existing one untouched;
#  4. perf fit-overhead on tests/fixtures/engines/cpu_overheads-synthetic.csv
#     recovers the planted lines (fixtures/engines/README.md) and writes a
#     profile that run --set perf.engine=<path> uses;
#  5. perf calibrate on the fixture tables writes a file that a run with
#     perf.tables pointing at it loads (and a broken copy fails the run);
#  6. profiles/calibration.json names exactly the <gpu>/<model>/ tables
#     shipped under profiles/ (a stale calibration fails here);
#  7. workload.fit_context=N: no request has prompt + output > N, outputs
#     are kept and each prompt is min(prompt, N - output) of the same run
#     without it, where some requests exceed N.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

PROF="$HS_ROOT/profiles"

# json_get FILE PYTHON-EXPR: prints the expression over the parsed file `d`.
json_get() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1
}

# 1. The default run: measured tables on A100, the vllm engine, no warning.
db=$T/a.db
if hs_run 0 "run --requests 200 (defaults)" run --db "$db" --requests 200; then
    check_grep "trust line: a100-80g measured table" "$T/out" '^trust     a100-80g: measured table$'
    check_eq "one trust line" "$(grep -c '^trust ' "$T/out")" 1
    check_grep "engine vllm in the header" "$T/out" '^policy .*, engine vllm$'
    check_eq "no warning on stderr" "$(grep -ci 'warning' "$T/err")" 0
    check_num "replicas rows" "$(q "$db" "select count(*) from replicas")" 'x >= 1'
    check_eq "replicas: calibration, no expected error, engine vllm" \
        "$(q "$db" "select distinct calibration, expected_err_pct is null, engine from replicas")" \
        "a100-80g: measured table|1|vllm"
    check_eq "replicas: perf_model table" "$(q "$db" "select distinct perf_model from replicas")" "table"
fi

# 2. L40S: no measurement of its own, one warning.  (H100s have measured
#    tables since they were added; their trust line is checked beside.)
db=$T/h.db
if hs_run 0 "run --cluster 1x8xl40s" run --db "$db" --requests 200 --cluster 1x8xl40s; then
    check_eq "one warning line" "$(grep -c '^hetsim: warning:' "$T/err")" 1
    check_grep "the warning names l40s, uncalibrated" "$T/err" \
        '^hetsim: warning: .*l40s.*uncalibrated'
    check_grep "trust line: transferred, uncalibrated" "$T/out" \
        '^trust     l40s: transferred from [a-z0-9,-]+, uncalibrated'
    check_eq "replicas: transferred and uncalibrated, engine vllm" \
        "$(q "$db" "select count(*) from replicas where calibration like 'l40s: transferred from %uncalibrated%'
                    and engine = 'vllm'")" \
        "$(q "$db" "select count(*) from replicas")"
    # one new GPU: the median over the GPUs held out, not the pooled figure
    want=$(json_get "$PROF/calibration.json" '[e["cv"]["gpu_fold_median_ape"] for e in d["entries"] if e["gpu"] == ""][0]')
    got=$(q "$db" "select distinct expected_err_pct from replicas")
    check_num "replicas: expected error = the transfer entry's median by GPU held out ($want)" "$got" \
        "x > 0 && (x - $want)^2 < 1e-18"
    check_grep "trust line: the range over the GPUs held out" "$T/out" \
        '^trust     l40s: transferred from .*uncalibrated \(\+-[0-9]+% per layer, [0-9]+-[0-9]+% by GPU held out\)$'
    check_eq "l40s (tensor cores) is not called extrapolated" "$(grep -c 'no tensor cores' "$T/out")" 0
fi

# 2a'. A GPU without tensor cores (the P100: FP16 GEMMs at its FP32 rate)
# on a transfer fitted on tensor-core GPUs says it is extrapolated; the
# L40S above does not.
if hs_run 0 "run --cluster 1x2xp100-12g" run --db "$T/p100.db" --requests 20 --cluster 1x2xp100-12g \
        --model llama-2-7b; then
    check_grep "trust line: p100 extrapolated" "$T/out" \
        '^trust     p100-12g: transferred from [a-z0-9,-]+, uncalibrated, no tensor cores \(extrapolated\) \(\+-[0-9]+% per layer'
    check_eq "replicas row says so too" \
        "$(q "$T/p100.db" "select count(*) from replicas where calibration like '%no tensor cores (extrapolated)%'")" 1
fi

# 2b. H100s run on their shipped measured tables: no warning.
if hs_run 0 "run --cluster h100x8" run --db "$T/h100.db" --requests 50 --cluster h100x8; then
    check_eq "no warning" "$(grep -c '^hetsim: warning:' "$T/err")" 0
    check_grep "trust line: measured table" "$T/out" '^trust     h100-sxm-80g: measured table'
fi

# 2c. A GPU on a measured GPU's chip (same_chip_as) borrows its fit.
if hs_run 0 "run --cluster 1x8xa100-40g" run --db "$T/a40g.db" --requests 50 --cluster 1x8xa100-40g; then
    check_grep "trust line: fitted on a100-80g (same chip)" "$T/out" \
        '^trust     a100-40g: fitted on a100-80g \(same chip\), uncalibrated \(\+-[0-9]+% per layer\)'
    want=$(json_get "$PROF/calibration.json" '[e["cv"]["layer_median_ape"] for e in d["entries"] if e["gpu"] == "a100-80g"][0]')
    got=$(q "$T/a40g.db" "select distinct expected_err_pct from replicas")
    check_num "replicas: expected error = a100-80g's ($want)" "$got" "x > 0 && (x - $want)^2 < 1e-18"
fi

# 2d. The H200's tables hold its cuBLAS GEMMs only (hetsim-exec's other
# rows time our own kernels): Llama-2-7B at TP 1 takes its GEMMs from the
# table and the other ops from the H100's fit; a model or TP degree with
# no H200 table takes the H100's fit for all of it, as before.
if hs_run 0 "run --cluster h200x16 --model llama-2-7b --tp 1" run --db "$T/h200.db" --requests 50 \
        --cluster h200x16 --model llama-2-7b --tp 1; then
    check_grep "trust line: GEMMs measured, the rest from the H100" "$T/out" \
        '^trust     h200: measured table, other ops fitted on h100-sxm-80g \(same chip\), uncalibrated \(\+-[0-9]+% per layer\)'
    check_eq "one warning" "$(grep -c '^hetsim: warning: kernel times not measured on the GPU they run on: h200' "$T/err")" 1
fi
if hs_run 0 "run --cluster h200x16 --model codellama-34b --tp 2" run --db "$T/h200b.db" --requests 50 \
        --cluster h200x16 --model codellama-34b --tp 2; then
    check_grep "trust line: no H200 table, the H100's fit" "$T/out" \
        '^trust     h200: fitted on h100-sxm-80g \(same chip\), uncalibrated'
fi
check_eq "the H200 entry was fitted on its two GEMM tables" \
    "$(json_get "$PROF/calibration.json" '[e["models"] for e in d["entries"] if e["gpu"] == "h200"][0]')" "llama-2-70b,llama-2-7b"
check_eq "and the transfer saw them" \
    "$(json_get "$PROF/calibration.json" '[int("h200" in e["trained_on"]) for e in d["entries"] if e["gpu"] == ""][0]')" 1

# 3. An unknown engine: exit 2, one line naming the key, nothing written.
if hs_run 2 "run --set perf.engine=no-such" run --db "$T/none.db" --requests 20 --set perf.engine=no-such; then
    check_eq "one line on stderr" "$(wc -l <"$T/err")" 1
    check_grep "it names perf.engine" "$T/err" 'perf\.engine'
    check_grep "it names the profile" "$T/err" '"no-such"'
    check "no database created" ! -e "$T/none.db"
fi
counts() {
    q "$1" "select (select count(*) from runs) || ',' || (select count(*) from replicas) || ',' ||
                   (select count(*) from requests)"
}
before=$(counts "$T/a.db")
if hs_run 2 "run --set perf.engine=no-such into an existing database" \
        run --db "$T/a.db" --requests 20 --set perf.engine=no-such; then
    check_eq "existing database untouched (runs, replicas, requests)" "$(counts "$T/a.db")" "$before"
fi

# 4. perf fit-overhead on the synthetic file, then a run on the profile.
# perf.engine holds 47 characters: the profile goes to a short path.
eng=$T/e.json
if [ ${#eng} -gt 47 ]; then
    short=$(mktemp -d /tmp/hse.XXXXXX) || exit 1
    trap 'rm -rf "$T" "$short"' EXIT
    eng=$short/e.json
fi
csv=$FIX/engines/cpu_overheads-synthetic.csv
if hs_run 0 "perf fit-overhead --out" perf fit-overhead "$csv" --out "$eng" --name synth \
        --collective-launch-us 15; then
    check_grep "fit: 72 rows" "$T/out" 'fitted on .*cpu_overheads-synthetic.csv: 72 rows'
    check_grep "fit: leave-one-model-out pooled ~0" "$T/out" 'leave-one-model-out, pooled: median 0\.0%'
    check_grep "fit: wrote the profile" "$T/out" "^wrote $eng\$"
    check_eq "profile: name, launch" "$(json_get "$eng" 'd["name"], d["collective_launch_us"]')" "('synth', 15)"
    check_eq "profile: components" "$(json_get "$eng" '[c["name"] for c in d["components"]]')" \
        "['schedule', 'sampler', 'prepare_inputs', 'process_outputs', 'ray_comm']"
    check_eq "profile: sampler's planted lines per TP class" \
        "$(json_get "$eng" '[(r["min_tp"], r["fixed_us"], r["per_seq_us"]) for r in d["components"][1]["rows"]]')" \
        "[(1, 600, 3), (2, 700, 5), (3, 900, 6)]"
    check_eq "profile: Ray on several GPUs only (no TP-1 sample)" \
        "$(json_get "$eng" '(d["components"][4]["multi_gpu"], [r["min_tp"] for r in d["components"][4]["rows"]])')" \
        "(True, [2, 3])"
    db=$T/e.db
    if hs_run 0 "run --set perf.engine=<fitted profile>" run --db "$db" --requests 50 --set perf.engine="$eng"; then
        check_grep "engine synth in the header" "$T/out" ', engine synth$'
        check_eq "replicas: engine synth" "$(q "$db" "select distinct engine from replicas")" "synth"
        check_eq "config records the path" "$(q "$db" "select json_extract(config, '\$.perf.engine') from runs")" "$eng"
    fi
fi
hs_run 2 "perf fit-overhead: a malformed file" perf fit-overhead "$FIX/azure-bad-line5.csv"
check_grep "names the file" "$T/err" 'azure-bad-line5\.csv'

# 5. perf calibrate on the fixture tables: a file a run loads.
root=$T/root
mkdir -p "$root"
cp -r "$FIX/perf/tables/a100-80g" "$root/"
if hs_run 0 "perf calibrate <fixture tables> --out" perf calibrate "$FIX/perf/tables" --out "$T/cal.json"; then
    check_grep "calibrate: wrote" "$T/out" "^wrote $T/cal.json\$"
    check_eq "calibration: an A100 entry and the transfer entry" \
        "$(json_get "$T/cal.json" '[(e["gpu"], e["models"], e["tables"]) for e in d["entries"]]')" \
        "[('a100-80g', 'tiny-test', 1), ('', 'all', 1)]"
    check_eq "calibration: twelve kinds per entry" \
        "$(json_get "$T/cal.json" '[len(e["kinds"]) for e in d["entries"]]')" "[12, 12]"
    cp "$T/cal.json" "$root/calibration.json"
    db=$T/c.db
    if hs_run 0 "run on the written calibration (llama-2-7b, no table)" run --db "$db" --model llama-2-7b \
            --requests 20 --set perf.tables="$root"; then
        # one table: nothing to leave out, so no error figure, and it says so
        check_grep "trust: a100-80g fitted on its tables" "$T/out" '^trust     a100-80g: fitted on its tables \(one model: not cross-validated\)$'
        check_eq "replicas: fitted on its tables" \
            "$(q "$db" "select distinct calibration from replicas")" "a100-80g: fitted on its tables (one model: not cross-validated)"
    fi
    if hs_run 0 "run on the written calibration (h100x8)" run --db "$db" --model tiny-test --cluster h100x8 \
            --requests 20 --set perf.tables="$root"; then
        check_grep "trust: transferred from a100-80g" "$T/out" \
            '^trust     h100-sxm-80g: transferred from a100-80g, uncalibrated'
    fi
    # the run reads the file: a broken copy fails it, naming the file
    head -c 200 "$T/cal.json" >"$root/calibration.json"
    hs_run 2 "run on a truncated calibration" run --db "$T/c2.db" --model llama-2-7b --requests 20 \
        --set perf.tables="$root"
    check_grep "names calibration.json" "$T/err" "$root/calibration\\.json"
fi

# 6. The shipped calibration names exactly the shipped table folders.
if out=$(python3 - "$PROF" <<'PY' 2>&1
import json, os, sys
prof = sys.argv[1]
cal = json.load(open(os.path.join(prof, "calibration.json")))
folders = {}
for g in sorted(os.listdir(prof)):
    d = os.path.join(prof, g)
    if not os.path.isdir(d):
        continue
    # kernel tables (dense.csv); a collectives-only _network folder is not fitted
    ms = sorted(m for m in os.listdir(d) if os.path.isfile(os.path.join(d, m, "meta.json"))
                and os.path.isfile(os.path.join(d, m, "dense.csv")))
    if ms:
        folders[g] = ms
bad = []
entries = {}
for e in cal["entries"]:
    if e["gpu"] in entries:
        bad.append("two entries for gpu %r" % e["gpu"])
    entries[e["gpu"]] = e
gpus = sorted(g for g in entries if g)
if gpus != sorted(folders):
    bad.append("calibrated GPUs %s, table folders %s" % (gpus, sorted(folders)))
for g in sorted(set(gpus) & set(folders)):
    e = entries[g]
    listed = sorted(e["models"].split(","))
    if listed != folders[g]:
        bad.append("%s: calibration lists %s, folders hold %s" % (g, listed, folders[g]))
    if e["tables"] != len(folders[g]):
        bad.append("%s: tables %s, folders %d" % (g, e["tables"], len(folders[g])))
    if e["trained_on"] != [g]:
        bad.append("%s: trained_on %s" % (g, e["trained_on"]))
if "" not in entries:
    bad.append("no transfer entry")
else:
    t = entries[""]
    n = sum(len(v) for v in folders.values())
    if t["tables"] != n:
        bad.append("transfer entry: tables %s, folders %d" % (t["tables"], n))
    if sorted(t["trained_on"]) != sorted(folders):
        bad.append("transfer entry: trained_on %s" % t["trained_on"])
print("; ".join(bad) if bad else "%d GPUs, %d tables" % (len(folders), sum(len(v) for v in folders.values())))
sys.exit(1 if bad else 0)
PY
); then
    ok "profiles/calibration.json matches the shipped tables ($out)"
else
    bad "profiles/calibration.json matches the shipped tables" "$out"
fi

# 7. workload.fit_context: preset S has prompts up to 512 and outputs up
# to 80 tokens, so 300 cuts some prompts and keeps every output.
db=$T/fc.db
if hs_run 0 "run preset S" run --db "$db" --requests 300 --set workload.preset=S --quiet &&
   hs_run 0 "run preset S, fit_context 300" run --db "$db" --requests 300 --set workload.preset=S \
        --set workload.fit_context=300 --quiet; then
    check_num "without: some prompt + output > 300" \
        "$(q "$db" "select count(*) from requests where run = 1 and prompt + output > 300")" 'x > 0'
    check_eq "with: none over 300" "$(q "$db" "select count(*) from requests where run = 2 and prompt + output > 300")" 0
    check_eq "with: 300 requests" "$(q "$db" "select count(*) from requests where run = 2")" 300
    check_eq "with: outputs kept, prompt = min(prompt, 300 - output)" \
        "$(q "$db" "select count(*) from requests a join requests b on a.id = b.id and a.run = 1 and b.run = 2
                    where a.output = b.output and b.prompt = min(a.prompt, 300 - a.output)")" 300
    check_eq "config records fit_context" \
        "$(q "$db" "select json_extract(config, '\$.workload.fit_context') from runs where id = 2")" 300
fi

e2e_finish
