#!/usr/bin/env bats
# A careful dataset user's checks: concatenated MPEG-TS recordings (`cat a.ts b.ts`, whose
# timestamps restart) give the frames the ffmpeg CLI gives, in its order, and their times as the
# CLI times them (one after the other, never going back); a second --dump-stages run into one DIR
# leaves no stale stages of the first. Oracles: the ffmpeg CLI (the videos, the
# frames it decodes, showinfo's pts_time), numpy (HF's linspace sampling), Python's json.
load test_helper

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "concatenated MPEG-TS with restarting timestamps: the CLI's frames in its order, its times, never going back" {
    mkdir -p "$T/in"
    # three parts with distinct pictures; the second starts 30 s later, the third 10 s later
    "${FF[@]}" -f lavfi -i testsrc=size=64x64:rate=10:duration=2 -c:v mpeg2video "$T/a.ts"
    "${FF[@]}" -f lavfi -i testsrc2=size=64x64:rate=10:duration=2 -c:v mpeg2video "$T/b.ts"
    "${FF[@]}" -f lavfi -i testsrc2=size=64x64:rate=10:duration=2 -c:v mpeg2video -output_ts_offset 30 "$T/b30.ts"
    "${FF[@]}" -f lavfi -i smptebars=size=64x64:rate=10:duration=2 -c:v mpeg2video -output_ts_offset 10 "$T/c10.ts"
    cat "$T/a.ts" "$T/b.ts" > "$T/in/same-start.ts"          # the timestamps start again at the same time
    cat "$T/a.ts" "$T/b30.ts" "$T/c10.ts" > "$T/in/three.ts"  # forward, then back to between the two
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --dump-stages "$T/ds" --fps 3 "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T" <<'PY'
import glob, json, os, re, subprocess, sys
import numpy as np
t = sys.argv[1]
recs = {os.path.basename(json.loads(l)["input"]): json.loads(l) for l in open(t + "/o/manifest.jsonl", encoding="utf-8")}
assert set(recs) == {"same-start.ts", "three.ts"}, recs
for name, r in sorted(recs.items()):
    f = f"{t}/in/{name}"
    assert r["status"] == "ok", r
    cli = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", f, "-fps_mode", "passthrough",
                          "-pix_fmt", "rgb24", "-f", "rawvideo", "-"], capture_output=True, check=True).stdout
    frames = np.frombuffer(cli, np.uint8).reshape(-1, 64, 64, 3).astype(np.int64)
    info = subprocess.run(["ffmpeg", "-nostdin", "-i", f, "-fps_mode", "passthrough", "-vf", "showinfo",
                           "-f", "null", "-"], capture_output=True, text=True).stderr
    times = [float(x) for x in re.findall(r"pts_time:([-0-9.e]+)", info)]
    n_total = len(frames)
    assert len(times) == n_total, (len(times), n_total)
    # HF's sampling: n = int(total / fps_v * 3), clamped, indices = round(linspace(0, total - 1, n))
    n = min(max(int(n_total / r["fps"] * 3), 4), 768, n_total)
    want = [int(i) for i in np.round(np.linspace(0, n_total - 1, n))]
    print(name, r["frame_indices"], r["timestamps"])
    assert r["frame_indices"] == want, (r["frame_indices"], want)
    ts = r["timestamps"]
    assert all(b > a for a, b in zip(ts, ts[1:])), ("times go back", ts)
    exp = [times[i] - times[0] for i in want]
    assert np.allclose(ts, exp, atol=1e-6), (ts, exp)
    for k, i in enumerate(want):
        (png,) = glob.glob(f"{t}/ds/**/{name}/input_{k:03d}.png", recursive=True)
        raw = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", png, "-f", "rawvideo", "-pix_fmt",
                              "rgb24", "-"], capture_output=True, check=True).stdout
        ours = np.frombuffer(raw, np.uint8).reshape(64, 64, 3).astype(np.int64)
        diff = np.abs(ours - frames[i]).mean()
        spread = np.abs(frames[i] - frames[i].mean()).mean()
        assert diff < spread / 4, (name, k, i, diff, spread)
print("ok")
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "--dump-stages into a DIR of an earlier run: an input's files are this run's, none left over from the earlier one" {
    mkdir -p "$T/in"
    "${FF[@]}" -f lavfi -i testsrc=size=64x64:rate=10:duration=2 -c:v libx264 -pix_fmt yuv420p "$T/in/clip.mp4"
    "${FF[@]}" -f lavfi -i testsrc=size=64x64:rate=1 -frames:v 1 "$T/in/broken.png"
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o1" -q --dump-stages "$T/ds" --num-frames 6 "$T/in"
    [ "$status" -eq 0 ]
    d=$(find "$T/ds" -type d -name clip.mp4)
    [ -f "$d/input_005.png" ]
    echo "mine" > "$d/notes.txt"  # the user's own file beside the dump
    head -c 100 /dev/urandom > "$T/in/broken.png"  # fails in the second run
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o2" -q --dump-stages "$T/ds" --num-frames 2 "$T/in"
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" - "$T" <<'PY'
import glob, json, os, sys
import numpy as np
t = sys.argv[1]
recs = {os.path.basename(json.loads(l)["input"]): json.loads(l) for l in open(t + "/o2/manifest.jsonl", encoding="utf-8")}
r = recs["clip.mp4"]
assert r["status"] == "ok" and recs["broken.png"]["status"] == "error", recs
(d,) = [x for x in glob.glob(t + "/ds/**/clip.mp4", recursive=True) if os.path.isdir(x)]
names = sorted(os.listdir(d))
print(names)
pngs = [n for n in names if n.startswith("input")]
assert len(pngs) == len(r["frame_indices"]) == 2, (pngs, r["frame_indices"])
pv = np.load(d + "/pixel_values.npy")
assert pv.shape[0] == int(np.prod(r["grid_thw"])), (pv.shape, r["grid_thw"])
out = np.load(d + "/output.npy")
assert list(out.shape) == r["shape"], (out.shape, r["shape"])
assert open(d + "/notes.txt").read() == "mine\n"  # not a file of the dump: kept
(b,) = [x for x in glob.glob(t + "/ds/**/broken.png", recursive=True)]
assert not [n for n in os.listdir(b) if n.endswith((".png", ".npy"))], os.listdir(b)  # no stale stages
print("ok")
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
