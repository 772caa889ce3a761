#!/usr/bin/env bash
# session 7, call 1 (nvidia-h200): where the time goes. ncu --set full on the fa3 v2 kernel
# (D 72, 128-key tiles) at 64 x 784 and 4 x 8160; its SASS; GPU time by kernel family for one
# tower forward at 64 x 448², 16 x 1024², 4 x 1088x1920, 1 x 2048² (device-run.sh profile).
set -u
source scripts/device-env.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for sk in 0 16; do
  timeout 150 "$NCU" --set full --kernel-name regex:attn_fa3v2 --launch-skip $sk --launch-count 1 \
     "$BIN/attnbench" --iters 1 > "$OUT/ncu_fa3_$sk.txt" 2>&1; echo "ncu $sk exit $?"
done
cuobjdump -sass "$BIN/attnbench" > /tmp/all.sass 2>&1; echo "cuobjdump exit $?"
python3 - <<'PY'
import re,os
t=open('/tmp/all.sass').read()
parts=re.split(r'(?=\n\s+Function : )',t)
for p in parts:
    if 'attn_fa3v2' in p[:300]:
        name=re.search(r'Function : (\S+)',p).group(1)
        open(os.environ['OUT']+'/sass_'+name[:60]+'.txt','w').write(p)
        print(name, len(p.splitlines()))
PY
PROFILE_SIZES="64x28x28 16x64x64 4x68x120 1x128x128" bash scripts/device-run.sh profile 2>&1 | tail -40
