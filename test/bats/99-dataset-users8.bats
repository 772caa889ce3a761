#!/usr/bin/env bats
# A careful dataset user's checks: an AVI whose index lists dropped frames (empty chunks, as
# `ffmpeg -r 1000` or a capture tool writes them) gives the frames the ffmpeg CLI decodes instead
# of failing as truncated, while an AVI really cut short still fails; an animated WebP gives its
# first frame, as PIL (HF's load_image) does. Oracles: the ffmpeg CLI (the videos, its frame
# count, a stream copy of the same packets), numpy (HF's linspace sampling), PIL, Python's json.
load test_helper

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "an AVI listing dropped frames: the CLI's frames, the same embedding as its packets copied to MKV" {
    mkdir -p "$T/in" "$T/cut"
    # 25 pictures written at -r 1000: the index lists 961 frames, 936 of them empty chunks
    "${FF[@]}" -f lavfi -i testsrc=size=64x48:rate=25:duration=1 -c:v mpeg4 -r 1000 "$T/in/drops.avi"
    "${FF[@]}" -i "$T/in/drops.avi" -c copy -fps_mode passthrough "$T/in/copy.mkv"
    head -c 15000 "$T/in/drops.avi" > "$T/cut/cut.avi" # cut in its frames, the index lost
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    cmp "$T/o/drops.avi.npy.zst" "$T/o/copy.mkv.npy.zst"
    run "$PY" - "$T" <<'PY'
import json, subprocess, sys
import numpy as np
t = sys.argv[1]
f = f"{t}/in/drops.avi"
decoded = sum(1 for l in subprocess.run(["ffmpeg", "-v", "error", "-i", f, "-fps_mode", "passthrough", "-f", "framemd5", "-"],
              capture_output=True, check=True, text=True).stdout.splitlines() if not l.startswith("#"))
listed = json.loads(subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=nb_frames",
                    "-of", "json", f], capture_output=True, check=True).stdout)["streams"][0]["nb_frames"]
assert int(listed) > decoded, (listed, decoded)
recs = {r["input"].rsplit("/", 1)[1]: r for r in map(json.loads, open(f"{t}/o/manifest.jsonl"))}
r = recs["drops.avi"]
n = len(r["frame_indices"])
assert r["frame_indices"] == [int(x) for x in np.round(np.linspace(0, decoded - 1, n))], (r, decoded)
assert r["frame_indices"] == recs["copy.mkv"]["frame_indices"]
PY
    echo "$output"
    [ "$status" -eq 0 ]
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o2" "$T/cut"
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); assert r["status"]=="error" and "truncated" in r["error"], r' \
        "$T/o2/manifest.jsonl"
}

@test "an animated WebP: its first frame, the pixels PIL's load_image gives (EXIF orientation applied)" {
    mkdir -p "$T/in"
    "$PY" - "$T/in" <<'PY'
import sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(7)
rgba = [Image.fromarray(rng.integers(0, 256, (30, 44, 4), dtype=np.uint8), "RGBA") for _ in range(3)]
rgba[0].save(f"{d}/alpha.webp", save_all=True, append_images=rgba[1:], duration=80, loop=0, lossless=True)
rgb = [Image.fromarray(rng.integers(0, 256, (36, 52, 3), dtype=np.uint8)) for _ in range(2)]
rgb[0].save(f"{d}/lossy.webp", save_all=True, append_images=rgb[1:], duration=80, quality=80)
ex = Image.Exif()
ex[0x0112] = 6
rgb[0].save(f"{d}/exif6.webp", save_all=True, append_images=rgb[1:], duration=80, lossless=True, exif=ex.tobytes())
PY
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --dump-stages "$T/ds" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T" <<'PY'
import json, os, sys
import numpy as np
from PIL import Image, ImageOps
t = sys.argv[1]
recs = [json.loads(l) for l in open(f"{t}/o/manifest.jsonl")]
assert len(recs) == 3 and all(r["status"] == "ok" for r in recs), recs
for r in recs:
    n = os.path.basename(r["input"])
    im = Image.open(f"{t}/in/{n}")
    assert getattr(im, "n_frames", 1) > 1, n
    ref = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    ours = np.asarray(Image.open(f"{t}/ds/{n}/decoded.png").convert("RGB"))
    assert ref.shape == ours.shape and (ref == ours).all(), (n, ref.shape, ours.shape)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
