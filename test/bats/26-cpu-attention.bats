#!/usr/bin/env bats
# The CPU tower's attention (mv_attention_cpu_gemm, timed and run alone by build/cpubench --what
# attn) against numpy's softmax attention in float64, on segments long enough for its key-blocked
# online softmax (more than 1024 keys: 2 and 3 key blocks, with a query-block tail) beside short
# ones and a video's per-frame segments; head_dim 72 (the 27B layout's) and 64. Queries are
# scaled up so that the softmax is peaked and a row's maximum grows from one key block to the
# next (the rescale path), and the largest keys sit in the last block. Also: the same bytes at
# -j 1 and -j 3. Each check runs in both GEMM modes (--cpu-gemm f32: oneDNN's or OpenBLAS's
# sgemm; bf16x6: the AMX kernel, as the tower runs attention in that mode) where the CPU has AMX
# (/proc/cpuinfo, as 27-cpu-gemm.bats decides); elsewhere the bf16x6 run must be refused with
# the reason, and auto must run f32.
load test_helper

# CPUBENCH (env): the cpubench binary of the build under test (default build/cpubench)
BENCH="${CPUBENCH:-$ROOT/build/cpubench}"

setup_file() {
    export T72="$BATS_FILE_TMPDIR/t72" T64="$BATS_FILE_TMPDIR/t64"
    # DEPTHxHIDDENxHEADSxINTERxOUT: 2 heads of 72, 2 heads of 64 (only heads and head_dim matter)
    "$PY" "$ROOT/scripts/make_random_tower.py" "$T72" --config 1x144x2x64x32 --seed 2 >/dev/null
    "$PY" "$ROOT/scripts/make_random_tower.py" "$T64" --config 1x128x2x64x32 --seed 3 >/dev/null
}

# has_amx: /proc/cpuinfo lists amx_bf16 and amx_tile (27-cpu-gemm.bats's test)
has_amx() { grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo; }

# modes: the GEMM modes to check here (bf16x6 only where AMX is there); without AMX, checks that
# bf16x6 is refused with the reason and that auto runs f32
modes() {
    if has_amx; then
        echo "f32 bf16x6"
        return
    fi
    run "$BENCH" --model "$T64" --grid "1,4,6" --what attn -j 2 --iters 1 --cpu-gemm bf16x6
    [ "$status" -eq 1 ] || return 1
    [[ "$output" =~ "bf16x6 GEMMs need Intel AMX: " ]] || return 1
    run "$BENCH" --model "$T64" --grid "1,4,6" --what attn -j 2 --iters 1 --cpu-gemm auto
    [ "$status" -eq 0 ] || return 1
    grep -q "^attn_lib .* f32$" <<< "$output" || return 1
    echo "# no AMX on this CPU: bf16x6 refused (checked), f32 alone" >&3
    echo "f32"
}

# attn_vs_numpy MODEL GRID HIDDEN HEADS: random qkv for GRID's segments (one per frame of h x w
# patches), our attention -j 2 in each of modes(), numpy's in f64; max |ours - numpy| <= 2e-5 *
# max |numpy|
attn_vs_numpy() {
    local d="$BATS_TEST_TMPDIR" ms m
    ms=$(modes)
    [ -n "$ms" ]
    "$PY" - "$2" "$3" "$d" <<'EOF'
import numpy as np, sys
grid = [tuple(int(v) for v in e.split(",")) for e in sys.argv[1].split(";")]
H = int(sys.argv[2])
n = sum(t * h * w for t, h, w in grid)
rng = np.random.default_rng(7)
qkv = rng.uniform(-1, 1, (n, 3 * H)).astype(np.float32)
qkv[:, :H] *= 6  # peaked softmax: scores of several units
qkv[-n // 3:, H:2 * H] *= 1.5  # the largest keys of each segment's tail: in its last block
np.save(sys.argv[3] + "/qkv.npy", qkv)
EOF
    for m in $ms; do
    run "$BENCH" --model "$1" --grid "$2" --what attn --qkv "$d/qkv.npy" -j 2 --iters 1 --out "$d/out.npy" \
        --cpu-gemm "$m"
    [ "$status" -eq 0 ]
    if [ "$m" = bf16x6 ]; then grep -q "^attn_lib AMX bf16x6 (" <<< "$output"; else grep -q "^attn_lib .* f32$" <<< "$output"; fi
    run "$PY" - "$2" "$3" "$4" "$d" <<'EOF'
import numpy as np, sys
grid = [tuple(int(v) for v in e.split(",")) for e in sys.argv[1].split(";")]
H, heads, d = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
D = H // heads
qkv = np.load(d + "/qkv.npy").astype(np.float64)
ours = np.load(d + "/out.npy")
ref = np.zeros((qkv.shape[0], H))
s0 = 0
for t, h, w in grid:
    for _ in range(t):
        L = h * w
        for hd in range(heads):
            q = qkv[s0:s0 + L, hd * D:(hd + 1) * D]
            k = qkv[s0:s0 + L, H + hd * D:H + (hd + 1) * D]
            v = qkv[s0:s0 + L, 2 * H + hd * D:2 * H + (hd + 1) * D]
            s = q @ k.T / np.sqrt(D)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            ref[s0:s0 + L, hd * D:(hd + 1) * D] = (p / p.sum(axis=1, keepdims=True)) @ v
        s0 += L
err = np.abs(ours - ref).max() / np.abs(ref).max()
print(f"max error {err:.3g} of max |out|")
sys.exit(0 if ours.shape == ref.shape and np.isfinite(ours).all() and err <= 2e-5 else 1)
EOF
    echo "# $2 $m: $output" >&3
    [ "$status" -eq 0 ]
    done
}

@test "attention vs numpy: 1500, 2116 and 4-key segments, head_dim 72" {
    attn_vs_numpy "$T72" "1,30,50;1,46,46;1,2,2" 144 2
}

@test "attention vs numpy: a 2-frame video (2 segments of 24), a 1088-key segment, head_dim 64" {
    attn_vs_numpy "$T64" "2,4,6;1,32,34" 128 2
}

@test "attention: the same bytes at -j 1 and -j 3 (2116 keys: 3 key blocks), in each GEMM mode" {
    d="$BATS_TEST_TMPDIR"
    ms=$(modes)
    [ -n "$ms" ]
    for m in $ms; do
        for j in 1 3; do
            run "$BENCH" --model "$T72" --grid "1,46,46;1,4,4" --what attn -j "$j" --iters 1 \
                --cpu-gemm "$m" --out "$d/$m-j$j.npy"
            [ "$status" -eq 0 ]
        done
        cmp "$d/$m-j1.npy" "$d/$m-j3.npy"
    done
}

@test "attention without AMX (MV_NO_AMX=1 where the CPU has it): bf16x6 refused with the reason, auto runs f32" {
    MV_NO_AMX=1 run "$BENCH" --model "$T64" --grid "1,4,6" --what attn -j 2 --iters 1 --cpu-gemm bf16x6
    [ "$status" -eq 1 ]
    [[ "$output" =~ "bf16x6 GEMMs need Intel AMX: MV_NO_AMX is set" ]]
    MV_NO_AMX=1 run "$BENCH" --model "$T64" --grid "1,4,6" --what attn -j 2 --iters 1 --cpu-gemm auto
    [ "$status" -eq 0 ]
    grep -q "^attn_lib .* f32$" <<< "$output"
}
