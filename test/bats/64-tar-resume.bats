#!/usr/bin/env bats
# The tar layout's resume and integrity (issue 30: items 1, 11, 12; 6 and 13 below): a rerun with
# other settings redoes every input; a shard overwritten, cut short or removed is redone; values
# that are not finite as written are refused; OUT's layout is not mixed.
# Oracles: Python's tarfile, json, numpy and xxhash (tar_check.py), the filesystem (truncate, dd).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

@test "tar resume: a rerun with --out-dtype f16, --max-pixels or --pool mean redoes every input" {
    n=$(ls "$IMG" | wc -l)
    tar_run "$T/o" -q
    [ "$status" -eq 0 ]
    tar_run "$T/o" --out-dtype f16
    [ "$status" -eq 0 ]
    [[ "$output" =~ "$n ok, 0 failed, 0 skipped" ]]
    tar_check "$T/o" --ok "$n" --dtype f16
    tar_run "$T/o" --out-dtype f16 --max-pixels 40000
    [[ "$output" =~ "$n ok, 0 failed, 0 skipped" ]]
    "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
latest = {}
for l in open(sys.argv[1]):
    r = json.loads(l); latest[r["input"]] = r
assert all(r["resized"][0] * r["resized"][1] <= 40000 for r in latest.values()), latest
PYEOF
    tar_run "$T/o" --out-dtype f16 --max-pixels 40000 --pool mean
    [[ "$output" =~ "$n ok, 0 failed, 0 skipped" ]]
    "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
latest = {}
for l in open(sys.argv[1]):
    r = json.loads(l); latest[r["input"]] = r
assert all(r["shape"][0] == 1 for r in latest.values()), latest
PYEOF
    tar_check "$T/o" --ok "$n" --dtype f16
    tar_run "$T/o" --out-dtype f16 --max-pixels 40000 --pool mean
    [[ "$output" =~ "0 ok, 0 failed, $n skipped" ]]
}

@test "tar resume: a shard overwritten with garbage, cut short or removed is redone; the rest is skipped" {
    n=$(ls "$IMG" | wc -l)
    tar_run "$T/o" -q --shard-size 40K
    [ "$status" -eq 0 ]
    shards=("$T"/o/shard-*.tar)
    [ "${#shards[@]}" -ge 4 ]
    count() { grep -c "\"shard\":\"$(basename "$1")\"" "$T/o/manifest.jsonl"; }
    redo=$(( $(count "${shards[0]}") + $(count "${shards[1]}") + $(count "${shards[2]}") ))
    head -c 2048 /dev/urandom > "${shards[0]}"                       # garbage
    truncate -s 1000 "${shards[1]}"                                  # cut short
    rm "${shards[2]}"                                                # removed
    # one byte of the array data changed in the middle of the fourth shard
    off=$("$PY" -c 'import json,sys; print(next(json.loads(l)["offset"] for l in open(sys.argv[1]) if sys.argv[2] in l))' \
        "$T/o/manifest.jsonl" "$(basename "${shards[3]}")")
    printf '\x7f' | dd of="${shards[3]}" bs=1 seek=$((off + 5)) conv=notrunc status=none
    redo=$((redo + 1))
    tar_run "$T/o"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "$redo ok, 0 failed, $((n - redo)) skipped" ]]
    [[ "$output" =~ "its sample is missing or damaged" ]]
    [[ "$output" =~ "XXH64" ]]
    tar_check "$T/o" --ok "$n"
}

@test "tar layout: an embedding that is Inf or NaN as written fails its input (f32 and f16), no sample" {
    cp -r "$MODEL" "$T/m"
    # finite weights whose f32 output overflows, and a bias that only f16 cannot hold (99840)
    "$PY" - "$T/m" "$ROOT/test/bats" <<'PYEOF'
import shutil, struct, sys
sys.path.insert(0, sys.argv[2])
from st_tool import read, write
d = sys.argv[1]
shutil.copytree(d, d + "-f16")
hdr, data = read(d + "/model.safetensors")
raw = bytearray(data)
a, b = hdr["model.visual.merger.linear_fc2.weight"]["data_offsets"]
assert hdr["model.visual.merger.linear_fc2.weight"]["dtype"] == "BF16"
raw[a:b] = struct.pack("<H", 0x7f7f) * ((b - a) // 2)  # 3.39e38 everywhere
write(d + "/model.safetensors", hdr, bytes(raw))
hdr, data = read(d + "-f16/model.safetensors")
raw = bytearray(data)
t = hdr["model.visual.merger.linear_fc2.bias"]
a, b = t["data_offsets"]
if t["dtype"] == "BF16":
    raw[a:b] = struct.pack("<H", 0x47c3) * ((b - a) // 2)  # 99840
else:
    assert t["dtype"] == "F32", t
    raw[a:b] = struct.pack("<f", 99840.0) * ((b - a) // 4)
write(d + "-f16/model.safetensors", hdr, bytes(raw))
PYEOF
    for args in "--model $T/m" "--model $T/m-f16 --out-dtype f16"; do
        rm -rf "$T/o"
        run "$MVEMBED" --device cpu $args --out "$T/o" --layout tar "$IMG/png_rgb_320x256.png" "$IMG/png_gray_128x72.png"
        echo "$args: $output"
        [ "$status" -eq 2 ]
        [[ "$output" =~ "png_rgb_320x256.png: not written: the embedding holds "[0-9]+" NaN/Inf values" ]]
        "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2 and all(r["status"] == "error" and "NaN/Inf" in r["error"] for r in rows), rows
PYEOF
        for s in "$T"/o/shard-*.tar; do [ ! -e "$s" ] || [ -z "$(tar -tf "$s")" ]; done
    done
    # the same model in f32 holds 99840: ok, finite
    rm -rf "$T/o"
    run "$MVEMBED" -q --device cpu --model "$T/m-f16" --out "$T/o" --layout tar "$IMG/png_rgb_320x256.png"
    [ "$status" -eq 0 ]
    tar_check "$T/o" --ok 1
}

@test "layout switch: --layout tar into a files-layout OUT (and back) is refused naming the layout OUT holds" {
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$IMG"
    [ "$status" -eq 0 ]
    cp "$T/o/manifest.jsonl" "$T/before"
    # what the refused run leaves: its run record (status fatal), nothing else
    ls -A "$T/o" | grep -v '^run-' | sort > "$T/ls-before"
    tar_run "$T/o" -q
    [ "$status" -eq 1 ]
    [[ "$output" =~ "$T/o holds the files layout (21 inputs, such as " ]]
    [[ "$output" =~ "--layout tar would mix two layouts in one output directory" ]]
    cmp "$T/before" "$T/o/manifest.jsonl"   # nothing written
    ls -A "$T/o" | grep -v '^run-' | sort | cmp - "$T/ls-before"
    # the other way round: a tar-layout OUT refuses the files layout
    tar_run "$T/t" -q
    [ "$status" -eq 0 ]
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/t" "$IMG"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "$T/t holds the tar layout (21 inputs" ]]
    [ -z "$(find "$T/t" -name '*.npy.zst')" ]
    tar_check "$T/t" --ok 21 --one-sample
}

@test "tar resume: the same folder as in, ./in and /abs/in makes no second sample" {
    cp -r "$IMG" "$T/in"
    cd "$T"
    for p in in ./in "$T/in" ./in/; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 40K "$p"
        echo "$p: $output"
        [ "$status" -eq 0 ]
    done
    [[ "$output" =~ "0 ok, 0 failed, 21 skipped" ]]
    tar_check "$T/o" --ok 21 --one-sample
}

# orphan_shard OUT: a tar run into OUT (40K shards), then the state a SIGKILL between a shard's
# rename and its lines leaves: the second shard ($orphan) without its $m lines
orphan_shard() {
    tar_run "$1" -q --shard-size 40K
    [ "$status" -eq 0 ]
    orphan=$(basename "$(ls "$1"/shard-*.tar | sed -n 2p)")
    grep -v "\"shard\":\"$orphan\"" "$1/manifest.jsonl" > "$T/m" || true
    m=$(( $(wc -l < "$1/manifest.jsonl") - $(wc -l < "$T/m") ))
    [ "$m" -gt 0 ]
    cp "$T/m" "$1/manifest.jsonl"
}

@test "tar resume: a complete shard whose manifest lines were never written (killed in between) is adopted, not redone" {
    n=$(ls "$IMG" | wc -l)
    orphan_shard "$T/o"
    tar_run "$T/o"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "$m samples of complete shards had no manifest line (a run stopped in between): adopted" ]]
    [[ "$output" =~ "0 ok, 0 failed, $n skipped" ]]
    tar_check "$T/o" --ok "$n" --one-sample
}

@test "tar --force beside an orphan shard: every input redone by this run, compact leaves one sample each" {
    n=$(ls "$IMG" | wc -l)
    orphan_shard "$T/o"
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

@test "tar layout: after --force reruns, manifest compact rewrites the shards: a reader sees one sample per input" {
    inputs "$T/in" a 4 # dozens of shards: the copies show up in compact's own directory listing
    n=$(ls "$T/in" | wc -l)
    IMG="$T/in"
    tar_run "$T/o" -q --shard-size 40K
    tar_run "$T/o" -q --shard-size 40K --force
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 40K --force "$IMG"/*png*
    [ "$status" -eq 0 ]
    run "$MVEMBED" manifest compact "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "compacted shards: "[0-9]+" dead samples (inputs redone since) removed" ]]
    tar_check "$T/o" --ok "$n" --one-sample
    # the README's memmap recipe reads the moved samples where the manifest now says
    cd "$T" && mv o emb
    readme_recipe "Tar shards without copying" > "$T/reader.py"
    run "$PY" "$T/reader.py"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq "$n" ]
    # a second compact finds nothing to do, and a resume skips everything
    run "$MVEMBED" manifest compact "$T/emb"
    [[ ! "$output" =~ "compacted shards" ]]
    tar_run "$T/emb" --shard-size 40K
    [[ "$output" =~ "0 ok, 0 failed, $n skipped" ]]
}
