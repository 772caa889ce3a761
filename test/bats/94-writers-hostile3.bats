#!/usr/bin/env bats
# Writers in a hostile OUT: inputs whose output names fall in OUT's pooled directories (pooled/,
# pooled-KKKKK-of-NNNNN/), which --pool mean writes and replaces whole (their files went out of
# OUT with the old directory, behind ok lines and exit 0); a pooled/ holding other files.
# Oracles: Python's json, numpy (np.load after zstandard), os.walk, cmp.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

# ok_outputs OUT: the newest line of each input: its output file, when ok, loads with numpy in the
# shape the line records; no temporary file or directory is left in OUT; prints "ok N failed M"
ok_outputs() {
    "$PY" - "$1" <<'EOF'
import io, json, os, sys
import numpy as np, zstandard
out = sys.argv[1]
ok = failed = 0
latest = {}
for line in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8"):
    r = json.loads(line)
    latest[r["input"]] = r
for r in latest.values():
    if r["status"] != "ok":
        failed += 1
        continue
    ok += 1
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(open(os.path.join(out, r["output"]), "rb").read())
    assert list(np.load(io.BytesIO(raw)).shape) == r["shape"], r
left = [os.path.join(d, f) for d, ds, fs in os.walk(out) for f in fs + ds if f.startswith(".tmp-")]
assert not left, left
print("ok", ok, "failed", failed)
EOF
}

@test "--pool mean: inputs under folders named pooled/ and pooled-00000-of-00002/ fail naming it; no ok line loses its file" {
    img="$ROOT/fixtures/media/images"
    mkdir -p "$T/in/pooled" "$T/in/pooled-00000-of-00002"
    cp "$img/png_rgb_320x256.png" "$T/in/pooled/a.png"
    cp "$img/jpeg_gray_200x149.jpg" "$T/in/pooled-00000-of-00002/b.jpg"
    cp "$img/png_gray_128x72.png" "$T/in/pooled.png"
    cp "$img/webp_lossy_192x128.webp" "$T/in/"
    for pass in 1 2; do # the second run retries the failed ones: the same refusal, nothing lost
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
        echo "pass $pass: exit $status: $output"
        [ "$status" -eq 2 ]
        run ok_outputs "$T/o"
        echo "$output"
        [ "$status" -eq 0 ]
        [ "$output" = "ok 2 failed 2" ]
    done
    "$PY" - "$T/o" <<'EOF'
import json, os, sys
import numpy as np
out = sys.argv[1]
latest = {}
for line in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8"):
    r = json.loads(line)
    latest[os.path.relpath(r["input"], os.path.dirname(out) + "/in")] = r
for name, folder in (("pooled/a.png", "pooled"), ("pooled-00000-of-00002/b.jpg", "pooled-00000-of-00002")):
    r = latest[name]
    assert r["status"] != "ok" and f"lies in {out}/{folder}/, the directory --pool mean" in r["error"], r
assert latest["pooled.png"]["status"] == "ok"
rows = np.load(os.path.join(out, "pooled", "pooled.npy"))
index = [json.loads(l) for l in open(os.path.join(out, "pooled", "pooled.jsonl"), encoding="utf-8")]
assert rows.shape[0] == 2 and sum(1 for x in index if x.get("row") is not None) == 2, (rows.shape, index)
assert sorted(os.listdir(os.path.join(out, "pooled"))) == ["pooled.jsonl", "pooled.npy"]
assert not os.path.exists(os.path.join(out, "pooled-00000-of-00002"))
EOF
}

@test "--pool mean over an OUT whose pooled/ holds another file (an output an earlier build put there): exit 1 naming it, the file kept" {
    small_set "$T/in"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    # as an earlier build left it: an input's output inside pooled/
    cp "$T/o/png_rgb_320x256.png.npy.zst" "$T/o/pooled/a.png.npy.zst"
    cp "$T/o/png_rgb_320x256.png.npy.zst" "$T/keep"
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean --force "$T/in"
    echo "exit $status: $output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o/pooled: holds a.png.npy.zst, not a file of --pool mean: not replaced"* ]]
    cmp "$T/keep" "$T/o/pooled/a.png.npy.zst"
    run ok_outputs "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [ ! -e "$T/o/_SUCCESS" ]
}
