#!/usr/bin/env bats
# Many runs, one tar-layout OUT (issue 30: items 4, 5, 9): runs at once pick distinct shard
# numbers, temporary shards of a run in another PID namespace are not swept, and a file system
# without RENAME_NOREPLACE never gets a shard replaced.
# Oracles: Python's tarfile, json, numpy and xxhash (tar_check.py), util-linux's unshare, the
# filesystem.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# check OUT [ARGS...]: tar_check.py's verdict on OUT
check() {
    run "$PY" "$ROOT/test/bats/tar_check.py" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" =~ ^ok ]]
}

# inputs DIR PREFIX COPIES: DIR holds COPIES copies of every fixture image, named PREFIX-i-<name>
inputs() {
    mkdir -p "$1"
    for i in $(seq "$3"); do
        for f in "$IMG"/*; do cp "$f" "$1/$2-$i-$(basename "$f")"; done
    done
}

@test "two unsharded tar runs at once into one OUT: both exit 0, distinct shards, every input once" {
    inputs "$T/a" a 3
    inputs "$T/b" b 3
    n=$(( $(ls "$T/a" | wc -l) + $(ls "$T/b" | wc -l) ))
    # each temporary shard waits 700 ms once created: both runs choose numbers while the other's
    # shards are open (the old binary ignores the hook; both its runs scan OUT at their start)
    export MVEMBED_TEST_PAUSE_TAR_OPEN=700
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K "$T/a" 2> "$T/err-a" &
    pa=$!
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K "$T/b" 2> "$T/err-b" &
    pb=$!
    ra=0; rb=0
    wait "$pa" || ra=$?
    wait "$pb" || rb=$?
    cat "$T/err-a" "$T/err-b"
    [ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
    [ "$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")" -eq "$n" ]
    check "$T/o" --ok "$n" --one-sample
    [ -z "$(ls -A "$T/o" | grep -v -e '^shard-[0-9]\{5\}\.tar$' -e '^manifest.jsonl$')" ]
}
