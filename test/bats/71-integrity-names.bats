#!/usr/bin/env bats
# Output names and resume integrity: the same base name in two folders, an output name held by
# another input in an earlier run, reruns with other settings, damaged or escaping outputs, OUT
# inside the input directory, and resume whatever way the PATH was typed. Oracles: numpy (shapes
# and dtypes of the saved arrays), the zstd CLI (frame integrity), cmp against a one-input run,
# the manifest parsed by python's json.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/d/cam1" "$T/d/cam2"
    cp "$IMG/png_rgb_320x256.png" "$T/d/cam1/IMG_1.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/d/cam2/IMG_1.png"
}

run_mv() { "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" "$@"; }

# shape_dtype FILE.npy.zst: "(rows, cols) dtype" as numpy reads the decompressed file
shape_dtype() {
    zstd -q -d -c "$1" > "$T/sd.npy" &&
        "$PY" -c 'import numpy as np,sys; a=np.load(sys.argv[1]); print(list(a.shape), a.dtype)' "$T/sd.npy"
}

# manifest_shape OUT INPUT: the "shape" of INPUT's last ok line in OUT/manifest.jsonl
manifest_shape() {
    "$PY" -c '
import json,sys
s=None
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["input"]==sys.argv[2] and r["status"]=="ok": s=r["shape"]
print(s)' "$1/manifest.jsonl" "$2"
}

@test "xargs -n 1 over cam1/IMG_1.png and cam2/IMG_1.png keeps both outputs, each its own image's" {
    cd "$T/d"
    find . -type f -print0 | sort -z | xargs -0 -n 1 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o"
    # each output equals a run on that image alone, and its shape is what its manifest line says
    for c in cam1 cam2; do
        run_mv --out "$T/solo-$c" "$T/d/$c/IMG_1.png"
        solo=$(find "$T/solo-$c" -name '*.npy.zst')
        cmp "$T/o/$c/IMG_1.png.npy.zst" "$solo"
        sd=$(shape_dtype "$T/o/$c/IMG_1.png.npy.zst")
        [ "${sd% *}" = "$(manifest_shape "$T/o" "./$c/IMG_1.png")" ]
    done
    # a rerun skips both, and they are still two different arrays
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out "$T/o" ./cam1/IMG_1.png ./cam2/IMG_1.png
    [ "$status" -eq 0 ]
    [[ "$output" =~ "0 ok, 0 failed, 2 skipped" ]]
    ! cmp -s "$T/o/cam1/IMG_1.png.npy.zst" "$T/o/cam2/IMG_1.png.npy.zst"
}

@test "two directory arguments with the same relative names in one run: the second is an error, nothing lost" {
    run run_mv --out "$T/o" "$T/d/cam1" "$T/d/cam2"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "$T/d/cam2/IMG_1.png: output name IMG_1.png.npy.zst is already used by another input of this run" ]]
    run_mv --out "$T/solo" "$T/d/cam1"
    cmp "$T/o/IMG_1.png.npy.zst" "$T/solo/IMG_1.png.npy.zst"
}

@test "a later run never overwrites an output name another input holds: exit 2 naming both inputs" {
    run_mv --out "$T/o" "$T/d/cam1"
    cp "$T/o/IMG_1.png.npy.zst" "$T/before"
    run run_mv --out "$T/o" "$T/d/cam2"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "$T/d/cam2/IMG_1.png: output name IMG_1.png.npy.zst already holds the embedding of $T/d/cam1/IMG_1.png" ]]
    cmp "$T/before" "$T/o/IMG_1.png.npy.zst"
    # the manifest says so too: cam2's line is an error, cam1's ok line is still the only ok one
    run "$PY" -c '
import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
print(sorted((r["input"].split("/")[-2], r["status"]) for r in rs))' "$T/o/manifest.jsonl"
    [ "$output" = "[('cam1', 'ok'), ('cam2', 'error')]" ]
    # --force does not take the name either
    run run_mv --out "$T/o" --force "$T/d/cam2"
    [ "$status" -eq 2 ]
    cmp "$T/before" "$T/o/IMG_1.png.npy.zst"
}

@test "a rerun with another --max-pixels redoes the inputs made with the old settings" {
    run_mv --out "$T/o" "$T/d/cam1"
    first=$(shape_dtype "$T/o/IMG_1.png.npy.zst")
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --max-pixels 16384 --out "$T/o" "$T/d/cam1"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "1 input was made with other settings" ]]
    [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
    now=$(shape_dtype "$T/o/IMG_1.png.npy.zst")
    [ "$now" != "$first" ]
    # the new array's shape is the one its new manifest line records, and 16384 pixels bound it
    [ "${now% *}" = "$(manifest_shape "$T/o" "$T/d/cam1/IMG_1.png")" ]
    run "$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; w,h=r["resized"]; print(w*h<=16384)' "$T/o/manifest.jsonl"
    [ "$output" = "True" ]
    # same settings again: skipped
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --max-pixels 16384 --out "$T/o" "$T/d/cam1"
    [[ "$output" =~ "0 ok, 0 failed, 1 skipped" ]]
}

@test "a rerun with --out-dtype f16 redoes f32 outputs (numpy reads float16 after it)" {
    run_mv --out "$T/o" "$T/d/cam1"
    [[ "$(shape_dtype "$T/o/IMG_1.png.npy.zst")" == *float32 ]]
    run run_mv --out-dtype f16 --out "$T/o" "$T/d/cam1"
    [ "$status" -eq 0 ]
    [[ "$(shape_dtype "$T/o/IMG_1.png.npy.zst")" == *float16 ]]
}

@test "the fingerprint changes with --min-pixels, --fps, --num-frames, --min/max-frames and --video-max-pixels" {
    fp() { "$MVEMBED" -v -q -j 1 --device cpu --model "$MODEL" "$@" --out "$T/fp" "$T/d/nothing" 2>&1 |
           sed -n 's/.*fingerprint \([0-9a-f]\{16\}\).*/\1/p'; }
    base=$(fp)
    [ -n "$base" ]
    for opt in "--min-pixels 4096" "--fps 1" "--num-frames 8" "--min-frames 2" "--max-frames 64" \
               "--video-max-pixels 100000" "--out-dtype f16" "--max-pixels 20000"; do
        other=$(fp $opt)
        echo "$opt: $base vs $other"
        [ -n "$other" ] && [ "$other" != "$base" ]
    done
    [ "$(fp)" = "$base" ]
}

@test "resume redoes an output truncated by head -c 100 and an emptied one" {
    run_mv --out "$T/o" "$T/d"
    cp "$T/o/cam1/IMG_1.png.npy.zst" "$T/c1"
    cp "$T/o/cam2/IMG_1.png.npy.zst" "$T/c2"
    head -c 100 "$T/c1" > "$T/o/cam1/IMG_1.png.npy.zst"
    : > "$T/o/cam2/IMG_1.png.npy.zst"
    ! zstd -q -t "$T/o/cam1/IMG_1.png.npy.zst"
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/d"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "2 ok, 0 failed, 0 skipped" ]]
    zstd -q -t "$T/o/cam1/IMG_1.png.npy.zst"
    cmp "$T/c1" "$T/o/cam1/IMG_1.png.npy.zst"
    cmp "$T/c2" "$T/o/cam2/IMG_1.png.npy.zst"
}

@test "resume never follows an output that leaves OUT (a '..' output field, a symlink out)" {
    mkdir -p "$T/elsewhere"
    run_mv --out "$T/o" "$T/d/cam1"
    cp "$T/o/IMG_1.png.npy.zst" "$T/elsewhere/x.npy.zst"
    # the manifest's output field edited to point outside OUT, at a whole file
    sed -i 's#"output":"IMG_1.png.npy.zst"#"output":"../elsewhere/x.npy.zst"#' "$T/o/manifest.jsonl"
    grep -q '"output":"../elsewhere/x.npy.zst"' "$T/o/manifest.jsonl"
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/d/cam1"
    [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
    # the output replaced by a symlink to a whole copy outside OUT
    ln -sf "$T/elsewhere/x.npy.zst" "$T/o/IMG_1.png.npy.zst"
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/d/cam1"
    [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
    [[ "$output" =~ "leads outside the output directory" ]]
    [ ! -L "$T/o/IMG_1.png.npy.zst" ] && [ -f "$T/o/IMG_1.png.npy.zst" ]
}

@test "--all-files with OUT inside the input directory does not take its own outputs or manifest" {
    ln -s o "$T/d/via-link"
    for i in 1 2 3; do
        run run_mv --all-files --out "$T/d/o" "$T/d"
        [ "$status" -eq 0 ]
    done
    run "$PY" -c '
import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
print(len(rs), sorted(set(r["input"][len(sys.argv[2])+1:] for r in rs)))' "$T/d/o/manifest.jsonl" "$T/d"
    [ "$output" = "2 ['cam1/IMG_1.png', 'cam2/IMG_1.png']" ]
}

@test "resume by output name: images/, ./images and an absolute path are the same inputs" {
    cd "$T"
    run_mv --out o d/
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out o ./d
    [ "$status" -eq 0 ]
    [[ "$output" =~ "0 ok, 0 failed, 2 skipped" ]]
    run "$MVEMBED" -j 1 --device cpu --model "$MODEL" --out o "$T/d"
    [[ "$output" =~ "0 ok, 0 failed, 2 skipped" ]]
    [ "$(wc -l < o/manifest.jsonl)" -eq 2 ]
}

@test "file arguments keep their path under OUT: absolute without its leading '/', '..' as '__'" {
    mkdir -p "$T/d/__"
    cp "$IMG/webp_lossy_192x128.webp" "$T/d/__/w.webp"
    cp "$IMG/png_gray_128x72.png" "$T/d/cam1/IMG_2.png"
    cd "$T/d/cam1"
    run_mv --out "$T/o" ../__/w.webp ../cam2/IMG_1.png "$T/d/cam1/IMG_1.png" ./IMG_2.png
    [ -f "$T/o/__/___/w.webp.npy.zst" ]
    [ -f "$T/o/__/cam2/IMG_1.png.npy.zst" ]
    [ -f "$T/o/${T#/}/d/cam1/IMG_1.png.npy.zst" ]
    [ -f "$T/o/IMG_2.png.npy.zst" ]
    [ "$(find "$T/o" -name '*.npy.zst' | wc -l)" -eq 4 ]
    # and nothing was written outside OUT
    [ -z "$(find "$T/d" -name '*.npy.zst')" ]
}
