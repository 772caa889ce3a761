#!/usr/bin/env bats
# The files layout's manifests when many runs share one OUT (issue 30): the record's order
# survives merging (the newest record of an input wins), merge says when shards were made with
# other settings, every run reads every manifest in OUT, and claims on output names hold across
# processes. Oracles: Python's json, the filesystem (cmp, stat), real concurrent processes.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    small_set "$T/in" fixme.jpg
}

emb() { mvembed -q --device cpu --model "$MODEL" "$@"; }

# last_status MANIFEST INPUT_SUFFIX: the status of the only line whose input ends with the suffix
last_status() {
    "$PY" -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
m = [l for l in ls if l["input"].endswith(sys.argv[2])]
assert len(m) == 1, m
print(m[0]["status"])' "$1" "$2"
}

@test "merge after a fix-up run keeps the newer ok line, not the shard's older error line" {
    for k in 0 1; do
        run emb --out "$T/o" --shard "$k/2" "$T/in"
        [ "$status" -le 2 ]
    done
    run mvembed manifest merge "$T/o"
    [ "$status" -eq 0 ]
    [ "$(last_status "$T/o/manifest.jsonl" fixme.jpg)" = error ]
    cp "$IMG/png_rgba_160x120.png" "$T/in/fixme.jpg"
    run emb --out "$T/o" --shard none "$T/in"
    [ "$status" -eq 0 ]
    run mvembed manifest merge "$T/o"
    [ "$status" -eq 0 ]
    [ "$(last_status "$T/o/manifest.jsonl" fixme.jpg)" = ok ]
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --shard none "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed, 6 skipped" ]]
}

@test "every line carries the schema version, its run id, a sequence and a time" {
    run emb --out "$T/o" "$T/in"
    [ "$status" -eq 2 ]
    run "$PY" -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert len(ls) == 6 and all(l["schema"] == 5 for l in ls), ls
assert len({l["run"] for l in ls}) == 1 and sorted(l["seq"] for l in ls) == sorted(set(l["seq"] for l in ls))
assert all(isinstance(l["time"], float) and l["time"] > 1.6e9 for l in ls)
print("ok")' "$T/o/manifest.jsonl"
    [ "$output" = ok ]
}

@test "merging shards made with different fingerprints says so" {
    rm "$T/in/fixme.jpg"
    emb --out "$T/o" --shard 0/2 "$T/in"
    emb --out "$T/o" --shard 1/2 --out-dtype f16 "$T/in"
    [ -s "$T/o/manifest-00000-of-00002.jsonl" ] && [ -s "$T/o/manifest-00001-of-00002.jsonl" ]
    run mvembed manifest merge "$T/o"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "made with 2 different fingerprints" ]]
    [[ "$output" =~ "manifest-00001-of-00002.jsonl" ]]
    rm -rf "$T/p"
    emb --out "$T/p" --shard 0/2 "$T/in"
    emb --out "$T/p" --shard 1/2 "$T/in"
    run mvembed manifest merge "$T/p"
    [ "$status" -eq 0 ]
    [[ ! "$output" =~ "fingerprints" ]]
}

# cams: camA/ and camB/ holding the same relative names, other pictures
cams() {
    mkdir -p "$T/camA" "$T/camB"
    local a=(jpeg_gray_200x149.jpg png_rgb_320x256.png webp_lossy_192x128.webp png_gray_128x72.png)
    local b=(jpeg_exif6_168x104.jpg png_rgba_160x120.png png_interlaced_131x87.png jpeg_exif3_117x199.jpg)
    for i in 0 1 2 3; do
        cp "$IMG/${a[$i]}" "$T/camA/img$i.png"
        cp "$IMG/${b[$i]}" "$T/camB/img$i.png"
    done
}

@test "a run of another shard count sees the shard manifests: names held there are not replaced" {
    cams
    for k in 0 1; do emb --out "$T/o" --shard "$k/2" "$T/camA"; done
    cp -r "$T/o" "$T/before"
    for sh in none 0/3 1/3 2/3; do
        run mvembed --device cpu --model "$MODEL" --out "$T/o" --shard "$sh" "$T/camB"
        echo "--shard $sh: $output"
        [ "$status" -eq 2 ] # each of these shards takes one input at least here
        [[ "$output" =~ " 0 ok, " ]]
    done
    # each camB input failed twice: under --shard none, and under its shard of 3
    [ "$(cat "$T"/o/manifest*.jsonl | grep -c 'already holds the embedding of .*camA/img')" -eq 8 ]
    for i in 0 1 2 3; do cmp "$T/before/img$i.png.npy.zst" "$T/o/img$i.png.npy.zst"; done
    # and resume reads them all: camA again under --shard none redoes nothing
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --shard none "$T/camA"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed, 4 skipped" ]]
}

# many_cams N: camA/ and camB/ with N images each under the same names, other pictures
many_cams() {
    mkdir -p "$T/camA" "$T/camB"
    local imgs=("$IMG"/*.png "$IMG"/*.jpg) m i
    m=${#imgs[@]}
    for ((i = 0; i < $1; i++)); do
        cp "${imgs[$((i % m))]}" "$T/camA/img$i.png"
        cp "${imgs[$(((i + 1) % m))]}" "$T/camB/img$i.png"
    done
}

# one_owner OUT REF_A REF_B: each output name has ok lines of exactly one input over all of OUT's
# manifests, and its file holds the bytes of that input's own embedding (refA or refB)
one_owner() {
    "$PY" - "$@" <<'PYEOF'
import filecmp, glob, json, os, sys
out, ref = sys.argv[1], {"camA": sys.argv[2], "camB": sys.argv[3]}
owners = {}
for m in glob.glob(os.path.join(out, "manifest*.jsonl")):
    for l in open(m):
        r = json.loads(l)
        if r["status"] == "ok":
            owners.setdefault(r["output"], set()).add(r["input"])
files = sorted(os.path.relpath(p, out) for p in glob.glob(os.path.join(out, "*.npy.zst")))
assert sorted(owners) == files, (sorted(owners), files)
for name, ins in owners.items():
    assert len(ins) == 1, (name, ins)
    cam = os.path.basename(os.path.dirname(next(iter(ins))))
    assert filecmp.cmp(os.path.join(out, name), os.path.join(ref[cam], name), shallow=False), (name, ins)
print("ok", len(files))
PYEOF
}

@test "two concurrent runs over camA/ and camB/ with the same names: each name has one owner, the later input fails" {
    many_cams 40
    emb --out "$T/refA" "$T/camA"
    emb --out "$T/refB" "$T/camB"
    mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/camA" 2>"$T/errA" & a=$!
    mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/camB" 2>"$T/errB" & b=$!
    ra=0 rb=0
    wait $a || ra=$?
    wait $b || rb=$?
    echo "exit $ra $rb"; tail -n 1 "$T/errA" "$T/errB"
    [ $((ra + rb)) -ge 2 ] && [ "$ra" -ne 1 ] && [ "$rb" -ne 1 ]
    run one_owner "$T/o" "$T/refA" "$T/refB"
    echo "$output"
    [ "$output" = "ok 40" ]
    [ "$(cat "$T/errA" "$T/errB" | grep -c 'already holds the embedding of')" -eq 40 ]
}

@test "an input changed in place is redone: ok lines record its size and mtime, resume compares them" {
    rm "$T/in/fixme.jpg"
    emb --out "$T/o" "$T/in"
    run "$PY" -c '
import json, os, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    st = os.stat(r["input"])
    assert r["input_bytes"] == st.st_size and r["input_mtime_ns"] == st.st_mtime_ns, r
print("ok")' "$T/o/manifest.jsonl"
    [ "$output" = ok ]
    cp "$IMG/png_rgb_wide_400x60.png" "$T/in/png_gray_128x72.png" # another picture, another size
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "png_gray_128x72.png: changed since it was embedded" ]]
    [[ "$output" =~ " 1 ok, 0 failed, 4 skipped" ]]
    run "$PY" -c '
import json, sys
from PIL import Image
ls = [json.loads(l) for l in open(sys.argv[1]) if "png_gray_128x72" in l]
new = Image.open(sys.argv[2]).size
assert len(ls) == 2 and [ls[-1]["width"], ls[-1]["height"]] == list(new), (ls[-1], new)
print("ok")' "$T/o/manifest.jsonl" "$T/in/png_gray_128x72.png"
    [ "$output" = ok ]
}

@test "--input-hash records each input's XXH64 and redoes an input whose bytes changed under the same size and mtime" {
    mkdir -p "$T/h"
    "$PY" -c '
import sys
from PIL import Image
Image.new("RGB", (64, 48), (200, 30, 30)).save(sys.argv[1])
Image.new("RGB", (64, 48), (30, 30, 200)).save(sys.argv[2])' "$T/h/a.bmp" "$T/b.bmp"
    run cmp -s "$T/h/a.bmp" "$T/b.bmp"
    [ "$status" -eq 1 ]
    [ "$(stat -c %s "$T/h/a.bmp")" -eq "$(stat -c %s "$T/b.bmp")" ]
    emb --out "$T/o" --input-hash "$T/h"
    run "$PY" -c '
import json, sys, xxhash
r = json.loads(open(sys.argv[1]).readline())
assert r["input_xxh64"] == xxhash.xxh64(open(sys.argv[2], "rb").read()).hexdigest(), r
print("ok")' "$T/o/manifest.jsonl" "$T/h/a.bmp"
    [ "$output" = ok ]
    touch -r "$T/h/a.bmp" "$T/stamp"
    cp "$T/b.bmp" "$T/h/a.bmp"
    touch -r "$T/stamp" "$T/h/a.bmp" # same size, same mtime, other bytes
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/h"
    [[ "$output" =~ " 0 ok, 0 failed, 1 skipped" ]] # without the option: size and mtime only
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --input-hash "$T/h"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "a.bmp: changed since it was embedded (its XXH64 is" ]]
    [[ "$output" =~ " 1 ok, 0 failed, 0 skipped" ]]
}

@test "manifest compact while a run writes into OUT is refused, and no line is lost" {
    many_cams 30
    for layout in files tar; do
        rm -f "$T/fifo"
        mkfifo "$T/fifo"
        mvembed --device cpu --model "$MODEL" --out "$T/o-$layout" --layout "$layout" - <"$T/fifo" 2>"$T/err" & pid=$!
        exec 7>"$T/fifo"
        # the first 10 paths; the run then waits for more on its standard input: it is running
        ls "$T"/camA/img?.png >&7
        if [ "$layout" = files ]; then
            for _ in $(seq 500); do
                [ "$(cat "$T/o-$layout/manifest.jsonl" 2>/dev/null | wc -l)" -ge 10 ] && break
                sleep 0.02
            done
            [ "$(wc -l <"$T/o-$layout/manifest.jsonl")" -eq 10 ]
        else # its lines come when its shard is complete; it has taken OUT once it lists its manifest
            for _ in $(seq 500); do
                grep -qs '^manifest.jsonl$' "$T/o-$layout/.mvembed.lock" && break
                sleep 0.02
            done
        fi
        run mvembed manifest compact "$T/o-$layout"
        echo "$layout: $output"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "an mvembed run is writing into it" ]]
        ls "$T"/camA/img??.png >&7
        exec 7>&-
        wait "$pid"
        run "$PY" -c '
import json, sys
ins = [json.loads(l)["input"] for l in open(sys.argv[1])]
assert len(ins) == 30 and len(set(ins)) == 30, len(ins)
print("ok")' "$T/o-$layout/manifest.jsonl"
        [ "$output" = ok ]
        run mvembed manifest compact "$T/o-$layout" # once the run is over
        [ "$status" -eq 0 ]
    done
}

@test "without locks or RENAME_NOREPLACE (NFS nolock): concurrent runs never replace an output another input holds; an input redoes its own" {
    preload=$(fs_shim "$T")
    export FS_SHIM_NOLOCK=1 FS_SHIM_RENAME2=all # an NFS client mounted nolock
    many_cams 40
    emb --out "$T/refA" "$T/camA"
    emb --out "$T/refB" "$T/camB"
    LD_PRELOAD="$preload" "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/camA" 2>"$T/errA" & a=$!
    LD_PRELOAD="$preload" "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/camB" 2>"$T/errB" & b=$!
    ra=0 rb=0
    wait $a || ra=$?
    wait $b || rb=$?
    echo "exit $ra $rb"; tail -n 1 "$T/errA" "$T/errB"
    grep -q "the file system offers no locks" "$T/errA"
    [ "$ra" -ne 1 ] && [ "$rb" -ne 1 ]
    run one_owner "$T/o" "$T/refA" "$T/refB"
    echo "$output"
    [ "$output" = "ok 40" ]
    # camA again with --force: its own outputs are redone (replaced), camB's are refused
    nA=$(cat "$T"/o/manifest.jsonl | grep '"status":"ok"' | grep -c '/camA/' || true)
    run env LD_PRELOAD="$preload" "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --force "$T/camA"
    echo "$output" | tail -n 1
    [[ "$output" =~ " $nA ok, $((40 - nA)) failed, 0 skipped" ]]
    run one_owner "$T/o" "$T/refA" "$T/refB"
    [ "$output" = "ok 40" ]
}
