#!/usr/bin/env bash
# make-fixture-videos.sh - makes the tiny video fixtures under fixtures/media/videos/ and the broken
# ones under fixtures/bad/ with the ffmpeg CLI (Debian 12: FFmpeg 5.1). Deterministic input
# (lavfi testsrc2/sine), single-threaded encoders with bitexact flags, so reruns give the same clips
# on the same FFmpeg build. It is not a reference tool: scripts/ffmpeg_frames.py extracts the
# reference frames from these files.
#   scripts/make-fixture-videos.sh [OUTDIR]     (default fixtures/media/videos)
# Encoders that this ffmpeg lacks (libx265, libaom-av1/libsvtav1, libvpx-vp9) are skipped with a
# note on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-fixtures/media/videos}
bad=fixtures/bad
mkdir -p "$out" "$bad"

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)
BX=(-fflags +bitexact -flags:v +bitexact -map_metadata -1 -threads 1)
ENCODERS=$(ffmpeg -hide_banner -encoders 2>/dev/null)
have_enc() { grep -qE "^ V.{5} $1 " <<<"$ENCODERS"; }
src() { # src W H RATE DURATION -> lavfi input args (testsrc2 makes even sizes only: see crop below)
    echo "-f lavfi -i testsrc2=size=$1x$2:rate=$3:duration=$4"
}
ODD=(-vf format=rgb24,crop=97:61:0:0) # 98x62 source cropped to 97x61
X264=(-c:v libx264 -preset veryfast -x264-params threads=1:sliced-threads=0)

# H.264 yuv420p, 192x128, 24 fps, 3 s = 72 frames, keyframe every 12 frames (B-frames on: pts != dts).
"${FF[@]}" $(src 192 128 24 3) "${X264[@]}" -g 12 -keyint_min 12 -bf 2 -pix_fmt yuv420p "${BX[@]}" \
    "$out/h264_192x128_24fps.mp4"
# A 3-frame clip (odd T: the processor repeats the last frame).
"${FF[@]}" $(src 96 64 10 0.3) "${X264[@]}" -pix_fmt yuv420p "${BX[@]}" "$out/h264_3frames.mp4"
# Odd frame size: H.264 High 4:4:4 (x264 refuses odd sizes for 4:2:0) ...
"${FF[@]}" $(src 98 62 12 1) "${ODD[@]}" "${X264[@]}" -pix_fmt yuv444p "${BX[@]}" "$out/h264_97x61_yuv444p.mp4"
# Display-matrix rotation (stream copy keeps the pixels, the mov muxer writes the tkhd matrix).
"${FF[@]}" $(src 128 96 12 1) "${X264[@]}" -pix_fmt yuv420p "${BX[@]}" "$out/.rot_src.mp4"
# (FFmpeg 5.1 reads the rotate=90 matrix back as a 270-degree turn for the CLI, and 270 as 90.)
for r in 90 180 270; do
    "${FF[@]}" -i "$out/.rot_src.mp4" -c copy -metadata:s:v:0 rotate=$r "${BX[@]}" "$out/h264_rotate$r.mp4"
done
rm -f "$out/.rot_src.mp4"
# Variable frame rate: 8 frames 0.1 s apart, 8 frames 0.25 s apart, 8 frames 0.05 s apart
# (millisecond time base all the way, else the encoder quantizes to 1/10 s and drops frames).
"${FF[@]}" $(src 128 96 10 2.4) \
    -vf "settb=1/1000,setpts='(if(lt(N,8),N*0.1,if(lt(N,16),0.8+(N-8)*0.25,2.8+(N-16)*0.05)))/TB'" \
    -fps_mode vfr -enc_time_base 1:1000 -video_track_timescale 1000 "${X264[@]}" -bf 0 -pix_fmt yuv420p "${BX[@]}" \
    "$out/h264_vfr.mp4"
# MPEG-TS cut in the middle of a GOP: the first packets cannot be decoded (the CLI skips them).
"${FF[@]}" $(src 128 96 25 3) "${X264[@]}" -g 25 -bf 2 -pix_fmt yuv420p "${BX[@]}" "$out/.ts_src.ts"
size=$(stat -c %s "$out/.ts_src.ts")
tail -c +$(( (size / 3 / 188) * 188 + 1 )) "$out/.ts_src.ts" >"$out/h264_cut_midgop.ts"
rm -f "$out/.ts_src.ts"
# 10-bit HEVC.
if have_enc libx265; then
    "${FF[@]}" $(src 128 96 15 1) -c:v libx265 -preset ultrafast -x265-params pools=1:frame-threads=1:log-level=error \
        -pix_fmt yuv420p10le -tag:v hvc1 "${BX[@]}" "$out/hevc_main10_128x96.mp4"
else echo "make-fixture-videos: no libx265, skipping the 10-bit HEVC clip" >&2; fi
# VP9 in WebM, odd size 4:2:0 (VP9 allows it).
if have_enc libvpx-vp9; then
    "${FF[@]}" $(src 160 96 20 2) -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 200k -g 20 \
        -pix_fmt yuv420p "${BX[@]}" "$out/vp9_160x96.webm"
    "${FF[@]}" $(src 98 62 10 1) "${ODD[@]}" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 100k \
        -pix_fmt yuv420p "${BX[@]}" "$out/vp9_97x61.webm"
else echo "make-fixture-videos: no libvpx-vp9, skipping the VP9 clips" >&2; fi
# MPEG-4 part 2 in AVI.
"${FF[@]}" $(src 128 96 25 1.2) -c:v mpeg4 -q:v 5 -g 10 -pix_fmt yuv420p "${BX[@]}" "$out/mpeg4_128x96.avi"
# AV1.
if have_enc libaom-av1; then
    "${FF[@]}" $(src 128 96 10 1) -c:v libaom-av1 -cpu-used 8 -crf 40 -row-mt 0 -tiles 1x1 \
        -pix_fmt yuv420p "${BX[@]}" "$out/av1_128x96.mp4"
elif have_enc libsvtav1; then
    "${FF[@]}" $(src 128 96 10 1) -c:v libsvtav1 -preset 12 -pix_fmt yuv420p "${BX[@]}" "$out/av1_128x96.mp4"
else echo "make-fixture-videos: no AV1 encoder, skipping the AV1 clip" >&2; fi

# --- broken files ------------------------------------------------------------------------------
# moov at the front, media data cut at 60%: the index promises 48 frames, the data ends early.
"${FF[@]}" $(src 128 96 24 2) "${X264[@]}" -g 12 -pix_fmt yuv420p -movflags +faststart "${BX[@]}" \
    "$bad/.trunc_src.mp4"
size=$(stat -c %s "$bad/.trunc_src.mp4")
head -c $((size * 6 / 10)) "$bad/.trunc_src.mp4" >"$bad/video_truncated.mp4"
# moov at the end, cut at 50%: no index at all.
"${FF[@]}" $(src 128 96 24 2) "${X264[@]}" -pix_fmt yuv420p "${BX[@]}" "$bad/.trunc_src2.mp4"
size=$(stat -c %s "$bad/.trunc_src2.mp4")
head -c $((size / 2)) "$bad/.trunc_src2.mp4" >"$bad/video_no_moov.mp4"
rm -f "$bad/.trunc_src.mp4" "$bad/.trunc_src2.mp4"
# Audio only.
"${FF[@]}" -f lavfi -i sine=frequency=440:sample_rate=16000:duration=0.5 -c:a aac -b:a 32k "${BX[@]}" \
    "$bad/video_no_video_stream.mp4"
# Over the default decode budget (178956970 pixels): one solid 14000x14000 HEVC frame, 47 kB
# (HEVC's 64x64 blocks keep it small; encoding it takes ~3 GB and half a minute).
if have_enc libx265; then
    "${FF[@]}" -f lavfi -i color=c=blue:s=14000x14000:r=25 -frames:v 1 -c:v libx265 -preset ultrafast \
        -x265-params pools=1:frame-threads=1:log-level=error -pix_fmt yuv420p "${BX[@]}" "$bad/video_14000x14000.mkv"
else echo "make-fixture-videos: no libx265, skipping video_14000x14000.mkv" >&2; fi

du -ch "$out"/* "$bad"/video_* | tail -1 | sed 's/^/make-fixture-videos: /'
