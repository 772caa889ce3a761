#!/usr/bin/env bats
# A careful dataset user's checks: a rotated 4:2:2 video (as cameras write them) whose frame size
# shrinks mid-stream gets the frames the ffmpeg CLI gives, scaled to the first frame's size; and
# the man page's xargs example over a dataset folder (images beside their captions) runs as
# written. Oracles: the ffmpeg CLI (the video, its frames, the PNGs read back), numpy, Python's
# json (manifest lines), GNU find and xargs.
load test_helper

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "a rotated yuv422p video shrinking mid-stream: its later frames are the CLI's, scaled to the first size, not memory past the frame" {
    mkdir -p "$T/in"
    "${FF[@]}" -f lavfi -i testsrc=size=96x64:rate=4 -t 2 -c:v libx264 -pix_fmt yuv422p \
        -bsf:v h264_mp4toannexb "$T/a.ts"
    "${FF[@]}" -f lavfi -i testsrc=size=64x32:rate=4 -t 2 -c:v libx264 -pix_fmt yuv422p \
        -bsf:v h264_mp4toannexb "$T/b.ts"
    printf "file '%s'\nfile '%s'\n" "$T/a.ts" "$T/b.ts" > "$T/list.txt"
    "${FF[@]}" -f concat -safe 0 -i "$T/list.txt" -c copy -metadata:s:v rotate=90 "$T/in/shrinks.mp4"
    # what the CLI gives: every frame turned upright, at the first frame's size
    ffmpeg -v error -nostdin -i "$T/in/shrinks.mp4" -fps_mode passthrough -pix_fmt rgb24 -f rawvideo "$T/cli.rgb"
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --dump-stages "$T/ds" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T" <<'PY'
import glob, json, subprocess, sys
import numpy as np
t = sys.argv[1]
(r,) = [json.loads(l) for l in open(t + "/o/manifest.jsonl", encoding="utf-8")]
w, h = r["width"], r["height"]
assert r["status"] == "ok" and r["rotation"] in (90, 270) and r["resized"] == [w, h], r
cli = np.fromfile(t + "/cli.rgb", np.uint8).reshape(-1, h, w, 3).astype(np.int64)
late = 0
for k, i in enumerate(r["frame_indices"]):
    (png,) = glob.glob(f"{t}/ds/*/input_{k:03d}.png")
    raw = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", png, "-f", "rawvideo", "-pix_fmt",
                          "rgb24", "-"], capture_output=True, check=True).stdout
    ours = np.frombuffer(raw, np.uint8).reshape(h, w, 3).astype(np.int64)
    diff = np.abs(ours - cli[i]).mean()
    spread = np.abs(cli[i] - cli[i].mean()).mean()  # how far the picture is from a flat grey
    print(i, round(diff, 2), round(spread, 2))
    assert diff < spread / 4, (i, diff, spread)
    late += i >= len(cli) // 2
assert late >= 2, r["frame_indices"]  # frames of the smaller part were checked
print("ok")
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "man page EXAMPLES: the find | xargs batches over images beside their captions embed every image, nothing fails" {
    small_set "$T/data/a"
    for f in "$T"/data/a/*; do
        echo "caption" > "${f%.*}.txt"
        echo '{"url": "x"}' > "${f%.*}.json"
    done
    cmd=$(awk '/^In batches of 1000 with xargs/ { f = 1 } f && /^    find / { print; exit }' "$ROOT/man/mvembed.1" |
        sed -e 's/\\-/-/g' -e 's/^ *//')
    echo "$cmd"
    [[ $cmd == "find data "*"| xargs "*"mvembed "* ]]
    # as written, the binary under test on the CPU and the tiny model put in for mvembed and M
    cmd=${cmd//mvembed /$MVEMBED --device cpu }
    cmd=${cmd/--model M /--model $MODEL }
    cd "$T"
    run bash -c "$cmd"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T/O" "$T/data" <<'PY'
import json, os, sys
out, data = sys.argv[1:]
lines = [json.loads(l) for l in open(out + "/manifest.jsonl", encoding="utf-8")]
images = sorted(os.path.join("data", "a", f) for f in os.listdir(data + "/a") if not f.endswith((".txt", ".json")))
assert sorted(l["input"] for l in lines) == images, [l["input"] for l in lines]
assert all(l["status"] == "ok" for l in lines), lines
print("ok", len(images))
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
