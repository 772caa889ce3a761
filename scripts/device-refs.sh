#!/usr/bin/env bash
# device-refs.sh - runs on the GPU machine (which has torch + transformers 5.17): makes the tiny
# fixture model and HF reference outputs for every fixture input, packed into $OUT/refs.tgz.
#   .device/frames/*.npy  video frames decoded by the ffmpeg CLI here (scripts/ffmpeg_frames.py)
# Usage (device tool, carry .device/frames): bash scripts/device-refs.sh
set -euo pipefail
export PYTHONUNBUFFERED=1
W=/tmp/refs
rm -rf $W && mkdir -p $W/ref
python3 scripts/hf_reference.py make-model --config tiny --seed 0 --out $W/model-tiny
# every fixture image: exact pixel digest + resized frames + output in f64 (and HF f32 errors)
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/images --pixel-digest \
    --stages output --dtypes f64,f32,bf16 --images fixtures/media/images/*
# parity inputs: every stage in f64 (f32 error per stage in errors.json)
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/parity \
    --dtypes f64,f32 --images fixtures/parity/*.png
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/parity \
    --dtypes f64,f32 --videos .device/frames/h264_192x128_24fps.npy
# every fixture video with the default fps: frame indices, pixel digest, output
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/videos --pixel-digest \
    --stages output --dtypes f64,f32 --videos .device/frames/*.npy
# explicit frame counts (HF's num_frames path)
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/videos-n5 --pixel-digest \
    --stages output --dtypes f64,f32 --num-frames 5 --videos .device/frames/h264_192x128_24fps.npy
tar czf $OUT/refs.tgz -C $W model-tiny ref
ls -la $OUT
