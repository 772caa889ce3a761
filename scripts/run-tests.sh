#!/usr/bin/env bash
# run-tests.sh UNIT_BIN... - runs the C unit tests and the bats suites, counts TAP results and
# prints the closing line "N passed, N failed". Exit status is non-zero when anything failed.
# MVEMBED_BATS_FILTER limits the bats files (a glob under test/bats/); MVEMBED_BATS_EXCLUDE
# leaves some out.
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
count() { # reads TAP on stdin, echoes it, adds to the counters
    local p f
    p=$(grep -cE '^ok ' "$log" || true)
    f=$(grep -cE '^not ok ' "$log" || true)
    passed=$((passed + p)); failed=$((failed + f))
}
for t in "$@"; do
    echo "# unit: $t"
    "$t" >"$log" 2>&1; rc=$?
    cat "$log"
    count
    if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$log"; then
        echo "not ok - $t exited with status $rc"
        failed=$((failed + 1))
    fi
done
if command -v bats >/dev/null; then
    files=()
    for f in test/bats/${MVEMBED_BATS_FILTER:-*.bats}; do
        # MVEMBED_BATS_EXCLUDE: space-separated file names left out (the ASan build cannot run
        # under valgrind)
        case " ${MVEMBED_BATS_EXCLUDE:-} " in *" $(basename "$f") "*) echo "# excluded: $f"; continue ;; esac
        files+=("$f")
    done
    # A skipped test counts as a failure: a suite that skipped everything did not pass.
    bats --tap "${files[@]}" >"$log" 2>&1; rc=$?
    cat "$log"
    sk=$(grep -cE '^ok .*# skip' "$log" || true)
    count
    passed=$((passed - sk)); failed=$((failed + sk))
    if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$log"; then
        echo "not ok - bats exited with status $rc"
        failed=$((failed + 1))
    fi
else
    echo "not ok - bats is not installed (run scripts/install-deps.sh)"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
