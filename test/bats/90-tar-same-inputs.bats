#!/usr/bin/env bats
# Two --layout tar runs at once into one OUT over the same inputs (the same command launched
# twice, a Slurm array without --shard): each embeds what it did not find done when it started,
# and a shard's commit takes out the samples another run committed meanwhile, so a WebDataset
# reader iterating the shards sees every input once and the manifest has one ok line per input.
# Oracles: Python's tarfile, json, numpy and xxhash (tar_check.py), json for the run records.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

# run_both A_ARGS B_ARGS: tar runs (64K shards, each temporary shard held open 700 ms once
# created, so that both runs' shards are open at once) into $T/o; exit statuses in ra, rb
run_both() {
    export MVEMBED_TEST_PAUSE_TAR_OPEN=700
    # shellcheck disable=SC2086
    "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K $1 2> "$T/err-a" &
    local pa=$!
    # shellcheck disable=SC2086
    "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K $2 2> "$T/err-b" &
    local pb=$!
    ra=0
    rb=0
    wait "$pa" || ra=$?
    wait "$pb" || rb=$?
    unset MVEMBED_TEST_PAUSE_TAR_OPEN
    grep -v -e ' -> shard-' -e 'pipeline:' "$T/err-a" "$T/err-b" || true
}

# the checks of both tests: $1 inputs in all; every input one sample a reader sees, one ok line
# each, the runs' records' ok counts adding up to it, no temporary file left
check_once() {
    [ "$ra" -eq 0 ]
    [ "$rb" -eq 0 ]
    tar_check "$T/o" --ok "$1" --one-sample
    # one ok line per input, and its "offset" is where np.memmap finds the array that np.load
    # reads from the <key>.npy member (shards rewritten without some samples moved the others)
    run "$PY" -c '
import collections, io, json, sys, tarfile
import numpy as np
n = collections.Counter()
for line in open(sys.argv[1] + "/manifest.jsonl"):
    r = json.loads(line)
    if r["status"] == "ok":
        n[r["input_abs"] if "input_abs" in r else r["input"]] += 1
        shard = sys.argv[1] + "/" + r["shard"]
        with tarfile.open(shard) as t:
            a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
        m = np.memmap(shard, dtype=a.dtype, mode="r", offset=r["offset"], shape=a.shape)
        assert np.array_equal(a, m), ("offset", r["input"])
assert len(n) == int(sys.argv[2]) and set(n.values()) == {1}, ("ok lines per input", n)
print("ok", len(n))' "$T/o" "$1"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" -c '
import glob, json, sys
recs = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")]
assert len(recs) == 2, len(recs)
ok = sum(r["counts"]["ok"] for r in recs)
assert ok == int(sys.argv[2]), ("ok counted by the runs", ok)
print("ok")' "$T/o" "$1"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$(ls -A "$T/o" | grep '^\.tmp')" ]
}

@test "two tar runs at once over the same folder: every input one sample, one ok line" {
    inputs "$T/in" x 3
    n=$(ls "$T/in" | wc -l)
    run_both "$T/in" "$T/in"
    check_once "$n"
    # the second committer said why it kept fewer
    cat "$T/err-a" "$T/err-b" | grep -q 'embedded meanwhile by another run'
}

@test "two tar runs at once over overlapping inputs (x y and y z): every input one sample" {
    inputs "$T/in/x" x 1
    inputs "$T/in/y" y 2
    inputs "$T/in/z" z 1
    n=$(find "$T/in" -type f | wc -l)
    run_both "$T/in/x $T/in/y" "$T/in/y $T/in/z"
    check_once "$n"
}
