#!/usr/bin/env bash
# device-e2e.sh - end-to-end benchmark on the GPU machine (issue: throughput pipeline), after
# scripts/device-bundle.sh here, with `.device` in the device tool's carry:
#   1. the CLI on the CUDA backend against HF's bf16 outputs for the fixture images (cosine)
#   2. 2000 photo-sized JPEGs (scripts/make_photos.py), a random 27B-layout tower
#   3. HF transformers end to end (scripts/bench_e2e_hf.py) on the first N of them
#   4. mvembed end to end on all of them (-v prints end-to-end and tower-busy rates)
#   5. the same with a folder of short videos (made with OpenCV; HF loads them with opencv)
# Logs under $OUT. Sizes: E2E_PHOTOS (2000), E2E_HF (160), E2E_VIDEOS (120), E2E_HF_VIDEOS (24;
# 0 skips HF on videos).
# E2E_DEVICES: the --devices lists to run mvembed with (default "0"; "0 0,1" on two GPUs);
#   6. --pool mean on the GPU against numpy's mean of the GPU's token outputs (fixture media)
#   7. E2E_REPEAT (10) runs of --devices 0,1 on E2E_REPEAT_FILES (300) photos: exit 0, every
#      input ok
# E2E_INFLIGHT: the --inflight values (default "2"); E2E_STEPS: which of 1-7 to run (default all);
# E2E_OUT: where step 4 writes (default the work dir on disk; /dev/shm takes the disk out: 2 GPUs
# write ~1.7 GB/s of f32 outputs, more than the disk's ~1.4 GB/s with fsync);
# E2E_TOWER=1 also times the tower alone on the photos' size (bench_tower.py, for "end to end vs
# tower-only").
set -u
cd "$(dirname "$0")/.."
source scripts/device-env.sh
MV=$BIN/mvembed
W=/tmp/e2e
mkdir -p $W
log() { echo "$*" | tee -a "$OUT/e2e.log"; }
: >"$OUT/e2e.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee -a "$OUT/e2e.log"

steps=${E2E_STEPS:-1 2 3 4 5 6 7}
want() { [[ " $steps " == *" $1 "* ]]; }
if want 1; then
log "== 1. CLI on CUDA vs HF bf16 (fixture images, tiny model)"
$MV -v --device cuda --model fixtures/model-tiny --out $W/fx --dump-stages $W/fxd fixtures/media/images 2>&1 | tail -3 | tee -a "$OUT/e2e.log"
python3 - "$W/fxd" fixtures/ref/images >>"$OUT/e2e.log" 2>&1 <<'PY'
import os, sys, numpy as np
d, ref = sys.argv[1], sys.argv[2]
worst_cos, worst_rel, worst_hf = 1.0, 0.0, 0.0
for n in sorted(os.listdir(ref)):
    if n == "png_gray16_96x64.png":
        continue
    o = np.load(f"{d}/{n}/output.npy").astype(np.float64)
    f = np.load(f"{ref}/{n}/output.f64.npy")
    b = np.load(f"{ref}/{n}/output.bf16.npy").astype(np.float64)
    cos = (o * f).sum(1) / np.linalg.norm(o, axis=1) / np.linalg.norm(f, axis=1)
    rel = np.linalg.norm(o - f) / np.linalg.norm(f)
    relhf = np.linalg.norm(b - f) / np.linalg.norm(f)
    worst_cos, worst_rel, worst_hf = min(worst_cos, cos.min()), max(worst_rel, rel), max(worst_hf, relhf)
    print(f"{n}: min_row_cos {cos.min():.6f} rel_l2 {rel:.3e} (HF bf16 {relhf:.3e})")
print(f"fixtures CUDA bf16: worst min_row_cos {worst_cos:.6f}, worst rel_l2 {worst_rel:.3e}, HF bf16 worst {worst_hf:.3e}",
      "PASS" if worst_cos >= 0.999 else "FAIL")
PY
tail -1 "$OUT/e2e.log"
fi

log "== 2. inputs"
[ -f $W/m27/config.json ] || python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $W/m27 2>&1 | tail -1 | tee -a "$OUT/e2e.log"
t=$(date +%s.%N)
python3 scripts/make_photos.py --src fixtures/media/images --out $W/photos --count ${E2E_PHOTOS:-2000} 2>&1 | tail -1 | tee -a "$OUT/e2e.log"
find $W/photos -name '*.jpg' | sort > $W/photos.txt
log "photos: $(wc -l < $W/photos.txt) files, $(du -sh $W/photos | cut -f1), made in $(python3 -c "import time;print(round(time.time()-$t,1))")s"

if want 3; then
log "== 3. HF end to end (images)"
timeout 200 python3 scripts/bench_e2e_hf.py --model $W/m27 --files $W/photos.txt --limit ${E2E_HF:-160} --batch 8 --out $W/hf_out 2>&1 | grep -v Warning | tail -2 | tee -a "$OUT/e2e.log"
fi

if want 4; then
if [ "${E2E_TOWER:-0}" = 1 ]; then
    log "== 4a. tower alone on the photos' size (16 x 1600x1200 photos, host to host)"
    python3 scripts/bench_tower.py bench --model $W/m27 --mvtower /tmp/mv/bin/mvtower --sizes 16x1600x1200 \
        --iters 5 --no-hf 2>&1 | grep -vE "^\s*$" | tail -4 | tee -a "$OUT/e2e.log"
fi
for dv in ${E2E_DEVICES:-0}; do
    for inf in ${E2E_INFLIGHT:-2}; do
        log "== 4. mvembed end to end (images), --devices $dv --inflight $inf"
        O=${E2E_OUT:-$W}/o_photos
        rm -rf $W/o_photos $O
        sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
        /usr/bin/time -v $MV -v --no-progress --devices $dv --inflight $inf --model $W/m27 --out $O \
            $W/photos > $W/mv_photos_${dv/,/_}_$inf.log 2>&1
        rm -rf $O
        grep -E "using the|ok, .* failed|end to end|device busy|executing|timeline|Maximum resident|Elapsed|Minor" \
            $W/mv_photos_${dv/,/_}_$inf.log | tee -a "$OUT/e2e.log"
    done
done
fi

if want 5; then
log "== 5. videos"
python3 - $W/videos ${E2E_VIDEOS:-120} <<'PY' 2>&1 | tail -1 | tee -a "$OUT/e2e.log"
import os, sys, cv2, numpy as np
from multiprocessing import Pool
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
def clip(i):
    p = f"{out}/clip_{i:04d}.mp4"
    if os.path.exists(p):
        return
    rng = np.random.default_rng(i)
    base = cv2.imread("fixtures/media/images/png_rgb_320x256.png")
    w = cv2.VideoWriter(p + ".tmp.mp4", cv2.VideoWriter_fourcc(*"mp4v"), 30, (640, 480))
    img = cv2.resize(base, (700, 540))
    for f in range(150):  # 5 s at 30 fps
        x, y = (f * 2 + i) % 60, (f + 3 * i) % 60
        fr = img[y:y + 480, x:x + 640].astype(np.int16) + rng.integers(-8, 8, (480, 640, 3), dtype=np.int16)
        w.write(np.clip(fr, 0, 255).astype(np.uint8))
    w.release()
    os.rename(p + ".tmp.mp4", p)
with Pool(os.cpu_count()) as pool:
    pool.map(clip, range(n))
print(f"videos: {n} clips of 5 s, 640x480, 30 fps, mp4v")
PY
find $W/videos -name '*.mp4' | sort > $W/videos.txt
[ "${E2E_HF_VIDEOS:-24}" = 0 ] || timeout 150 python3 scripts/bench_e2e_hf.py --videos --model $W/m27 --files $W/videos.txt --limit ${E2E_HF_VIDEOS:-24} --batch 4 2>&1 | grep -v Warning | tail -2 | tee -a "$OUT/e2e.log"
/usr/bin/time -v $MV -v --no-progress --model $W/m27 --out $W/o_videos $W/videos > $W/mv_videos.log 2>&1
grep -E "using the|ok, .* failed|end to end|device busy|executing|timeline|Maximum resident|Elapsed" $W/mv_videos.log | tee -a "$OUT/e2e.log"
grep -m3 "mvembed: .*clip" $W/mv_videos.log | tee -a "$OUT/e2e.log"
fi
if want 6; then
log "== 6. --pool mean on the GPU vs numpy on the GPU's tokens (fixture media, tiny model, tar layout)"
rm -rf $W/pool_tok $W/pool_mean
$MV -q --device cuda --model fixtures/model-tiny --layout tar --out $W/pool_tok fixtures/media >>"$OUT/e2e.log" 2>&1
$MV -q --device cuda --model fixtures/model-tiny --layout tar --pool mean --out $W/pool_mean fixtures/media >>"$OUT/e2e.log" 2>&1
python3 - "$W/pool_tok" "$W/pool_mean" >>"$OUT/e2e.log" 2>&1 <<'PY'
import glob, io, json, sys, tarfile, numpy as np
def load(d):
    arrs = {}
    for t in sorted(glob.glob(f"{d}/*.tar")):
        with tarfile.open(t) as tf:
            by = {}
            for m in tf.getmembers():
                k, ext = m.name.split(".", 1)
                by.setdefault(k, {})[ext] = tf.extractfile(m).read()
            for k, v in by.items():
                arrs[json.loads(v["json"])["input"]] = np.load(io.BytesIO(v["npy"]))
    return arrs
tok, mean = load(sys.argv[1]), load(sys.argv[2])
assert tok and set(tok) == set(mean), (len(tok), len(mean))
worst, same = 0.0, 0
for k in sorted(tok):
    t = tok[k].astype(np.float64)
    ref = t.mean(0)
    got = mean[k].astype(np.float64)[0]
    worst = max(worst, float(np.abs(got - ref).max() / np.abs(ref).max()))
    acc = np.zeros(t.shape[1])
    for row in t:  # the row-order f64 sum the device (and mv_pool_mean) does
        acc += row
    same += np.array_equal((acc / t.shape[0]).astype(np.float32), mean[k][0])
print(f"pool mean on the GPU: {len(tok)} inputs, worst max-abs error / max-abs vs numpy f64 mean {worst:.2e}, "
      f"bit-identical to the row-order f64 mean: {same}/{len(tok)}", "PASS" if worst <= 1e-6 and same == len(tok) else "FAIL")
PY
tail -1 "$OUT/e2e.log"
fi
if want 7; then
n7=${E2E_REPEAT_FILES:-300}
log "== 7. ${E2E_REPEAT:-10} runs of --devices 0,1 on $n7 photos (no failure; the md5 is information: which inputs share a forward varies, and with it the last bits)"
head -n "$n7" $W/photos.txt > $W/photos7.txt
fails=0
for r in $(seq 1 ${E2E_REPEAT:-10}); do
    rm -rf $W/o_rep
    $MV -q --devices 0,1 --model $W/m27 --out $W/o_rep - < $W/photos7.txt > $W/mv_rep_$r.log 2>&1
    rc=$?
    nok=$(grep -c '"status":"ok"' $W/o_rep/manifest.jsonl 2>/dev/null || echo 0)
    sum=$(cd $W/o_rep 2>/dev/null && find . -name '*.npy.zst' -print0 | sort -z | xargs -0 cat | md5sum | cut -c1-12)
    log "run $r: exit $rc, $nok ok lines, outputs md5 $sum"
    [ "$rc" = 0 ] && [ "$nok" = "$n7" ] || { fails=$((fails + 1)); tail -3 $W/mv_rep_$r.log | tee -a "$OUT/e2e.log"; }
done
log "--devices 0,1 repeated: $fails failed runs of ${E2E_REPEAT:-10}"
fi
tar -C $W -cJf "$OUT/e2e_logs.tar.xz" $(cd $W && ls mv_*.log 2>/dev/null) 2>/dev/null || true
