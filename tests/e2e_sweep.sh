#!/usr/bin/env bash
# e2e_sweep.sh - hetsim sweep: a parallel sweep stores the same database as
# a serial one (INV-SWEEP-3, "identical" as defined by canon in
# fixtures/sweep.sh); run ids follow case order; a rerun skips stored cases;
# a sweep killed with SIGKILL mid-way keeps a prefix of committed cases,
# leaves no worker behind, and resumes to exactly the uninterrupted database
# with no duplicate (INV-SWEEP-1/2); the --spec form equals the --grid form;
# failed cases are recorded, skipped, and retried on request; two sweeps
# writing one file at once store each case once; a version-1 database is
# migrated; bad input fails before any database exists.
set -u
. "$(dirname "$0")/fixtures/lib.sh"
. "$(dirname "$0")/fixtures/sweep.sh"

# 32 cases of 1000 requests: long enough to kill mid-way.
args=(--set workload.max_requests=1000 --grid workload.rate=2:9:1 --grid policy=vllm,sarathi
      --grid seed=1,2)
N=32

hs_run 0 "serial reference sweep" sweep "${args[@]}" --db "$T/ref.db" -j 1 --quiet
check_eq "serial: $N runs" "$(q "$T/ref.db" "select count(*) from runs")" $N
check_eq "serial: run ids follow case order" \
    "$(q "$T/ref.db" "select count(*) from sweep_cases where run = idx + 1")" $N
check_eq "serial: case 7 is rate 3, sarathi, seed 1 (first axis slowest)" \
    "$(q "$T/ref.db" "select json_extract(config, '$.workload.rate') || ' ' || json_extract(config, '$.policy') || ' ' || seed from runs where id = 7")" \
    "3 sarathi 1"
check_num "serial: samples stored" "$(q "$T/ref.db" "select count(*) from samples")" 'x > 100'

hs_run 0 "parallel sweep (-j 3)" sweep "${args[@]}" --db "$T/par.db" -j 3 --quiet
same_db "parallel database identical to serial" "$T/ref.db" "$T/par.db"

# Rerun: nothing to do, nothing changes.
hs_run 0 "rerun" sweep "${args[@]}" --db "$T/par.db" -j 2
check_grep "rerun: all stored" "$T/err" "all $N cases are stored"
same_db "rerun changes nothing" "$T/ref.db" "$T/par.db"

# Kill -9 mid-sweep, then resume.  A killed sweep cannot remove its scratch
# folder: give it one under $T, removed with $T, not one left in /dev/shm.
mkdir -p "$T/scratch-k"
TMPDIR="$T/scratch-k" "$HS" sweep "${args[@]}" --db "$T/k.db" -j 2 --quiet 2>"$T/kill.err" &
pid=$!
n=0
for _ in $(seq 1 600); do
    n=$(sqlite3 -readonly -cmd ".timeout 2000" "$T/k.db" "select count(*) from sweep_cases" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 2 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
n=$(q "$T/k.db" "select count(*) from sweep_cases")
check_num "killed mid-sweep ($n of $N stored)" "$n" "x >= 1 && x < $N"
check_eq "killed: the stored cases are a prefix of the case list" \
    "$(q "$T/k.db" "select max(idx) + 1 = count(*) and min(idx) = 0 from sweep_cases")" 1
check_eq "killed: every stored run is whole (one case row, its requests' summary)" \
    "$(q "$T/k.db" "select count(*) from runs r where (select count(*) from sweep_cases c where c.run = r.id) != 1
                    or (select value from summary s where s.run = r.id and s.metric = 'completed') is null")" 0
# Orphaned workers notice the dead parent and exit; a loaded machine may
# take a while to schedule them, so poll (up to 10 s) rather than sleep.
for _ in $(seq 1 100); do
    [ "$(pgrep -f -- "$T/k.db" | wc -l)" -eq 0 ] && break
    sleep 0.1
done
check_eq "killed: no worker left running" "$(pgrep -f -- "$T/k.db" | wc -l)" 0
keys_before=$(q "$T/k.db" "select case_key from sweep_cases order by case_key")
hs_run 0 "resume after kill -9" sweep "${args[@]}" --db "$T/k.db" -j 2
check_grep "resume: skips the stored cases" "$T/err" "$n already stored"
same_db "resumed database identical to the uninterrupted one" "$T/ref.db" "$T/k.db"
check_eq "resume: no duplicate case" "$(q "$T/k.db" "select count(*) - count(distinct case_key) from sweep_cases")" 0
check_eq "resume: $N runs" "$(q "$T/k.db" "select count(*) from runs")" $N
missing=0
for k in $keys_before; do
    [ "$(q "$T/k.db" "select count(*) from sweep_cases where case_key = '$k'")" = 1 ] || missing=$((missing + 1))
done
check_eq "resume: no case finished before the kill was lost" "$missing" 0

# The same sweep as a --spec file: the same cases in the same order.
cat >"$T/spec.json" <<'EOF'
{"set": {"workload.max_requests": 1000},
 "grid": {"workload.rate": [2, 3, 4, 5, 6, 7, 8, 9], "policy": ["vllm", "sarathi"], "seed": [1, 2]}}
EOF
hs_run 0 "--spec sweep" sweep --spec "$T/spec.json" --db "$T/spec.db" -j 2 --quiet
same_db "--spec database identical to --grid" "$T/ref.db" "$T/spec.db"

# --dry-run lists without running.
hs_run 0 "dry run" sweep "${args[@]}" --grid engine.block_size=16,32 --db "$T/ref.db" --dry-run
check_eq "dry run: $N stored, $N pending" "$(grep -c ' stored ' "$T/out") $(grep -c ' pending ' "$T/out")" "$N $N"
check_eq "dry run: nothing ran" "$(q "$T/ref.db" "select count(*) from runs")" $N

# A failing case is recorded, not fatal; skipped on rerun; retried on request.
hs_run 3 "a failing case (exit 3)" sweep --set workload.max_requests=100 --grid policy=vllm,nosuch \
    --db "$T/f.db" -j 2 --quiet
check_eq "failed case recorded with its reason" \
    "$(q "$T/f.db" "select count(*) from sweep_cases where run is null and error like '%unknown policy \"nosuch\"%'")" 1
check_eq "failed case: only the good one has a run" "$(q "$T/f.db" "select count(*) from runs")" 1
hs_run 0 "rerun skips the failed case" sweep --set workload.max_requests=100 --grid policy=vllm,nosuch \
    --db "$T/f.db" -j 2
check_grep "rerun: both stored" "$T/err" "all 2 cases are stored"
hs_run 3 "--retry-failed runs it again" sweep --set workload.max_requests=100 --grid policy=vllm,nosuch \
    --db "$T/f.db" --retry-failed --quiet
check_eq "retry: still one record" "$(q "$T/f.db" "select count(*) from sweep_cases")" 2

# Two sweeps of the same cases into one file at once: each case stored once.
cc=(sweep --set workload.max_requests=300 --grid seed=1:30:1 --db "$T/cc.db" --quiet)
"$HS" "${cc[@]}" -j 1 2>"$T/cc1.err" &
p1=$!
"$HS" "${cc[@]}" -j 2 2>"$T/cc2.err"
r2=$?
wait $p1
r1=$?
check_eq "concurrent sweeps: both succeed" "$r1 $r2" "0 0"
# Say why when one failed (seen once under ASan on a loaded machine).
[ "$r1 $r2" = "0 0" ] || { echo "sweep 1 stderr:"; tail -3 "$T/cc1.err"; echo "sweep 2 stderr:"; tail -3 "$T/cc2.err"; }
check_eq "concurrent sweeps: 30 cases, 30 runs, no duplicate, no orphan run" \
    "$(q "$T/cc.db" "select count(*) || ' ' || count(distinct case_key) || ' ' || (select count(*) from runs) || ' ' ||
        (select count(*) from runs r where not exists (select 1 from sweep_cases c where c.run = r.id)) from sweep_cases")" \
    "30 30 30 0"

# A version-1 database (before sweep_cases and samples, before the
# replicas' calibration columns of version 3 and the runs' deployment and
# the views of version 4) is migrated and keeps its runs.
hs_run 0 "a plain run" run --requests 50 --db "$T/v1.db" --quiet
sqlite3 "$T/v1.db" "drop table sweep_cases; drop table samples;
    alter table replicas drop column calibration; alter table replicas drop column expected_err_pct;
    alter table replicas drop column engine; drop view summary_wide; drop view requests_ms;
    alter table runs drop column deployment; alter table runs drop column planner;
    update meta set value = '1' where key = 'schema_version'"
hs_run 0 "sweep into a version-1 database" sweep --set workload.max_requests=50 --grid seed=5,6 --db "$T/v1.db" --quiet
check_eq "migrated: version 4, old run kept, 2 cases added" \
    "$(q "$T/v1.db" "select (select value from meta where key = 'schema_version') || ' ' || (select count(*) from runs) || ' ' || (select count(*) from sweep_cases)")" "4 3 2"
check_eq "migrated: the old run has no deployment, the new ones do, all in summary_wide" \
    "$(q "$T/v1.db" "select count(*) filter (where deployment is null) || ' ' || count(*) filter (where planner = 'uniform') || ' ' || (select count(*) from summary_wide) from runs")" "1 2 3"
check_eq "migrated: the old run's replicas have no calibration, the new ones do" \
    "$(q "$T/v1.db" "select count(distinct run) from replicas where calibration is null") $(q "$T/v1.db" "select count(distinct run) from replicas where calibration like '%a100-80g%'")" "1 2"

# Bad input: one line naming the key; no database file.
hs_run 2 "unknown key" sweep --grid engine.nosuch=1,2 --db "$T/bad.db"
check_grep "unknown key: named" "$T/err" "nosuch"
check_eq "unknown key: one line" "$(wc -l <"$T/err")" 1
check "unknown key: no database" ! -e "$T/bad.db"
hs_run 2 "bad range" sweep --grid workload.rate=5:1:1 --db "$T/bad.db"
check_grep "bad range: says why" "$T/err" "A <= B"
hs_run 2 "value out of range" sweep --grid engine.block_size=16,-4 --db "$T/bad.db"
check_grep "out of range: names the case" "$T/err" "case 2"
check "out of range: no database" ! -e "$T/bad.db"
hs_run 2 "unknown kernels" sweep --grid perf.quant_kernels=awq,bogus --db "$T/bad.db"
check_grep "unknown kernels: named" "$T/err" 'perf\.quant_kernels: "awq"'
check_eq "unknown kernels: one line" "$(wc -l <"$T/err")" 1
check "unknown kernels: no database" ! -e "$T/bad.db"

# SIGINT stops the sweep cleanly: exit 1 with one line, workers gone, its
# scratch folder removed, the stored cases whole; a rerun completes.
# The sweep gets a scratch parent of its own (TMPDIR): under ctest -j, other
# tests' sweeps (e2e_report, e2e_search, e2e_sweep_mpi) create and remove
# their folders in /dev/shm meanwhile, so counting /dev/shm's folders before
# and after failed now and then without any folder being left.
mkdir -p "$T/scratch-int"
TMPDIR="$T/scratch-int" "$HS" sweep --set workload.max_requests=20000 --grid seed=1:24:1 --db "$T/int.db" -j 2 \
    --quiet 2>"$T/int.err" &
pint=$!
for _ in $(seq 1 100); do
    # plain sqlite3: the file may not exist yet, which q would count as a failed query
    [ "$(sqlite3 "$T/int.db" "select count(*) from sweep_cases" 2>/dev/null || echo 0)" -ge 2 ] 2>/dev/null && break
    sleep 0.1
done
# The sweep is still running here (24 long cases), so its folder exists.
check_eq "SIGINT: the sweep's scratch folder is in TMPDIR" "$(ls "$T/scratch-int" | grep -c '^hetsim-sweep')" 1
kill -INT $pint
wait $pint
rint=$?
check_eq "SIGINT: exit 1" "$rint" 1
check_grep "SIGINT: says how to resume" "$T/int.err" "interrupted by signal 2: .* run the sweep again to resume"
check_eq "SIGINT: no scratch folder left" "$(ls -A "$T/scratch-int" | wc -l)" 0
check_eq "SIGINT: stored cases whole" "$(q "$T/int.db" "select count(*) from sweep_cases where run is not null and run not in (select id from runs)")" 0
hs_run 0 "SIGINT: rerun completes" sweep --set workload.max_requests=20000 --grid seed=1:24:1 --db "$T/int.db" -j 2 --quiet
check_eq "SIGINT: 24 runs after the rerun" "$(q "$T/int.db" "select count(*) from runs")" 24

e2e_finish
