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

# two_runs: tar runs over $T/a and $T/b into $T/o at once (64K shards); exit statuses in ra, rb
two_runs() {
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K "$T/a" 2> "$T/err-a" &
    local pa=$!
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K "$T/b" 2> "$T/err-b" &
    local pb=$!
    ra=0
    rb=0
    wait "$pa" || ra=$?
    wait "$pb" || rb=$?
}

@test "two unsharded tar runs at once into one OUT: both exit 0, distinct shards, every input once" {
    inputs "$T/a" a 3
    inputs "$T/b" b 3
    n=$(( $(ls "$T/a" | wc -l) + $(ls "$T/b" | wc -l) ))
    # each temporary shard waits 700 ms once created: both runs choose numbers while the other's
    # shards are open (the old binary ignores the hook; both its runs scan OUT at their start)
    export MVEMBED_TEST_PAUSE_TAR_OPEN=700
    two_runs
    cat "$T/err-a" "$T/err-b"
    [ "$ra" -eq 0 ]
    [ "$rb" -eq 0 ]
    [ "$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")" -eq "$n" ]
    tar_check "$T/o" --ok "$n" --one-sample
    [ -z "$(ls -A "$T/o" | grep -v -e '^shard-[0-9]\{5\}\.tar$' -e '^manifest.jsonl$' -e '^run-[0-9a-f]*\.json$' \
        -e '^_SUCCESS$' -e '^\.mvembed\.lock$' -e '^\.mvembed-tar\.json$')" ]
}

# shim: the LD_PRELOAD library (fs_shim) in $preload, set to make renameat2's RENAME_NOREPLACE
# fail with EINVAL, each refusal logged to $T/shim.log
shim() {
    preload=$(fs_shim "$T")
    export FS_SHIM_RENAME2=noreplace FS_SHIM_LOG="$T/shim.log"
}

@test "without RENAME_NOREPLACE (EINVAL, as on NFS): a file at a shard's name is not replaced; the run fails naming it" {
    shim
    mkdir -p "$T/o"
    inputs "$T/a" a 4 # one shard, open for a second or more (with the hook, 1.5 s more)
    MVEMBED_TEST_PAUSE_TAR_OPEN=1500 LD_PRELOAD="$preload" \
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --jobs 1 "$T/a" 2> "$T/err" &
    p=$!
    # once the run's temporary shard exists, another writer (not mvembed) takes the final name
    for i in $(seq 100); do ls -A "$T/o" 2>/dev/null | grep -q '^\.tmp-tar-' && break; sleep 0.1; done
    tmp=$(ls -A "$T/o" | grep '^\.tmp-tar-' | head -1)
    fin=${tmp#.tmp-tar-*-*-}
    [[ "$fin" =~ ^shard-[0-9]{5}\.tar$ ]]
    echo "another writer's bytes" > "$T/o/$fin"
    r=0
    wait "$p" || r=$?
    cat "$T/err"
    [ "$r" -eq 1 ]
    grep -q "$fin: exists already: not replaced" "$T/err"
    [ "$(cat "$T/o/$fin")" = "another writer's bytes" ]
    grep -q "RENAME_NOREPLACE" "$T/shim.log"   # the shim was in the way
    ! grep -q "\"shard\":\"$fin\"" "$T/o/manifest.jsonl"   # no line points into another's file
}

@test "without RENAME_NOREPLACE (EINVAL, as on NFS): two unsharded tar runs at once both exit 0, every input once" {
    shim
    inputs "$T/a" a 2
    inputs "$T/b" b 2
    n=$(( $(ls "$T/a" | wc -l) + $(ls "$T/b" | wc -l) ))
    export MVEMBED_TEST_PAUSE_TAR_OPEN=500 LD_PRELOAD="$preload"
    two_runs
    unset LD_PRELOAD
    cat "$T/err-a" "$T/err-b"
    [ "$ra" -eq 0 ]
    [ "$rb" -eq 0 ]
    grep -q "RENAME_NOREPLACE" "$T/shim.log"
    tar_check "$T/o" --ok "$n" --one-sample
    [ -z "$(ls -A "$T/o" | grep -v -e '^shard-[0-9]\{5\}\.tar$' -e '^manifest.jsonl$' -e '^run-[0-9a-f]*\.json$' \
        -e '^_SUCCESS$' -e '^\.mvembed\.lock$' -e '^\.mvembed-tar\.json$')" ]
}

@test "a tar run in another PID namespace keeps its temporary shards while a second run sweeps OUT" {
    inputs "$T/a" a 8 # a run of seconds, its shards open all along (with the hook 3 s more)
    inputs "$T/b" b 1
    n=$(( $(ls "$T/a" | wc -l) + $(ls "$T/b" | wc -l) ))
    # a pid that no process outside the namespace has (nor the next 30), for the run inside it
    free=300
    while :; do
        used=0
        for p in $(seq "$free" $((free + 30))); do [ -e "/proc/$p" ] && used=1 && break; done
        [ "$used" -eq 0 ] && break
        free=$((free + 31))
    done
    # its own /proc too (--mount-proc), as in a container: what it sees of pids is its namespace's
    unshare --pid --fork --mount-proc sh -c '
        while [ "$(sh -c "echo \$\$")" -lt "$1" ]; do :; done
        MVEMBED_TEST_PAUSE_TAR_OPEN=3000 "$2" -q --device cpu --model "$3" --out "$4" --layout tar --jobs 1 "$5"
    ' sh "$free" "$MVEMBED" "$MODEL" "$T/o" "$T/a" 2> "$T/err-a" &
    pa=$!
    for i in $(seq 200); do ls -A "$T/o" 2>/dev/null | grep -q '^\.tmp-tar-' && break; sleep 0.05; done
    tmp=$(ls -A "$T/o" | grep '^\.tmp-tar-' | head -1)
    [ -n "$tmp" ]
    pid=$(echo "$tmp" | cut -d- -f3)
    [ "$pid" -ge "$free" ]
    [ ! -e "/proc/$pid" ]   # from out here, the writer's pid runs nowhere
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/b"
    echo "second run: $output"
    [ "$status" -eq 0 ]
    [ -e "$T/o/$tmp" ] || [ -e "$T/o/${tmp#.tmp-tar-*-*-}" ]   # kept (or already renamed by its run)
    r=0
    wait "$pa" || r=$?
    echo "run in the namespace: exit $r"
    cat "$T/err-a"
    [ "$r" -eq 0 ]
    tar_check "$T/o" --ok "$n" --one-sample
}

@test "manifest compact killed by SIGTERM leaves no temporary manifest; a dead one's is swept, a locked one kept" {
    mkdir -p "$T/o"
    "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(300000):  # two lines per input: compact halves it, writing ~30 MB
        n = f"d/img{i % 150000:07d}.jpg"
        f.write(json.dumps({"input": n, "output": n + ".npy.zst", "status": "ok", "shape": [20, 64],
                            "dtype": "f32", "bytes": 5248, "model": "6e560c57e5bd22b7"}) + "\n")
PYEOF
    "$MVEMBED" manifest compact "$T/o" 2> "$T/err" &
    p=$!
    for i in $(seq 2000); do ls -A "$T/o" | grep -q '^\.tmp-.*-manifest\.jsonl$' && break; sleep 0.005; done
    ls -A "$T/o" | grep -q '^\.tmp-.*-manifest\.jsonl$'   # caught while it writes
    kill -TERM "$p"
    r=0
    wait "$p" || r=$?
    cat "$T/err"
    [ "$r" -eq 143 ]
    [ -z "$(ls -A "$T/o" | grep '^\.tmp-')" ]
    # the manifest is the old one or the compacted one, whole
    n=$(wc -l < "$T/o/manifest.jsonl")
    [ "$n" -eq 300000 ] || [ "$n" -eq 150000 ]
    "$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$T/o/manifest.jsonl"
    # a killed compact's temp manifest (its pid gone, no lock) is swept by the next compact; one
    # whose writer holds its lock (another PID namespace: its pid means nothing here) is kept
    sh -c 'exit 0' & dead=$!
    wait "$dead"
    echo partial > "$T/o/.tmp-$dead-manifest.jsonl"
    sh -c 'exit 0' & dead2=$!
    wait "$dead2"
    locked="$T/o/.tmp-$dead2-manifest.jsonl"
    echo partial > "$locked"
    hold_lock "$locked"
    run "$MVEMBED" manifest compact "$T/o"
    kill "$holder"
    [ "$status" -eq 0 ]
    [ ! -e "$T/o/.tmp-$dead-manifest.jsonl" ]
    [ "$(cat "$locked")" = partial ]
}
