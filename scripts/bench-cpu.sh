#!/usr/bin/env bash
# bench-cpu.sh - the CPU tower benchmark (a benchmark, not a test): mvembed's CPU tower alone
# (model load excluded; build/cpubench) beside the time of its Linear GEMMs alone (the same
# shapes and weights through the tower's own GEMM path - oneDNN against packed weights, or
# OpenBLAS in a NO_DNNL build - same thread count), and
# HF transformers' Qwen3_5VisionModel (f32, sdpa, torch.set_num_threads) on the same pixels when
# `import torch, transformers` works. Random 27B-layout tower written by scripts/make_random_tower.py.
#   scripts/bench-cpu.sh                      (or: make bench-cpu)
# Environment (defaults):
#   THREADS   threads for both sides (the CPUs of the affinity mask: nproc)
#   SIZES     inputs, ';'-separated COUNTxHEIGHTxWIDTH in pixels (4x448x448;1x1024x1024)
#   DEPTH     tower depth (27; 4 makes a quick local run)
#   ITERS     timed runs after one warm-up (3)
#   MODEL     tower directory (made under WORK if absent)   WORK  scratch dir (/tmp/mvembed-bench-cpu)
#   PYTHON    python with numpy (/usr/bin/python3)        HF_PYTHON python with torch + transformers
#             (/opt/torch/.venv/bin/python when present, else python3)
#   BLAS      1: also time the GEMMs through OpenBLAS's own threads (cblas_sgemm on the whole
#             matrices, as numpy runs them), for reference (0)
#   CPU_GEMM  the tower's GEMM modes to time, space-separated, one table row each (f32; e.g.
#             "f32 bf16x6": mvembed --cpu-gemm), HF timed once per input beside them
#   OUT       also write the table to $OUT/bench-cpu.md
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS="${THREADS:-$(nproc)}"
SIZES="${SIZES:-4x448x448;1x1024x1024}"
DEPTH="${DEPTH:-27}"
ITERS="${ITERS:-3}"
BLAS="${BLAS:-0}"
CPU_GEMM="${CPU_GEMM:-f32}"
WORK="${WORK:-/tmp/mvembed-bench-cpu}"
MODEL="${MODEL:-$WORK/tower-27b-d$DEPTH}"
PYTHON="${PYTHON:-/usr/bin/python3}"
if [ -z "${HF_PYTHON:-}" ]; then
    if [ -x /opt/torch/.venv/bin/python ]; then HF_PYTHON=/opt/torch/.venv/bin/python; else HF_PYTHON=python3; fi
fi
"$PYTHON" -c 'import numpy' 2>/dev/null || PYTHON="$HF_PYTHON" # the GPU machine: numpy in the venv
BENCH="${CPUBENCH:-$ROOT/build/cpubench}" # CPUBENCH: a prebuilt one (the GPU machine's bundle)
[ -x "$BENCH" ] || { echo "bench-cpu: $BENCH missing (run make)" >&2; exit 1; }
mkdir -p "$WORK"
[ -f "$MODEL/config.json" ] || "$PYTHON" "$ROOT/scripts/make_random_tower.py" "$MODEL" --config 27b --depth "$DEPTH" >&2
HF=0
if "$HF_PYTHON" -c 'import torch, transformers' 2>/dev/null; then HF=1; fi

val() { sed -n "s/^$1 //p" <<< "$2"; }
table="| input | patches | threads | GEMM mode | mvembed tower s | GEMMs alone s | tower/GEMMs | OpenBLAS own threads s | HF s | HF/mvembed |
|---|---|---|---|---|---|---|---|---|---|"
lib=""
libs=""
IFS=';' read -ra sizes <<< "$SIZES"
for sz in "${sizes[@]}"; do
    IFS=x read -r cnt hh ww <<< "$sz"
    g="1,$((hh / 16)),$((ww / 16))"
    grid="$g"
    for ((i = 1; i < cnt; i++)); do grid="$grid;$g"; done
    pix="$WORK/pixels-$sz.npy"
    "$PYTHON" "$ROOT/scripts/bench_cpu_hf.py" pixels --grid "$grid" --seed 0 --out "$pix"
    hf="-"
    if [ "$HF" = 1 ]; then
        h=$(OMP_NUM_THREADS="$THREADS" "$HF_PYTHON" "$ROOT/scripts/bench_cpu_hf.py" hf --model "$MODEL" \
            --pixels "$pix" --grid "$grid" --threads "$THREADS" --iters "$ITERS")
        echo "$h" >&2
        hf=$(val hf_min "$h")
    fi
    np=$((cnt * (hh / 16) * (ww / 16)))
    for mode in $CPU_GEMM; do
        r=$("$BENCH" --model "$MODEL" --grid "$grid" --pixels "$pix" -j "$THREADS" --iters "$ITERS" \
            --what both --blas "$BLAS" --cpu-gemm "$mode")
        echo "$r" >&2
        tw=$(val tower_min "$r")
        tg=$(val gemm_min "$r")
        tb=$(val gemm_blas_min "$r")
        lib=$(val gemm_lib "$r")
        [[ "$libs" == *"$lib"* ]] || libs="${libs:+$libs; }$lib"
        ratio="-"
        [ "$hf" = - ] || ratio=$(awk -v a="$hf" -v b="$tw" 'BEGIN { printf "%.2f", a / b }')
        table="$table
| $sz | $np | $THREADS | $mode | $tw | $tg | $(awk -v a="$tw" -v b="$tg" 'BEGIN { printf "%.2f", a / b }') | ${tb:--} | $hf | $ratio |"
    done
done
echo "bench-cpu: depth $DEPTH, fastest of $ITERS runs each, model load excluded; GEMMs: $libs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "$table"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    { echo "bench-cpu: depth $DEPTH, $THREADS threads, GEMMs: $libs"; echo "$table"; } > "$OUT/bench-cpu.md"
fi
