#!/usr/bin/env bash
# e2e_fetch_traces.sh - tools/fetch-traces without the network: a local
# manifest of fixtures copied with --from and downloaded through file://
# URLs (curl), checksums enforced (a corrupt file is refused and never
# lands under its name), idempotent reruns, resumption of a .part left by
# an interrupted download, a checksum recorded for files published
# without one, no network as one line (exit 3), bad usage (exit 2).  With
# the real traces in $HS_SHARED_DATA/traces it also checks the built-in
# checksums against them.
set -u
. "$(dirname "$0")/fixtures/lib.sh"

FT="$HS_ROOT/tools/fetch-traces"
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP: curl not found"
    exit 77
fi
# ft WANT-RC NAME ARGS...: like hs_run, for the script.
ft() {
    local want=$1 name=$2 rc; shift 2
    "$FT" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" = "$want" ]; then ok "$name (exit $rc)"; return 0; fi
    bad "$name" "exit $rc, want $want; stderr: $(head -c 400 "$T/err")"
    return 1
}

mkdir -p "$T/src"
cp "$HS_ROOT/traces/azure-mini.csv" "$T/src/conv.csv"
cp "$HS_ROOT/traces/sharegpt-mini.csv" "$T/src/stats.csv"
printf 'unpinned,1\n' >"$T/src/free.csv"
s1=$(sha256sum "$T/src/conv.csv" | cut -d' ' -f1)
s2=$(sha256sum "$T/src/stats.csv" | cut -d' ' -f1)
cat >"$T/man" <<EOF
# name file sha256 url
conv conv.csv $s1 file://$T/src/conv.csv
stats stats.csv $s2 file://$T/src/stats.csv
free free.csv - file://$T/src/free.csv
EOF

ft 0 "--from copies and verifies" --manifest "$T/man" --dir "$T/a" --from "$T/src" conv stats
check "--from: conv.csv there" -s "$T/a/conv.csv"
check_eq "--from: identical bytes" "$(sha256sum <"$T/a/conv.csv" | cut -d' ' -f1)" "$s1"
check_eq "--from: one ok line per trace" "$(grep -c 'sha256 ok' "$T/out")" 2
ft 0 "idempotent rerun" --manifest "$T/man" --dir "$T/a" --from "$T/src" conv stats
check_eq "rerun: both already present" "$(grep -c 'present, sha256 ok' "$T/out")" 2

ft 0 "download through file:// URLs" --manifest "$T/man" --dir "$T/b" conv stats
check_eq "download: identical bytes" "$(sha256sum <"$T/b/stats.csv" | cut -d' ' -f1)" "$s2"

# Resume: a .part holding the first 100 bytes is completed, not restarted.
mkdir -p "$T/c"
head -c 100 "$T/src/conv.csv" >"$T/c/conv.csv.part"
ft 0 "resume a .part" --manifest "$T/man" --dir "$T/c" conv
check_eq "resume: complete file" "$(sha256sum <"$T/c/conv.csv" | cut -d' ' -f1)" "$s1"
check "resume: .part gone" ! -e "$T/c/conv.csv.part"

# A corrupt source: refused, nothing under the trace's name.
mkdir -p "$T/bad"
sed 's/,1$/,2/' "$T/src/conv.csv" >"$T/bad/conv.csv"
ft 1 "checksum mismatch refused" --manifest "$T/man" --dir "$T/d" --from "$T/bad" conv
check_grep "mismatch: says which and why" "$T/err" "^fetch-traces: conv: sha256 [0-9a-f]{64}, want $s1"
check "mismatch: no conv.csv" ! -e "$T/d/conv.csv"
check "mismatch: no .part left" ! -e "$T/d/conv.csv.part"
cp "$T/bad/conv.csv" "$T/d/conv.csv"
ft 1 "a wrong file already there" --manifest "$T/man" --dir "$T/d" conv
check_grep "wrong file: named, kept" "$T/err" "exists with sha256 .*remove it to fetch again"

# No published checksum: the first one is recorded, then enforced.
ft 0 "unpinned: first download" --manifest "$T/man" --dir "$T/e" free
check_grep "unpinned: recorded" "$T/out" "no published checksum; recorded sha256"
check_grep "unpinned: in the record" "$T/e/.fetch-traces.sha256" "  free.csv$"
printf 'changed,2\n' >"$T/src/free.csv"
rm "$T/e/free.csv"
ft 1 "unpinned: a changed file is refused later" --manifest "$T/man" --dir "$T/e" free

# No network: one line, exit 3 (port 1 on the loopback refuses at once).
cat >"$T/man2" <<EOF
conv conv.csv $s1 http://127.0.0.1:1/conv.csv
EOF
ft 3 "no network" --manifest "$T/man2" --dir "$T/f"
check_eq "no network: one line" "$(wc -l <"$T/err")" 1
check_grep "no network: says so" "$T/err" "^fetch-traces: no network: cannot reach 127.0.0.1:1"

ft 2 "unknown trace" --manifest "$T/man" --dir "$T/g" nosuch
check_grep "unknown trace: lists the names" "$T/err" "unknown trace \"nosuch\" \(known: conv, stats, free, all\)"
ft 2 "unknown option" --frob
printf 'x y.csv 12 file:///z\n' >"$T/man3"
ft 2 "bad manifest checksum" --manifest "$T/man3"
check_grep "bad manifest: names the entry" "$T/err" "entry 1 \(x\): checksum \"12\""
ft 0 "--list" --list
check_eq "--list: six public traces" "$(wc -l <"$T/out")" 6

# The built-in checksums against the real files, when this machine has them.
if [ -n "${HS_SHARED_DATA:-}" ] && [ -r "$HS_SHARED_DATA/traces/AzureLLMInferenceTrace_conv.csv" ]; then
    ft 0 "built-in checksums match the public files" --dir "$T/real" --from "$HS_SHARED_DATA/traces"
    check_eq "built-in: three verified" "$(grep -c 'sha256 ok' "$T/out")" 3
else
    echo "note: HS_SHARED_DATA/traces absent; built-in checksums not checked against the real files"
fi
e2e_finish
