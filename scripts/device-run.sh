#!/usr/bin/env bash
# device-run.sh STEP... - runs on the GPU machine (through the device tool, from the repository
# root, after scripts/device-bundle.sh here and with `.device` in carry). Writes logs under $OUT
# (default /tmp/mvout) and prints short summaries. Steps:
#   tests      .device/bin/test_cuda_ops (kernel twins incl. cuDNN attention, whole-tower CUDA
#              vs CPU with both attentions, two backends on two GPUs / two threads), then
#              test_cuda_ops --big (one 47376-row cuDNN segment)                  -> tests.log
#   sanitizer  compute-sanitizer memcheck + racecheck on test_cuda_ops --quick    -> sanitizer.log
#   attn       .device/bin/attnbench (builtin vs cuDNN kernels) and scripts/bench_attn_torch.py
#              (torch sdpa FlashAttention-2 / cuDNN) on the same shapes           -> attn.log/jsonl
#   fa3        the Hopper kernel (cu/attention_fa3.cu): test_fa3 (layout probes, twin tests),
#              test_fa3 --big, compute-sanitizer memcheck + racecheck on test_fa3 --quick,
#              attnbench (fa3 beside builtin and cuDNN)        -> fa3.log, fa3_sanitizer.log,
#              fa3_bench.jsonl
#   parity     full-size random towers (27b, 2b layouts) from scripts/hf_reference.py make-model;
#              HF f64/f32 (CPU) and bf16 (GPU) vs mvtower dumps: f32, bf16 (default: f32
#              residual stream), bf16 with cuDNN attention, bf16 with HF's bf16 residual
#              (MV_CUDA_F32_RESIDUAL=0), and with PARITY_FA3=1 bf16 with the fa3
#              attention kernel                                                  -> parity.log
#   bench      scripts/bench_tower.py bench on the 27b layout, our tower with builtin and
#              cuDNN attention beside HF                                         -> bench.log/json
#   ncu        Nsight Compute on the attention kernel and a GEMM (448x448 batch) -> ncu.log
#   profile    GPU time by kernel family for one forward (nsys, else ncu durations) at
#              PROFILE_SIZES (default 64 x 448² and one 2048²)                 -> profile.log
#   u8dump     the CLI on every fixture (tiny model) with --device cuda and --device cpu and
#              --dump-stages: the GPU-patchified pixel_values (forward_u8, cu/patchify.cu) equal
#              the CPU's and HF's (fixtures/ref sha256) bit for bit                -> u8dump.log
# The environment (unpacked bundle, libraries, cuDNN from the torch venv) is scripts/device-env.sh.
# Each step's exit status is logged; the script exits 1 when any step failed.
# Example (device tool): scripts/device-run.sh tests attn parity bench
set -u
cd "$(dirname "$0")/.."
source scripts/device-env.sh
echo "device-run: cuDNN from $MV_CUDNN_LIB: $(ls "$MV_CUDNN_LIB"/libcudnn.so.9 2>&1)"
GRID="1,32,40;2,16,24;1,6,10;1,2,2"   # 2112 patches: a 512x640 image, a 2-group video, small ones
sanitize() { # $1 = a twin-test binary, run with --quick under memcheck and racecheck; $2 = log
    local cs
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    : >"$2"
    for tool in memcheck racecheck; do
        echo "== $tool" >>"$2"
        timeout ${SAN_TIMEOUT:-100} "$cs" --tool $tool --error-exitcode 9 "$1" --quick >>"$2" 2>&1
        echo "== $tool exit $?" >>"$2"
    done
}
ensure_model() { # $1 = config
    local m=/tmp/mv/model_$1
    [ -f "$m/config.json" ] || python3 scripts/hf_reference.py make-model --config "$1" --seed 0 --out "$m" >&2
    echo "$m"
}

rc=0
for step in "$@"; do
    t0=$(date +%s)
    case "$step" in
    tests)
        nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv | tee "$OUT/tests.log"
        nvidia-smi -L | tee -a "$OUT/tests.log"
        timeout 360 "$BIN/test_cuda_ops" >>"$OUT/tests.log" 2>&1 || { rc=1; echo "test_cuda_ops: exit $?" | tee -a "$OUT/tests.log"; }
        echo "== test_cuda_ops --big" >>"$OUT/tests.log"
        timeout ${BIG_TIMEOUT:-200} "$BIN/test_cuda_ops" --big >>"$OUT/tests.log" 2>&1 || { rc=1; echo "test_cuda_ops --big: exit $?" | tee -a "$OUT/tests.log"; }
        grep -E "^not ok|^1\.\.|Bail|^# only|two devices" "$OUT/tests.log" | head -40
        echo "tests: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
        ;;
    sanitizer)
        sanitize "$BIN/test_cuda_ops" "$OUT/sanitizer.log"
        grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^not ok" "$OUT/sanitizer.log"
        # cuBLASLt's Hopper kernels (nvjet_*, synchronized by mbarriers) are reported by racecheck;
        # count the hazards that name a kernel of cu/
        echo "hazards in cu/ kernels: $(grep -E "Race reported" "$OUT/sanitizer.log" | grep -cE "attn_|layernorm|rope|pos_embed|_f32_kernel|act_kernel")"
        ;;
    parity)
        : >"$OUT/parity.log"
        for cfg in 27b 2b; do
            m=$(ensure_model $cfg)
            python3 scripts/bench_tower.py pixels --grid "$GRID" --seed 3 --out /tmp/mv/pix.npy
            python3 scripts/hf_reference.py run --model "$m" --pixels /tmp/mv/pix.npy --grid "$GRID" \
                --dtypes f64,f32,bf16 --name p --out /tmp/mv/hf_$cfg >>"$OUT/parity.log" 2>&1
            # name:precision:attention:MV_CUDA_F32_RESIDUAL (bf16 default = f32 residual stream)
            runs="f32:f32:builtin:1 bf16:bf16:builtin:1 bf16_cudnn:bf16:cudnn:1 bf16_hfres:bf16:builtin:0"
            fa3ours=""
            if [ "${PARITY_FA3:-0}" = 1 ]; then
                runs="$runs bf16_fa3:bf16:fa3:1"
                fa3ours="bf16_fa3=/tmp/mv/our_${cfg}_bf16_fa3"
            fi
            for run in $runs; do
                IFS=: read -r name prec attn res <<<"$run"
                mkdir -p /tmp/mv/our_${cfg}_$name
                MV_CUDA_F32_RESIDUAL=$res "$BIN/mvtower" run --model "$m" --pixels /tmp/mv/pix.npy --grid "$GRID" \
                    --precision $prec --attention $attn --out /tmp/mv/our_${cfg}_$name >>"$OUT/parity.log" 2>&1 ||
                    { rc=1; echo "mvtower $name: failed" | tee -a "$OUT/parity.log"; }
            done
            echo "== parity $cfg (rel L2 vs HF f64; grid $GRID)" | tee -a "$OUT/parity.log"
            python3 scripts/bench_tower.py compare --ref /tmp/mv/hf_$cfg/p --ours f32=/tmp/mv/our_${cfg}_f32 \
                bf16=/tmp/mv/our_${cfg}_bf16 bf16_cudnn=/tmp/mv/our_${cfg}_bf16_cudnn \
                bf16_hfres=/tmp/mv/our_${cfg}_bf16_hfres $fa3ours \
                --json "$OUT/parity_$cfg.json" >/tmp/mv/cmp.txt 2>&1 || rc=1
            cat /tmp/mv/cmp.txt >>"$OUT/parity.log"
            grep -E "^(PASS|FAIL)|^stage|^output|^embed|^patch_embed|^block_00|^merger|Error" /tmp/mv/cmp.txt
        done
        ;;
    attn)
        timeout 240 "$BIN/attnbench" --iters ${ATTN_ITERS:-20} >"$OUT/attn.jsonl" 2>"$OUT/attn.log" || rc=1
        timeout 240 python3 scripts/bench_attn_torch.py --iters ${ATTN_ITERS:-20} >>"$OUT/attn.jsonl" 2>>"$OUT/attn.log" || rc=1
        # the same shapes through the ragged graph only (the bench's segments are all equal)
        MV_CUDNN_DENSE=0 timeout 240 "$BIN/attnbench" --iters ${ATTN_ITERS:-20} 2>>"$OUT/attn.log" |
            grep '"cudnn"' | sed 's/"impl": "cudnn"/"impl": "cudnn_ragged"/' >>"$OUT/attn.jsonl" || rc=1
        grep -v '^{' "$OUT/attn.jsonl"
        grep -E '"attn_agree"|"error"' "$OUT/attn.jsonl" | head -20
        tail -5 "$OUT/attn.log"
        ;;
    fa3)
        : >"$OUT/fa3.log"
        nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a "$OUT/fa3.log"
        timeout ${FA3_TIMEOUT:-300} "$BIN/test_fa3" >>"$OUT/fa3.log" 2>&1 || { rc=1; echo "test_fa3: exit $?" | tee -a "$OUT/fa3.log"; }
        echo "== test_fa3 --big" >>"$OUT/fa3.log"
        timeout ${BIG_TIMEOUT:-200} "$BIN/test_fa3" --big >>"$OUT/fa3.log" 2>&1 || { rc=1; echo "test_fa3 --big: exit $?" | tee -a "$OUT/fa3.log"; }
        grep -E "^not ok|^1\.\.|Bail" "$OUT/fa3.log" | head -30
        echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
        sanitize "$BIN/test_fa3" "$OUT/fa3_sanitizer.log"
        grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/fa3_sanitizer.log"
        timeout 240 "$BIN/attnbench" --iters ${ATTN_ITERS:-20} >"$OUT/fa3_bench.jsonl" 2>>"$OUT/fa3.log" || rc=1
        grep -v '^{' "$OUT/fa3_bench.jsonl"
        grep -E '"attn_agree"|"error"' "$OUT/fa3_bench.jsonl" | head -20
        ;;
    bench)
        m=$(ensure_model 27b)
        python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --iters ${BENCH_ITERS:-10} \
            ${BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -8
        echo "== cuDNN attention through the ragged graph only (MV_CUDNN_DENSE=0), mvembed only" | tee -a "$OUT/bench.log"
        MV_CUDNN_DENSE=0 python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --attention cudnn \
            --iters ${BENCH_ITERS:-10} --no-hf 2>&1 | tee -a "$OUT/bench.log" | grep -E "tokens|Error" | tail -6
        if [ "${BENCH_VARIANT1:-0}" = 1 ]; then
            echo "== attention kernel variant 1 (8 warps x 16 rows), mvembed only" | tee -a "$OUT/bench.log"
            MV_ATTN_VARIANT=1 python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --attention builtin \
                --iters ${BENCH_ITERS:-10} --no-hf 2>&1 | tee -a "$OUT/bench.log" | grep -E "tokens|Error" | tail -4
        fi
        ;;
    ncu)
        m=$(ensure_model 27b)
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        G448=$(python3 -c 'print(";".join(["1,28,28"]*64))')
        python3 scripts/bench_tower.py pixels --grid "$G448" --out /tmp/mv/p448.npy
        timeout 240 "$NCU" --clock-control none --kernel-name regex:'attn_bf16|gemm|sm90|nvjet|layernorm|rope' \
            --launch-skip 20 --launch-count 12 --section SpeedOfLight --section Occupancy \
            --section LaunchStats "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/p448.npy --grid "$G448" \
            --iters 1 --warmup 0 >"$OUT/ncu.log" 2>&1
        grep -E "attn_bf16|gemm|sm90|nvjet|layernorm|rope|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy" "$OUT/ncu.log" | head -80
        ;;
    profile)
        # where one forward's GPU time goes, by kernel family: nsys when installed, else ncu with one
        # metric (kernel durations; ncu serialises kernels, so the sum is GPU time, not wall time)
        m=$(ensure_model 27b)
        for sz in ${PROFILE_SIZES:-64x28x28 1x128x128}; do
            IFS=x read -r cnt gh gw <<< "$sz"
            G=$(python3 -c "print(';'.join(['1,$gh,$gw']*$cnt))")
            python3 scripts/bench_tower.py pixels --grid "$G" --out /tmp/mv/prof.npy
            NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
            if [ -n "$NSYS" ]; then
                timeout 200 "$NSYS" profile -o /tmp/mv/prof_$sz --force-overwrite true --stats=false \
                    "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/prof.npy --grid "$G" --iters 2 --warmup 1 \
                    >"$OUT/profile_$sz.log" 2>&1
                timeout 120 "$NSYS" stats --report cuda_gpu_kern_sum --format csv /tmp/mv/prof_$sz.nsys-rep \
                    >"$OUT/profile_$sz.csv" 2>>"$OUT/profile_$sz.log"
            else
                NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
                timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
                    "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/prof.npy --grid "$G" --iters 1 --warmup 0 \
                    >"$OUT/profile_$sz.csv" 2>"$OUT/profile_$sz.log"
            fi
            python3 scripts/profile_summary.py "$OUT/profile_$sz.csv" "$sz" | tee -a "$OUT/profile.log"
        done
        ;;
    u8dump)
        rm -rf /tmp/mv/u8 && mkdir -p /tmp/mv/u8 && : >"$OUT/u8dump.log"
        for dev in cuda cpu; do
            "$BIN/mvembed" -q --device $dev --model fixtures/model-tiny --out /tmp/mv/u8/out_$dev \
                --dump-stages /tmp/mv/u8/dump_$dev fixtures/media >>"$OUT/u8dump.log" 2>&1 || true
        done
        python3 - /tmp/mv/u8 fixtures/ref >>"$OUT/u8dump.log" 2>&1 <<'PY' || rc=1
import hashlib, json, os, sys
import numpy as np
w, ref = sys.argv[1:3]
ok = lambda dev: {json.loads(l)["output"][:-8]: json.loads(l) for l in open(f"{w}/out_{dev}/manifest.jsonl")
                  if json.loads(l)["status"] == "ok"}
cuda, cpu = ok("cuda"), ok("cpu")
bad = n_hf = 0
for rel in sorted(cpu):
    a = np.load(f"{w}/dump_cpu/{rel}/pixel_values.npy")
    b = np.load(f"{w}/dump_cuda/{rel}/pixel_values.npy") if rel in cuda else None
    same = b is not None and a.shape == b.shape and a.tobytes() == b.tobytes()
    h = f"{ref}/{rel.split('/')[0]}/{os.path.splitext(os.path.basename(rel))[0] if rel.startswith('videos/') else os.path.basename(rel)}/pixel_values.sha256"
    hf = None
    if os.path.exists(h) and b is not None and not rel.endswith("png_gray16_96x64.png"):
        hf = hashlib.sha256(np.ascontiguousarray(b, dtype="<f4").tobytes()).hexdigest() == open(h).read().strip()
        n_hf += 1
    print(f"{rel}: cuda == cpu {same}, == HF {hf}")
    bad += (not same) + (hf is False)
print(f"u8dump: {len(cpu)} inputs ok on cpu, {len(cuda)} on cuda, {n_hf} with HF refs: "
      + ("PASS" if bad == 0 and len(cuda) == len(cpu) and len(cpu) > 0 else f"FAIL ({bad} mismatches)"))
sys.exit(0 if bad == 0 and len(cuda) == len(cpu) and len(cpu) > 0 else 1)
PY
        tail -1 "$OUT/u8dump.log"
        ;;
    *)
        echo "device-run: unknown step $step" >&2
        rc=2
        ;;
    esac
    echo "== $step: $(($(date +%s) - t0)) s"
done
exit $rc
