#!/usr/bin/env bats
# A backend that resizes on its device (mv_backend.resizes: CUDA) gets each image's decoded frame
# (each video's decoded frames) and the target size instead of the resized frames. No GPU here: the test hook
# MVEMBED_TEST_CPU_RESIZES=1 makes the CPU backend take them the same way (it resizes with the
# CPU's resize, which the CUDA kernel matches byte for byte: test/cuda/test_resize.cu,
# test_cuda_ops's device-resize forward). Oracles: cmp and diff (the same bytes as the path that
# resizes in the decode threads, itself held to HF's references by 30-images.bats), -v's count.
load test_helper

# kept_decoded MANIFEST: how many ok inputs have at most 4x their target's pixels (the manifest's
# width, height and resized), which a resizing backend gets decoded
kept_decoded() {
    "$PY" -c 'import json,sys
rs = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r["status"] == "ok" and r["width"] * r["height"] <= 4 * r["resized"][0] * r["resized"][1] for r in rs))' "$1"
}

setup() {
    T="$BATS_TEST_TMPDIR"
    IMGS="$ROOT/fixtures/media/images"
}

@test "images handed over decoded to a resizing backend: every output and --dump-stages file the same bytes" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --dump-stages "$T/da" "$IMGS"
    run env MVEMBED_TEST_CPU_RESIZES=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/b" \
        --dump-stages "$T/db" "$IMGS"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: 21 inputs resized by the backend on its device" ]]
    same_bytes "$T/a" "$T/b"
    diff -r "$T/da" "$T/db" # pixel_values, input.png, decoded.png, every stage
    [ "$(find "$T/db" -name pixel_values.npy | wc -l)" -eq 21 ]
}

@test "packed forwards mixing decoded images and videos give the same bytes" {
    export MVEMBED_TEST_FILL_WINDOW=1 # packing independent of timing
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --batch-tokens 4096 "$ROOT/fixtures/media"
    run env MVEMBED_TEST_CPU_RESIZES=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/b" \
        --batch-tokens 4096 "$ROOT/fixtures/media"
    [ "$status" -eq 0 ]
    want=$(kept_decoded "$T/b/manifest.jsonl")
    [ "$want" -gt 21 ] # the 21 images and some videos
    [[ "$output" =~ "mvembed: $want inputs resized by the backend on its device" ]]
    n_fwd=$(forwards "$output")
    [ "$n_fwd" -lt 5 ] # images and videos share forwards
    same_bytes "$T/a" "$T/b"
    [ "$(find "$T/b" -name '*.npy.zst' | wc -l)" -gt 30 ]
}

@test "videos handed over decoded to a resizing backend: every output and --dump-stages file the same bytes" {
    V="$ROOT/fixtures/media/videos"
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --dump-stages "$T/da" "$V" || true
    run env MVEMBED_TEST_CPU_RESIZES=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/b" \
        --dump-stages "$T/db" "$V"
    echo "$output" | tail -3
    want=$(kept_decoded "$T/b/manifest.jsonl")
    [ "$want" -gt 5 ]
    [[ "$output" =~ "mvembed: $want inputs resized by the backend on its device" ]]
    same_bytes "$T/a" "$T/b"
    diff -r "$T/da" "$T/db" # pixel_values, every input_NNN.png, every stage
    [ "$(find "$T/db" -name 'input_*.png' | wc -l)" -gt 10 ]
}

@test "an image over 4x its target's pixels is resized by the decode threads, with the same bytes" {
    cd "$IMGS"
    # 320x256 = 81920 pixels; --max-pixels 16384 makes the target at most a quarter of that
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --max-pixels 16384 png_rgb_320x256.png
    run env MVEMBED_TEST_CPU_RESIZES=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/b" \
        --max-pixels 16384 png_rgb_320x256.png
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: 0 inputs resized by the backend on its device" ]]
    same_bytes "$T/a" "$T/b"
    run "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r["width"]*r["height"] > 4*r["resized"][0]*r["resized"][1])' "$T/b/manifest.jsonl"
    [ "$output" = True ]
}

@test "-v counts the images the backend resized: every image of a folder, none without the hook" {
    run env MVEMBED_TEST_CPU_RESIZES=1 "$MVEMBED" -v --no-progress --device cpu --model "$MODEL" --out "$T/v1" \
        "$ROOT/fixtures/media/images"
    [ "$status" -eq 0 ]
    n=$(ls "$ROOT/fixtures/media/images" | wc -l)
    [[ "$output" == *"mvembed: $n inputs resized by the backend on its device"* ]]
    run "$MVEMBED" -v --no-progress --device cpu --model "$MODEL" --out "$T/v2" "$ROOT/fixtures/media/images"
    [[ "$output" != *"resized by the backend on its device"* || "$output" == *"mvembed: 0 inputs resized by the backend"* ]]
}
