#!/usr/bin/env bats
# WebDataset shards as input: a .tar PATH (or one named on standard input) is read member by
# member; each image/video member is an input named <tar path>/<member>; other members are
# ignored. Oracle: GNU tar packs the shard, and embedding the same files unpacked must give
# byte-identical outputs.
load test_helper

setup() {
    T=$BATS_TEST_TMPDIR
    IMG="$ROOT/fixtures/media/images"
    mkdir -p "$T/src" "$T/shards"
    cp "$IMG/jpeg_baseline_420_320x240.jpg" "$T/src/00000.jpg"
    echo '{"caption": "a"}' > "$T/src/00000.json"
    cp "$IMG/png_gray_128x72.png" "$T/src/00001.png"
    echo 'b' > "$T/src/00001.txt"
    cp "$(ls "$IMG"/*.webp | head -1)" "$T/src/00002.webp"
    (cd "$T/src" && tar -cf "$T/shards/00000.tar" 00000.jpg 00000.json 00001.png 00001.txt 00002.webp)
    cd "$T"
}

@test "a tar PATH: every media member embedded as <tar>/<member>, bytes equal to the unpacked files'" {
    run mvembed --device cpu --model "$MODEL" --out "$T/o" shards/00000.tar
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq 3 ]
    mvembed -q --device cpu --model "$MODEL" --out "$T/ref" src
    for m in 00000.jpg 00001.png 00002.webp; do
        cmp "$T/o/shards/00000.tar/$m.npy.zst" "$T/ref/$m.npy.zst"
        grep -qF "\"input\":\"shards/00000.tar/$m\"" "$T/o/manifest.jsonl"
    done
    ! grep -q '00000.json\|00001.txt' "$T/o/manifest.jsonl"
}

@test "a tar named on standard input, and resume: a second run skips every member" {
    echo shards/00000.tar | mvembed -q --device cpu --model "$MODEL" --out "$T/o" -
    [ "$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")" -eq 3 ]
    run mvembed --device cpu --model "$MODEL" --out "$T/o" shards/00000.tar
    [ "$status" -eq 0 ]
    [[ "$output" =~ "0 ok, 0 failed, 3 skipped" ]]
}

@test "a damaged member fails alone (named <tar>/<member>); a truncated tar is an error line; the batch goes on" {
    head -c 3000 "$T/src/00000.jpg" > "$T/src/cut.jpg"
    (cd "$T/src" && tar -cf "$T/shards/bad.tar" cut.jpg 00001.png)
    head -c 3000 "$T/shards/00000.tar" > "$T/shards/trunc.tar"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" shards/bad.tar shards/trunc.tar
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "mvembed: shards/bad.tar/cut.jpg: " ]]
    [[ "$output" =~ "mvembed: shards/trunc.tar" ]]
    grep -qF '"input":"shards/bad.tar/00001.png","output":"shards/bad.tar/00001.png.npy.zst","status":"ok"' "$T/o/manifest.jsonl"
    ! grep -q '/proc/self/fd' "$T/o/manifest.jsonl"
}

@test "video members: decoded from the tar as from the unpacked file, and a damaged one fails the same, named <tar>/<member>" {
    cp "$ROOT/fixtures/media/videos/h264_3frames.mp4" "$T/src/clip.mp4"
    cp "$ROOT/fixtures/bad/video_truncated.mp4" "$T/src/cut.mp4"
    (cd "$T/src" && tar -cf "$T/shards/v.tar" clip.mp4 cut.mp4)
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" shards/v.tar
    [ "$status" -eq 2 ]
    run mvembed -q --device cpu --model "$MODEL" --out "$T/ref" src/clip.mp4 src/cut.mp4
    [ "$status" -eq 2 ]
    cmp "$T/o/shards/v.tar/clip.mp4.npy.zst" "$T/ref/src/clip.mp4.npy.zst"
    "$PY" - "$T/o/manifest.jsonl" "$T/ref/manifest.jsonl" <<'PYEOF'
import json, sys
tar = {r["input"]: r for r in map(json.loads, open(sys.argv[1]))}
ref = {r["input"]: r for r in map(json.loads, open(sys.argv[2]))}
assert tar["shards/v.tar/clip.mp4"]["status"] == "ok", tar
for k in ("frame_indices", "timestamps", "fps", "grid_thw"):
    assert tar["shards/v.tar/clip.mp4"][k] == ref["src/clip.mp4"][k], k
err, want = tar["shards/v.tar/cut.mp4"]["error"], ref["src/cut.mp4"]["error"]
print(err)
assert want.startswith("src/cut.mp4: decode failed at frame "), want
assert err == want.replace("src/cut.mp4", "shards/v.tar/cut.mp4", 1), (err, want)
PYEOF
}

@test "hard-link members (GNU tar cf of hard-linked files): each embedded with its target's bytes, as tar -x gives them" {
    mkdir "$T/h"
    cp "$IMG/png_rgb_320x256.png" "$IMG/jpeg_gray_200x149.jpg" "$IMG/webp_lossy_192x128.webp" "$T/h/"
    ln "$T/h/png_rgb_320x256.png" "$T/h/again.png"
    ln "$T/h/jpeg_gray_200x149.jpg" "$T/h/again.jpg"
    (cd "$T" && tar -cf "$T/shards/links.tar" h)
    [ "$(tar -tvf "$T/shards/links.tar" | grep -c '^h')" -eq 2 ]   # GNU tar wrote two link members
    run mvembed --device cpu --model "$MODEL" --out "$T/o" shards/links.tar
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "5 ok, 0 failed, 0 skipped" ]]
    mkdir "$T/x"
    tar -xf "$T/shards/links.tar" -C "$T/x"
    mvembed -q --device cpu --model "$MODEL" --out "$T/ref" "$T/x/h"
    for m in png_rgb_320x256.png jpeg_gray_200x149.jpg webp_lossy_192x128.webp again.png again.jpg; do
        cmp "$T/o/shards/links.tar/h/$m.npy.zst" "$T/ref/$m.npy.zst"
    done
}

@test "symbolic-link members: embedded with their target member's bytes; one leading outside the tar or dangling fails alone" {
    mkdir -p "$T/s/sub"
    cp "$IMG/png_gray_128x72.png" "$T/s/sub/"
    ln -s sub/png_gray_128x72.png "$T/s/top.png"
    ln -s ../sub/png_gray_128x72.png "$T/s/sub/up.png"
    ln -s ../../etc/x.png "$T/s/out.png"
    ln -s missing.png "$T/s/dangling.png"
    (cd "$T" && tar -cf "$T/shards/syms.tar" s)
    [ "$(tar -tvf "$T/shards/syms.tar" | grep -c '^l')" -eq 4 ]   # GNU tar stored four symlinks
    run mvembed --device cpu --model "$MODEL" --out "$T/o" shards/syms.tar
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "3 ok, 2 failed, 0 skipped" ]]
    [[ "$output" =~ "shards/syms.tar/s/out.png: symbolic link to ../../etc/x.png, which leads outside the tar" ]]
    [[ "$output" =~ "shards/syms.tar/s/dangling.png: symbolic link to s/missing.png, which is not a regular member of the tar" ]]
    mkdir "$T/x"
    tar -xf "$T/shards/syms.tar" -C "$T/x"   # tar -x makes the links; the files layout reads through them
    mvembed -q --device cpu --model "$MODEL" --out "$T/ref" "$T/x/s/sub"
    for m in top.png sub/up.png sub/png_gray_128x72.png; do
        cmp "$T/o/shards/syms.tar/s/$m.npy.zst" "$T/ref/png_gray_128x72.png.npy.zst"
    done
}
