#!/usr/bin/env bats
# --layout tar runs of different namings at once into one OUT over the same inputs: an unsharded
# run beside a Slurm-style --shard K/2 array (a fix-up run next to the array, or one launched
# without --shard by mistake). Each shard's commit holds OUT's commit lock and takes out the
# samples of inputs another run committed meanwhile in any manifest, so a WebDataset reader
# iterating every shard sees each input once, and the manifests hold one ok line per input.
# Oracles: Python's tarfile, json, numpy and xxhash (tar_check.py), json for the manifests.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "tar runs unsharded, --shard 0/2 and --shard 1/2 at once over one folder: every input one sample" {
    inputs "$T/in" x 3
    n=$(ls "$T/in" | wc -l)
    # each temporary shard held open 700 ms once created: the three runs' shards are open at once
    export MVEMBED_TEST_PAUSE_TAR_OPEN=700
    pids=()
    for sh in none 0/2 1/2; do
        "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 64K \
            --shard "$sh" "$T/in" 2> "$T/err-${sh/\//-}" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    unset MVEMBED_TEST_PAUSE_TAR_OPEN
    grep -h -v -e ' -> shard-' -e 'pipeline:' "$T"/err-* || true
    tar_check "$T/o" --ok "$n" --one-sample
    run "$PY" - "$T/o" "$n" <<'PY'
import collections, glob, json, sys
ok = collections.Counter()
for m in glob.glob(sys.argv[1] + "/manifest*.jsonl"):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        if r["status"] == "ok":
            ok[r.get("input_abs", r["input"])] += 1
assert len(ok) == int(sys.argv[2]) and set(ok.values()) == {1}, ok
print("ok", len(ok))
PY
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$(ls -A "$T/o" | grep '^\.tmp')" ]
    # the runs overlapped: some commit took out samples another run had committed
    cat "$T"/err-* | grep -q 'embedded meanwhile by another run'
    # and a resume of each naming finds everything done
    for sh in none 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard "$sh" "$T/in"
        echo "$output"
        [ "$status" -eq 0 ]
        [[ "$output" =~ " 0 ok, 0 failed" ]]
    done
}
