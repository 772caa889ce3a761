#!/usr/bin/env bats
# The tower's input is the resized uint8 frames (mv_backend.forward_u8): the backend normalises
# and patchifies them itself. On the CPU backend, for every fixture image and video, the
# pixel_values it made (--dump-stages) must be bit for bit what numpy makes of the dumped input
# frames with HF's formula (decoded by the ffmpeg CLI), what HF made (fixtures/ref sha256), and
# the f32 pixel_values path (--pixels) must give the same embedding bytes.
load test_helper

setup_file() {
    # one CPU run over every fixture image and video, one input per forward (--dump-stages)
    export RUN="$BATS_FILE_TMPDIR/all"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$RUN/out" --dump-stages "$RUN/dump" \
        "$ROOT/fixtures/media" >"$RUN.log" 2>&1 || true
}

@test "pixel_values from the uint8 frames equal numpy's HF patchify of the dumped frames, every fixture" {
    run "$PY" - "$RUN/out/manifest.jsonl" "$RUN/dump" "$MODEL" <<'PYEOF'
import json, os, subprocess, sys
import numpy as np
man, dump, model = sys.argv[1:4]

def norm_consts(name):
    cfg = json.load(open(os.path.join(model, name)))
    resc = cfg.get("rescale_factor", 1 / 255)
    # HF's fused rescale + normalize: mean / rescale, std / rescale in Python floats, then f32
    mean = np.array([m * (1.0 / resc) for m in cfg["image_mean"]], dtype=np.float32)
    std = np.array([s * (1.0 / resc) for s in cfg["image_std"]], dtype=np.float32)
    return mean, std, cfg["patch_size"], cfg["merge_size"], cfg["temporal_patch_size"]

def frame(path, w, h):
    raw = subprocess.run(["ffmpeg", "-loglevel", "error", "-i", path, "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, dtype=np.uint8).reshape(h, w, 3)

n_img = n_vid = 0
for line in open(man):
    r = json.loads(line)
    assert r["status"] == "ok", r
    rel = r["output"][: -len(".npy.zst")]
    d = os.path.join(dump, rel)
    w, h = r["resized"]
    video = r["kind"] == "video"
    mean, std, P, M, T = norm_consts("video_preprocessor_config.json" if video else "preprocessor_config.json")
    if video:
        names = ["input_%03d.png" % i for i in range(len(r["frame_indices"]))]
        n_vid += 1
    else:
        names = ["input.png"]
        n_img += 1
    x = np.stack([frame(os.path.join(d, n), w, h) for n in names])        # [n, h, w, 3] uint8
    x = (x.astype(np.float32) - mean) / std                              # f32, as torch does
    x = x.transpose(0, 3, 1, 2)                                          # [n, 3, h, w]
    if x.shape[0] % T:                                                   # repeat the last frame
        x = np.concatenate([x] + [x[-1:]] * (T - x.shape[0] % T))
    gt, gh, gw = x.shape[0] // T, h // P, w // P
    assert [gt, gh, gw] == r["grid_thw"], (rel, r["grid_thw"], (gt, gh, gw))
    x = x.reshape(gt, T, 3, gh // M, M, P, gw // M, M, P)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gt * gh * gw, 3 * T * P * P)
    ours = np.load(os.path.join(d, "pixel_values.npy"))
    assert ours.dtype == np.float32 and ours.shape == x.shape, (rel, ours.shape, x.shape)
    assert ours.tobytes() == np.ascontiguousarray(x, dtype="<f4").tobytes(), rel
print("ok", n_img, "images", n_vid, "videos")
PYEOF
    echo "$output"
    [ "${lines[-1]}" = "ok 21 images 13 videos" ]
}

@test "pixel_values from the uint8 frames are HF's own (sha256) for every fixture with a reference" {
    n=0
    for d in "$REF"/images/* "$REF"/videos/*; do
        name=$(basename "$d")
        [ "$name" = png_gray16_96x64.png ] && continue # documented divergence (30-images.bats)
        kind=$(basename "$(dirname "$d")")
        f=$(cd "$ROOT/fixtures/media/$kind" && ls "$name" "$name".* 2>/dev/null | head -1)
        ours=$(npy_sha256 "$RUN/dump/$kind/$f/pixel_values.npy")
        echo "$kind/$f ours=$ours hf=$(cat "$d/pixel_values.sha256")"
        [ "$ours" = "$(cat "$d/pixel_values.sha256")" ]
        n=$((n + 1))
    done
    [ "$n" -ge 32 ]
}

@test "the f32 pixel_values path (--pixels) gives the uint8 path's embeddings byte for byte" {
    n=0
    while IFS=$'\t' read -r rel grid; do
        p="$BATS_TEST_TMPDIR/in$n.npy"
        cp "$RUN/dump/$rel/pixel_values.npy" "$p"
        mvembed -q --device cpu --model "$MODEL" --pixels "$p" --grid "$grid" --out "$BATS_TEST_TMPDIR/o"
        zstd -q -d -c "$BATS_TEST_TMPDIR/o/in$n.npy.zst" >"$BATS_TEST_TMPDIR/f32.npy"
        zstd -q -d -c "$RUN/out/$rel.npy.zst" >"$BATS_TEST_TMPDIR/u8.npy"
        cmp "$BATS_TEST_TMPDIR/f32.npy" "$BATS_TEST_TMPDIR/u8.npy"
        n=$((n + 1))
    done < <("$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["output"][:-len(".npy.zst")], ",".join(map(str, r["grid_thw"])), sep="\t")' "$RUN/out/manifest.jsonl")
    echo "$n inputs"
    [ "$n" -eq 34 ]
}

@test "images and videos packed into shared forwards: every embedding stays that of its own forward" {
    run env MVEMBED_TEST_FILL_WINDOW=1 "$MVEMBED" -v --device cpu --model "$MODEL" --batch-tokens 4096 \
        --out "$BATS_TEST_TMPDIR/p" "$ROOT/fixtures/media"
    [ "$status" -eq 0 ]
    n_fwd=$(forwards "$output")
    echo "34 inputs in $n_fwd forwards"
    [ "$n_fwd" -ge 1 ] && [ "$n_fwd" -lt 34 ]
    # a frame staged at the wrong offset would change an embedding entirely; batching itself only
    # moves the last bits (other GEMM row blocks)
    run "$PY" - "$BATS_TEST_TMPDIR/p" "$RUN/out" <<'PYEOF'
import io, json, os, subprocess, sys
import numpy as np
packed, solo = sys.argv[1:3]
def load(p):
    return np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", p], check=True,
                                             capture_output=True).stdout))
n = 0
for l in open(os.path.join(packed, "manifest.jsonl")):
    r = json.loads(l)
    a, b = load(os.path.join(packed, r["output"])), load(os.path.join(solo, r["output"]))
    rel = float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))
    assert a.shape == b.shape and rel < 1e-5, (r["output"], rel)
    n += 1
print("ok", n)
PYEOF
    echo "$output"
    [ "${lines[-1]}" = "ok 34" ]
}
