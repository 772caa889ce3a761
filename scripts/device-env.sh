# device-env.sh - sourced (not run) on the GPU machine by scripts/device-run.sh and device-e2e.sh,
# from the repository root after scripts/device-bundle.sh here with `.device` in the device
# tool's carry: unpacks .device (xz) into /tmp/mv/{bin,lib} once, puts those libraries, CUDA's,
# cuBLAS's and cuDNN's (the torch venv's nvidia/* packages) on LD_LIBRARY_PATH, sets MV_CUDNN_LIB,
# BIN=/tmp/mv/bin and OUT (default /tmp/mvout, created), and defines the helpers the steps share:
# ensure_model (a random full-size tower), attn_ab and tower_ab (an fa3 configuration against the
# table's, test/cuda/variants/variants.cuh). Not here: any step.
OUT=${OUT:-/tmp/mvout}
mkdir -p "$OUT" /tmp/mv/bin /tmp/mv/lib
export PYTHONUNBUFFERED=1
for f in .device/bin/*.xz .device/lib/*.xz; do
    [ -e "$f" ] || continue
    d=/tmp/mv/$(basename "$(dirname "$f")")/$(basename "$f" .xz)
    [ -e "$d" ] || python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$f" "$d"
    chmod +x "$d"
done
CUBLAS_DIR=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
CUDNN_DIR=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null ||
            echo /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib)
export MV_CUDNN_LIB=${MV_CUDNN_LIB:-$CUDNN_DIR}
export LD_LIBRARY_PATH=/tmp/mv/lib:/usr/local/cuda/lib64:${CUBLAS_DIR}:${CUDNN_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=/tmp/mv/bin

# ensure_model CONFIG: prints the directory of a random full-size tower of that layout (27b, 2b;
# scripts/hf_reference.py make-model, seed 0), made under /tmp/mv on first use
ensure_model() {
    local m=/tmp/mv/model_$1
    [ -f "$m/config.json" ] || python3 scripts/hf_reference.py make-model --config "$1" --seed 0 --out "$m" >&2
    echo "$m"
}

# attn_ab SPEC SHAPE...: the fa3 kernel with the table's configuration ("fa3") against the same
# with SPEC's fields (attnbench --fa3-row fa3_ab=SPEC; mvtower's --fa3 syntax, e.g. sw=0 or
# bn=128,wg=2), beside cuDNN, at head dim AB_DIM (72): per shape twice in each row order, an idle
# second before each row; one line per run
attn_ab() {
    local v=$1 sh i ord
    shift
    for sh in "$@"; do
        for i in 1 2; do
            for ord in "" --reverse; do
                echo "D ${AB_DIM:-72} $sh ${ord:-forward}: $(timeout 60 $BIN/attnbench --iters 30 --only fa3,fa3_ab,cudnn \
                    --fa3-row "fa3_ab=$v" --shape $sh --dim ${AB_DIM:-72} --rest 1000 $ord 2>&1 |
                    grep -E "^(cudnn|fa3[a-z0-9_]*) " | awk '{printf "%s %s | ", $1, $5} END {print ""}')"
            done
        done
    done
}
# tower_ab SPEC SIZES MODEL: the tower (bench_tower.py, no HF) with the table's fa3 configuration
# and with mvtower --fa3 SPEC, in both orders with an idle second before each run
tower_ab() {
    local i b a
    for i in 1 2; do
        for b in 0 1; do
            a="" # run 1: the table's first; run 2: SPEC's first
            [ $(((i + b) % 2)) = 0 ] && a="--fa3 $1"
            sleep 1
            timeout 90 python3 scripts/bench_tower.py bench --model "$3" --mvtower $BIN/mvtower --iters 5 \
                --sizes "$2" --attention auto --no-hf ${a:+"--mvtower-args=$a"} 2>&1 | grep -E "mvembed" |
                sed "s/^/${a:-table}: /"
        done
    done
}
