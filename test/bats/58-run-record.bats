#!/usr/bin/env bats
# The run record (issue 30, item 16): one JSON file per run, per shard when sharded, beside the
# manifest: the model as given with its resolved directory and snapshot commit, the resolved
# settings and fingerprint, the version, counts by status, failures by cause, bytes written,
# seconds and rates. Oracles: Python's json and os.stat, the manifest lines, `mvembed --version`.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    small_set "$T/in" empty.jpg
    cp "$ROOT/fixtures/bad/x.jpg" "$T/in/notmedia.jpg"
}

# check_record OUT RECORD MANIFEST VERSION: the record agrees with its manifest and OUT's files
check_record() {
    "$PY" - "$@" <<'PYEOF'
import collections, json, os, sys
out, rec, man, version = sys.argv[1:]
r = json.load(open(rec))
lines = [json.loads(l) for l in open(man)]
mine = [l for l in lines if l.get("run") == r["run"]]
assert mine and len(mine) == len(lines), (len(mine), len(lines))
ok = [l for l in mine if l["status"] == "ok"]
assert r["schema"] == 1 and r["status"] == "complete" and r["mvembed_version"] == version, r
assert r["manifest"] == os.path.basename(man), r["manifest"]
assert r["counts"]["ok"] == len(ok) and r["counts"]["failed"] == len(mine) - len(ok), r["counts"]
assert r["counts"]["inputs"] == r["counts"]["ok"] + r["counts"]["failed"] + r["counts"]["skipped"]
assert r["bytes_written"] == sum(os.stat(os.path.join(out, l["output"])).st_size for l in ok)
assert {l["model"] for l in mine} == {r["fingerprint"]}, r["fingerprint"]
assert sum(v["count"] for v in r["failures"].values()) == r["counts"]["failed"], r["failures"]
assert r["settings"]["backend"] == "cpu" and r["settings_line"].startswith("backend=cpu ")
assert r["seconds"] > 0 and r["finished_at"] >= r["started_at"] > 1.6e9
assert abs(r["rates"]["ok_per_second"] - len(ok) / r["seconds"]) < 1e-6 * max(1, len(ok) / r["seconds"])
print("ok", r["failures"])
PYEOF
}

@test "a run writes one run record beside its manifest that agrees with the manifest and the files" {
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 2 ]
    version=$(mvembed --version | awk '{print $2}')
    recs=("$T"/o/run-*.json)
    [ "${#recs[@]}" -eq 1 ]
    [[ "$(basename "${recs[0]}")" =~ ^run-[0-9a-f]{16}\.json$ ]]
    run check_record "$T/o" "${recs[0]}" "$T/o/manifest.jsonl" "$version"
    echo "$output"
    [[ "$output" =~ ^ok ]]
    [[ "$output" =~ "'empty': {'count': 1" ]]
    [[ "$output" =~ "'not_media': {'count': 1" ]]
    # a second run: a record of its own (all skipped), the first one kept
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    [ "$(ls "$T"/o/run-*.json | wc -l)" -eq 2 ]
}

@test "sharded runs write one run record per shard, named so that shards never collide" {
    for k in 0 1; do
        run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --shard "$k/2" "$T/in"
        [ "$status" -le 2 ]
    done
    version=$(mvembed --version | awk '{print $2}')
    for k in 0 1; do
        recs=("$T"/o/run-0000$k-of-00002-*.json)
        [ "${#recs[@]}" -eq 1 ]
        run check_record "$T/o" "${recs[0]}" "$T/o/manifest-0000$k-of-00002.jsonl" "$version"
        echo "$output"
        [[ "$output" =~ ^ok ]]
        "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["shard"] == {"k": int(sys.argv[2]), "n": 2}, r["shard"]' \
            "${recs[0]}" "$k"
    done
}

@test "the run record names the model as given, its snapshot directory and commit" {
    c=0123456789abcdef0123456789abcdef01234567
    repo="$T/hub/models--Org--Tiny"
    mkdir -p "$repo/refs" "$repo/snapshots"
    cp -r "$MODEL" "$repo/snapshots/$c"
    printf '%s' "$c" > "$repo/refs/main"
    rm "$T/in/empty.jpg" "$T/in/notmedia.jpg"
    HF_HUB_CACHE="$T/hub" mvembed -q --device cpu --model Org/Tiny --out "$T/o" "$T/in"
    run "$PY" -c '
import glob, json, os, sys
[p] = glob.glob(sys.argv[1] + "/run-*.json")
m = json.load(open(p))["model"]
assert m["given"] == "Org/Tiny" and m["commit"] == sys.argv[2], m
assert os.path.samefile(m["dir"], sys.argv[3]), m
print("ok")' "$T/o" "$c" "$repo/snapshots/$c"
    [ "$output" = ok ]
}
