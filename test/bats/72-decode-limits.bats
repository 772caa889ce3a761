#!/usr/bin/env bats
# Decode limits and frame enumeration (integrity issue, items 7, 8, 9, 11, 12): the pixel budget
# for videos, images decoded from the file (trailing data is never read), --timeout for images,
# non-regular model files refused instead of waited on, and videos whose packets are not the
# ffmpeg CLI's frame list. Every awkward input is made here with the ffmpeg CLI, python3 or
# truncate/mkfifo; the oracles are ffprobe/ffmpeg (sizes, frame counts, timestamps, pixels), HF's
# references in fixtures/ref, and numpy's linspace.
load test_helper

IMG="$ROOT/fixtures/media/images"
FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)
X264=(-c:v libx264 -preset veryfast -x264-params threads=1)
TEST_VIDEO="$(dirname "$NPYCMP")/test_video" # the unit binary: frames against the CLI's, bit for bit

setup() {
    T="$BATS_TEST_TMPDIR"
    MAN="$T/o/manifest.jsonl"
}

# embed ARGS...: the CLI (CPU, quiet) into $T/o under a guard against hangs
embed() { run timeout 300 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$@"; }

# field_of INPUT FIELD: FIELD of INPUT's manifest line (JSON for lists)
field_of() {
    "$PY" -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["input"] == sys.argv[2]]
assert len(ls) == 1, ls
v = ls[0].get(sys.argv[3])
print(json.dumps(v) if isinstance(v, list) else v)' "$MAN" "$1" "$2"
}

# under_memory_cap GB CMD...: runs CMD with at most GB GiB of memory per allocation / address space
# (AddressSanitizer reserves terabytes of address space, so an ASan build gets ASan's own cap)
under_memory_cap() {
    local gb=$1
    shift
    if ldd "$MVEMBED" | grep -q libasan; then
        run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=$((gb * 1024)):allocator_may_return_null=1" \
            timeout 300 "$@"
    else
        run timeout 300 bash -c "ulimit -v $((gb * 1024 * 1024)); exec \"\$@\"" _ "$@"
    fi
}

@test "a video frame over --max-decode-pixels is refused before decoding, naming file, size and limit; the batch goes on" {
    "${FF[@]}" -f lavfi -i testsrc2=size=320x240:rate=10:duration=0.3 "${X264[@]}" -pix_fmt yuv420p "$T/v.mkv"
    size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0:s=x "$T/v.mkv")
    [ "$size" = 320x240 ]
    embed --max-decode-pixels 50000 "$T/v.mkv" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    [ "$(field_of "$T/v.mkv" status)" = error ]
    [ "$(field_of "$T/v.mkv" error)" = "$T/v.mkv: video frame size 320x240 (76800 pixels) exceeds the limit of 50000 pixels (--max-decode-pixels)" ]
    [ "$(field_of "$IMG/png_gray_128x72.png" status)" = ok ]
    # at the limit it is accepted
    rm -rf "$T/o"
    embed --max-decode-pixels 76800 "$T/v.mkv"
    [ "$status" -eq 0 ]
}

@test "the default pixel limit refuses a 14000x14000 video (196 Mpixels) before decoding it" {
    # fixtures/bad/video_14000x14000.mkv: one solid HEVC frame, 47 kB (scripts/make-fixture-videos.sh;
    # making it takes ~3 GB and half a minute, decoding it about as much)
    huge="$ROOT/fixtures/bad/video_14000x14000.mkv"
    size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0:s=x "$huge")
    [ "$size" = 14000x14000 ]
    under_memory_cap 2 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$huge" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    [ "$(field_of "$huge" error)" = "$huge: video frame size 14000x14000 (196000000 pixels) exceeds the limit of 178956970 pixels (--max-decode-pixels)" ]
    [ "$(field_of "$IMG/png_gray_128x72.png" status)" = ok ]
}

@test "a budget of two frames decodes the sampled frames in chunks; the embedding still matches HF" {
    d="$REF/videos/h264_192x128_24fps"
    embed --max-decode-pixels $((192 * 128 * 2)) "$ROOT/fixtures/media/videos/h264_192x128_24fps.mp4"
    [ "$status" -eq 0 ]
    # a file argument keeps its path under OUT
    match_hf "$(find "$T/o" -name h264_192x128_24fps.mp4.npy.zst)" "$d" h264_192x128_24fps
}

@test "images followed by 10 GB of zeros decode from the file under a 3 GB memory cap, matching HF" {
    for name in png_gray_128x72.png jpeg_gray_200x149.jpg webp_lossy_192x128.webp; do
        mkdir -p "$T/in"
        cp "$IMG/$name" "$T/in/$name"
        truncate -s +10G "$T/in/$name" # sparse: costs no disk
    done
    under_memory_cap 3 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    for name in png_gray_128x72.png jpeg_gray_200x149.jpg webp_lossy_192x128.webp; do
        match_hf "$T/o/$name.npy.zst" "$REF/images/$name" "$name"
    done
}

@test "--timeout stops a JPEG with thousands of scans; the batch goes on" {
    # A valid progressive 4096x4096 grayscale JPEG (flat grey) whose AC scan (all blocks one EOB
    # run) is repeated 3000 times: ~150 kB that takes seconds to decode.
    "$PY" - "$T/scans.jpg" 3000 <<'PYEOF'
import struct, sys
W = H = 4096
def seg(m, body): return b"\xff" + bytes([m]) + struct.pack(">H", len(body) + 2) + body
nb = (W // 8) * (H // 8)
out = b"\xff\xd8" + seg(0xDB, b"\x00" + b"\x01" * 64)
out += seg(0xC2, struct.pack(">BHHB", 8, H, W, 1) + b"\x01\x11\x00")
out += seg(0xC4, b"\x00" + b"\x01" + b"\x00" * 15 + b"\x00")  # DC: one 1-bit code, category 0
out += seg(0xC4, b"\x10" + b"\x01" + b"\x00" * 15 + b"\xe0")  # AC: one 1-bit code, EOB run 2^14
out += seg(0xDA, b"\x01\x01\x00\x00\x00\x00") + b"\x00" * (nb // 8)                # DC first scan
ac = seg(0xDA, b"\x01\x01\x00\x01\x3f\x00") + b"\x00" * (nb // 16384 * 15 // 8)  # EOB runs only
open(sys.argv[1], "wb").write(out + ac * int(sys.argv[2]) + b"\xff\xd9")
PYEOF
    # the ffmpeg CLI reads it as the JPEG it is
    [ "$(ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 "$T/scans.jpg")" = mjpeg,4096,4096 ]
    embed --timeout 1 "$T/scans.jpg" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    [ "$(field_of "$T/scans.jpg" error)" = "$T/scans.jpg: JPEG decode stopped: time limit exceeded (--timeout)" ]
    [ "$(field_of "$IMG/png_gray_128x72.png" status)" = ok ]
}

@test "a FIFO as config.json, preprocessor_config.json or the weights file is a fatal error, not a hang" {
    for f in config.json preprocessor_config.json model.safetensors; do
        rm -rf "$T/m" "$T/o"
        cp -r "$MODEL" "$T/m"
        [ -f "$T/m/$f" ]
        rm "$T/m/$f"
        mkfifo "$T/m/$f"
        run timeout 60 "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/o" "$IMG/png_gray_128x72.png"
        echo "$f: $status $output"
        [ "$status" -eq 1 ]
        [ "$output" = "mvembed: $T/m/$f: not a regular file (a fifo)" ]
    done
}

# make_awkward_videos DIR: videos whose packets are not the CLI's frame list, and other starts
make_awkward_videos() {
    local d=$1 src=(-f lavfi -i testsrc2=size=128x96:rate=25:duration=0.8)
    local og=(-c:v libx264 -preset veryfast -x264-params threads=1:open-gop=1:keyint=10:min-keyint=10:scenecut=0)
    mkdir -p "$d"
    "${FF[@]}" "${src[@]}" "${X264[@]}" -bf 3 -pix_fmt yuv420p "$d/bframes.mkv"
    "${FF[@]}" "${src[@]}" "${X264[@]}" -bf 3 -pix_fmt yuv420p "$T/bframes.mp4"
    "${FF[@]}" "${src[@]}" "${X264[@]}" -bf 3 -pix_fmt yuv420p -output_ts_offset 3.3 "$d/offset_start.mkv"
    "${FF[@]}" -itsoffset 1.7 -i "$T/bframes.mp4" -c copy "$d/itsoffset.mp4"
    # an edit list that starts mid-GOP (the demuxer discards the packets before it)
    "${FF[@]}" -ss 0.3 -i "$T/bframes.mp4" -c copy "$d/editlist.mp4"
    # 29.97 fps
    "${FF[@]}" -f lavfi -i testsrc2=size=128x96:rate=30000/1001:duration=0.8 "${X264[@]}" -bf 3 -pix_fmt yuv420p "$d/ntsc.mkv"
    # open GOPs cut twice: leading B-frames without their references, a packet without timestamps
    "${FF[@]}" -f lavfi -i testsrc2=size=128x96:rate=25:duration=2 "${og[@]}" -bf 3 -pix_fmt yuv420p "$T/og.ts"
    "${FF[@]}" -ss 0.5 -i "$T/og.ts" -c copy "$T/og_cut.mkv" 2>/dev/null
    "${FF[@]}" -ss 0.5 -i "$T/og_cut.mkv" -c copy "$d/opengop_cut.mkv" 2>/dev/null
    "${FF[@]}" -ss 0.5 -i "$T/og.ts" -c copy "$d/opengop_cut.mp4" 2>/dev/null
    # MPEG-4 part 2 with B-frames in AVI: packets carry decode times only
    "${FF[@]}" -f lavfi -i testsrc2=size=128x96:rate=25:duration=1 -c:v mpeg4 -bf 2 "$d/mpeg4_bframes.avi"
}

@test "B-frames, edit lists, cut open GOPs, offset starts: frame count, indices, timestamps and pixels equal the ffmpeg CLI's" {
    make_awkward_videos "$T/v"
    for f in "$T"/v/*; do
        n=$(basename "$f")
        "$PY" "$ROOT/scripts/ffmpeg_frames.py" "$f" "$T/$n.npy" --json "$T/$n.json" >/dev/null
        rm -rf "$T/o"
        embed --num-frames 4 "$f"
        [ "$status" -eq 0 ] || { echo "$n: $output"; false; }
        run "$PY" -c '
import json, sys, numpy as np
cli = json.load(open(sys.argv[1]))
line = json.loads(open(sys.argv[2]).readline())
total = round(line["duration"] * line["fps"])
want = [int(i) for i in np.linspace(0, cli["total_frames"] - 1, 4).round().astype(int)]
# (AVI frames have no presentation times for ffprobe: compare the ones the CLI has)
ts = [cli["pts"][i] - cli["pts"][0] if cli["pts"][i] is not None and cli["pts"][0] is not None else None
      for i in want]
ok = total == cli["total_frames"] and line["frame_indices"] == want and \
    all(b is None or abs(a - b) < 1e-6 for a, b in zip(line["timestamps"], ts))
print("%s frames %d (CLI %d), indices %s (numpy %s), timestamps %s (CLI %s)" % (
    "ok" if ok else "MISMATCH", total, cli["total_frames"], line["frame_indices"], want, line["timestamps"], ts))' \
            "$T/$n.json" "$MAN"
        echo "$n: $output"
        [[ $output == ok* ]]
        # every frame, a sparse sample and backward reads, bit for bit against `ffmpeg -f rawvideo`
        run "$TEST_VIDEO" "$f"
        echo "$output" | grep -v '^ok'
        [ "$status" -eq 0 ]
        [[ $output == *"all frames equal the CLI's bit for bit"* ]]
    done
}

@test "--max-decode-pixels refuses a GIF, BMP or TIFF over it before decoding, naming size and limit" {
    for f in gif_frame_past_screen_48x32.gif bmp_rle4_81x47.bmp tif_rgb_tiles_45x29.tif; do
        p="$ROOT/fixtures/formats/$f"
        # the size as PIL opens it (a GIF's canvas grows to hold its first frame: 48x32 here)
        size=$("$PY" -c 'import sys; from PIL import Image; print("%dx%d" % Image.open(sys.argv[1]).size)' "$p")
        px=$((${size%x*} * ${size#*x}))
        rm -rf "$T/o"
        small="$ROOT/fixtures/formats/gif87a_2colours_33x17.gif" # 561 pixels: under every limit here
        embed --max-decode-pixels $((px - 1)) "$p" "$small"
        [ "$status" -eq 2 ]
        [ "$(field_of "$p" error)" = "$p: image size $size ($px pixels) exceeds the limit of $((px - 1)) pixels (decompression bomb guard)" ]
        [ "$(field_of "$small" status)" = ok ]
        rm -rf "$T/o"
        embed --max-decode-pixels $px "$p"
        [ "$status" -eq 0 ]
    done
}

# big_flat DIR W H: DIR/flat.gif, flat.bmp and flat.tif, one colour each, W x H pixels, small files
# that take seconds to decode at 10000 x 10000 (scripts/make_fixture_formats.py --flat says how)
big_flat() { "$PY" "$ROOT/scripts/make_fixture_formats.py" --flat "$@"; }

@test "--timeout stops GIF, BMP and TIFF decodes at once, and part way through large images" {
    for f in gif_lzw_256colours_120x90.gif bmp_rle8_79x43.bmp tif_rgb_lzw_45x29.tif; do
        p="$ROOT/fixtures/formats/$f"
        fmt=$(echo "${f%%_*}" | tr a-z A-Z | sed 's/TIF$/TIFF/')
        rm -rf "$T/o"
        embed --timeout 0.000001 "$p"
        [ "$status" -eq 2 ]
        [ "$(field_of "$p" error)" = "$p: $fmt decode stopped: time limit exceeded (--timeout)" ]
    done
    # the generator makes valid files: small ones decode to PIL's pixels (one colour each)
    big_flat "$T/small" 700 300
    rm -rf "$T/o"
    embed --dump-stages "$T/d" "$T/small"
    [ "$status" -eq 0 ]
    run "$PY" - "$T/small" "$T/d" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
for n in ("flat.gif", "flat.bmp", "flat.tif"):
    want = np.asarray(Image.open(os.path.join(sys.argv[1], n)).convert("RGB"))
    got = np.asarray(Image.open(os.path.join(sys.argv[2], n, "decoded.png")))
    assert want.shape == (300, 700, 3) and (got == want).all() and len(np.unique(want.reshape(-1, 3), axis=0)) == 1, n
print("ok")
PYEOF
    echo "$output"
    [ "$output" = ok ]
    # 10000 x 10000 takes seconds (8000 x 8000 for the TIFF): 0.1 s stops each inside its rows,
    # one input a run (each holds hundreds of MB)
    big_flat "$T/big" 10000 10000
    big_flat "$T/big8" 8000 8000
    for p in "$T/big/flat.gif" "$T/big/flat.bmp" "$T/big8/flat.tif"; do
        fmt=$(echo "${p##*.}" | tr a-z A-Z | sed 's/TIF$/TIFF/')
        rm -rf "$T/o"
        SECONDS=0
        embed --timeout 0.1 "$p"
        echo "$p: $output ($SECONDS s)"
        [ "$status" -eq 2 ]
        [ "$(field_of "$p" error)" = "$p: $fmt decode stopped: time limit exceeded (--timeout)" ]
        [ "$SECONDS" -lt 30 ]
    done
}
