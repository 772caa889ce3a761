#!/usr/bin/env bats
# valgrind memcheck over one end-to-end batch (CPU backend): images of each decoder, a video and a
# bad file. No memory errors, no definitely-lost blocks; the batch's own exit status is 2. The
# binary is the build without FFmpeg (make valgrind-bin; `make test` passes it as
# MVEMBED_VALGRIND): Debian's FFmpeg loads libhwy, whose initialiser executes an instruction
# valgrind 3.19 refuses on some CPUs (the Makefile says which), so the video here takes the
# "built without video support" error path; video decoding itself is checked under ASan/UBSan.
load test_helper

VG="${MVEMBED_VALGRIND:-$ROOT/build-vg/mvembed}"

@test "valgrind memcheck: one end-to-end batch, no errors" {
    T="$BATS_TEST_TMPDIR"
    [ -x "$VG" ] || { echo "no $VG: make valgrind-bin"; false; }
    mkdir "$T/in"
    cp "$ROOT"/fixtures/media/images/{jpeg_baseline_420_320x240.jpg,png_rgba_160x120.png,webp_lossy_192x128.webp} \
       "$ROOT"/fixtures/formats/{gif_interlaced_99x45.gif,bmp_rle4_81x47.bmp,tif_rgb_tiles_lzw_45x29.tif} \
       "$ROOT/fixtures/media/videos/h264_3frames.mp4" "$ROOT/fixtures/bad/truncated.jpg" \
       "$ROOT/fixtures/bad/truncated.tif" "$T/in/"
    OMP_NUM_THREADS=1 run valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite "$VG" -q --device cpu -j 1 --jobs 1 --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output" | grep -E "ERROR SUMMARY|definitely lost|Invalid|uninitialised|mvembed:" || true
    [ "$status" -eq 2 ]
    [[ "$output" =~ "ERROR SUMMARY: 0 errors" ]]
    # the six images ok; the truncated JPEG and TIFF and the video (no FFmpeg in this build) failed
    "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
rows = {r["input"].rsplit("/", 1)[1]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
ok = sorted(k for k, r in rows.items() if r["status"] == "ok")
assert ok == ["bmp_rle4_81x47.bmp", "gif_interlaced_99x45.gif", "jpeg_baseline_420_320x240.jpg",
              "png_rgba_160x120.png", "tif_rgb_tiles_lzw_45x29.tif", "webp_lossy_192x128.webp"], ok
assert rows["truncated.jpg"]["status"] == "error" and rows["h264_3frames.mp4"]["status"] == "error", rows
assert rows["truncated.tif"]["status"] == "error", rows
assert "video" in rows["h264_3frames.mp4"]["error"], rows["h264_3frames.mp4"]
PYEOF
}
