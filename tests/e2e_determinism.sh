#!/usr/bin/env bash
# e2e_determinism.sh - per-seed determinism across processes: the same
# command with the same seed, run twice into two databases, stores identical
# requests, summary and replicas tables (whatever the host time zone); a
# different seed changes the rows.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# dump DB: the simulated results of run 1: no wall-clock columns, and the
# stored configuration without its db path.
dump() {
    q "$1" "select * from requests where run = 1 order by id"
    echo "--"
    q "$1" "select metric, value from summary where run = 1 order by metric"
    echo "--"
    q "$1" "select * from replicas where run = 1 order by id"
    echo "--"
    q "$1" "select seed, json_remove(config, '$.db') from runs where id = 1"
}

# same_twice TAG ARGS...: runs ARGS twice (second time in another time zone)
# and compares the dumps.
same_twice() {
    local tag=$1; shift
    hs_run 0 "$tag: first" run --db "$T/$tag-1.db" "$@" --quiet || return 1
    TZ=Asia/Kolkata LC_ALL=C hs_run 0 "$tag: second" run --db "$T/$tag-2.db" "$@" --quiet || return 1
    dump "$T/$tag-1.db" >"$T/$tag-1.txt"
    dump "$T/$tag-2.db" >"$T/$tag-2.txt"
    check_num "$tag: rows stored" "$(q "$T/$tag-1.db" "select count(*) from requests")" 'x > 0'
    if cmp -s "$T/$tag-1.txt" "$T/$tag-2.txt"; then ok "$tag: identical tables"
    else bad "$tag: identical tables" "$(diff "$T/$tag-1.txt" "$T/$tag-2.txt" | head -5)"; fi
}

same_twice synth --requests 300 --seed 42
same_twice trace --trace "$HS_ROOT/traces/azure-mini.csv" --policy sarathi --router rr --seed 3
same_twice sharegpt --trace "$HS_ROOT/traces/sharegpt-mini.csv" --cluster dgx-a100x2 --tp 4 --policy static --seed 9

# A different seed gives different rows.
if hs_run 0 "synth: other seed" run --db "$T/synth-3.db" --requests 300 --seed 43 --quiet; then
    dump "$T/synth-3.db" >"$T/synth-3.txt"
    if cmp -s "$T/synth-1.txt" "$T/synth-3.txt"; then bad "seed 43 differs from seed 42" "identical dumps"
    else ok "seed 43 differs from seed 42"; fi
    check_eq "seed 43: same request count" "$(q "$T/synth-3.db" "select count(*) from requests")" 300
    check_num "seed 43: arrivals differ" \
        "$(q "$T/synth-3.db" "attach '$T/synth-1.db' as o;
              select count(*) from requests a join o.requests b on a.id = b.id
              where a.arrival = b.arrival and a.prompt = b.prompt and a.output = b.output")" 'x < 300'
fi

# The seed set through --config (or --set seed=) must seed the workload like --seed.
echo '{"seed": 42}' >"$T/seed.json"
if hs_run 0 "seed from --config" run --db "$T/cfgseed.db" --config "$T/seed.json" --requests 300 --quiet; then
    check_eq "seed from --config: runs.seed" "$(q "$T/cfgseed.db" "select seed from runs")" 42
    q "$T/cfgseed.db" "select * from requests where run = 1 order by id" >"$T/cfgseed.txt"
    q "$T/synth-1.db" "select * from requests where run = 1 order by id" >"$T/synth-1.req"
    # The top-level seed drives the workload unless workload.seed is set.
    if cmp -s "$T/cfgseed.txt" "$T/synth-1.req"; then ok "seed from --config: same requests as --seed 42"
    else bad "seed from --config" "other requests than --seed 42"; fi
fi

e2e_finish
