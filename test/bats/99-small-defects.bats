#!/usr/bin/env bats
# Small defects: what `manifest compact` reports for the tar layout, which error a fatal run prints
# first, and --pool mean's unsharded and --shard directories in one OUT.
# Oracles: Python's json (lines a manifest holds), numpy (pooled arrays: pooled_check.py).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# compact_said OUTPUT: checks each "compacted M: A lines -> B (C ok, D not ok)" line of OUTPUT
# against what manifest M holds now, as Python's json reads it
compact_said() {
    "$PY" - "$1" <<'PYEOF'
import json, re, sys
said = re.findall(r"compacted (\S+): (\d+) lines -> (\d+) \((\d+) ok, (\d+) not ok\)", sys.argv[1])
assert said, sys.argv[1]
for path, before, after, ok, notok in said:
    recs = [json.loads(l) for l in open(path) if l.strip()]
    n_ok = sum(r.get("status") == "ok" for r in recs)
    assert (int(after), int(ok), int(notok)) == (len(recs), n_ok, len(recs) - n_ok), (path, after, ok, notok, len(recs), n_ok)
    print(path, before, "->", len(recs))
PYEOF
}

@test "tar compact: the line counts printed are those the manifests hold once dead samples' lines are out" {
    small_set "$T/in"
    IMG="$T/in"
    tar_run "$T/o" -q
    [ "$status" -eq 0 ]
    # a sharded --force rerun: the shard manifest's lines are newer, so manifest.jsonl's lines
    # for those inputs name dead samples, and compact takes them out of manifest.jsonl
    tar_run "$T/o" -q --shard 0/2 --force
    [ "$status" -eq 0 ]
    tar_run "$T/o" -q --shard 1/2 --force
    [ "$status" -eq 0 ]
    run "$MVEMBED" manifest compact --all "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "compacted shards: "[1-9][0-9]*" dead samples" ]]
    compact_said "$output"
    tar_check "$T/o" --ok 5 --one-sample
}

@test "a fatal write error: the cause (the output and errno's text) is told first, the run record's failure after it" {
    small_set "$T/in"
    efbig=$("$PY" -c 'import errno, os; print(os.strerror(errno.EFBIG))')
    local layout
    for layout in files tar; do
        rm -rf "$T/o"
        # 1 KiB a file: no output fits, nor does the run record (SIGXFSZ ignored: write() fails)
        run bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' _ "$MVEMBED" -q --device cpu --model "$MODEL" \
            --layout $layout --out "$T/o" "$T/in"
        echo "--layout $layout: status $status"
        echo "$output"
        [ "$status" -eq 1 ]
        # the first line names an output of OUT (a .npy.zst, or a shard) and the cause
        [[ "${lines[0]}" =~ ^"mvembed: $T/o/"[^:]*(\.npy\.zst|shard-[0-9]+\.tar)": ".*"$efbig" ]]
        [[ ! "${lines[0]}" =~ "/.tmp-" ]]
        # the run record could not be written either, and says so after the cause
        [ "${#lines[@]}" -ge 2 ]
        [[ "${lines[-1]}" =~ ^"mvembed: $T/o/.tmp-"[0-9]+"-run-"[0-9a-f]+".json: write: $efbig"$ ]]
        [ "$(find "$T/o" -name 'run-*.json' | wc -l)" -eq 0 ]
    done
}

# pool_run OUT [ARGS...]: a --pool mean run over $T/in into OUT (status and output as run sets them)
pool_run() {
    local out=$1
    shift
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$out" --pool mean "$@" "$T/in"
    echo "$output"
}

# both_kinds_read OUT: the README-recommended readings of OUT's pooled directories, with numpy
# (pooled_check.py): OUT/pooled/ alone holds each of the 5 inputs once, and so do the
# pooled-*-of-*/ directories alone
both_kinds_read() {
    pooled_check "$1" 5 --dirs pooled --exact
    [ "${lines[-1]}" = "ok 5 1" ]
    pooled_check "$1" 5 --dirs 'pooled-*-of-*' --exact
    [ "${lines[-1]}" = "ok 5 2" ]
}

# warned OUTPUT A B: OUTPUT warns that directory A of $T/o holds rows B holds, and which to read
warned() {
    [[ "$1" =~ "mvembed: warning: $T/o/$2/ also hold"s?" rows of inputs $T/o/$3/ holds" ]]
    [[ "$1" =~ "read $T/o/pooled/ alone or the pooled-*-of-*/ directories alone, never both" ]]
}

# unsharded_then_shards LAYOUT_ARGS...: a run without --shard, then --shard 0/2 and 1/2, into $T/o
# (the shard runs find every input done): each shard run says pooled/ holds its rows too
unsharded_then_shards() {
    small_set "$T/in"
    pool_run "$T/o" "$@"
    [ "$status" -eq 0 ]
    [[ ! "$output" =~ "warning" ]]
    pool_run "$T/o" --shard 0/2 -q "$@"
    [ "$status" -eq 0 ]
    warned "$output" pooled pooled-00000-of-00002
    pool_run "$T/o" --shard 1/2 "$@"
    [ "$status" -eq 0 ]
    warned "$output" pooled pooled-00001-of-00002
    both_kinds_read "$T/o"
}

# shards_then_unsharded LAYOUT_ARGS...: --shard 0/2 and 1/2, then a run without --shard (it finds
# every input done) into $T/o: the last one says the shards' directories hold its rows too
shards_then_unsharded() {
    small_set "$T/in"
    pool_run "$T/o" --shard 0/2 "$@"
    [ "$status" -eq 0 ]
    pool_run "$T/o" --shard 1/2 "$@"
    [ "$status" -eq 0 ]
    [[ ! "$output" =~ "warning" ]]
    pool_run "$T/o" "$@"
    [ "$status" -eq 0 ]
    warned "$output" "pooled-00000-of-00002/ and 1 more pooled-*-of-*" pooled
    both_kinds_read "$T/o"
}

@test "files layout --pool mean: a run without --shard, then --shard K/2: each says pooled/ holds its rows too" {
    unsharded_then_shards
}

@test "tar layout --pool mean: a run without --shard, then --shard K/2: each says pooled/ holds its rows too" {
    unsharded_then_shards --layout tar
}

@test "files layout --pool mean: --shard K/2, then a run without --shard: it says the shards' directories hold its rows" {
    shards_then_unsharded
}

@test "tar layout --pool mean: --shard K/2, then a run without --shard: it says the shards' directories hold its rows" {
    shards_then_unsharded --layout tar
}
