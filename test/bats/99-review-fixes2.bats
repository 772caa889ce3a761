#!/usr/bin/env bats
# Review fixes: a --shard K/N tar run's pooled directory whose rows another naming embedded under
# another relative path (so its index names them from /) stays when the other shards end; a
# video read in decode order times a frame without a timestamp as the ffmpeg CLI does.
# Oracles: json (the manifests, the pooled indexes), tarfile + numpy (the samples, the rows),
# the ffmpeg CLI (showinfo's pts_time).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    jpg_png_set "$T/in"
}

@test "tar --pool mean: a fix-up run from inside the folder, then --shard 0/2, 1/2 from above: both shards' pooled directories stay, every input once" {
    (cd "$T/in" && "$MVEMBED" --device cpu --model "$MODEL" --out ../o --layout tar --pool mean .)
    cd "$T"
    for sh in 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out o --layout tar --pool mean --shard "$sh" in
        echo "$output"
        [ "$status" -eq 0 ]
    done
    # both pooled-K-of-2 exist; their index names inputs relative to the folder above OUT
    pooled_check "$T/o" "$N" --base "$T"
}

@test "an MPEG-2 elementary stream (read in decode order): the flushed last frame is timed as the ffmpeg CLI times it" {
    ffmpeg -hide_banner -loglevel error -nostdin -y -f lavfi -i testsrc=size=64x64:rate=10:duration=2 \
        -c:v mpeg2video -f mpeg2video "$T/a.m2v"
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --fps 3 "$T/a.m2v"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T" <<'PY'
import json, re, subprocess, sys
t = sys.argv[1]
(r,) = [json.loads(l) for l in open(t + "/o/manifest.jsonl", encoding="utf-8")]
assert r["status"] == "ok", r
info = subprocess.run(["ffmpeg", "-nostdin", "-i", t + "/a.m2v", "-fps_mode", "passthrough", "-vf", "showinfo",
                       "-f", "null", "-"], capture_output=True, text=True).stderr
cli = [float(x) for x in re.findall(r"n: *\d+ pts: *\d+ pts_time:([0-9.]+)", info)]
idx, ts = r["frame_indices"], r["timestamps"]
assert idx[-1] == len(cli) - 1, (idx, len(cli))  # the last frame is sampled
want = [cli[i] - cli[0] for i in idx]
assert all(x is not None for x in ts), ts
assert all(abs(a - b) < 1e-6 for a, b in zip(ts, want)), (ts, want)
print("ok", ts)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
