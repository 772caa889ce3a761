#!/usr/bin/env bats
# Many writers of one OUT, tar layout with --pool mean: a --shard K/N run's pooled directory
# (pooled-KKKKK-of-NNNNN/) holds a row for every input of its shard, also those a run of another
# naming (an unsharded fix-up run, before it or beside it) embedded, so that the shards' pooled
# directories together hold every input once. Oracles: json (the manifests), tarfile + numpy (the
# samples and the pooled arrays).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    jpg_png_set "$T/in"
}

# tar_pooled_shards OUT N: pooled-K-of-2 (K = 0, 1) has one row per index line, each numpy's mean
# of that input's newest sample (read from its shard with tarfile); the two together index all N
# inputs, each once (pooled_check.py; the index's relative inputs are resolved from $T)
tar_pooled_shards() {
    pooled_check "$1" "$2" --base "$T"
}

@test "tar --pool mean: --shard K/2 runs after an unsharded run did every input: each shard's pooled directory has its inputs' rows" {
    cd "$T"
    for sh in none 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out o --layout tar --pool mean --shard "$sh" in
        echo "$output"
        [ "$status" -eq 0 ]
    done
    [[ "$output" =~ " 0 ok, 0 failed" ]] # the last shard's inputs were all done: skipped
    tar_pooled_shards "$T/o" "$N"
}

@test "tar --pool mean: the fix-up run names the folder from /, the shards by a relative path: rows for every input" {
    cd "$T"
    run "$MVEMBED" --device cpu --model "$MODEL" --out o --layout tar --pool mean "$T/in"
    [ "$status" -eq 0 ]
    for sh in 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out o --layout tar --pool mean --shard "$sh" ./in
        echo "$output"
        [ "$status" -eq 0 ]
    done
    tar_pooled_shards "$T/o" "$N"
}

@test "tar --pool mean: an unsharded run and --shard 0/2, 1/2 at once: each shard's pooled directory has its inputs' rows" {
    rm -r "$T/in"
    inputs "$T/in" x 6 # enough that the unsharded run is still going when the others start
    N=$(ls "$T/in" | wc -l)
    cd "$T"
    # one sample a shard, so that the unsharded run's lines come one by one; once it has written
    # some it is stopped (SIGSTOP) until both --shard runs have started their pipelines, so that
    # the three overlap however slowly the shard runs start on a loaded machine
    timeout 300 "$MVEMBED" -v --device cpu --model "$MODEL" --out o --threads 1 --jobs 1 --layout tar \
        --shard-samples 1 --pool mean in 2> "$T/err-none" &
    pids=($!)
    for _ in $(seq 600); do
        [ "$(cat o/manifest.jsonl 2>/dev/null | wc -l)" -lt 3 ] || break
        sleep 0.05
    done
    pkill -STOP -P "${pids[0]}" # timeout's child: the run itself
    for sh in 0/2 1/2; do
        timeout 300 "$MVEMBED" -v --device cpu --model "$MODEL" --out o --threads 1 --jobs 1 --layout tar \
            --shard-samples 1 --pool mean --shard "$sh" in 2> "$T/err-${sh/\//-}" &
        pids+=($!)
    done
    for _ in $(seq 1200); do
        [ "$(cat "$T/err-0-2" "$T/err-1-2" 2>/dev/null | grep -c 'mvembed: pipeline:')" -lt 2 ] || break
        sleep 0.05
    done
    pkill -CONT -P "${pids[0]}"
    for p in "${pids[@]}"; do wait "$p"; done
    # they did run at once: a shard run's record starts before the unsharded run's ends (json)
    "$PY" - "$T/o" <<'PY'
import glob, json, sys
recs = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")]
none = [r for r in recs if r["shard"] is None]
shards = [r for r in recs if r["shard"] is not None]
assert len(none) == 1 and len(shards) == 2, recs
assert any(r["started_at"] < none[0]["finished_at"] for r in shards), [(r["started_at"], r["finished_at"]) for r in recs]
PY
    tar_pooled_shards "$T/o" "$N"
}
