#!/usr/bin/env bash
# e2e_plugins.sh - the plug-in contract seen from outside (issue 17):
#   - no file under sim/serve, sim/core or sim/cli names a registered policy
#     or planner (names are learnt from the registries);
#   - a policy's own keys (engine.*) and a planner's (--plan-opts) are
#     declared by the plug-in: help and list show them, a run honours them,
#     a misspelt key is one error line naming it;
#   - the research subcommands come from the planners.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

names() { "$HS" list "$1" | awk '/^[^ ]/ { print $1 }'; }
hs_run 0 "list policies" list policies && cp "$T/out" "$T/policies"
hs_run 0 "list planners" list planners && cp "$T/out" "$T/planners"
all=$( (names policies; names planners) | sort -u)
check "registries list names" "$(echo "$all" | wc -l)" -ge 10
hits=$T/hits
: >"$hits"
for n in $all; do
    # Quoted, the way code would compare or default to a name.
    grep -rn --include='*.[ch]' -F "\"$n\"" "$HS_ROOT/sim/serve" "$HS_ROOT/sim/core" "$HS_ROOT/sim/cli" >>"$hits"
    # As a word in code or comments, except names that are English or C words.
    case $n in static|uniform) continue ;; esac
    grep -rniw --include='*.[ch]' -e "$n" "$HS_ROOT/sim/serve" "$HS_ROOT/sim/core" "$HS_ROOT/sim/cli" >>"$hits"
done
check_eq "sim/serve, sim/core, sim/cli name no policy or planner" "$(wc -l <"$hits")" 0
[ -s "$hits" ] && head -5 "$hits"

# A policy's key: declared by it, listed with it and in run --help.
check_grep "list policies shows nobatch's key" "$T/policies" "engine\.nobatch_timeout_s"
hs_run 0 "run --help" run --help && check_grep "run --help lists a policy's key" "$T/out" "engine\.nobatch_timeout_s"
# ...and honoured: with a 1 ms time-out most of a burst is dropped.
common=(run --model llama-2-7b --cluster dgx-a100 --tp 1 --set max_replicas=1 --requests 40 --rate 1000 --quiet)
hs_run 0 "nobatch run" "${common[@]}" --policy nobatch --db "$T/a.db" &&
hs_run 0 "nobatch run with time-out" "${common[@]}" --policy nobatch --set engine.nobatch_timeout_s=0.001 --db "$T/b.db"
if command -v sqlite3 >/dev/null; then
    check_eq "without time-out nothing is dropped" \
        "$(sqlite3 "$T/a.db" "select count(*) from requests where dropped=1")" 0
    check_num "with a 1 ms time-out most are dropped" \
        "$(sqlite3 "$T/b.db" "select count(*) from requests where dropped=1")" 'x >= 30'
    check_grep "drop reason names the key" <(sqlite3 "$T/b.db" "select drop_reason from requests where dropped=1 limit 1") \
        "nobatch_timeout_s"
fi
hs_run 2 "unknown engine key" "${common[@]}" --set engine.nobatch_timout_s=1 --db "$T/c.db" &&
    check_grep "names the key" "$T/err" "nobatch_timout_s"
check_eq "one error line" "$(wc -l <"$T/err")" 1
hs_run 2 "policy key out of range" "${common[@]}" --set engine.nobatch_timeout_s=-1 --db "$T/c.db" &&
    check_grep "names the key" "$T/err" "nobatch_timeout_s"

# A planner's keys: listed, and a misspelt one names the key and the keys.
check_grep "list planners shows hexgen2's keys" "$T/planners" "^ +search +\"guided\""
hs_run 2 "unknown planner option" plan --planner hexgen2 --model llama-2-7b --cluster hexgen2-het1 \
    --plan-opts serch=ga &&
    check_grep "names key and planner" "$T/err" "plan_opts: serch: unknown key for planner hexgen2 \(keys: search"
hs_run 2 "option of a planner without options" plan --planner uniform --plan-opts x=1 &&
    check_grep "says it takes none" "$T/err" "planner uniform takes no options"

# A replayed deployment records the planner that made it.
if hs_run 0 "plan distserve" plan --planner distserve --model llama-2-7b --cluster hexgen2-homo-h100x8 \
        --plan-opts in=512,out=128,iters=5 --emit-deployment "$T/ds.json" --quiet &&
   hs_run 0 "replay it" run --deployment "$T/ds.json" --router weighted --requests 20 --db "$T/ds.db" --quiet &&
   command -v sqlite3 >/dev/null; then
    check_grep "runs.config names the deployment's planner" <(sqlite3 "$T/ds.db" "select config from runs") \
        '"planner":"distserve"'
fi

# Subcommands contributed by planners appear in the help and dispatch.
hs_run 0 "hetsim --help" --help
for n in $(awk '/^[^ ]/ { print $1 }' "$T/planners"); do
    if "$HS" "$n" --help >/dev/null 2>&1; then
        check_grep "--help lists subcommand $n" "$T/out" "^  $n "
    fi
done

e2e_finish
