#!/usr/bin/env bats
# --cpu-gemm bf16x6 (src/tower/gemm_amx.c): f32 operands split exactly into three bf16 parts, six part
# products per 32-k step on Intel AMX tiles. Oracles: numpy's f64 product for single GEMMs
# (build/gemmrun, the tower's GEMM path), with f32 GEMMs' error on the same data as the bar; HF's
# f64 tower (fixtures/ref/parity, with 20-parity.bats's budget: 2x HF f32's error) for the tower;
# /proc/cpuinfo for whether AMX is there. Both modes' errors are printed (fd 3) for the record.
# Where the CPU has AMX, MV_NO_AMX=1 stands in for a CPU without it (the refusal and auto's
# fallback); elsewhere those are what every test checks.
load test_helper
# GEMMRUN (env): the gemmrun binary of the build under test (default build/gemmrun)

GEMMRUN="${GEMMRUN:-$ROOT/build/gemmrun}"

# has_amx: /proc/cpuinfo lists amx_bf16 and amx_tile (the kernel's own probe also asks Linux for
# the tile state: a mismatch fails the tests below, by design)
has_amx() { grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo; }

setup_file() {
    export G="$BATS_FILE_TMPDIR/g"
    mkdir -p "$G"
    # activation-like rows (mean 0.2) against weights of the tower's scale, at two reduction lengths
    "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
d = sys.argv[1]
for name, m, k, n in (("a", 300, 1152, 1152), ("b", 200, 4304, 1152), ("m1", 1, 40, 48),
                      ("m15", 15, 100, 40), ("m17", 17, 4304, 33), ("m33", 33, 1152, 3456)):
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

# refused: the given command fails with the reason; auto runs f32
check_refusal() {
    run "$@" "$GEMMRUN" --cpu-gemm bf16x6 "$G/x_a.npy" "$G/w_a.npy" "$G/o.npy"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "bf16x6 GEMMs need Intel AMX: " ]]
    run "$@" "$GEMMRUN" --cpu-gemm auto "$G/x_a.npy" "$G/w_a.npy" "$G/o.npy"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " f32" ]]
}

@test "bf16x6 single GEMMs: below f32 GEMMs' error against numpy f64 (tower shapes and M 1, 15, 17, 33; N 33, 40, 48; K 40, 100, 4304)" {
    if ! has_amx; then
        check_refusal env
        return 0
    fi
    for s in a b m1 m15 m17 m33; do
        run "$GEMMRUN" --cpu-gemm f32 -j 2 "$G/x_$s.npy" "$G/w_$s.npy" "$G/f32_$s.npy"
        [ "$status" -eq 0 ]
        ef=$(rel_err "$G/x_$s.npy" "$G/w_$s.npy" "$G/f32_$s.npy")
        run "$GEMMRUN" --cpu-gemm bf16x6 -j 2 "$G/x_$s.npy" "$G/w_$s.npy" "$G/b_$s.npy"
        [ "$status" -eq 0 ]
        [[ "$output" =~ "AMX bf16x6 (" ]]
        eb=$(rel_err "$G/x_$s.npy" "$G/w_$s.npy" "$G/b_$s.npy")
        echo "# gemm $s: f32 rel_l2 $ef, bf16x6 $eb" >&3
        "$PY" -c 'import sys; b, f = map(float, sys.argv[1:]); sys.exit(not (b < f and b < 1e-6))' "$eb" "$ef"
    done
}

@test "bf16x6 single GEMMs: the same bytes for any row split (-j 1, 2, 3, 5, 7, 13)" {
    has_amx || return 0 # refused there: the test above checks the refusal
    for j in 1 2 3 5 7 13; do
        run "$GEMMRUN" --cpu-gemm bf16x6 -j "$j" "$G/x_b.npy" "$G/w_b.npy" "$G/j$j.npy"
        [ "$status" -eq 0 ]
        run "$GEMMRUN" --cpu-gemm bf16x6 -j "$j" "$G/x_m33.npy" "$G/w_m33.npy" "$G/k$j.npy"
        [ "$status" -eq 0 ]
    done
    for j in 2 3 5 7 13; do cmp "$G/j1.npy" "$G/j$j.npy"; cmp "$G/k1.npy" "$G/k$j.npy"; done
}

@test "bf16x6 without AMX (MV_NO_AMX=1 where the CPU has it): refused with a reason; auto falls back to f32" {
    check_refusal env MV_NO_AMX=1
    MV_NO_AMX=1 run "$MVEMBED" -q --device cpu --cpu-gemm bf16x6 --model "$MODEL" \
        --out "$BATS_TEST_TMPDIR/o" "$ROOT/fixtures/media/images"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "bf16x6 GEMMs need Intel AMX: MV_NO_AMX is set; use f32 GEMMs" ]]
    MV_NO_AMX=1 run "$MVEMBED" -v --device cpu --cpu-gemm auto --model "$MODEL" \
        --out "$BATS_TEST_TMPDIR/o2" "$ROOT/fixtures/media/images"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "GEMMs through "[^\ ]*" "[0-9.]*" f32" || "$output" =~ "GEMMs through OpenBLAS" ]]
}

@test "--cpu-gemm: auto (the default) is bf16x6 exactly where the CPU has AMX; -v names mode and implementation; bad values" {
    run "$MVEMBED" -v --device cpu --cpu-gemm auto --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" \
        "$ROOT/fixtures/media/images/"*.png
    [ "$status" -eq 0 ]
    line=$(grep "GEMMs through" <<< "$output")
    echo "# auto: $line" >&3
    if has_amx; then
        [[ "$line" =~ "AMX bf16x6 (gemm_amx.c" ]]
    else
        [[ "$line" =~ " f32" ]]
    fi
    # no --cpu-gemm: the same mode, and the same bytes as auto (numpy reads both outputs)
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/od" "$ROOT/fixtures/media/images/"*.png
    [ "$status" -eq 0 ]
    dline=$(grep "GEMMs through" <<< "$output")
    [ "${dline%% (weights packed*}" = "${line%% (weights packed*}" ] # the packing time varies
    n=0
    while IFS= read -r f; do # outputs mirror the inputs' paths under --out
        g="$BATS_TEST_TMPDIR/od/${f#"$BATS_TEST_TMPDIR"/o/}"
        [ -f "$g" ]
        "$PY" - "$f" "$g" <<'PYEOF'
import sys, io, numpy as np
def load(p):
    if p.endswith(".zst"):
        import subprocess
        return np.load(io.BytesIO(subprocess.run(["zstd", "-dc", p], check=True, capture_output=True).stdout))
    return np.load(p)
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b), (sys.argv[1], a.shape, b.shape)
PYEOF
        n=$((n + 1))
    done < <(find "$BATS_TEST_TMPDIR/o" -name '*.npy*')
    [ "$n" -gt 0 ]
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
    has_amx || return 0 # refused there (checked above)
    for n in square_128x128.png grid6x10_320x192.png onecell_32x32.png h264_192x128_24fps; do
        tower_modes "$n"
    done
}
