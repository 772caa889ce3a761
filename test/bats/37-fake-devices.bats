#!/usr/bin/env bats
# Many devices without a GPU: the test hook MVEMBED_TEST_CPU_DEVICES=N (src/run/run.c) makes the CPU
# backend N "devices" of --inflight backends each, laid out as the CUDA backends of --devices
# (device i's k-th forward in flight at backend k * N + i), so the pipeline's many-device path runs
# here: one tower thread per backend taking forwards from one queue, outputs and manifest lines
# written from all of them at once, -v's busy time per device. Oracles: HF's f64 outputs (within
# 2x HF f32's error), and cmp against a one-backend run (the CPU tower's bytes do not depend on
# which backend or thread ran an input when each input is its own forward).
load test_helper

IMG="$ROOT/fixtures/media/images"
VID="$ROOT/fixtures/media/videos"

# once MANIFEST N_OK N_ERR: every input has exactly one line; N_OK ok and N_ERR error lines
once() {
    "$PY" - "$@" <<'PYEOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
n = collections.Counter(r["input"] for r in rows)
assert all(c == 1 for c in n.values()), n
st = collections.Counter(r["status"] for r in rows)
assert st["ok"] == int(sys.argv[2]) and st["error"] == int(sys.argv[3]), st
PYEOF
}

@test "4 test devices x 2 forwards in flight: every input once, outputs byte-identical to one backend's" {
    T="$BATS_TEST_TMPDIR"
    run mvembed -q --device cpu --model "$MODEL" -j 2 --out "$T/one" "$IMG" "$VID"
    [ "$status" -eq 0 ]
    run env MVEMBED_TEST_CPU_DEVICES=4 "$MVEMBED" -v --device cpu --model "$MODEL" -j 2 --out "$T/four" "$IMG" "$VID"
    echo "$output" | grep -E "test devices|device busy|tower thread"
    [ "$status" -eq 0 ]
    # 8 tower threads on 4 devices, each device's busy time reported
    echo "$output" | grep -q "as 4 test devices (MVEMBED_TEST_CPU_DEVICES), 2 forwards in flight each"
    echo "$output" | grep -q "pipeline: .* 8 tower threads"
    [ "$(echo "$output" | grep "device busy" | grep -o "% of the run" | wc -l)" -eq 4 ]
    n=$(($(ls "$IMG" | wc -l) + $(ls "$VID" | wc -l)))
    once "$T/four/manifest.jsonl" "$n" 0
    same_bytes "$T/one" "$T/four"
}

@test "8 test devices x 3 in flight, packed forwards: every image within 2x HF f32's error of HF's f64" {
    T="$BATS_TEST_TMPDIR"
    # 24 tower threads and --batch-tokens: several inputs per forward, forwards on every thread
    run env MVEMBED_TEST_CPU_DEVICES=8 "$MVEMBED" -v --device cpu --model "$MODEL" -j 2 --inflight 3 \
        --batch-tokens 2048 --out "$T/o" "$IMG"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "pipeline: .* 24 tower threads"
    n_fwd=$(forwards "$output")
    echo "$n_fwd forwards"
    [ "$n_fwd" -ge 1 ]
    once "$T/o/manifest.jsonl" "$(ls "$IMG" | wc -l)" 0
    for d in "$REF"/images/*; do
        name=$(basename "$d")
        [ "$name" = png_gray16_96x64.png ] && continue
        match_hf "$T/o/$name.npy.zst" "$d" "$name"
    done
}

@test "bad inputs among good ones on 4 test devices: those fail (exit 2), the rest are byte-identical" {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/in"
    cp "$IMG"/*.jpg "$IMG"/*.webp "$T/in/"
    cp "$ROOT/fixtures/bad/truncated.jpg" "$T/in/bad_truncated.jpg"
    cp "$ROOT/fixtures/bad/empty.jpg" "$T/in/bad_empty.jpg"
    cp "$ROOT/fixtures/bad/video_no_moov.mp4" "$T/in/bad_no_moov.mp4"
    run mvembed -q --device cpu --model "$MODEL" -j 2 --out "$T/one" "$T/in"
    [ "$status" -eq 2 ]
    run env MVEMBED_TEST_CPU_DEVICES=4 "$MVEMBED" -q --device cpu --model "$MODEL" -j 2 --out "$T/four" "$T/in"
    [ "$status" -eq 2 ]
    good=$(ls "$IMG" | grep -cE '\.(jpg|webp)$')
    once "$T/four/manifest.jsonl" "$good" 3
    "$PY" - "$T/four/manifest.jsonl" <<'PYEOF'
import json, sys
for r in map(json.loads, open(sys.argv[1], "rb")):
    bad = r["input"].rsplit("/", 1)[1].startswith("bad_")
    assert (r["status"] == "error") == bad, r
    assert not bad or (r["error"] and "output" not in r), r
PYEOF
    same_bytes "$T/one" "$T/four"
}

@test "MVEMBED_TEST_CPU_DEVICES: values it does not take are refused, naming the variable" {
    for v in 1 9 abc 3x -2; do
        run env MVEMBED_TEST_CPU_DEVICES="$v" "$MVEMBED" -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o$v" "$IMG"
        echo "$v: $status $output"
        [ "$status" -eq 1 ]
        [[ "$output" == *"MVEMBED_TEST_CPU_DEVICES=$v"* ]]
    done
    # 0 and empty: one backend, as without it
    run env MVEMBED_TEST_CPU_DEVICES=0 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/z" "$IMG/webp_lossy_192x128.webp"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "pipeline: .* 1 tower thread,"
}

@test "--devices x --inflight beyond the pipeline's 64 tower threads: refused up front, nothing written" {
    # 33 GPUs x 2: refused before any device is opened (so it holds on a machine without a GPU)
    run "$MVEMBED" -q --device cuda --devices "$(seq -s, 0 32)" --inflight 2 --model "$MODEL" \
        --out "$BATS_TEST_TMPDIR/o" "$IMG"
    echo "$status $output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"33 GPUs x --inflight 2 = 66 forwards in flight: at most 64"* ]]
    [ ! -e "$BATS_TEST_TMPDIR/o/manifest.jsonl" ]
    # 8 test devices x 8 in flight = 64: runs
    run env MVEMBED_TEST_CPU_DEVICES=8 "$MVEMBED" -v --device cpu --inflight 8 --model "$MODEL" -j 1 \
        --out "$BATS_TEST_TMPDIR/p" "$IMG/webp_lossy_192x128.webp" "$IMG/png_rgb_320x256.png"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "pipeline: .* 64 tower threads"
    once "$BATS_TEST_TMPDIR/p/manifest.jsonl" 2 0
}
