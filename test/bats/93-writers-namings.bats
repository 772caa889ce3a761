#!/usr/bin/env bats
# Runs side by side over one OUT and one set of inputs (files and tar layouts, several --shard
# namings): an input another run embedded meanwhile is skipped only where that run's line stands
# for the file as this run read it. Oracles: json (the manifests), numpy + zstandard (the outputs),
# os.stat.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    img="$ROOT/fixtures/media/images"
}

# changed_race LAYOUT ARGS...: in $T, run B (--layout LAYOUT, its paths read from a pipe) embeds
# in/y.jpg; then, B still live, runs A (one per ARGS word, each its --shard: none, 0/2 ...) embed
# x/a.png, which is then replaced by other bytes, and only then B is given x/a.png
changed_race() {
    local layout=$1 pid sh
    shift
    mkdir -p "$T/in" "$T/x"
    cp "$img/jpeg_gray_200x149.jpg" "$T/in/y.jpg"
    cp "$img/png_rgb_320x256.png" "$T/x/a.png"
    cd "$T"
    mkfifo list
    timeout 120 "$MVEMBED" -v --device cpu --model "$MODEL" --out o --layout "$layout" --threads 1 --jobs 1 - \
        < list 2> errB 3>&- &
    pid=$!
    exec 7> list
    echo in/y.jpg >&7
    # B is live: its lock file's line says so
    for _ in $(seq 600); do grep -q '^live ' o/.mvembed.lock 2>/dev/null && break; sleep 0.05; done
    grep -q '^live ' o/.mvembed.lock
    for sh in "$@"; do
        timeout 60 "$MVEMBED" --device cpu --model "$MODEL" --out o --layout "$layout" --shard "$sh" x 3>&-
    done
    grep -q '"x/a.png"' o/manifest*.jsonl
    cp "$img/jpeg_baseline_420_320x240.jpg" x/a.png
    echo x/a.png >&7
    exec 7>&-
    wait "$pid"
    cat errB
    # the reference: a.png as it is now, embedded into a fresh OUT
    timeout 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out ref x 3>&-
}

@test "files layout: an input changed on disk after another run embedded it is written again, not skipped" {
    changed_race files none
    # the newest line of a.png (either spelling, by its path from /) is ok, of a.png as it is
    # now, and its output holds the embedding of these bytes (a fresh OUT as the reference)
    run "$PY" - o ref/a.png.npy.zst "$T/x/a.png" <<'PY'
import io, json, os, sys
import numpy as np, zstandard
load = lambda p: np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(p, "rb")).read()))
lines = [json.loads(l) for l in open(sys.argv[1] + "/manifest.jsonl")]
last = [r for r in lines if r.get("input_abs") == os.path.realpath(sys.argv[3])][-1]
assert last["status"] == "ok" and last["input_bytes"] == os.path.getsize(sys.argv[3]), last
a, b = load(os.path.join(sys.argv[1], last["output"])), load(sys.argv[2])
assert a.shape == b.shape and np.array_equal(a, b), "OUT holds the embedding of a.png's old bytes"
print("ok")
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

# tar_newest OUT ABS REF: the newest line of the input at ABS over OUT's manifests (by "time") is
# ok, records the file's size now, and its sample's .npy (read with tarfile) is REF's array
tar_newest() {
    run "$PY" - "$@" <<'PY'
import glob, io, json, os, sys, tarfile
import numpy as np, zstandard
out, path, ref = sys.argv[1:4]
lines = [json.loads(l) for m in glob.glob(out + "/manifest*.jsonl") for l in open(m)]
last = max((r for r in lines if r.get("input_abs") == os.path.realpath(path)), key=lambda r: r["time"])
assert last["status"] == "ok" and last["input_bytes"] == os.path.getsize(path), last
with tarfile.open(os.path.join(out, last["shard"])) as t:
    a = np.load(io.BytesIO(t.extractfile(last["key"] + ".npy").read()))
b = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(ref, "rb")).read()))
assert a.shape == b.shape and np.array_equal(a, b), "the newest sample is of a.png's old bytes"
print("ok")
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "tar layout, one naming: an input changed on disk after another run committed it is kept, not taken out" {
    changed_race tar none
    tar_newest o "$T/x/a.png" ref/a.png.npy.zst
    ! grep -q 'embedded meanwhile' errB
    # A's sample of the old bytes is dead: compact takes it out, a reader sees each input once
    run timeout 60 "$MVEMBED" manifest compact o
    echo "$output"
    [ "$status" -eq 0 ]
    tar_check o --ok 2 --one-sample
    tar_newest o "$T/x/a.png" ref/a.png.npy.zst
}

@test "tar layout, other namings (--shard 0/2, 1/2): an input changed on disk after they committed it is kept" {
    changed_race tar 0/2 1/2
    tar_newest o "$T/x/a.png" ref/a.png.npy.zst
    ! grep -q 'embedded meanwhile' errB
}
