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
assert r["schema"] == 2 and r["status"] == "complete" and r["mvembed_version"] == version, r
assert r["manifest"] == os.path.basename(man), r["manifest"]
assert r["counts"]["ok"] == len(ok) and r["counts"]["failed"] == len(mine) - len(ok), r["counts"]
assert r["counts"]["inputs"] == r["counts"]["ok"] + r["counts"]["failed"] + r["counts"]["skipped"]
assert r["bytes_written"] == sum(os.stat(os.path.join(out, l["output"])).st_size for l in ok)
assert {l["model"] for l in mine} == {r["fingerprint"]}, r["fingerprint"]
assert sum(v["count"] for v in r["failures"].values()) == r["counts"]["failed"], r["failures"]
bad = [l for l in mine if l["status"] != "ok"]
for cause, f in r["failures"].items(): # each cause's example is the message of one of its lines
    assert any(f["example"] == l["error"] and f["example_input"] == l["input"] for l in bad), f
import datetime
for k in ("started_at", "finished_at"):
    t = datetime.datetime.strptime(r[k + "_utc"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    assert abs(t.timestamp() - r[k]) < 1e-3, (k, r[k], r[k + "_utc"])
assert r["tar_shards"] is None and r["marker"] == ("_SUCCESS" if r["shard"] is None else
                                                    "_SUCCESS-%05d-of-%05d" % (r["shard"]["k"], r["shard"]["n"]))
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

# check_tar_shards OUT RECORD: the record's tar_shards equal what Python's tarfile counts in each
# shard (.npy members, their bytes, the file's size) and name exactly the shards whose samples
# the run's manifest lines name; prints the number of shards
check_tar_shards() {
    "$PY" - "$@" <<'PYEOF'
import json, os, sys, tarfile
out, rec = sys.argv[1:]
r = json.load(open(rec))
lines = [json.loads(l) for l in open(os.path.join(out, r["manifest"]), "rb")]
named = {l["shard"] for l in lines if l.get("run") == r["run"] and l["status"] == "ok"}
shards = r["tar_shards"]
assert set(shards) == named and named, (sorted(shards), sorted(named))
for name, s in shards.items():
    with tarfile.open(os.path.join(out, name)) as t:
        npy = [m for m in t.getmembers() if m.name.endswith(".npy")]
    assert s["samples"] == len(npy), (name, s, len(npy))
    assert s["embedding_bytes"] == sum(m.size for m in npy), (name, s)
    assert s["bytes"] == os.path.getsize(os.path.join(out, name)), (name, s)
assert sum(s["samples"] for s in shards.values()) == r["counts"]["ok"], r["counts"]
assert sum(s["embedding_bytes"] for s in shards.values()) == r["bytes_written"]
print(len(shards))
PYEOF
}

@test "tar layout: the run record's per-tar-shard counts equal what tarfile counts in each shard" {
    rm "$T/in/empty.jpg"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 20K "$T/in"
    [ "$status" -eq 2 ]
    recs=("$T"/o/run-*.json)
    run check_tar_shards "$T/o" "${recs[0]}"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" -eq "$(ls "$T"/o/shard-*.tar | wc -l)" ] && [ "$output" -ge 2 ]
    # a rerun redoing two inputs names only the shards it wrote
    old=$(ls "$T"/o/shard-*.tar)
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 20K --force \
        "$T/in/png_rgb_320x256.png" "$T/in/jpeg_gray_200x149.jpg"
    [ "$status" -eq 0 ]
    rec=$(ls -t "$T"/o/run-*.json | head -1)
    run check_tar_shards "$T/o" "$rec"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" -c 'import json,sys; print(sorted(json.load(open(sys.argv[1]))["tar_shards"]))' "$rec"
    for f in $old; do [[ "$output" != *"$(basename "$f")"* ]]; done
}

@test "tar layout, sharded: each shard's run record lists only its own tar shards" {
    rm "$T/in/empty.jpg" "$T/in/notmedia.jpg"
    for k in 0 1; do
        run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard "$k/2" "$T/in"
        [ "$status" -eq 0 ]
        recs=("$T"/o/run-0000$k-of-00002-*.json)
        run check_tar_shards "$T/o" "${recs[0]}"
        echo "$output"
        [ "$status" -eq 0 ]
        run "$PY" -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["tar_shards"]))' "${recs[0]}"
        for s in $output; do [[ "$s" == shard-0000$k-of-00002-* ]]; done
    done
}

@test "the run record's options say the out-dtype each run resolved and the tar shard limits given" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/f32" "$IMG"                 # an f32 tower: f32
    MVEMBED_TEST_OUT_BF16=1 mvembed -q --device cpu --model "$MODEL" --out "$T/auto" "$IMG" # bf16 tokens
    mvembed -q --device cpu --model "$MODEL" --out "$T/bf16" --out-dtype bf16 "$IMG"
    mvembed -q --device cpu --model "$MODEL" --out "$T/tar" --layout tar --shard-samples 4 --shard-size 64M "$IMG"
    run "$PY" - "$T" <<'PYEOF'
import glob, json, sys
t = sys.argv[1]
def opts(d):
    (rec,) = glob.glob(f"{t}/{d}/run-*.json")
    return json.load(open(rec))["options"]
dtypes = {d: {json.loads(l)["dtype"] for l in open(f"{t}/{d}/manifest.jsonl")} for d in ("f32", "auto", "bf16")}
assert opts("f32")["out_dtype"] == "f32" and dtypes["f32"] == {"f32"}, (opts("f32"), dtypes)
assert opts("auto")["out_dtype"] == "auto" and dtypes["auto"] == {"f16"}, (opts("auto"), dtypes)
assert opts("bf16")["out_dtype"] == "bf16" and dtypes["bf16"] == {"bfloat16"}, (opts("bf16"), dtypes)
o = opts("tar")
assert (o["layout"], o["shard_samples"], o["shard_size"]) == ("tar", 4, 64 << 20), o
assert (opts("f32")["shard_samples"], opts("f32")["shard_size"]) == (0, 0), opts("f32")
print("ok")
PYEOF
    echo "$output"
    [ "$output" = ok ]
}

@test "OUT and the model directory named with bytes that are not UTF-8: the run completes, its record keeps their bytes" {
    out="$T/o"$'\xff'
    m="$T/m"$'\xfe'
    cp -r "$MODEL" "$m"
    run mvembed --device cpu --model "$m" --out "$out" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -f "$out/_SUCCESS" ]
    recs=("$out"/run-*.json)
    [ "${#recs[@]}" -eq 1 ]
    "$PY" - "${recs[0]}" "$out" "$m" <<'PYEOF'
import base64, json, os, sys
r = json.load(open(sys.argv[1]))
out, m = os.fsencode(sys.argv[2]), os.fsencode(sys.argv[3])
assert r["status"] == "complete" and r["counts"]["ok"] == 1, r
assert base64.b64decode(r["out_b64"]) == out, r["out_b64"]
assert base64.b64decode(r["model"]["given_b64"]) == m, r["model"]
assert os.path.realpath(base64.b64decode(r["model"]["dir_b64"])) == os.path.realpath(m), r["model"]
assert "\\xff" in r["out"] and "\\xfe" in r["model"]["given"], (r["out"], r["model"]["given"])
PYEOF
    # a rerun into it skips the input and completes too
    run mvembed --device cpu --model "$m" --out "$out" "$IMG/png_rgb_320x256.png"
    [ "$status" -eq 0 ]
}
