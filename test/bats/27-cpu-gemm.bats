#!/usr/bin/env bats
# --cpu-gemm bf16x6 (src/gemm_cpu.c): f32 operands split exactly into three bf16 parts, one bf16
# matmul over 6 x K. Oracles: numpy's f64 product for single GEMMs (build/gemmrun, the tower's GEMM
# path), HF's f64 tower (fixtures/ref/parity, with 20-parity.bats's budget: 2x HF f32's error)
# for the tower. Both modes' errors are printed (fd 3) for the record. oneDNN's ISA is capped with
# ONEDNN_MAX_CPU_ISA to run each of its bf16 implementations this CPU has (AMX, AVX512-BF16, plain
# AVX-512: gemm:jit) and to check the refusal below AVX-512 (AVX2).
load test_helper
# GEMMRUN (env): the gemmrun binary of the build under test (default build/gemmrun)

GEMMRUN="${GEMMRUN:-$ROOT/build/gemmrun}"

# has_avx512: the CPU has what oneDNN's AVX-512 (avx512_core) needs, read from /proc/cpuinfo, and
# mvembed was built with oneDNN (a `make NO_DNNL=1` build refuses bf16x6: the first test checks it)
has_avx512() {
    local f
    "$GEMMRUN" "$G/x_a.npy" "$G/w_a.npy" "$G/o.npy" | grep -q "gemm_lib oneDNN" || return 1
    for f in avx512f avx512bw avx512vl avx512dq; do grep -qw "$f" /proc/cpuinfo || return 1; done
}

# isas: the oneDNN ISA caps to run bf16x6 under on this CPU ("ALL": no cap)
isas() {
    echo ALL
    if has_avx512; then
        grep -qw avx512_bf16 /proc/cpuinfo && grep -qw amx_bf16 /proc/cpuinfo && echo AVX512_CORE_BF16
        grep -qw avx512_bf16 /proc/cpuinfo && echo AVX512_CORE
    fi
    return 0
}

setup_file() {
    export G="$BATS_FILE_TMPDIR/g"
    mkdir -p "$G"
    # activation-like rows (mean 0.2) against weights of the tower's scale, at two reduction lengths
    "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
d = sys.argv[1]
for name, m, k, n in (("a", 300, 1152, 1152), ("b", 200, 4304, 1152)):
    np.save(f"{d}/x_{name}.npy", (r.standard_normal((m, k)) * 0.5 + 0.2).astype(np.float32))
    np.save(f"{d}/w_{name}.npy", (r.standard_normal((n, k)) * 0.03).astype(np.float32))
' "$G"
}

# rel_err X W OUT: relative L2 error of OUT against numpy's f64 X . W^T
rel_err() {
    "$PY" -c '
import numpy as np, sys
x, w, o = (np.load(p) for p in sys.argv[1:4])
ref = x.astype(np.float64) @ w.astype(np.float64).T
print("%.3e" % (np.linalg.norm(o - ref) / np.linalg.norm(ref)))' "$1" "$2" "$3"
}

@test "bf16x6 single GEMMs: within 2x the f32 mode's error against numpy f64, in every bf16 implementation" {
    if ! has_avx512; then # refused, with the reason: the CPU, or a build without oneDNN
        run "$GEMMRUN" --cpu-gemm bf16x6 "$G/x_a.npy" "$G/w_a.npy" "$G/o.npy"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "no bf16 matmul on this CPU" || "$output" =~ "bf16x6 GEMMs need oneDNN, and this mvembed was built without it" ]]
        run "$GEMMRUN" --cpu-gemm auto "$G/x_a.npy" "$G/w_a.npy" "$G/o.npy"
        [ "$status" -eq 0 ]
        [[ "$output" =~ " f32" ]]
        return 0
    fi
    for s in a b; do
        run "$GEMMRUN" --cpu-gemm f32 -j 2 "$G/x_$s.npy" "$G/w_$s.npy" "$G/f32_$s.npy"
        [ "$status" -eq 0 ]
        ef=$(rel_err "$G/x_$s.npy" "$G/w_$s.npy" "$G/f32_$s.npy")
        echo "# gemm $s: f32 ($output): rel_l2 $ef" >&3
        for isa in $(isas); do
            ONEDNN_MAX_CPU_ISA=$isa run "$GEMMRUN" --cpu-gemm bf16x6 -j 2 "$G/x_$s.npy" "$G/w_$s.npy" "$G/b_$s.npy"
            [ "$status" -eq 0 ]
            [[ "$output" =~ "bf16x6 (" ]]
            eb=$(rel_err "$G/x_$s.npy" "$G/w_$s.npy" "$G/b_$s.npy")
            echo "# gemm $s: bf16x6 cap $isa ($output): rel_l2 $eb" >&3
            "$PY" -c 'import sys; b, f = map(float, sys.argv[1:]); sys.exit(not (b <= 2 * f and b < 1e-6))' "$eb" "$ef"
        done
    done
}

@test "bf16x6 single GEMMs: the same bytes for any row split (-j 1, 2, 3, 5, 7, 13) in every bf16 implementation" {
    has_avx512 || return 0 # refused there: the test above checks the refusal
    for isa in $(isas); do
        for j in 1 2 3 5 7 13; do
            ONEDNN_MAX_CPU_ISA=$isa run "$GEMMRUN" --cpu-gemm bf16x6 -j "$j" "$G/x_b.npy" "$G/w_b.npy" "$G/j$j.npy"
            [ "$status" -eq 0 ]
        done
        for j in 2 3 5 7 13; do cmp "$G/j1.npy" "$G/j$j.npy"; done
    done
}

@test "bf16x6 below AVX-512: refused with a reason; auto falls back to f32" {
    has_avx512 || return 0 # ONEDNN_MAX_CPU_ISA needs oneDNN; the first test checks the refusal
    ONEDNN_MAX_CPU_ISA=AVX2 run "$MVEMBED" -q --device cpu --cpu-gemm bf16x6 --model "$MODEL" \
        --out "$BATS_TEST_TMPDIR/o" "$ROOT/fixtures/media/images"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "bf16x6 GEMMs: oneDNN "[0-9.]*" has no bf16 matmul on this CPU (its ISA: AVX2; it needs AVX-512); use f32 GEMMs" ]]
    ONEDNN_MAX_CPU_ISA=AVX2 run "$MVEMBED" -v --device cpu --cpu-gemm auto --model "$MODEL" \
        --out "$BATS_TEST_TMPDIR/o2" "$ROOT/fixtures/media/images"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "GEMMs through oneDNN "[0-9.]*" f32 (" ]]
}

@test "--cpu-gemm: auto is bf16x6 exactly where the CPU has AMX; -v names mode and implementation; bad values" {
    run "$MVEMBED" -v --device cpu --cpu-gemm auto --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" \
        "$ROOT/fixtures/media/images/"*.png
    [ "$status" -eq 0 ]
    line=$(grep "GEMMs through" <<< "$output")
    echo "# auto: $line" >&3
    if has_avx512 && grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo; then
        [[ "$line" =~ "bf16x6 (brg:avx512_core_amx_bf16)" ]]
    else
        [[ "$line" =~ " f32 (" ]]
    fi
    run "$MVEMBED" --device cpu --cpu-gemm bf16 --model "$MODEL" --out "$BATS_TEST_TMPDIR/o3" "$ROOT/fixtures/media"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--cpu-gemm must be f32, bf16x6 or auto: bf16" ]]
}

STAGES="patch_embed embed block_00 block_01 merger_norm merger_fc1 output"

# tower_modes NAME: the CPU tower on HF's pixel_values in both modes; every stage of bf16x6 within
# the budget; both modes' errors printed
tower_modes() {
    local R="$REF/parity/$1" g s b ef eb
    g=$("$PY" -c 'import numpy as np,sys; print(";".join(",".join(str(int(x)) for x in r) for r in np.load(sys.argv[1])))' "$R/grid_thw.npy")
    zstd -q -d -c "$R/pixel_values.npy.zst" > "$BATS_TEST_TMPDIR/$1.npy"
    for m in f32 bf16x6; do
        mvembed -q --device cpu --cpu-gemm "$m" --model "$MODEL" --pixels "$BATS_TEST_TMPDIR/$1.npy" \
            --grid "$g" --dump-stages "$BATS_TEST_TMPDIR/$m" --out "$BATS_TEST_TMPDIR/o$m"
    done
    for s in $STAGES; do
        b=$(budget "$R" "$s")
        run "$NPYCMP" "$BATS_TEST_TMPDIR/f32/$1/$s.npy" "$R/$s.f64.npy"
        ef=$(sed -n 's/.*rel_l2=\([^ ]*\).*/\1/p' <<< "$output")
        run "$NPYCMP" --max-rel "$b" "$BATS_TEST_TMPDIR/bf16x6/$1/$s.npy" "$R/$s.f64.npy"
        eb=$(sed -n 's/.*rel_l2=\([^ ]*\).*/\1/p' <<< "$output")
        echo "# $1 $s: rel_l2 vs HF f64: f32 $ef, bf16x6 $eb, budget $b" >&3
        [ "$status" -eq 0 ]
    done
}

@test "bf16x6 tower parity against HF f64, every stage within 2x HF f32's error: four parity inputs" {
    has_avx512 || return 0 # refused there (checked above)
    for n in square_128x128.png grid6x10_320x192.png onecell_32x32.png h264_192x128_24fps; do
        tower_modes "$n"
    done
}
