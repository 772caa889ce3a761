#!/usr/bin/env bats
# Images end to end against HF transformers 5.17 references (fixtures/ref/images, made on the GPU
# machine by scripts/device-refs.sh with HF's load_image + Qwen2VLImageProcessor + the tower).
load test_helper

setup_file() {
    # one CPU run over every fixture image, shared by the parity checks below
    export RUN="$BATS_FILE_TMPDIR/all"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$RUN/out" --dump-stages "$RUN/dump" \
        "$ROOT/fixtures/media/images" >"$RUN.log" 2>&1 || true
}

@test "pixel_values are bit-identical to HF's for every fixture image (16-bit gray aside)" {
    n=0
    for d in "$REF"/images/*; do
        name=$(basename "$d")
        [ "$name" = png_gray16_96x64.png ] && continue
        ours=$(npy_sha256 "$RUN/dump/$name/pixel_values.npy")
        echo "$name ours=$ours hf=$(cat "$d/pixel_values.sha256")"
        [ "$ours" = "$(cat "$d/pixel_values.sha256")" ]
        n=$((n + 1))
    done
    [ "$n" -ge 20 ]
}

@test "16-bit grayscale PNG: PIL clips it to white, mvembed scales to 8 bits (documented divergence)" {
    d="$REF/images/png_gray16_96x64.png"
    run bash -c "ffmpeg -loglevel error -i '$d/hf_frame_000.png' -f rawvideo -pix_fmt rgb24 - | od -An -tu1 -v | tr -s ' ' '\n' | grep -v '^$' | sort -u"
    [ "$output" = 255 ]
    run bash -c "ffmpeg -loglevel error -i '$RUN/dump/png_gray16_96x64.png/input.png' -f rawvideo -pix_fmt rgb24 - | od -An -tu1 -v | tr -s ' ' '\n' | grep -v '^$' | sort -u | wc -l"
    [ "$output" -gt 50 ]
    grep -q "16-bit grayscale" "$ROOT/man/mvembed.1"
}

@test "embeddings match HF within the f32 error budget for every fixture image" {
    for d in "$REF"/images/*; do
        name=$(basename "$d")
        [ "$name" = png_gray16_96x64.png ] && continue
        match_hf "$RUN/dump/$name/output.npy" "$d" "$name"
        # the saved file holds the same numbers
        zstd -q -d -c "$RUN/out/$name.npy.zst" > "$BATS_TEST_TMPDIR/o.npy"
        run "$NPYCMP" --exact "$BATS_TEST_TMPDIR/o.npy" "$RUN/dump/$name/output.npy"
        [ "$status" -eq 0 ]
    done
}

@test "manifest: one ok line per image with the documented fields; numpy reads every output" {
    run "$PY" - "$RUN/out" "$REF/images" <<'PYEOF'
import json, os, subprocess, sys, io
import numpy as np
out, ref = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
assert len(lines) == len(os.listdir(ref)), len(lines)
for r in lines:
    assert r["status"] == "ok" and r["kind"] == "image", r
    name = os.path.basename(r["input"])
    assert r["output"] == name + ".npy.zst"
    meta = json.load(open(os.path.join(ref, name, "meta.json")))
    grid = np.load(os.path.join(ref, name, "grid_thw.npy"))[0].tolist()
    assert r["grid_thw"] == grid, (name, r["grid_thw"], grid)
    assert [r["width"], r["height"]] == [meta["width"], meta["height"]], (name, r)
    assert r["resized"] == meta["resized"], (name, r["resized"], meta["resized"])
    assert r["shape"] == [grid[0] * grid[1] * grid[2] // 4, 64] and r["dtype"] == "f32"
    assert len(r["model"]) == 16
    raw = subprocess.run(["zstd", "-q", "-d", "-c", os.path.join(out, r["output"])],
                         check=True, capture_output=True).stdout
    a = np.load(io.BytesIO(raw))
    assert a.shape == tuple(r["shape"]) and a.dtype == np.float32 and np.isfinite(a).all()
print("ok", len(lines))
PYEOF
    echo "$output"
    [ "${lines[-1]}" = "ok 21" ]
}

@test "zstd frames carry content size and checksum" {
    run zstd -lv "$RUN/out/png_rgb_320x256.png.npy.zst"
    [[ "$output" =~ "Check: XXH64" ]]
    [[ "$output" =~ "Decompressed Size:" ]]
}

@test "--out-dtype f16 writes <f2 equal to the f32 result rounded" {
    cd "$ROOT/fixtures/media/images" # a file argument's output name is its path as given
    mvembed -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" --out-dtype f16 png_rgb_320x256.png
    zstd -q -d -c "$BATS_TEST_TMPDIR/o/png_rgb_320x256.png.npy.zst" > "$BATS_TEST_TMPDIR/h.npy"
    zstd -q -d -c "$RUN/out/png_rgb_320x256.png.npy.zst" > "$BATS_TEST_TMPDIR/f.npy"
    run "$PY" -c 'import numpy as np,sys; h=np.load(sys.argv[1]); f=np.load(sys.argv[2]); assert h.dtype==np.float16; assert (h==f.astype(np.float16)).all(); print("ok")' \
        "$BATS_TEST_TMPDIR/h.npy" "$BATS_TEST_TMPDIR/f.npy"
    [ "$output" = ok ]
    grep -q '"dtype":"f16"' "$BATS_TEST_TMPDIR/o/manifest.jsonl"
}

@test "a window's sliver waits for the next one: 18 equal images, 3 a forward, make 6 forwards, each matching HF" {
    # 32 patches an image, --batch-tokens 100: 3 a forward; a window (200 patches) holds 7, whose
    # seventh would be a forward of its own; held for the next window, 18 images make 18 / 3
    mkdir -p "$BATS_TEST_TMPDIR/in"
    for i in $(seq -w 1 18); do cp "$ROOT/fixtures/media/images/png_gray_128x72.png" "$BATS_TEST_TMPDIR/in/g$i.png"; done
    run env MVEMBED_TEST_FILL_WINDOW=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" \
        --batch-tokens 100 "$BATS_TEST_TMPDIR/in"
    echo "$output" | tail -5
    [ "$status" -eq 0 ]
    [[ "$output" =~ "18 ok, 0 failed" ]]
    [[ "$output" =~ " 6 forwards, 96 patches each" ]]
    for i in $(seq -w 1 18); do
        match_hf "$BATS_TEST_TMPDIR/o/g$i.png.npy.zst" "$REF/images/png_gray_128x72.png" "g$i.png"
    done
}

@test "--batch-tokens on the CPU packs images into fewer forwards; every embedding still matches HF" {
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/p" --batch-tokens 4096 \
        --dump-stages "$BATS_TEST_TMPDIR/d" "$ROOT/fixtures/media/images"
    [ "$status" -eq 0 ]
    # --dump-stages dumps one input per forward: packing is off there, so compare the saved files
    n_fwd=$(forwards "$output")
    [ "$n_fwd" -eq 21 ]
    # the test hook makes the tower wait for a full window: packing does not depend on timing
    run env MVEMBED_TEST_FILL_WINDOW=1 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" --batch-tokens 4096 \
        "$ROOT/fixtures/media/images"
    [ "$status" -eq 0 ]
    n_fwd=$(forwards "$output")
    echo "packed into $n_fwd forwards"
    [ "$n_fwd" -ge 1 ] && [ "$n_fwd" -lt 21 ]
    for d in "$REF"/images/*; do
        name=$(basename "$d")
        [ "$name" = png_gray16_96x64.png ] && continue
        match_hf "$BATS_TEST_TMPDIR/o/$name.npy.zst" "$d" "$name"
    done
}
