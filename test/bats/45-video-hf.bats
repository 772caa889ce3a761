#!/usr/bin/env bats
# Videos end to end against HF transformers 5.17 (fixtures/ref/videos): HF's Qwen3VLVideoProcessor
# was given the frames the ffmpeg CLI decodes (scripts/ffmpeg_frames.py) with the stream's fps, and
# sampled, resized and grouped them itself. We check the sampled frame indices, the exact
# pixel_values, and the embeddings (each temporal pair its own attention segment).
load test_helper

setup_file() {
    export RUN="$BATS_FILE_TMPDIR/v"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$RUN/out" --dump-stages "$RUN/dump" \
        "$ROOT/fixtures/media/videos" >"$RUN.log" 2>&1 || true
}

each_video() { # calls check NAME FILE REF for every reference
    local d n f
    for d in "$REF"/videos/*; do
        n=$(basename "$d")
        f=$(ls "$ROOT"/fixtures/media/videos/"$n".* | head -1)
        check "$n" "$(basename "$f")" "$d"
    done
}

@test "sampled frame indices equal HF's sample_frames for every fixture video" {
    check() {
        run "$PY" -c '
import json, sys
ref = json.load(open(sys.argv[1] + "/meta.json"))
line = [json.loads(l) for l in open(sys.argv[2]) if json.loads(l)["input"].endswith("/" + sys.argv[3])][0]
assert line["status"] == "ok" and line["kind"] == "video", line
assert line["frame_indices"] == ref["frame_indices"], (line["frame_indices"], ref["frame_indices"])
assert abs(line["fps"] - ref["fps"]) < 1e-9 and line["resized"] == ref["resized"]
assert len(line["timestamps"]) == len(line["frame_indices"])
print("ok")' "$3" "$RUN/out/manifest.jsonl" "$2"
        echo "$1: $output"
        [ "$output" = ok ]
    }
    each_video
}

@test "pixel_values are bit-identical to HF's for every fixture video" {
    check() {
        [ "$(npy_sha256 "$RUN/dump/$2/pixel_values.npy")" = "$(cat "$3/pixel_values.sha256")" ]
    }
    each_video
}

@test "video embeddings match HF within the f32 error budget" {
    check() { match_hf "$RUN/dump/$2/output.npy" "$3" "$1"; }
    each_video
}

@test "--batch-tokens packs videos (several segments each) with others; embeddings still match HF" {
    # the test hook makes the tower wait for a full window: packing does not depend on timing
    run env MVEMBED_TEST_FILL_WINDOW=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/p" --batch-tokens 4096 \
        "$ROOT/fixtures/media/videos"
    [ "$status" -eq 0 ]
    n_fwd=$(forwards "$output")
    echo "fixture videos in $n_fwd forwards"
    [ "$n_fwd" -ge 1 ] && [ "$n_fwd" -lt 12 ]
    check() { match_hf "$BATS_TEST_TMPDIR/p/$2.npy.zst" "$3" "$1"; }
    each_video
}

@test "output rows are group-major: [groups * tokens_per_group, out]" {
    run "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    t, h, w = r["grid_thw"]
    assert r["shape"] == [t * h * w // 4, 64], r
    assert t == (len(r["frame_indices"]) + 1) // 2, r
print("ok")' "$RUN/out/manifest.jsonl"
    [ "$output" = ok ]
}

@test "rotated clips: the display rotation is applied (90 and 270 swap the sides)" {
    run "$PY" -c '
import json, sys
m = {r["input"].rsplit("/", 1)[1]: r for r in map(json.loads, open(sys.argv[1]))}
print(m["h264_rotate90.mp4"]["rotation"], m["h264_rotate90.mp4"]["width"], m["h264_rotate90.mp4"]["height"],
      m["h264_rotate180.mp4"]["width"], m["h264_rotate180.mp4"]["height"])' "$RUN/out/manifest.jsonl"
    [ "$output" = "90 96 128 128 96" ] || [ "$output" = "270 96 128 128 96" ] || [ "$output" = "-90 96 128 128 96" ]
}

@test "--fps and --num-frames change the sampling" {
    V="$ROOT/fixtures/media/videos/h264_192x128_24fps.mp4"
    mvembed -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/a" --num-frames 5 "$V"
    # numpy's round(linspace(0, total-1, n)) is what HF uses
    want=$("$PY" -c 'import numpy as np; print(",".join(str(int(x)) for x in np.round(np.linspace(0, 71, 5))))')
    grep -q "\"frame_indices\":\[$want\]" "$BATS_TEST_TMPDIR/a/manifest.jsonl"
    grep -q '"grid_thw":\[3,8,12\]' "$BATS_TEST_TMPDIR/a/manifest.jsonl"
    mvembed -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/b" --fps 4 "$V"
    grep -q '"grid_thw":\[6,8,12\]' "$BATS_TEST_TMPDIR/b/manifest.jsonl"
}
