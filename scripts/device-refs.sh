#!/usr/bin/env bash
# device-refs.sh - runs on the GPU machine (which has torch + transformers 5.17): makes the tiny
# fixture model and HF reference outputs for every fixture input, packed into $OUT/refs.tgz.
#   .device/frames/*.npy  video frames decoded by the ffmpeg CLI here (scripts/ffmpeg_frames.py)
# Usage (device tool, carry .device/frames): bash scripts/device-refs.sh
#
#   bash scripts/device-refs.sh videocap   only the video per-frame pixel cap references, made
#   with the committed fixtures/model-tiny, into ONE file $OUT/videocap_refs.tar holding
#   ref/videos_cap_{on,off}/NAME (the model's own budget, cap_pixels_per_frame True / False) and
#   ref/videos_cap_bind_{on,off}/NAME (max_video_tokens 4: a cap that binds on every fixture
#   clip), for every NAME under fixtures/ref/videos. Unpack here with
#   `tar xf videocap_refs.tar -C fixtures`. The frames: for f in fixtures/media/videos/*; do
#   /usr/bin/python3 scripts/ffmpeg_frames.py "$f" ".device/frames/$(basename "${f%.*}").npy"; done
#
#   bash scripts/device-refs.sh formats   only the references of the crafted GIF/BMP/TIFF files
#   (fixtures/formats, scripts/make_fixture_formats.py), made with the committed
#   fixtures/model-tiny (no carry needed), into ONE file $OUT/formats_refs.tar holding
#   ref/formats/NAME; each meta.json records the Pillow that decoded it and the sha256 of the
#   decoded RGB image. Unpack here with `tar xf formats_refs.tar -C fixtures`.
set -euo pipefail
export PYTHONUNBUFFERED=1
if [ "${1:-}" = formats ]; then
    W=/tmp/formats
    rm -rf $W && mkdir -p $W/ref
    python3 scripts/hf_reference.py run --model fixtures/model-tiny --out $W/ref/formats --pixel-digest \
        --stages output --dtypes f64,f32 --images fixtures/formats/*
    tar cf $OUT/formats_refs.tar -C $W ref
    ls -la $OUT
    exit 0
fi
if [ "${1:-}" = videocap ]; then
    W=/tmp/videocap
    rm -rf $W && mkdir -p $W/ref
    frames=()
    for d in fixtures/ref/videos/*/; do
        f=.device/frames/$(basename "$d").npy
        [ -f "$f" ] || { echo "device-refs.sh: $f missing (carry .device/frames)" >&2; exit 1; }
        frames+=("$f")
    done
    for rule in on off; do
        python3 scripts/hf_reference.py run --model fixtures/model-tiny --out $W/ref/videos_cap_$rule \
            --pixel-digest --stages output --dtypes f64,f32 --cap-pixels-per-frame $rule --max-video-tokens 768 \
            --videos "${frames[@]}"
        python3 scripts/hf_reference.py run --model fixtures/model-tiny --out $W/ref/videos_cap_bind_$rule \
            --pixel-digest --stages output --dtypes f64,f32 --cap-pixels-per-frame $rule --max-video-tokens 4 \
            --videos "${frames[@]}"
    done
    tar cf $OUT/videocap_refs.tar -C $W ref
    ls -la $OUT
    exit 0
fi
W=/tmp/refs
rm -rf $W && mkdir -p $W/ref
python3 scripts/hf_reference.py make-model --config tiny --seed 0 --out $W/model-tiny
# every fixture image: exact pixel digest + resized frames + output in f64 (and HF f32 errors)
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/images --pixel-digest \
    --stages output --dtypes f64,f32,bf16 --images fixtures/media/images/*
# the crafted GIF, BMP and TIFF files, the same way (also alone: `device-refs.sh formats`)
python3 scripts/hf_reference.py run --model $W/model-tiny --out $W/ref/formats --pixel-digest \
    --stages output --dtypes f64,f32 --images fixtures/formats/*
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
