# exec/tests/lib.sh - helpers shared by the executor's shell tests; sourced
# after setting $bin (the hetsim-exec binary).  Gives $tmp (removed on exit),
# fail, expect_error and finish.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_error NAME PATTERN ARGS...: exit code 2 and exactly one line on
# stderr, matching the extended regex PATTERN.
expect_error() {
    local name=$1 pat=$2; shift 2
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "$name: exit $rc, expected 2"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$tmp/err")"
    grep -qE -- "$pat" "$tmp/err" || fail "$name: stderr does not match /$pat/: $(cat "$tmp/err")"
    echo "ok: $name -> $(cat "$tmp/err")"
}

# finish: the exit status of the script.
finish() {
    if [ "$fails" -gt 0 ]; then
        echo "$fails failure(s)"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
