#!/usr/bin/env bats
# --shard-samples N (issue 33, item 6): tar shards cut by count as well as by size, whichever
# comes first (webdataset's ShardWriter maxcount/maxsize), and kept so by resume, adoption,
# `manifest compact` and runs sharing one OUT; OUT's record of the limit refuses another one.
# Oracles: Python's tarfile (members grouped by key as WebDataset groups them), json, numpy and
# xxhash (tar_check.py), the filesystem (stat, sha256sum).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# Runs that must fill a shard take --jobs 2: two writer threads (each fills its own shard), so
# one of them gets at least half the inputs on any machine.

# limit OUT: the "shard_samples" of OUT's record as Python's json reads it
limit() {
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/.mvembed-tar.json"))["shard_samples"])' "$1"
}

@test "--shard-samples 4: every shard holds at most 4 samples, some 4; with a smaller --shard-size the size cuts first" {
    n=$(ls "$IMG" | wc -l)
    tar_run "$T/o" -q --jobs 2 --shard-samples 4
    [ "$status" -eq 0 ]
    tar_check "$T/o" --ok "$n" --one-sample --max-samples 4 --some-full
    [ "$(ls "$T/o"/shard-*.tar | wc -l)" -ge $(( (n + 3) / 4 )) ]
    [ "$(limit "$T/o")" = 4 ]
    # 40K shards hold about 4 of these samples: the size cuts before 50 samples
    tar_run "$T/s" -q --shard-samples 50 --shard-size 40K
    [ "$status" -eq 0 ]
    tar_check "$T/s" --ok "$n" --one-sample --max-samples 50
    for s in "$T/s"/shard-*.tar; do [ "$(stat -c %s "$s")" -le $((40 * 1024)) ]; done
    [ "$(ls "$T/s"/shard-*.tar | wc -l)" -gt 2 ]
}

@test "--shard-samples refuses 0, negative and garbage values, and needs --layout tar; nothing is written" {
    for bad in 0 -3 abc 4x "" 99999999999999999999999; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-samples "$bad" "$IMG"
        echo "$output"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "--shard-samples must be a positive integer: $bad" ]]
    done
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --shard-samples 4 "$IMG"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--shard-samples needs --layout tar" ]]
    [ ! -e "$T/o" ]
}

@test "tar resume with --shard-samples: a rerun (N given or left out) and an adopted orphan shard keep every shard at N or fewer" {
    n=$(ls "$IMG" | wc -l)
    # a first run over part of the inputs (as if stopped), then the rest with the same N
    ls "$IMG"/* | head -7 | "$MVEMBED" -q --device cpu --jobs 2 --model "$MODEL" --out "$T/o" --layout tar \
        --shard-samples 3 -
    (cd "$T/o" && sha256sum shard-*.tar) > "$T/sums1"
    tar_run "$T/o" --jobs 2 --shard-samples 3
    [ "$status" -eq 0 ]
    [[ "$output" =~ " $((n - 7)) ok, 0 failed, 7 skipped" ]]
    (cd "$T/o" && sha256sum -c "$T/sums1") # shards are never reopened
    tar_check "$T/o" --ok "$n" --one-sample --max-samples 3 --some-full
    # the state a SIGKILL between a shard's rename and its lines leaves; the rerun leaves out N
    orphan=$(basename "$(ls "$T"/o/shard-*.tar | sed -n 2p)")
    grep -v "\"shard\":\"$orphan\"" "$T/o/manifest.jsonl" > "$T/m"
    cp "$T/m" "$T/o/manifest.jsonl"
    mkdir "$T/more"
    for f in "$IMG"/*.png; do cp "$f" "$T/more/more-$(basename "$f")"; done
    m=$(ls "$T/more" | wc -l)
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar --jobs 2 "$IMG" "$T/more"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ ".mvembed-tar.json: shards hold at most 3 samples, as OUT's earlier runs cut them (--shard-samples 3)" ]]
    [[ "$output" =~ "samples of complete shards had no manifest line (a run stopped in between): adopted" ]]
    [[ "$output" =~ " $m ok, 0 failed, $n skipped" ]]
    tar_check "$T/o" --ok $((n + m)) --one-sample --max-samples 3 --some-full
    [ "$(limit "$T/o")" = 3 ]
}

@test "tar resume with --shard-samples after kill -9 mid-shard: the open shard's inputs are redone, every shard at N or fewer" {
    mkdir "$T/in"
    for i in $(seq -w 1 12); do cp "$IMG/png_rgb_odd_173x97.png" "$T/in/a$i.png"; done
    # the paths come through a FIFO the test keeps open: the run waits with a shard open
    mkfifo "$T/paths"
    "$MVEMBED" -q --device cpu --threads 1 --jobs 1 --model "$MODEL" --out "$T/o" --layout tar \
        --shard-samples 3 - < "$T/paths" 2> "$T/err1" &
    pid=$!
    exec 7> "$T/paths"
    ls "$T/in"/* | head -7 >&7 # two writers or more: one of them gets 4 or more, a shard of 3 completes
    for _ in $(seq 1 1200); do
        [ "$(cat "$T/o/manifest.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && ls "$T/o"/.tmp-tar-* >/dev/null 2>&1 && break
        sleep 0.05
    done
    sleep 1 # the 7 inputs are through; the last ones sit in open shards
    kill -9 "$pid"
    wait "$pid" || true
    exec 7>&-
    done1=$(wc -l < "$T/o/manifest.jsonl")
    [ "$done1" -ge 3 ] && [ "$done1" -lt 7 ] && [ $((done1 % 3)) -eq 0 ] # whole shards only
    ls "$T/o"/.tmp-tar-*-shard-*.tar
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " $((12 - done1)) ok, 0 failed, $done1 skipped" ]]
    [ -z "$(ls -A "$T/o" | grep '^\.tmp-')" ]
    tar_check "$T/o" --ok 12 --one-sample --max-samples 3 --some-full
}

@test "a rerun with another --shard-samples, or with one into an OUT cut without, is refused naming OUT's record; nothing written" {
    tar_run "$T/o" -q --shard-samples 4
    [ "$status" -eq 0 ]
    ls -A "$T/o" | grep -v '^run-' > "$T/ls1"
    sha256sum "$T/o"/* "$T/o/.mvembed-tar.json" > "$T/sums1"
    for other in 3 5; do
        tar_run "$T/o" --shard-samples $other --force
        [ "$status" -eq 1 ]
        [[ "$output" =~ "$T/o/.mvembed-tar.json: the tar shards of $T/o hold at most 4 samples each (--shard-samples 4); this run asks for at most $other samples each (--shard-samples $other)" ]]
        [[ "$output" =~ "give --shard-samples 4, or another OUT" ]]
    done
    ls -A "$T/o" | grep -v '^run-' | cmp - "$T/ls1"
    sha256sum -c "$T/sums1"
    # an OUT first written without a limit keeps none
    tar_run "$T/u" -q
    [ "$status" -eq 0 ]
    [ "$(limit "$T/u")" = None ]
    tar_run "$T/u" --shard-samples 4 --force
    [ "$status" -eq 1 ]
    [[ "$output" =~ "hold any number of samples (no --shard-samples); this run asks for at most 4 samples each" ]]
    # shards of an earlier version (no record at all): none is recorded, a limit refused
    rm "$T/u/.mvembed-tar.json"
    tar_run "$T/u" --shard-samples 4 --force
    [ "$status" -eq 1 ]
    [[ "$output" =~ "written before OUT had this record" ]]
    [ ! -e "$T/u/.mvembed-tar.json" ]
    tar_run "$T/u" -q
    [ "$status" -eq 0 ]
    [ "$(limit "$T/u")" = None ]
}

@test "a damaged OUT/.mvembed-tar.json (not JSON, a limit of 0, a directory) stops a tar run naming it (exit 1), no shard" {
    mkdir -p "$T/o"
    for bad in 'garbage' '{"shard_samples": 0}' '{"shard_samples": "4"}' '{}'; do
        printf '%s\n' "$bad" > "$T/o/.mvembed-tar.json"
        tar_run "$T/o" -q
        [ "$status" -eq 1 ]
        [[ "$output" =~ "$T/o/.mvembed-tar.json: not a record of the tar shards' sample limit" ]]
    done
    rm "$T/o/.mvembed-tar.json"
    mkdir "$T/o/.mvembed-tar.json"
    tar_run "$T/o" -q --shard-samples 4
    [ "$status" -eq 1 ]
    [[ "$output" =~ "$T/o/.mvembed-tar.json: cannot read OUT's record of the tar shards' sample limit: not a regular file" ]]
    [ -z "$(ls "$T/o" | grep '^shard-')" ]
    [ ! -s "$T/o/manifest.jsonl" ]
}

@test "manifest compact after --force reruns with --shard-samples: shards still hold at most N samples, one per input" {
    inputs "$T/in" a 2
    n=$(ls "$T/in" | wc -l)
    IMG="$T/in"
    tar_run "$T/o" -q --jobs 2 --shard-samples 5
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-samples 5 --force "$IMG"/*png*
    [ "$status" -eq 0 ]
    run "$MVEMBED" manifest compact "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "compacted shards: "[0-9]+" dead samples (inputs redone since) removed, "[1-9][0-9]*" shards rewritten" ]]
    tar_check "$T/o" --ok "$n" --one-sample --max-samples 5
}

# two_runs N_A N_B [ARGS...]: tar runs over $T/a (--shard-samples N_A) and $T/b (N_B) into $T/o
# at once; exit statuses in ra, rb
two_runs() {
    local na=$1 nb=$2
    shift 2
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --jobs 2 --shard-samples "$na" "$@" "$T/a" 2> "$T/err-a" &
    local pa=$!
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --jobs 2 --shard-samples "$nb" "$@" "$T/b" 2> "$T/err-b" &
    local pb=$!
    ra=0
    rb=0
    wait "$pa" || ra=$?
    wait "$pb" || rb=$?
    cat "$T/err-a" "$T/err-b"
}

@test "two tar runs at once into one OUT with --shard-samples 3: every shard holds 3 or fewer, every input once" {
    inputs "$T/a" a 2
    inputs "$T/b" b 2
    n=$(( $(ls "$T/a" | wc -l) + $(ls "$T/b" | wc -l) ))
    export MVEMBED_TEST_PAUSE_TAR_OPEN=300 # shards of both runs open at the same time
    two_runs 3 3
    [ "$ra" -eq 0 ]
    [ "$rb" -eq 0 ]
    tar_check "$T/o" --ok "$n" --one-sample --max-samples 3 --some-full
    # and two --shard K/2 runs, each with its own manifest and naming, under the same record
    rm -rf "$T/o"
    two_runs 3 3 --shard 0/2
    [ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
    two_runs 3 3 --shard 1/2
    [ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
    ls "$T/o"/shard-00000-of-00002-*.tar "$T/o"/shard-00001-of-00002-*.tar
    tar_check "$T/o" --ok "$n" --one-sample --max-samples 3 --some-full
}

@test "two tar runs at once with different --shard-samples: one is refused, every shard keeps the other's limit" {
    inputs "$T/a" a 2
    inputs "$T/b" b 2
    export MVEMBED_TEST_PAUSE_TAR_OPEN=300
    two_runs 2 5
    echo "ra=$ra rb=$rb"
    [ $((ra + rb)) -eq 1 ] # one exits 0, the other 1
    if [ "$ra" -eq 0 ]; then won=2 lost=5 dir=a; else won=5 lost=2 dir=b; fi
    grep -q "hold at most $won samples each (--shard-samples $won); this run asks for at most $lost samples each" "$T/err-a" "$T/err-b"
    [ "$(limit "$T/o")" = "$won" ]
    tar_check "$T/o" --ok "$(ls "$T/$dir" | wc -l)" --one-sample --max-samples "$won" --some-full
}
