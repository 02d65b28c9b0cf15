#!/usr/bin/env bash
# e2e_harden.sh - the defects a fuzzing campaign found (issue 21), each
# reproduced as the outside tester did: every reproducer exits 2 with one
# line on stderr naming the problem (or succeeds where the input is valid),
# leaves no database behind, and (under the sanitized build's ctest) draws no
# sanitizer report.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

# one_line NAME: the last command's stderr ($T/err) is exactly one line.
one_line() { check_eq "$1: one stderr line" "$(awk 'END { print NR }' "$T/err")" 1; }

csv() { printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n'; printf '%s,100,10\n' "$@"; }

# F1: timestamps past int64 ns (April 2262) are range errors, in either order
csv "2300-01-01 00:00:00" "2023-01-01 00:00:00" >"$T/f1a.csv"
csv "2023-01-01 00:00:00" "2300-01-01 00:00:00" >"$T/f1b.csv"
hs_run 2 "F1 year 2300 first" trace stats "$T/f1a.csv"
one_line "F1 first"
check_grep "F1 first: names line 2 and the range" "$T/err" 'f1a\.csv:2: TIMESTAMP "2300-01-01 00:00:00": outside .*2262'
hs_run 2 "F1 year 2300 second" trace stats "$T/f1b.csv"
one_line "F1 second"
check_grep "F1 second: names line 3, not 'goes backwards'" "$T/err" 'f1b\.csv:3: TIMESTAMP .*outside'
csv "1969-12-31 23:59:59" >"$T/f1c.csv"
hs_run 2 "F1 before the epoch" trace stats "$T/f1c.csv"
csv "2262-04-11 00:00:00" >"$T/f1d.csv"
hs_run 0 "F1 the last whole day that fits is accepted" trace stats "$T/f1d.csv"

# F2: an idle year costs two samples per replica, not 3.15 M
csv "2023-01-01 00:00:00" "2024-01-01 00:00:00" >"$T/f2a.csv"
start=$(date +%s)
hs_run 0 "F2 a year-long idle gap" run --trace "$T/f2a.csv" --model tiny-test --db "$T/f2.db" --quiet
check_num "F2 runs in seconds" "$(( $(date +%s) - start ))" 'x < 20'
check_eq "F2 samples of replica 0: first idle, last before the arrival, after it" \
    "$(q "$T/f2.db" "select group_concat(t, ' ') from (select t from samples where replica = 0 order by t)")" \
    "10.0 31535990.0 31536000.0"
check_eq "F2 the skipped samples would repeat the kept one" \
    "$(q "$T/f2.db" "select util||','||kv_used||','||running||','||waiting from samples where replica = 0 order by t limit 1 offset 1")" \
    "0.0,0.0,0,0"
# a run without idle gaps keeps one sample per period
hs_run 0 "F2 busy run" run --model tiny-test --requests 400 --rate 200 --db "$T/f2b.db" --set sample_s=0.01 --quiet
sim=$(metric "$T/f2b.db" 1 simulated_s)
reps=$(q "$T/f2b.db" "select count(*) from replicas where run = 1")
busy_rows=$(q "$T/f2b.db" "select count(*) from samples where run = 1")
check_num "F2 busy run: a row per period per replica ($busy_rows rows, $reps replicas, $sim s)" "$busy_rows" \
    "x == $reps * int($sim / 0.01) || x == $reps * int($sim / 0.01 - 1e-9)"
# a row going backwards after a jump of a century: exit 2, not a hang
csv "2023-01-01 00:00:00" "2123-01-01 00:00:00" "2023-01-02 00:00:00" >"$T/f2c.csv"
start=$(date +%s)
hs_run 2 "F2 backwards after +100 years" run --trace "$T/f2c.csv" --model tiny-test --db "$T/f2c.db" --quiet
one_line "F2 backwards"
check_grep "F2 names line 4" "$T/err" 'f2c\.csv:4: TIMESTAMP .* goes backwards'
check_num "F2 backwards fails fast" "$(( $(date +%s) - start ))" 'x < 20'
check_eq "F2 no database left" "$(ls "$T"/f2c.db* 2>/dev/null)" ""

# F3, F4: validate range-checks measured times and refuses an empty schedule
sed -n '/^cat >"\$T\/s.jsonl"/,/^JSON/p' "$HS_ROOT/tests/e2e_validate.sh" | sed '1d;$d' >"$T/s.jsonl"
hs_run 0 "a run to attach validations to" run --requests 5 --model tiny-test --db "$T/v.db" --quiet
printf 'it,measured_ns\n0,8000000\n1,99999999999999999999\n2,4000000\n' >"$T/huge.csv"
hs_run 2 "F3 measured time of 1e20 ns" validate --schedule "$T/s.jsonl" --measured "$T/huge.csv" --db "$T/v.db"
one_line "F3"
check_grep "F3 names line 3" "$T/err" 'huge\.csv:3: measured time .* more than an hour'
check_eq "F3 nothing stored" "$(q "$T/v.db" "select count(*) from validations")" 0
head -1 "$T/s.jsonl" >"$T/header-only.jsonl"
printf 'it,measured_ns\n0,8000000\n' >"$T/one.csv"
hs_run 2 "F4 header-only schedule" validate --schedule "$T/header-only.jsonl" --measured "$T/one.csv" --db "$T/v.db"
one_line "F4"
check_grep "F4 says the schedule has no iteration" "$T/err" 'header-only\.jsonl: replica 0 ran no iteration'

# F5: control characters from the input are escaped, the error stays one line
hs_run 2 "F5 newline in --policy" run --policy "$(printf 'a\nb\033[31m')" --db "$T/f5.db" --quiet
one_line "F5 --policy"
check_grep "F5 --policy escaped" "$T/err" 'unknown policy "a\\nb\\x1b\[31m"'
printf '{"engine": {"a\\nb": 1}}' >"$T/f5.json"
hs_run 2 "F5 newline in a JSON key" run --config "$T/f5.json" --db "$T/f5.db" --quiet
one_line "F5 JSON key"
check_grep "F5 JSON key escaped" "$T/err" 'f5\.json: engine: unknown key "a\\nb"'
check_eq "F5 no database left" "$(ls "$T"/f5.db* 2>/dev/null)" ""

# F6: requests in flight are capped (engine.max_pending_mb), exit 2 before
# the memory is taken
hs_run 2 "F6 2^31 requests arriving faster than served" run --model tiny-test --requests 2147483648 \
    --rate 1e6 --set engine.max_pending_mb=16 --db "$T/f6.db" --quiet
one_line "F6"
check_grep "F6 names the key and the budget" "$T/err" 'requests in flight exceed engine\.max_pending_mb \(16 MiB at 256 bytes each\)'
check_eq "F6 no database left" "$(ls "$T"/f6.db* 2>/dev/null)" ""
hs_run 2 "F6 cap out of range" run --set engine.max_pending_mb=0 --db "$T/f6.db" --quiet
one_line "F6 range"

# A database that cannot be written is refused before planning and simulating.
hs_run 0 "a database to protect" run --model tiny-test --requests 5 --db "$T/ro.db" --quiet
chmod 444 "$T/ro.db"
chmod 555 "$T"
if [ "$(id -u)" = 0 ]; then
    # root writes anything: run as nobody, when the build is readable to it
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    if ! command -v setpriv >/dev/null || ! "${as[@]}" test -x "$HS"; then as=(); fi
else
    as=(env)
fi
if [ ${#as[@]} -gt 0 ]; then
    "${as[@]}" "$HS" run --model tiny-test --requests 200000 --rate 1000 --db "$T/ro.db" >"$T/out" 2>"$T/err"
    check_eq "read-only --db: exit 2" "$?" 2
    one_line "read-only --db"
    check_grep "read-only --db named" "$T/err" 'ro\.db: the database is not writable'
    "${as[@]}" "$HS" run --model tiny-test --requests 5 --db "$T/new.db" >"$T/out" 2>"$T/err"
    check_eq "--db in a read-only folder: exit 2" "$?" 2
    check_grep "--db folder named" "$T/err" 'new\.db: cannot create the database: folder'
else
    echo "skip read-only --db checks: running as root without setpriv"
fi
chmod 755 "$T"
check_eq "read-only --db untouched" "$(q "$T/ro.db" "select count(*) from runs")" 1

# The other commands' own error lines are escaped too, and search checks
# its database before printing or probing anything.
hs_run 2 "F5 search mode" search "$(printf 'cap\nx')"
one_line "F5 search mode"
check_grep "F5 search mode escaped" "$T/err" 'unknown mode "cap\\nx"'
hs_run 2 "F5 report --format" report --db "$T/f5.db" --format "$(printf 'p\033[31m')"
one_line "F5 report --format"
hs_run 2 "search: unwritable --db" search capacity --db "$T/no/such/dir/s.db" --lo 1 --hi 2 --need 'slo_attainment>=0.9'
one_line "search: unwritable --db"
check_eq "search: nothing printed before the error" "$(cat "$T/out")" ""

e2e_finish
