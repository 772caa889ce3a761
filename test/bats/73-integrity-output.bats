#!/usr/bin/env bats
# Output integrity (issue: integrity): non-finite embeddings are never marked ok (NaN weights and
# nonsense preprocessing numbers are refused at load; an output holding NaN/Inf, or f16 values
# past f16's range, fails its input);
# the temp-file sweep spares files a live writer holds a lock on; an output that cannot be written
# where it belongs (name too long, a directory in the way, a path over PATH_MAX) fails that input
# only; file names are escaped on stderr; `manifest merge` skips a line with bad input_b64; every
# ok line carries the output's size; SIGINT starts no queued work.
# Oracles: Python's json / os.stat / numpy, the zstd CLI, flock-style locks taken by Python.
load test_helper

# refute CMD...: fails when CMD succeeds (a bare `! CMD` does not fail a bats test)
refute() {
    if "$@"; then
        echo "unexpectedly true: $*"
        return 1
    fi
}

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# broken_model DIR PYTHON: copies the tiny model to DIR, then runs PYTHON (stdin) with st_tool's
# read/write and the model directory as argv[1]
broken_model() {
    cp -r "$MODEL" "$1"
    "$PY" - "$1" <<PYEOF
import sys, struct, json
sys.path.insert(0, "$ROOT/test/bats")
from st_tool import read, write
import numpy as np
d = sys.argv[1]
$(cat)
PYEOF
}

@test "a NaN in a bf16 weight: the model is refused at load naming the tensor (exit 1), nothing marked ok" {
    broken_model "$T/m" <<'EOF'
hdr, data = read(d + "/model.safetensors")
name = "model.visual.blocks.1.mlp.linear_fc1.weight"
a, b = hdr[name]["data_offsets"]
raw = bytearray(data)
struct.pack_into("<H", raw, a + 2 * 37, 0x7fc0)  # bf16 quiet NaN at flat index 37
assert np.isnan(np.frombuffer(bytes(raw[a:b]), "<u2").astype("<u4").__lshift__(16).view("<f4")).sum() == 1
write(d + "/model.safetensors", hdr, bytes(raw))
EOF
    for dev in cpu auto; do # auto: the weights held as the checkpoint's bytes (a run that may use CUDA)
        run "$MVEMBED" -q --device $dev --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png"
        echo "$dev: $output"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "tensor 'model.visual.blocks.1.mlp.linear_fc1.weight' holds 1 NaN/Inf values (the first at flat index 37)" ]]
        refute grep -qs '"status":"ok"' "$T/o/manifest.jsonl"
    done
}

# big_model DIR: the tiny model with a position table of 363^2 x 128 bf16 values (16.9 Mi floats
# in all: past the size from which the loader converts over threads, in pieces of 1 Mi floats)
big_model() {
    cp -r "$MODEL" "$1"
    "$PY" - "$1" "$ROOT/test/bats" <<'PYEOF'
import sys, json
sys.path.insert(0, sys.argv[2])
from st_tool import read, write
import numpy as np
d = sys.argv[1]
hdr, data = read(d + "/model.safetensors")
meta = hdr.pop("__metadata__", None)
side, H = 363, 128
rng = np.random.default_rng(7)
pos = (rng.standard_normal(side * side * H, dtype=np.float32) * 0.5).view("<u4") >> 16
blobs, out, off = [], {}, 0
for k in sorted(hdr, key=lambda k: hdr[k]["data_offsets"][0]):
    a, b = hdr[k]["data_offsets"]
    raw = data[a:b]
    if k.endswith("pos_embed.weight"):
        raw = pos.astype("<u2").tobytes()
        hdr[k]["shape"] = [side * side, H]
    out[k] = dict(hdr[k], data_offsets=[off, off + len(raw)])
    off += len(raw)
    blobs.append(raw)
if meta is not None:
    out["__metadata__"] = meta
write(d + "/model.safetensors", out, b"".join(blobs))
c = json.load(open(d + "/config.json"))
c["vision_config"]["num_position_embeddings"] = side * side
json.dump(c, open(d + "/config.json", "w"))
PYEOF
}

# same_result A B: the runs into $T/oA and $T/oB, whose -v fingerprints are in $T/fpA and $T/fpB,
# made one fingerprint and the same output bytes
same_result() {
    cat "$T/fp$1" "$T/fp$2"
    [ -s "$T/fp$1" ]
    cmp "$T/fp$1" "$T/fp$2"
    local o
    o=$(find "$T/o$1" -name '*.npy.zst')
    [ -n "$o" ]
    cmp "$o" "$T/o$2/${o#"$T/o$1/"}"
}

@test "a model past 16 Mi floats loads over threads: the same fingerprint and bytes on 1 and 2 threads" {
    big_model "$T/m"
    for n in 1 2; do
        OMP_NUM_THREADS=$n run "$MVEMBED" -v --no-progress --device cpu --model "$T/m" --out "$T/o$n" "$IMG/png_rgb_320x256.png"
        [ "$status" -eq 0 ]
        echo "$output" | grep -o 'fingerprint [0-9a-f]*' >"$T/fp$n"
    done
    same_result 1 2
}

@test "weights held as the checkpoint's bytes, then made f32 for the CPU: the same fingerprint and bytes" {
    # --device auto loads the checkpoint's bytes (a run that may use CUDA) and converts them when
    # the CPU runs after all (here, without a GPU); --device cpu converts at load
    big_model "$T/m"
    for dev in cpu auto; do
        run "$MVEMBED" -v --no-progress --device $dev --model "$T/m" --out "$T/o-$dev" "$IMG/png_rgb_320x256.png"
        [ "$status" -eq 0 ]
        echo "$output" | grep -o 'fingerprint [0-9a-f]*' >"$T/fp-$dev"
    done
    same_result -cpu -auto
}

@test "NaNs in three pieces of a large tensor: counted together, the first tensor in order named" {
    big_model "$T/m"
    "$PY" - "$T/m" "$ROOT/test/bats" >"$T/want" <<'PYEOF'
import sys, struct
sys.path.insert(0, sys.argv[2])
from st_tool import read, write
import numpy as np
d = sys.argv[1]
hdr, data = read(d + "/model.safetensors")
raw = bytearray(data)
for name, idx in (("model.visual.pos_embed.weight", (5, 3000001, 16000000)),
                  ("model.visual.merger.linear_fc2.bias", (1,))):
    a, b = hdr[name]["data_offsets"]
    for i in idx:
        struct.pack_into("<H", raw, a + 2 * i, 0x7fc0)  # bf16 quiet NaN
write(d + "/model.safetensors", hdr, bytes(raw))
a, b = hdr["model.visual.pos_embed.weight"]["data_offsets"]
f = (np.frombuffer(bytes(raw[a:b]), "<u2").astype("<u4") << 16).view("<f4")
bad = ~np.isfinite(f)
print(f"tensor 'model.visual.pos_embed.weight' holds {bad.sum()} NaN/Inf values (the first at flat index {np.argmax(bad)})")
PYEOF
    cat "$T/want"
    for dev in cpu auto; do
        run "$MVEMBED" -q --device $dev --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png"
        echo "$dev: $output"
        [ "$status" -eq 1 ]
        [[ "$output" == *"$(cat "$T/want")"* ]]
        refute grep -qs '"status":"ok"' "$T/o/manifest.jsonl"
    done
}

@test "an Inf in an f32 weight: refused at load naming the tensor (exit 1)" {
    broken_model "$T/m" <<'EOF'
hdr, data = read(d + "/model.safetensors")
name = "model.visual.merger.linear_fc2.bias"
meta = {k: v for k, v in hdr.items() if k != "__metadata__"}
out, off = {}, 0
blobs = []
for k, v in sorted(meta.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    a, b = v["data_offsets"]
    blob = data[a:b]
    if k == name:  # this one tensor becomes f32, with +Inf at index 5
        f = (np.frombuffer(blob, "<u2").astype("<u4") << 16).view("<f4").copy()
        f[5] = np.inf
        blob = f.tobytes()
        v = dict(v, dtype="F32")
    out[k] = dict(v, data_offsets=[off, off + len(blob)])
    off += len(blob)
    blobs.append(blob)
if "__metadata__" in hdr:
    out["__metadata__"] = hdr["__metadata__"]
write(d + "/model.safetensors", out, b"".join(blobs))
EOF
    for dev in cpu auto; do
        run "$MVEMBED" -q --device $dev --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png"
        echo "$dev: $output"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "tensor 'model.visual.merger.linear_fc2.bias' holds 1 NaN/Inf values (the first at flat index 5)" ]]
    done
}

@test "image_std 1e-45 in preprocessor_config.json: refused at load naming the field (exit 1)" {
    cp -r "$MODEL" "$T/m"
    "$PY" - "$T/m/preprocessor_config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["image_std"] = [0.5, 1e-45, 0.5]
json.dump(c, open(sys.argv[1], "w"))
EOF
    run "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" =~ preprocessor_config.json:\ \"image_std\"\[1\]\ =\ .*\ must\ be\ a\ finite\ number ]]
    refute grep -qs '"status":"ok"' "$T/o/manifest.jsonl"
    for bad in '"image_mean": [0.5, 1e300, 0.5]' '"rescale_factor": 0' '"image_std": 0'; do
        cp "$MODEL/preprocessor_config.json" "$T/m/"
        "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(json.loads("{"+sys.argv[2]+"}")); json.dump(c,open(sys.argv[1],"w"))' \
            "$T/m/preprocessor_config.json" "$bad"
        run "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png"
        echo "$bad: $output"
        [ "$status" -eq 1 ]
        [[ "$output" =~ preprocessor_config.json:\ \"(image_mean|image_std|rescale_factor)\" ]]
    done
}

@test "an embedding that overflows to Inf/NaN is not marked ok: the input fails (exit 2), no file" {
    # finite weights that overflow: bf16's largest value in the merger's last layer
    broken_model "$T/m" <<'EOF'
hdr, data = read(d + "/model.safetensors")
raw = bytearray(data)
a, b = hdr["model.visual.merger.linear_fc2.weight"]["data_offsets"]
raw[a:b] = struct.pack("<H", 0x7f7f) * ((b - a) // 2)  # 3.39e38 everywhere
write(d + "/model.safetensors", hdr, bytes(raw))
EOF
    run "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/o" "$IMG/png_rgb_320x256.png" "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "png_rgb_320x256.png.npy.zst: not written: the embedding holds "[0-9]+" NaN/Inf values" ]]
    "$PY" - "$T/o/manifest.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2 and all(r["status"] == "error" and "NaN/Inf" in r["error"] for r in rows), rows
EOF
    [ -z "$(find "$T/o" -name '*.npy.zst')" ]
}

@test "the sweep keeps a temp file whose writer (another pid namespace or machine) holds its lock" {
    mkdir -p "$T/o"
    sh -c 'exit 0' & dead=$!
    wait "$dead"
    sleep 1000 & live=$!
    # a live writer elsewhere: its pid means nothing here (dead here), it holds the lock
    locked="$T/o/.tmp-$dead-livewr"
    echo partial >"$locked"
    hold_lock "$locked"
    # abandoned: nobody holds its lock, last written two days ago (its pid number runs here)
    stale="$T/o/.tmp-$live-abandn"
    echo partial >"$stale"
    touch -d '2 days ago' "$stale"
    cd "$IMG" # a relative file argument: its output lands in OUT itself, where the temp files are
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" png_rgb_320x256.png
    kill "$holder" "$live"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -e "$locked" ]
    [ "$(cat "$locked")" = partial ]
    [ ! -e "$stale" ]
    # once its writer is gone, the next run's sweep removes it
    wait "$holder" || true
    rm "$T/o/png_rgb_320x256.png.npy.zst"
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" png_rgb_320x256.png
    [ "$status" -eq 0 ]
    [ ! -e "$locked" ]
}

@test "an output name too long, a directory in the way, a path over PATH_MAX: those inputs fail (exit 2), the batch goes on, every rerun too" {
    mkdir -p "$T/in"
    long=$(printf 'n%.0s' $(seq 244)).png # 248 bytes; with .npy.zst 256, over NAME_MAX
    cp "$IMG/png_rgb_320x256.png" "$T/in/$long"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    cp "$IMG/webp_lossy_192x128.webp" "$T/in/ok.webp"
    deep=$T/in
    while [ ${#deep} -lt 3980 ]; do deep=$deep/dddddddddddddddddddddddddddddddddddddddddddddddd; done
    mkdir -p "$deep"
    cp "$IMG/png_rgba_160x120.png" "$deep/x.png"
    out=$T/$(printf 'o%.0s' $(seq 250))/out # a long OUT: OUT + the deep name pass 4096 bytes
    mkdir -p "$out/a.png.npy.zst"             # a directory where an output belongs
    for round in 1 2; do
        run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$out" "$T/in"
        echo "round $round: $output"
        [ "$status" -eq 2 ]
        [[ "$output" =~ "$long.npy.zst is 256 bytes, over the 255-byte limit on a file name" ]] # before its forward
        [[ "$output" =~ "/a.png.npy.zst: rename from ".*": Is a directory" ]]
        [[ "$output" =~ "/ddd".*"File name too long" ]] # the deep one (its long name is cut)
    done
    "$PY" - "$out" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "manifest.jsonl"))]
ok = [r for r in rows if r["status"] == "ok"]
assert [r["output"] for r in ok] == ["ok.webp.npy.zst"], ok  # done once, skipped on the rerun
err = [r for r in rows if r["status"] == "error"]
assert len(err) == 6, rows
for r in err:
    want = ("Is a directory" if r["input"].endswith("/a.png") else "limit on a file name" if "nnnn" in r["input"]
            else "File name too long")
    assert want in r["error"], r
EOF
    [ -z "$(find "$out" -name '.tmp-*')" ]
}

@test "control characters in file names are escaped on stderr: no forged line, no terminal escape" {
    mkdir -p "$T/in"
    bad=$'bad\nmvembed: x: ok\e[31m.jpg'
    good=$'good\e]0;title\a\\.png'
    echo garbage >"$T/in/$bad"
    cp "$IMG/png_gray_128x72.png" "$T/in/$good"
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    printf '%s\n' "$output" | cat -A
    [ "$status" -eq 2 ]
    refute grep -q '^mvembed: x: ok' <<<"$output"
    refute grep -q $'\e' <<<"$output"
    refute grep -q $'\a' <<<"$output"
    [[ "$output" =~ 'bad\nmvembed: x: ok\x1b[31m.jpg: not an image or video' ]]
    [[ "$output" =~ 'good\x1b]0;title\x07\\.png -> good\x1b]0;title\x07\\.png.npy.zst' ]]
    # a fatal message too: an OUT whose name holds a newline and is a file
    printf x >"$T/f"$'\n''mvembed: forged'
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/f"$'\n''mvembed: forged/sub' "$T/in/$good"
    echo "$output"
    [ "$status" -eq 1 ]
    refute grep -q '^mvembed: forged' <<<"$output"
    [[ "$output" =~ 'f\nmvembed: forged' ]]
}

@test "manifest merge skips a line with malformed input_b64 as unreadable (not 'out of memory')" {
    mkdir -p "$T/o"
    printf '%s\n' '{"input":"a.jpg","status":"ok","output":"a.jpg.npy.zst"}' \
        '{"input":"\ufffd.jpg","input_b64":"!!not base64!!","status":"ok"}' >"$T/o/manifest-00000-of-00002.jsonl"
    printf '%s\n' '{"input":"b.jpg","status":"error","error":"x"}' \
        '{"input":"\ufffd","input_b64":"ab!c","status":"ok"}' >"$T/o/manifest-00001-of-00002.jsonl"
    run "$MVEMBED" manifest merge "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "2 lines (1 ok, 1 not ok), unreadable lines skipped" ]]
    "$PY" -c 'import json,sys; r=[json.loads(l)["input"] for l in open(sys.argv[1])]; assert r==["a.jpg","b.jpg"], r' \
        "$T/o/manifest.jsonl"
}

@test "every ok manifest line has bytes: the output file's size" {
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$IMG" "$ROOT/fixtures/media/videos/h264_3frames.mp4"
    [ "$status" -eq 0 ]
    "$PY" - "$T/o" <<'EOF'
import json, os, sys
n = 0
for l in open(os.path.join(sys.argv[1], "manifest.jsonl")):
    r = json.loads(l)
    assert r["status"] == "ok", r
    assert r["bytes"] == os.stat(os.path.join(sys.argv[1], r["output"])).st_size, r
    n += 1
assert n == 22, n
EOF
}

# heavy_model DIR: a random tower heavy enough (hidden 384, depth 4) that the tower, not decoding,
# is the slow stage: queues before it fill up
heavy_model() {
    mkdir -p "$1"
    cp "$MODEL/preprocessor_config.json" "$MODEL/video_preprocessor_config.json" "$1/"
    "$PY" - "$1" "$MODEL/config.json" <<'EOF'
import json, sys
import numpy as np
d = sys.argv[1]
c = json.load(open(sys.argv[2]))
v = c["vision_config"]
v.update(depth=4, hidden_size=384, num_heads=6, intermediate_size=1536, out_hidden_size=64)
json.dump(c, open(d + "/config.json", "w"))
H, I, L, P = 384, 1536, 64, v["num_position_embeddings"]
rng = np.random.default_rng(0)
shapes = {"patch_embed.proj.weight": (H, 3, 2, 16, 16), "patch_embed.proj.bias": (H,),
          "pos_embed.weight": (P, H), "merger.norm.weight": (H,), "merger.norm.bias": (H,),
          "merger.linear_fc1.weight": (4 * H, 4 * H), "merger.linear_fc1.bias": (4 * H,),
          "merger.linear_fc2.weight": (L, 4 * H), "merger.linear_fc2.bias": (L,)}
for b in range(4):
    for k, s in {"norm1.weight": (H,), "norm1.bias": (H,), "norm2.weight": (H,), "norm2.bias": (H,),
                 "attn.qkv.weight": (3 * H, H), "attn.qkv.bias": (3 * H,), "attn.proj.weight": (H, H),
                 "attn.proj.bias": (H,), "mlp.linear_fc1.weight": (I, H), "mlp.linear_fc1.bias": (I,),
                 "mlp.linear_fc2.weight": (H, I), "mlp.linear_fc2.bias": (H,)}.items():
        shapes["blocks.%d.%s" % (b, k)] = s
hdr, blobs, off = {}, [], 0
for k, s in sorted(shapes.items()):
    a = (np.ones(s) if k.endswith("norm1.weight") or k.endswith("norm2.weight") or k == "merger.norm.weight"
         else rng.normal(0, 0.02, s)).astype("<f4")
    raw = (a.view("<u4") >> 16).astype("<u2").tobytes()  # bf16 (truncated)
    hdr["model.visual." + k] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + len(raw)]}
    off += len(raw)
    blobs.append(raw)
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(d + "/model.safetensors", "wb").write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
EOF
}

@test "SIGINT starts no queued work: at most the in-flight inputs finish after it; resume completes the rest identically" {
    heavy_model "$T/m"
    mkdir -p "$T/in"
    for d in a b; do cp -r "$IMG" "$T/in/$d"; done
    N=$(find "$T/in" -type f | wc -l)
    args=(-q -j 1 --device cpu --model "$T/m")
    "$MVEMBED" "${args[@]}" --out "$T/ref" "$T/in"
    "$MVEMBED" "${args[@]}" --out "$T/o" "$T/in" 2>"$T/stderr" & pid=$!
    for _ in $(seq 3000); do
        [ -s "$T/o/manifest.jsonl" ] && break
        sleep 0.02
    done
    at_signal=$(wc -l <"$T/o/manifest.jsonl")
    kill -INT "$pid"
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -eq 130 ]
    ok=$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")
    # -j 1: queues hold 1*2+4 = 6 each. What can still finish after the signal is what was past
    # the tower (the writers' queue, 6, plus the 2 writers' own) and the forward then running, plus
    # one more forward started between reading the count and the signal: 10. The jobs and ready
    # queues (6 + 6, plus the input being decoded) are not started.
    echo "ok lines: $at_signal at the signal, $ok after; $N inputs"
    [ "$ok" -le $((at_signal + 10)) ]
    [ "$ok" -lt "$N" ]
    # every output on disk is one the manifest lists as ok; no temp file
    [ "$(find "$T/o" -name '*.npy.zst' | wc -l)" -eq "$ok" ]
    [ -z "$(find "$T/o" -name '.tmp-*')" ]
    run "$MVEMBED" "${args[@]}" --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    "$PY" - "$T/o" "$T/ref" "$N" <<'EOF'
import filecmp, json, os, sys
out, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(d):
    rows = {}
    for l in open(os.path.join(d, "manifest.jsonl")):
        r = json.loads(l)
        for k in ("seconds", "run", "seq", "time"): # per run and per line
            r.pop(k)
        assert r["input"] not in rows, "listed twice: " + r["input"]
        rows[r["input"]] = r
    return rows
a, b = load(out), load(ref)
assert len(a) == n and a == b, "manifest differs from the uninterrupted run"
for r in a.values():
    assert filecmp.cmp(os.path.join(out, r["output"]), os.path.join(ref, r["output"]), shallow=False), r
EOF
}

@test "--out-dtype f16: an embedding past f16's range fails its input instead of an ok line over Inf" {
    broken_model "$T/m" <<'EOF2'
hdr, data = read(d + "/model.safetensors")
name = "model.visual.merger.linear_fc2.bias"
a, b = hdr[name]["data_offsets"]
raw = bytearray(data)
struct.pack_into("<H", raw, a + 2 * 5, 0x47c3)  # bf16 99840: finite in f32, past f16's 65504
write(d + "/model.safetensors", hdr, bytes(raw))
EOF2
    run "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/f32" "$IMG/png_rgb_320x256.png"
    [ "$status" -eq 0 ]
    run "$PY" -c '
import io, subprocess, sys
import numpy as np
a = np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", sys.argv[1]], check=True, stdout=subprocess.PIPE).stdout))
assert a.dtype == np.float32 and np.isfinite(a).all() and np.abs(a).max() > 65504, (a.dtype, np.abs(a).max())
print("ok")' "$(find "$T/f32" -name "*.npy.zst")"
    echo "$output"
    [ "$output" = ok ] # finite in f32, past f16's largest value
    run "$MVEMBED" -q --device cpu --model "$T/m" --out "$T/f16" --out-dtype f16 "$IMG/png_rgb_320x256.png" \
        "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "values are past f16's range (+-65504) and would be stored as Inf" ]]
    refute grep -qs '"status":"ok"' "$T/f16/manifest.jsonl"
    [ -z "$(find "$T/f16" -name '*.npy.zst' -o -name '.tmp-*')" ]
}
