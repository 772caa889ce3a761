#!/usr/bin/env bats
# A hostile environment: a wall clock that is wrong or set back between runs (a host whose clock
# was ahead and got corrected, or shards run on hosts whose clocks disagree), through the
# LD_PRELOAD shim fs_shim's FS_SHIM_CLOCK_SHIFT. The newest line of an input decides resume,
# `manifest failed`, merge and compact; a rerun's line must win over the line it replaces
# whatever the clocks said, or a fixed input is redone forever, listed as failed, and compact
# keeps a stale embedding.
# Oracles: Python's json, tarfile and numpy; zstandard.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    mkdir -p "$T/in"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    preload=$(fs_shim "$T")
}

# ahead SECONDS CMD...: mvembed CMD... on a host whose clock is SECONDS ahead
ahead() {
    env FS_SHIM_CLOCK_SHIFT="$1" LD_PRELOAD="$preload" "$MVEMBED" "${@:2}"
}

# lines MANIFEST INPUT: "status status ..." of INPUT's lines in MANIFEST, in file order (json)
lines() {
    "$PY" -c 'import json,sys
print(" ".join(j["status"] for j in map(json.loads, open(sys.argv[1])) if j["input"] == sys.argv[2]))' "$1" "$2"
}

@test "a clock set back a day: a fixed input's ok line wins; no endless redo, not listed failed, compact keeps it" {
    cp "$ROOT/fixtures/bad/truncated.png" "$T/in/x.png"
    run ahead 86400 --device cpu --model "$MODEL" --out "$T/o" -q "$T/in"
    [ "$status" -eq 2 ]
    cp "$IMG/png_rgb_320x256.png" "$T/in/x.png"
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" -q "$T/in" # x redone: its ok line
    [ "$(lines "$T/o/manifest.jsonl" "$T/in/x.png")" = "error ok" ]
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" -q "$T/in" # nothing left to do
    [ "$(lines "$T/o/manifest.jsonl" "$T/in/x.png")" = "error ok" ]
    run "$MVEMBED" manifest failed "$T/o"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    "$MVEMBED" manifest compact "$T/o" 2>/dev/null
    [ "$(lines "$T/o/manifest.jsonl" "$T/in/x.png")" = "ok" ]
    "$PY" -c 'import json,sys,io,numpy as np,zstandard
for j in map(json.loads, open(sys.argv[1] + "/manifest.jsonl")):
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(sys.argv[1] + "/" + j["output"], "rb").read())))
    assert a.ndim == 2 and np.isfinite(a).all(), j' "$T/o"
}

@test "tar layout, a clock set back a day: compact keeps the sample of the input as it is now, not the stale one" {
    cp "$IMG/webp_lossy_192x128.webp" "$T/in/x.png" # content A (a WebP under a .png name: sniffed)
    ahead 86400 --device cpu --model "$MODEL" --out "$T/o" --layout tar -q "$T/in"
    cp "$IMG/png_rgb_320x256.png" "$T/in/x.png" # content B: redone by the next run
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar -q "$T/in"
    "$MVEMBED" manifest compact "$T/o" 2>/dev/null
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/ref" -q "$T/in/x.png" # B alone
    "$PY" - "$T/o" "$T/ref" <<'EOF'
import glob, io, json, sys, tarfile, numpy as np, zstandard
o, ref = sys.argv[1], sys.argv[2]
r = [json.loads(l) for l in open(ref + "/manifest.jsonl")][0]
want = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(ref + "/" + r["output"], "rb").read())))
found = []
for sh in sorted(glob.glob(o + "/shard-*.tar")):
    with tarfile.open(sh) as t:
        for m in t.getmembers():
            if m.name.endswith(".json") and json.load(t.extractfile(m))["input"].endswith("/x.png"):
                found.append(np.load(io.BytesIO(t.extractfile(m.name[:-5] + ".npy").read())))
assert len(found) == 1, len(found)
assert found[0].shape == want.shape and np.array_equal(found[0], want), (found[0].shape, want.shape)
EOF
}

@test "shards run on a host whose clock is an hour ahead: the fix-up run's ok line outlives the shard's error line" {
    cp "$ROOT/fixtures/bad/truncated.png" "$T/in/x.png"
    for k in 0 1; do
        run ahead 3600 --device cpu --model "$MODEL" --out "$T/o" --shard "$k/2" -q "$T/in"
    done
    cp "$IMG/png_rgb_320x256.png" "$T/in/x.png"
    "$MVEMBED" manifest failed "$T/o" -0 | "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" -q -0 -
    "$MVEMBED" manifest merge "$T/o" 2>/dev/null
    [ "$(lines "$T/o/manifest.jsonl" "$T/in/x.png")" = "ok" ]
    run "$MVEMBED" manifest failed "$T/o"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}
