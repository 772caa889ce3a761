#!/usr/bin/env bats
# --force in the tar layout beside a dead run's orphan shard (a complete shard no manifest line
# names: a run killed between its shard's name and its lines): the --force run redoes every input,
# the orphan's samples included, instead of adopting them and dropping its own redo.
# Oracles: json (the manifest's lines), Python's tarfile, numpy and xxhash (tar_check.py).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

@test "tar --force beside an orphan shard: every input redone by this run, compact leaves one sample each" {
    n=$(ls "$IMG" | wc -l)
    tar_run "$T/o" -q --shard-size 40K
    [ "$status" -eq 0 ]
    # the state a SIGKILL between a shard's rename and its lines leaves: the shard, no lines
    orphan=$(basename "$(ls "$T"/o/shard-*.tar | sed -n 2p)")
    grep -v "\"shard\":\"$orphan\"" "$T/o/manifest.jsonl" > "$T/m" || true
    [ "$(wc -l < "$T/m")" -lt "$(wc -l < "$T/o/manifest.jsonl")" ]
    cp "$T/m" "$T/o/manifest.jsonl"
    tar_run "$T/o" --shard-size 40K --force
    [ "$status" -eq 0 ]
    [[ "$output" =~ "$n ok, 0 failed, 0 skipped" ]]
    [[ ! "$output" =~ "adopted" ]]
    # every input's newest line is one of this run's (one run id among them), none in the orphan
    run "$PY" - "$T/o/manifest.jsonl" "$orphan" <<'PY'
import json, sys
latest = {}
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    latest[r["input"]] = r
runs = {r["run"] for r in latest.values()}
assert len(runs) == 1, runs
assert all(r["status"] == "ok" and r["shard"] != sys.argv[2] for r in latest.values())
print(len(latest))
PY
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" -eq "$n" ]
    run "$MVEMBED" manifest compact "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    tar_check "$T/o" --ok "$n" --one-sample
    # the orphan's samples were dead: compact removed them, and a resume skips every input
    tar_run "$T/o" --shard-size 40K
    [[ "$output" =~ "0 ok, 0 failed, $n skipped" ]]
}
