#!/usr/bin/env bash
# device-run.sh STEP... - runs on the GPU machine (through the device tool, from the repository
# root, after scripts/device-bundle.sh here and with `.device` in carry). Writes logs under $OUT
# (default /tmp/mvout) and prints short summaries. Steps:
#   tests      .device/bin/test_cuda_ops (kernel twins incl. cuDNN attention, whole-tower CUDA
#              vs CPU with both attentions, two backends on two GPUs / two threads), then
#              test_cuda_ops --big (one 47376-row cuDNN segment), test_resize (the
#              uint8 bicubic resize kernel against its CPU twin)                  -> tests.log
#   sanitizer  compute-sanitizer memcheck + racecheck on test_cuda_ops --quick and on test_resize,
#              each tool under SAN_TIMEOUT (300) s       -> sanitizer.log, sanitizer-resize.log
#   attn       .device/bin/attnbench (builtin vs cuDNN kernels) and scripts/bench_attn_torch.py
#              (torch sdpa FlashAttention-2 / cuDNN) on the same shapes           -> attn.log/jsonl
#   fa3        the Hopper kernel (cu/attention_fa3.cu): test_fa3 (layout probes, twin tests),
#              test_fa3 --big, compute-sanitizer memcheck + racecheck on test_fa3 --quick,
#              attnbench (fa3 beside builtin and cuDNN)        -> fa3.log, fa3_sanitizer.log,
#              fa3_bench.jsonl
#   parity     full-size random towers (27b, 2b layouts) from scripts/hf_reference.py make-model;
#              HF f64/f32 (CPU) and bf16 (GPU) vs mvtower dumps: f32, bf16 (default: f32
#              residual stream), bf16 with cuDNN attention, bf16 with HF's bf16 residual
#              (--cuda-residual bf16), and with PARITY_FA3=1 bf16 with the fa3
#              attention kernel                                                  -> parity.log
#   bench      scripts/bench_tower.py bench on the 27b layout at its default sizes, our tower
#              with BENCH_ATTN (auto,builtin,cudnn) attention beside HF          -> bench.log/json
#   ncu        Nsight Compute on the attention kernel and a GEMM (448x448 batch) -> ncu.log
#   profile    GPU time by kernel family for one forward (nsys, else ncu durations) at
#              PROFILE_SIZES (default 64 x 448² and one 2048²; grid cells of 16 px) of each
#              PROFILE_CONFIGS layout (default 27b)                              -> profile.log
#   u8dump     the CLI on every fixture (tiny model) with --device cuda and --device cpu and
#              --dump-stages: the GPU-patchified pixel_values (the uint8 forward, cu/patchify.cu) equal
#              the CPU's and HF's (fixtures/ref sha256) bit for bit                -> u8dump.log
#   tower      the tower vs HF at the five sizes (SIZES5 below; bench_tower.py bench): HF sdpa
#              bf16 with its inputs on the GPU beside ours host to host, f32 pixel_values one
#              forward at a time and, with --cli (TOWER_ARGS, default --cli), uint8 frames with
#              two forwards in flight as the CLI feeds it; TOWER_RUNS (2) runs, TOWER_CONFIG
#              (27b | 2b), TOWER_ATTN (auto), TOWER_ITERS (5), TOWER_SIZES, TOWER_FA3 (an fa3
#              configuration over the table's: mvtower --fa3 SPEC)               -> tower.log/json
#   attnfair   fa3 against cuDNN with neither row favoured: attnbench --only fa3,cudnn per shape
#              with an idle second before each row, in both row orders, twice; FAIR_DIMS (64 72),
#              FAIR_SHAPES (64x784 16x4096 16x7600 4x8160 1x16384 1x47376), FAIR_ITERS (30)  -> attnfair.log
#   variant    an fa3 configuration against the table's (FA3_SPEC: the fields it changes, as
#              mvtower's --fa3: sw=0, bn=128, wg=2, st=3, rm=8, qp=0, ps=0, split=0, ...; the variants
#              build, test/cuda/variants/variants.cuh): test_fa3 --fa3 FA3_SPEC, then attnbench
#              and the tower (no HF), the table's and FA3_SPEC's in both orders with rests
#              (device-env.sh attn_ab, tower_ab) at head dims VARIANT_DIMS (72 64) on
#              VARIANT_SHAPES (64x784 16x4096 16x7600 4x8160 1x16384) and, for the layouts
#              VARIANT_CONFIGS (27b 2b), VARIANT_SIZES (64x448x448,16x1600x1200,1x2048x2048)
#                                                                              -> variant.log
#   cpu        the CPU tower beside HF f32 (scripts/bench-cpu.sh, .device/bin/cpubench): 27
#              blocks, CPU_MODES (--cpu-gemm f32 bf16x6), CPU_THREADS (16) threads, CPU_SIZES
#              (4x448x448;1x1024x1024), CPU_ITERS (2)                 -> cpu.log, bench-cpu.md
#   cpugemm    the CPU tower's GEMMs alone (cpubench --what gemm), f32 and bf16x6, by thread count
#              (CPUGEMM_THREADS: 1 4 8 16; CPUGEMM_ITERS: 2), a depth-8 27B tower at 4 x 448²
#                                                                              -> cpugemm.log
#   kernels    one 64 x 448² forward kernel by kernel: ncu durations of 60 launches from the 600th
#              (a 15680-row chunk's blocks), no clock or cache control, shares by kernel
#                                                                        -> kernels.log/csv
#   chunks     rows per chunk: the tower at 64 x 448² and 16 x 1024² (no HF) with --batch-tokens
#              CHUNK_ROWS (16384 26400 32768 50176), alternated twice              -> chunks.log
#   gemmrank   cuBLASLt's other heuristic answers (mvtower --gemm-rank in,out,k) for proj (1152 ->
#              1152; answers GEMMRANK_PROJ: 0 3 4 6 0) and fc2 (4304 -> 1152; GEMMRANK_FC2: 0 3 7),
#              whole 64 x 448² forwards, images/s (mvtower --gemm-list's list first) -> gemmrank.log
#   clocks     sustained clocks and power under load: nvidia-smi sampled every 100 ms while the
#              tower (no HF) runs CLOCK_SIZES of each CLOCK_CONFIGS layout, and while attnbench's
#              fa3 runs CLOCK_SHAPES at head dim 64; per run the median / lowest SM clock, median
#              power and the share of samples under each throttle reason; then ncu on one fa3
#              launch per shape (clocks left free): duration, L2 hit rate, L2, DRAM and SM
#              throughput, SM clock                                               -> clocks.log
# The environment (unpacked bundle, libraries, cuDNN from the torch venv) is scripts/device-env.sh.
# Each step's exit status is logged; the script exits 1 when any step failed.
# Example (device tool): OUT=$OUT timeout 560 scripts/device-run.sh tests attn parity tower
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
        timeout ${SAN_TIMEOUT:-300} "$cs" --tool $tool --error-exitcode 9 "$1" --quick >>"$2" 2>&1
        echo "== $tool exit $?" >>"$2"
    done
}
SIZES5=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032   # the tower table's sizes
G448=$(python3 -c 'print(";".join(["1,28,28"] * 64))')                # 64 x 448² images
pixels448() { # pixel_values of 64 x 448² images (seed 1) at /tmp/mv/p448.npy
    [ -f /tmp/mv/p448.npy ] || python3 scripts/bench_tower.py pixels --grid "$G448" --seed 1 --out /tmp/mv/p448.npy >&2
}
img_s() { # mvtower bench's JSON line on stdin -> "N img/s"
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.1f img/s" % d["images_per_s"])' 2>/dev/null || echo "failed"
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
        echo "== test_resize" >>"$OUT/tests.log"
        timeout 120 "$BIN/test_resize" >>"$OUT/tests.log" 2>&1 || { rc=1; echo "test_resize: exit $?" | tee -a "$OUT/tests.log"; }
        grep -E "^not ok|^1\.\.|Bail|^# only|two devices" "$OUT/tests.log" | head -40
        echo "tests: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
        ;;
    sanitizer)
        sanitize "$BIN/test_cuda_ops" "$OUT/sanitizer.log"
        grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^not ok" "$OUT/sanitizer.log"
        sanitize "$BIN/test_resize" "$OUT/sanitizer-resize.log" # takes no options: --quick is ignored
        grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^not ok" "$OUT/sanitizer-resize.log" | sed 's/^/test_resize: /'
        # cuBLASLt's Hopper kernels (nvjet_*, synchronized by mbarriers) are reported by racecheck;
        # count the hazards that name a kernel of cu/
        # (the kernel's name only: a test's output line can run into the report's)
        echo "hazards in cu/ kernels: $(grep -oE "Race reported between [A-Za-z]+ access at [^+ ]+" "$OUT/sanitizer.log" |
            awk '{print $NF}' | grep -vcE "^(nvjet_|cudnn_|sm[0-9]+_|cutlass)")"
        ;;
    parity)
        : >"$OUT/parity.log"
        for cfg in 27b 2b; do
            m=$(ensure_model $cfg)
            python3 scripts/bench_tower.py pixels --grid "$GRID" --seed 3 --out /tmp/mv/pix.npy
            python3 scripts/hf_reference.py run --model "$m" --pixels /tmp/mv/pix.npy --grid "$GRID" \
                --dtypes f64,f32,bf16 --name p --out /tmp/mv/hf_$cfg >>"$OUT/parity.log" 2>&1
            # name:precision:attention:--cuda-residual (bf16's default: the f32 residual stream)
            runs="f32:f32:builtin:f32 bf16:bf16:builtin:f32 bf16_cudnn:bf16:cudnn:f32 bf16_hfres:bf16:builtin:bf16"
            fa3ours=""
            if [ "${PARITY_FA3:-0}" = 1 ]; then
                runs="$runs bf16_fa3:bf16:fa3:f32"
                fa3ours="bf16_fa3=/tmp/mv/our_${cfg}_bf16_fa3"
            fi
            for run in $runs; do
                IFS=: read -r name prec attn res <<<"$run"
                mkdir -p /tmp/mv/our_${cfg}_$name
                "$BIN/mvtower" run --model "$m" --pixels /tmp/mv/pix.npy --grid "$GRID" --cuda-residual $res \
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
            # the bf16 tower's output as each --out-dtype stores it (numpy's conversions), vs HF f64
            python3 - /tmp/mv/hf_$cfg/p/output.f64.npy /tmp/mv/our_${cfg}_bf16/output.npy <<'PYEOF' |
import sys
import numpy as np
ref = np.load(sys.argv[1]).astype(np.float64)
ours = np.load(sys.argv[2]).astype(np.float32).reshape(ref.shape)
u = ours.view(np.uint32).astype(np.uint64)
bf = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
for name, a in (("f32", ours), ("auto/f16", ours.astype(np.float16)), ("bf16", bf)):
    a = a.astype(np.float64)
    rel = np.linalg.norm(a - ref) / np.linalg.norm(ref)
    print(f"out-dtype {name}: rel L2 vs HF f64 {rel:.4e}, values not kept exactly {int((a != ours).sum())} of {ours.size}")
PYEOF
                tee -a "$OUT/parity.log"
        done
        ;;
    attn)
        timeout 240 "$BIN/attnbench" --iters ${ATTN_ITERS:-20} >"$OUT/attn.jsonl" 2>"$OUT/attn.log" || rc=1
        timeout 240 python3 scripts/bench_attn_torch.py --iters ${ATTN_ITERS:-20} >>"$OUT/attn.jsonl" 2>>"$OUT/attn.log" || rc=1
        # the same shapes through the ragged graph only (the bench's segments are all equal)
        timeout 240 "$BIN/attnbench" --iters ${ATTN_ITERS:-20} --cudnn-graph ragged 2>>"$OUT/attn.log" |
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
            --attention "${BENCH_ATTN:-auto,builtin,cudnn}" ${BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -8
        echo "== cuDNN attention through the ragged graph only (--cudnn-graph ragged), mvembed only" | tee -a "$OUT/bench.log"
        python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --attention cudnn \
            --mvtower-args="--cudnn-graph ragged" \
            --iters ${BENCH_ITERS:-10} --no-hf 2>&1 | tee -a "$OUT/bench.log" | grep -E "tokens|Error" | tail -6
        if [ "${BENCH_VARIANT1:-0}" = 1 ]; then
            echo "== attention kernel variant 1 (8 warps x 16 rows), mvembed only" | tee -a "$OUT/bench.log"
            python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --attention builtin \
                --mvtower-args="--attn-variant 1" --iters ${BENCH_ITERS:-10} --no-hf 2>&1 | tee -a "$OUT/bench.log" |
                grep -E "tokens|Error" | tail -4
        fi
        ;;
    ncu)
        m=$(ensure_model 27b)
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        python3 scripts/bench_tower.py pixels --grid "$G448" --out /tmp/mv/p448_seed0.npy
        timeout 240 "$NCU" --clock-control none --kernel-name regex:'attn_bf16|gemm|sm90|nvjet|layernorm|rope' \
            --launch-skip 20 --launch-count 12 --section SpeedOfLight --section Occupancy \
            --section LaunchStats "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/p448_seed0.npy --grid "$G448" \
            --iters 1 --warmup 0 >"$OUT/ncu.log" 2>&1
        grep -E "attn_bf16|gemm|sm90|nvjet|layernorm|rope|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy" "$OUT/ncu.log" | head -80
        ;;
    profile)
        # where one forward's GPU time goes, by kernel family: nsys when installed, else ncu with one
        # metric (kernel durations; ncu serialises kernels, so the sum is GPU time, not wall time)
        for cfg in ${PROFILE_CONFIGS:-27b}; do
        m=$(ensure_model $cfg)
        echo "== profile $cfg" | tee -a "$OUT/profile.log"
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
            python3 scripts/profile_summary.py "$OUT/profile_$sz.csv" "$cfg $sz" | tee -a "$OUT/profile.log"
        done
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
    clocks)
        : >"$OUT/clocks.log"
        under_smi() { # LABEL CMD...: CMD under nvidia-smi sampling, its summary line in clocks.log
            local label=$1
            shift
            local why=clocks_throttle_reasons.active # renamed clocks_event_reasons by newer drivers
            nvidia-smi --help-query-gpu 2>/dev/null | grep -q clocks_event_reasons.active && why=clocks_event_reasons.active
            nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,$why \
                --format=csv,noheader,nounits -lms 100 >/tmp/mv/smi.csv 2>/dev/null &
            local smi=$!
            "$@" >"$OUT/clocks_run.log" 2>&1
            kill $smi 2>/dev/null
            wait $smi 2>/dev/null
            echo "$label: $(grep -E 'img/s|TFLOP' "$OUT/clocks_run.log" | tail -2 | tr -s ' \n' ' ')" | tee -a "$OUT/clocks.log"
            python3 scripts/smi_summary.py /tmp/mv/smi.csv | tee -a "$OUT/clocks.log"
        }
        for cfg in ${CLOCK_CONFIGS:-27b 2b}; do
            m=$(ensure_model "$cfg")
            for sz in ${CLOCK_SIZES:-16x1600x1200 1x3024x4032}; do
                under_smi "tower $cfg $sz" timeout 150 python3 scripts/bench_tower.py bench --model "$m" \
                    --mvtower "$BIN/mvtower" --iters "${CLOCK_ITERS:-8}" --sizes "$sz" --attention auto --no-hf
            done
        done
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        for sh in ${CLOCK_SHAPES:-1x16384 1x47376}; do
            under_smi "fa3 d64 $sh" timeout 90 "$BIN/attnbench" --iters 200 --only fa3 --shape "$sh" --dim 64
            timeout 120 "$NCU" --clock-control none --kernel-name regex:fa3 --launch-skip 3 --launch-count 1 \
                --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second \
                "$BIN/attnbench" --iters 5 --only fa3 --shape "$sh" --dim 64 >"$OUT/clocks_ncu_$sh.log" 2>&1
            echo "ncu fa3 d64 $sh:" | tee -a "$OUT/clocks.log"
            grep -E "gpu__time_duration|lts__t_sector_hit|lts__throughput|dram__throughput|sm__throughput|sm__cycles_elapsed" \
                "$OUT/clocks_ncu_$sh.log" | tee -a "$OUT/clocks.log"
        done
        ;;
    tower)
        m=$(ensure_model "${TOWER_CONFIG:-27b}")
        targs=${TOWER_ARGS---cli} # unset: --cli; set (even empty): as given
        : >"$OUT/tower.log"
        for i in $(seq 1 "${TOWER_RUNS:-2}"); do
            echo "== tower run $i: ${TOWER_CONFIG:-27b}, mvtower --attention ${TOWER_ATTN:-auto}${TOWER_FA3:+ --fa3 $TOWER_FA3} $targs" |
                tee -a "$OUT/tower.log"
            timeout "${TOWER_TIMEOUT:-270}" python3 scripts/bench_tower.py bench --model "$m" \
                --mvtower "$BIN/mvtower" --iters "${TOWER_ITERS:-5}" --sizes "${TOWER_SIZES:-$SIZES5}" \
                --attention "${TOWER_ATTN:-auto}" $targs ${TOWER_FA3:+"--mvtower-args=--fa3 $TOWER_FA3"} \
                --json "$OUT/tower_$i.json" >"$OUT/tower_$i.log" 2>&1 ||
                { s=$?; rc=1; echo "tower run $i: exit $s" | tee -a "$OUT/tower.log"; }
            cat "$OUT/tower_$i.log" >>"$OUT/tower.log"
            grep -vE "^\s*$" "$OUT/tower_$i.log" | tail -16
        done
        ;;
    attnfair)
        : >"$OUT/attnfair.log"
        for d in ${FAIR_DIMS:-64 72}; do
            for sh in ${FAIR_SHAPES:-64x784 16x4096 16x7600 4x8160 1x16384 1x47376}; do
                for i in 1 2; do
                    for ord in "" --reverse; do
                        echo "D $d $sh ${ord:-forward}: $(timeout 60 "$BIN/attnbench" --iters "${FAIR_ITERS:-30}" \
                            --only fa3,cudnn --shape "$sh" --dim "$d" --rest 1000 $ord 2>&1 |
                            grep -E "^(cudnn|fa3) " | awk '{printf "%s %s | ", $1, $5} END {print ""}')" |
                            tee -a "$OUT/attnfair.log"
                    done
                done
            done
        done
        ;;
    variant)
        v=${FA3_SPEC:-}
        if [ -z "$v" ]; then
            echo "device-run: variant: set FA3_SPEC to the fa3 fields to try, e.g. FA3_SPEC=sw=0" >&2
            rc=2
        else
            timeout 150 "$BIN/test_fa3" --quick --fa3 "$v" >"$OUT/fa3-variant.log" 2>&1; s=$?
            { [ "$s" = 0 ] && ! grep -q '^not ok' "$OUT/fa3-variant.log"; } || rc=1
            echo "test_fa3 --fa3 $v: exit $s: $(grep -c '^ok' "$OUT/fa3-variant.log") ok," \
                "$(grep -c '^not ok' "$OUT/fa3-variant.log") not ok" | tee "$OUT/variant.log"
            grep -E "^not ok" "$OUT/fa3-variant.log" | cut -c1-220 | head -6
            for d in ${VARIANT_DIMS:-72 64}; do
                AB_DIM=$d attn_ab "$v" ${VARIANT_SHAPES:-64x784 16x4096 16x7600 4x8160 1x16384} | tee -a "$OUT/variant.log"
            done
            for cfg in ${VARIANT_CONFIGS:-27b 2b}; do
                echo "== tower $cfg" | tee -a "$OUT/variant.log"
                tower_ab "$v" "${VARIANT_SIZES:-64x448x448,16x1600x1200,1x2048x2048}" "$(ensure_model $cfg)" |
                    tee -a "$OUT/variant.log"
            done
        fi
        ;;
    cpu)
        OMP_PROC_BIND=false THREADS="${CPU_THREADS:-16}" SIZES="${CPU_SIZES:-4x448x448;1x1024x1024}" DEPTH=27 \
            ITERS="${CPU_ITERS:-2}" CPU_GEMM="${CPU_MODES:-f32 bf16x6}" CPUBENCH="$BIN/cpubench" OUT="$OUT" \
            timeout "${CPU_TIMEOUT:-400}" bash scripts/bench-cpu.sh >"$OUT/cpu.log" 2>&1 ||
            { s=$?; rc=1; echo "bench-cpu.sh: exit $s"; }
        lscpu | grep -iE "model name|^CPU\(s\)" | head -2
        grep -E "^\||bench-cpu:|^hf" "$OUT/cpu.log"
        ;;
    cpugemm)
        t=/tmp/mv/tower-27b-d8
        [ -f "$t/config.json" ] || python3 scripts/make_random_tower.py "$t" --config 27b --depth 8 >&2
        G4="1,28,28;1,28,28;1,28,28;1,28,28"
        : >"$OUT/cpugemm.log"
        for j in ${CPUGEMM_THREADS:-1 4 8 16}; do
            for mode in f32 bf16x6; do
                echo "-j $j $mode: $(OMP_PROC_BIND=false timeout 60 "$BIN/cpubench" --model "$t" --grid "$G4" -j "$j" \
                    --iters "${CPUGEMM_ITERS:-2}" --what gemm --cpu-gemm $mode 2>&1 | grep -E '^gemm(_min|_tflop|_lib)? ' | tr '\n' ' ')" |
                    tee -a "$OUT/cpugemm.log"
            done
        done
        ;;
    kernels)
        m=$(ensure_model 27b)
        pixels448
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        timeout 150 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
            --launch-skip 600 --launch-count 60 "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/p448.npy \
            --grid "$G448" --iters 1 --warmup 1 >"$OUT/kernels.csv" 2>"$OUT/kernels.err" ||
            { s=$?; rc=1; echo "ncu: exit $s"; }
        python3 - "$OUT/kernels.csv" <<'PY' 2>&1 | tee "$OUT/kernels.log"
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) * (1e-3 if r[ui] == "nsecond" else 1.0 if r[ui] == "usecond" else 1e3)
    k = r[ki][:60]; tot[k] = tot.get(k, 0) + v; cnt[k] += 1
s = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda x: -x[1]): print(f"{v:9.1f} us {100*v/s:5.1f} % x{cnt[k]:<3d} {k}")
print(f"{s:9.1f} us total over {len(rows)-1} launches")
PY
        ;;
    chunks)
        m=$(ensure_model 27b)
        : >"$OUT/chunks.log"
        for i in 1 2; do
            for bt in ${CHUNK_ROWS:-16384 26400 32768 50176}; do
                timeout 60 python3 scripts/bench_tower.py bench --model "$m" --mvtower "$BIN/mvtower" --iters 5 \
                    --sizes 64x448x448,16x1024x1024 --attention auto --no-hf --batch-tokens "$bt" 2>&1 |
                    grep -E "mvembed" | sed "s/^/rows $bt: /" | tee -a "$OUT/chunks.log"
            done
        done
        ;;
    gemmrank)
        m=$(ensure_model 27b)
        pixels448
        timeout 60 "$BIN/mvtower" bench --model "$m" --pixels /tmp/mv/p448.npy --grid "$G448" \
            --iters 1 --warmup 0 --gemm-list 2>"$OUT/gemmlist.txt" >/dev/null
        grep -E "answer" "$OUT/gemmlist.txt" | sed 's/ epi.*answer/ answer/' | sort -u -t: -k1,1 -k2 | head -60
        : >"$OUT/gemmrank.log"
        for sh in "1152,1152:${GEMMRANK_PROJ:-0 3 4 6 0}" "4304,1152:${GEMMRANK_FC2:-0 3 7}"; do
            line="${sh%%:*}:"
            for k in ${sh#*:}; do
                line="$line k$k $(timeout 40 "$BIN/mvtower" bench --model "$m" --gemm-rank "${sh%%:*},$k" \
                    --pixels /tmp/mv/p448.npy --grid "$G448" --iters 7 --warmup 2 2>/dev/null | img_s) |"
            done
            echo "$line" | tee -a "$OUT/gemmrank.log"
        done
        ;;
    *)
        echo "device-run: unknown step $step" >&2
        rc=2
        ;;
    esac
    echo "== $step: $(($(date +%s) - t0)) s"
done
exit $rc
