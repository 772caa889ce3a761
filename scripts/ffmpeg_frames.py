#!/usr/bin/python3
"""ffmpeg_frames.py - reference frames of a video, exactly as the ffmpeg CLI decodes them.

    /usr/bin/python3 scripts/ffmpeg_frames.py FILE OUT.npy [--json OUT.json]

Runs `ffmpeg -i FILE -fps_mode passthrough -pix_fmt rgb24 -f rawvideo -` (default autorotation,
the CLI's auto-inserted bicubic scaler) and saves every decoded frame as uint8 [T, H, W, 3] to
OUT.npy. `-fps_mode passthrough` matters: the rawvideo muxer has no timestamps, so without it the
CLI resamples a variable-frame-rate clip to constant rate (duplicating/dropping frames).

Metadata goes to OUT.json (default: OUT.npy with .json) and to stdout:
  total_frames   decoded frame count T (what mvembed uses as HF's total_num_frames)
  nb_frames      the container's frame count (ffprobe nb_frames; PyAV's stream.frames), or null
  fps            stream average frame rate (ffprobe avg_frame_rate = PyAV stream.average_rate,
                 which is what HF's pyav/torchvision loaders put into VideoMetadata.fps)
  fps_fraction, r_frame_rate   the same / the "real base" rate, as fraction strings
  duration       total_frames / fps (HF's VideoMetadata.duration formula)
  stream_duration  the container's duration in seconds (ffprobe), or null
  width, height  frame size after rotation; rotation (display-matrix degrees, ffprobe's sign)
  pts            presentation time in seconds of every decoded frame (best_effort_timestamp)
This is not an HF loader: it needs no PyAV/decord; the npy files feed HF's video processor.
"""
import json
import subprocess
import sys
from fractions import Fraction

import numpy as np


def probe(path):
    cmd = ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-show_frames",
           "-show_entries", "frame=best_effort_timestamp_time,width,height", "-of", "json", path]
    r = subprocess.run(cmd, capture_output=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{path}: ffprobe failed: {r.stderr.decode(errors='replace').strip()}")
    j = json.loads(r.stdout)
    if not j.get("streams"):
        raise SystemExit(f"{path}: no video stream")
    return j["streams"][0], j.get("frames", [])


def frac(s):
    try:
        f = Fraction(s)
        return f if f != 0 else None
    except (ValueError, ZeroDivisionError, TypeError):
        return None


def main(argv):
    args = argv[1:]
    jpath = None
    if "--json" in args:
        i = args.index("--json")
        jpath = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    path, out = args
    if jpath is None:
        jpath = (out[:-4] if out.endswith(".npy") else out) + ".json"
    st, frames = probe(path)
    rot = 0
    for sd in st.get("side_data_list", []):
        if "rotation" in sd:
            rot = int(round(float(sd["rotation"])))
    cmd = ["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
           "-pix_fmt", "rgb24", "-f", "rawvideo", "-"]
    r = subprocess.run(cmd, capture_output=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{path}: ffmpeg failed: {r.stderr.decode(errors='replace').strip()}")
    w, h = int(st["width"]), int(st["height"])
    if rot % 180 != 0:
        w, h = h, w
    fsz = w * h * 3
    if fsz == 0 or len(r.stdout) % fsz != 0:
        raise SystemExit(f"{path}: {len(r.stdout)} bytes of RGB is not a multiple of {w}x{h}x3")
    arr = np.frombuffer(r.stdout, dtype=np.uint8).reshape(-1, h, w, 3)
    np.save(out, arr)
    avg = frac(st.get("avg_frame_rate"))
    t = int(arr.shape[0])
    pts = [float(f["best_effort_timestamp_time"]) if "best_effort_timestamp_time" in f else None for f in frames]
    meta = {
        "file": path,
        "codec": st.get("codec_name"),
        "pix_fmt": st.get("pix_fmt"),
        "total_frames": t,
        "nb_frames": int(st["nb_frames"]) if str(st.get("nb_frames", "")).isdigit() else None,
        "fps": float(avg) if avg else None,
        "fps_fraction": st.get("avg_frame_rate"),
        "r_frame_rate": st.get("r_frame_rate"),
        "duration": float(t / avg) if avg else 0.0,
        "stream_duration": float(st["duration"]) if "duration" in st else None,
        "width": w,
        "height": h,
        "rotation": rot,
        "pts": pts if len(pts) == t else None,
    }
    with open(jpath, "w") as f:
        json.dump(meta, f, indent=1)
    short = {k: v for k, v in meta.items() if k != "pts"}
    print(json.dumps(short))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
