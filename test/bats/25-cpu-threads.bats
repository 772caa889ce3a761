#!/usr/bin/env bats
# The CPU tower's results do not depend on the thread count: the same inputs embedded with -j 1,
# -j 2 and -j 3 give byte-identical outputs (the oracle is cmp). The wide tower below has an MLP
# of 4304 (the 27B layout's), the reduction length at which OpenBLAS's own threads once changed
# the last bits; the fixture tower covers the other shapes. The two generated images (728 and
# 784 patches, under the fixture preprocessor's pixel cap) give each thread several GEMM calls (oneDNN's: 256 rows at most) and row blocks
# of many sizes, with and without a tail of fewer than 16 rows, at -j 1, 2, 5 and 7; the last test
# runs them with --cpu-gemm bf16x6 (the AMX kernel of src/tower/gemm_amx.c, under 16-row thread cuts).
load test_helper

setup_file() {
    export WIDE="$BATS_FILE_TMPDIR/wide"
    "$PY" "$ROOT/scripts/make_random_tower.py" "$WIDE" --config 2x128x2x4304x64 --seed 1 >/dev/null
    cp "$MODEL"/preprocessor_config.json "$MODEL"/video_preprocessor_config.json "$WIDE/"
    export BIG="$BATS_FILE_TMPDIR/big"
    mkdir -p "$BIG"
    # 448x416 -> 28x26 patches (728 rows: 45 row atoms of 16 + 8), 448x448 -> 28x28 (784 rows)
    ffmpeg -v error -f lavfi -i testsrc2=size=448x416 -frames:v 1 "$BIG/a_448x416.png"
    ffmpeg -v error -f lavfi -i mandelbrot=size=448x448 -frames:v 1 "$BIG/b_448x448.png"
}

@test "-j 1, -j 2, -j 3: byte-identical outputs (wide MLP tower, fixture images and videos)" {
    T="$BATS_TEST_TMPDIR"
    V="$ROOT/fixtures/media/videos"
    for j in 1 2 3; do
        run mvembed -q --device cpu --model "$WIDE" -j "$j" --out "$T/j$j" "$ROOT/fixtures/media/images" \
            "$V/h264_192x128_24fps.mp4" "$V/vp9_160x96.webm" "$V/h264_3frames.mp4"
        [ "$status" -eq 0 ]
    done
    same_bytes "$T/j1" "$T/j2"
    same_bytes "$T/j1" "$T/j3"
}

@test "-j 1 and -j 3: byte-identical outputs (fixture tower, all fixture media)" {
    T="$BATS_TEST_TMPDIR"
    for j in 1 3; do
        run mvembed -q --device cpu --model "$MODEL" -j "$j" --out "$T/j$j" "$ROOT/fixtures/media"
        [ "$status" -eq 0 ]
    done
    same_bytes "$T/j1" "$T/j3"
}

@test "-j 1, 2, 5, 7: byte-identical outputs for images of 728 and 784 patches (wide MLP tower)" {
    T="$BATS_TEST_TMPDIR"
    for j in 1 2 5 7; do
        run mvembed -q --device cpu --model "$WIDE" -j "$j" --out "$T/j$j" "$BIG"
        [ "$status" -eq 0 ]
    done
    # the patch counts the comment above relies on
    run "$PY" -c "import json,sys; print(sorted(json.loads(l)['grid_thw'][1] * json.loads(l)['grid_thw'][2] for l in open(sys.argv[1])))" "$T/j1/manifest.jsonl"
    [ "$output" = "[728, 784]" ]
    same_bytes "$T/j1" "$T/j2"
    same_bytes "$T/j1" "$T/j5"
    same_bytes "$T/j1" "$T/j7"
}

@test "--cpu-gemm bf16x6: -j 1, 2, 5, 7 byte-identical (wide MLP tower: 728 and 784 patches, fixture videos)" {
    T="$BATS_TEST_TMPDIR"
    V="$ROOT/fixtures/media/videos"
    # bf16x6 needs AMX (/proc/cpuinfo: amx_bf16, amx_tile): refused elsewhere, with the reason
    if ! grep -qw amx_bf16 /proc/cpuinfo || ! grep -qw amx_tile /proc/cpuinfo; then
        run mvembed -q --device cpu --cpu-gemm bf16x6 --model "$WIDE" --out "$T/r" "$BIG"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "bf16x6 GEMMs need Intel AMX: " ]]
        return 0
    fi
    for j in 1 2 5 7; do
        run mvembed -q --device cpu --cpu-gemm bf16x6 --model "$WIDE" -j "$j" --out "$T/j$j" "$BIG" \
            "$V/h264_192x128_24fps.mp4" "$V/h264_3frames.mp4"
        [ "$status" -eq 0 ]
    done
    same_bytes "$T/j1" "$T/j2"
    same_bytes "$T/j1" "$T/j5"
    same_bytes "$T/j1" "$T/j7"
}

# The GEMM libraries block a call's rows differently per CPU family (OpenBLAS's Haswell sgemm runs
# rows 24 at a time, SkylakeX's 16; oneDNN 2.6's f32 matmul is brgemm with AVX-512, gemm:jit
# without): the tower must give -j-independent bytes under each family this CPU can run, not only
# under the one it detects. OPENBLAS_CORETYPE and ONEDNN_MAX_CPU_ISA pick the family when the
# library loads (each build heeds the one of its library); -v names what ran.
@test "-j 1, 3, 4: byte-identical under each GEMM kernel family this CPU runs (OpenBLAS cores, oneDNN ISAs)" {
    T="$BATS_TEST_TMPDIR"
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
    fams="Prescott:SSE41"
    has avx && fams="$fams Sandybridge:AVX"
    has avx2 fma && fams="$fams Haswell:AVX2 Zen:AVX2"
    has avx512f avx512bw avx512dq avx512vl avx512cd && fams="$fams SkylakeX:AVX512_CORE"
    for fam in $fams; do
        core=${fam%%:*} isa=${fam#*:}
        for j in 1 3 4; do
            OPENBLAS_CORETYPE=$core ONEDNN_MAX_CPU_ISA=$isa run mvembed -v --device cpu --cpu-gemm f32 \
                --model "$WIDE" -j "$j" --out "$T/$core-j$j" "$BIG" "$ROOT/fixtures/media/videos/h264_3frames.mp4"
            [ "$status" -eq 0 ]
            if [[ "$output" == *"GEMMs through OpenBLAS"* ]]; then
                [[ "$output" == *"GEMMs through OpenBLAS (core $core)"* ]]
            else
                [[ "$output" == *"GEMMs through oneDNN"* ]]
            fi
        done
        same_bytes "$T/$core-j1" "$T/$core-j3"
        same_bytes "$T/$core-j1" "$T/$core-j4"
    done
}
