#!/usr/bin/env bash
# session 8, call 3 (nvidia-h200): sanitizers on the new fa3 options, parity (auto = fa3 with 3
# warpgroups at head dim 72; PARITY_FA3 adds --attention fa3), the -v attention line, and the AMX
# bf16x6 GEMMs by M block (cpubench built with -DAMX_MT=16 (default) / 8 / 4) and thread count.
set -u
source scripts/device-env.sh
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 110 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
PARITY_FA3=1 timeout 200 bash scripts/device-run.sh parity 2>&1 | grep -E "^(PASS|FAIL)" | head -14
python3 scripts/bench_tower.py pixels --grid "1,32,32" --seed 1 --out /tmp/mv/pv.npy >/dev/null 2>&1
$BIN/mvtower run --model /tmp/mv/model_27b --pixels /tmp/mv/pv.npy --grid "1,32,32" --out /tmp/mv/vrun \
    --attention auto 2>&1 | grep -i "attention" | head -3
t=/tmp/mv/tower-27b-d8
python3 scripts/make_random_tower.py $t --config 27b --depth 8 >/dev/null 2>&1 || echo "make_random_tower failed"
G="1,28,28;1,28,28;1,28,28;1,28,28"
for j in 16 8 1; do
    for v in "" -mt8 -mt4; do
        [ "$j" = 1 ] && [ -n "$v" ] && continue
        echo "bf16x6 MT${v:-16} -j $j: $(OMP_PROC_BIND=false timeout 60 $BIN/cpubench$v --model $t --grid "$G" -j $j --iters 3 --what gemm --cpu-gemm bf16x6 2>&1 | tail -1 | cut -c1-200)"
    done
    echo "f32 -j $j: $(OMP_PROC_BIND=false timeout 60 $BIN/cpubench --model $t --grid "$G" -j $j --iters 3 --what gemm --cpu-gemm f32 2>&1 | tail -1 | cut -c1-200)"
done
