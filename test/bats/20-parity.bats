#!/usr/bin/env bats
# CPU tower parity against HF transformers 5.17 (fixtures/ref/parity, made on the GPU machine by
# scripts/device-refs.sh). Each stage must be within the FlashAttention budget: relative L2 error
# against HF's f64 result at most 2x that of HF's own f32 result (errors.json), on HF's own
# pixel_values: a square image, a 6x10 merged-cell grid, a 1-cell image and a 3-group video.
load test_helper

STAGES="patch_embed embed block_00 block_01 merger_norm merger_fc1 output"

check_stages() { # REF_DIR DUMP_DIR
    local s b
    for s in $STAGES; do
        b=$(budget "$1" "$s")
        run "$NPYCMP" --max-rel "$b" "$2/$s.npy" "$1/$s.f64.npy"
        echo "$s: $output (budget $b)"
        [ "$status" -eq 0 ]
    done
}

tower_on_hf_pixels() { # NAME
    local R="$REF/parity/$1" g
    g=$("$PY" -c 'import numpy as np,sys; print(";".join(",".join(str(int(x)) for x in r) for r in np.load(sys.argv[1])))' "$R/grid_thw.npy")
    zstd -q -d -c "$R/pixel_values.npy.zst" > "$BATS_TEST_TMPDIR/$1.npy"
    mvembed -q --device cpu --model "$MODEL" --pixels "$BATS_TEST_TMPDIR/$1.npy" --grid "$g" \
        --dump-stages "$BATS_TEST_TMPDIR/d" --out "$BATS_TEST_TMPDIR/o"
    check_stages "$R" "$BATS_TEST_TMPDIR/d/$1"
}

@test "tower parity, square image (8x8 patches)" { tower_on_hf_pixels square_128x128.png; }
@test "tower parity, 6x10 merged cells (12x20 patches)" { tower_on_hf_pixels grid6x10_320x192.png; }
@test "tower parity, 1-cell image (2x2 patches)" { tower_on_hf_pixels onecell_32x32.png; }
@test "tower parity, video: 3 temporal groups as 3 segments" {
    [ "$("$PY" -c 'import numpy as np; print(np.load("'"$REF"'/parity/h264_192x128_24fps/grid_thw.npy")[0][0])')" = 3 ]
    tower_on_hf_pixels h264_192x128_24fps
}

@test "dump-stages from a file: names, shapes and input.png" {
    cd "$ROOT/fixtures/parity" # stages go to DIR/<output name>/, a file argument's path as given
    mvembed -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" \
        --dump-stages "$BATS_TEST_TMPDIR/d" grid6x10_320x192.png
    D="$BATS_TEST_TMPDIR/d/grid6x10_320x192.png"
    run "$PY" -c '
import numpy as np, sys
d = sys.argv[1]
for s, shp in [("pixel_values", (240, 1536)), ("patch_embed", (240, 128)), ("embed", (240, 128)),
               ("block_00", (240, 128)), ("block_01", (240, 128)), ("merger_norm", (240, 128)),
               ("merger_fc1", (60, 512)), ("output", (60, 64))]:
    a = np.load(f"{d}/{s}.npy"); assert a.shape == shp and a.dtype == np.float32, (s, a.shape)
print("ok")' "$D"
    [ "$output" = ok ]
    run file -b "$D/input.png"
    [[ "$output" =~ "PNG image data, 320 x 192, 8-bit/color RGB" ]]
}

@test "dump-stages decoded.png: the decoded picture before resizing, PIL's load_image, for images only" {
    cd "$ROOT/fixtures/media/images"
    mvembed -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" --dump-stages "$BATS_TEST_TMPDIR/d" \
        jpeg_exif6_168x104.jpg png_rgb_odd_173x97.png "$ROOT/fixtures/media/videos/h264_3frames.mp4"
    run "$PY" - "$BATS_TEST_TMPDIR/d" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image, ImageOps
d = sys.argv[1]
for n in ("jpeg_exif6_168x104.jpg", "png_rgb_odd_173x97.png"):
    want = np.asarray(ImageOps.exif_transpose(Image.open(n)).convert("RGB"))
    got = np.asarray(Image.open(os.path.join(d, n, "decoded.png")))
    assert got.shape == want.shape and (got == want).all(), n
    assert Image.open(os.path.join(d, n, "input.png")).size != got.shape[1::-1], n   # resized
video = [f for f in os.listdir(d) if f != "jpeg_exif6_168x104.jpg" and f != "png_rgb_odd_173x97.png"]
assert not any(os.path.exists(os.path.join(r, "decoded.png")) for r, _, _ in os.walk(os.path.join(d, video[0]))), video
print("ok")
PYEOF
    echo "$output"
    [ "$output" = ok ]
}

@test "npycmp fails above its limits and on shape mismatch" {
    R="$REF/parity/onecell_32x32.png"
    run "$NPYCMP" --max-rel 1e-3 "$R/output.f64.npy" "$R/output.f64.npy"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "rel_l2=0 " ]]
    run "$NPYCMP" --max-rel 1e-30 "$R/embed.f64.npy" "$R/patch_embed.f64.npy"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "FAIL: rel_l2" ]]
    run "$NPYCMP" "$R/output.f64.npy" "$R/embed.f64.npy"
    [ "$status" -eq 1 ]
}
