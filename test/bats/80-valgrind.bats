#!/usr/bin/env bats
# valgrind memcheck over one end-to-end batch (CPU backend): images of each decoder, a video and a
# bad file. No memory errors, no definitely-lost blocks; the batch's own exit status is 2 (the
# truncated JPEG).
load test_helper

@test "valgrind memcheck: one end-to-end batch, no errors" {
    T="$BATS_TEST_TMPDIR"
    mkdir "$T/in"
    cp "$ROOT"/fixtures/media/images/{jpeg_baseline_420_320x240.jpg,png_rgba_160x120.png,webp_lossy_192x128.webp} \
       "$ROOT/fixtures/media/videos/h264_3frames.mp4" "$ROOT/fixtures/bad/truncated.jpg" "$T/in/"
    OMP_NUM_THREADS=1 run valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite "$MVEMBED" -q --device cpu -j 1 --jobs 1 --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output" | grep -E "ERROR SUMMARY|definitely lost|Invalid|uninitialised" || true
    [ "$status" -eq 2 ]
    [[ "$output" =~ "ERROR SUMMARY: 0 errors" ]]
    [ "$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")" -eq 4 ]
}
