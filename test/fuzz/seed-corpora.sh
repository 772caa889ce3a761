#!/usr/bin/env bash
# seed-corpora.sh DIR - writes the starting corpora of the libFuzzer harnesses into DIR/<harness>/
# from the fixtures (and a few files generated here). Existing files are kept, so a corpus that
# grew during earlier runs stays. Needs /usr/bin/python3 with numpy (the .npy seeds).
set -eu
cd "$(dirname "$0")/../.."
D=${1:?usage: seed-corpora.sh DIR}
PY=/usr/bin/python3
mkdir -p "$D"/{safetensors,config,image,video,manifest,npy,tar}

# images: every fixture image, the parity images, the crafted GIF/BMP/TIFF files (decoded and
# refused ones) and the bad ones
for f in fixtures/media/images/* fixtures/parity/*.png fixtures/formats/* fixtures/unsupported/*.* \
    fixtures/bad/*.jpg fixtures/bad/*.png fixtures/bad/*.gif fixtures/bad/*.bmp fixtures/bad/*.tif; do
    [ -s "$f" ] && cp -n "$f" "$D/image/"
done
# videos: every fixture video and the bad ones
for f in fixtures/media/videos/* fixtures/bad/*.mp4; do
    [ -s "$f" ] && cp -n "$f" "$D/video/"
done

# model directory JSON: parts separated by NUL (config, preprocessor, video preprocessor, index)
M=fixtures/model-tiny
{ cat $M/config.json; printf '\0'; cat $M/preprocessor_config.json; printf '\0'
  cat $M/video_preprocessor_config.json; } > "$D/config/fixture"
cat $M/config.json > "$D/config/config-only"
{ cat $M/config.json; printf '\0\0\0'
  printf '{"metadata": {}, "weight_map": {"model.visual.patch_embed.proj.weight": "model.safetensors", "model.language_model.x": "other.safetensors"}}'
} > "$D/config/with-index"
$PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["vision_config"]))' \
    $M/config.json > "$D/config/standalone"

# safetensors: miniature models matching fuzz_safetensors.c's MINI_CONFIG, and broken variants
$PY - "$D/safetensors" <<'PYEOF'
import json, struct, sys
out = sys.argv[1]
H, I, L, MH, P = 8, 8, 8, 32, 2
shapes = {"patch_embed.proj.weight": [H, 3, 1, P, P], "patch_embed.proj.bias": [H],
          "pos_embed.weight": [4, H]}
for n, s in [("norm1.weight", [H]), ("norm1.bias", [H]), ("norm2.weight", [H]), ("norm2.bias", [H]),
             ("attn.qkv.weight", [3 * H, H]), ("attn.qkv.bias", [3 * H]), ("attn.proj.weight", [H, H]),
             ("attn.proj.bias", [H]), ("mlp.linear_fc1.weight", [I, H]), ("mlp.linear_fc1.bias", [I]),
             ("mlp.linear_fc2.weight", [H, I]), ("mlp.linear_fc2.bias", [H])]:
    shapes["blocks.0." + n] = s
shapes.update({"merger.norm.weight": [H], "merger.norm.bias": [H],
               "merger.linear_fc1.weight": [MH, MH], "merger.linear_fc1.bias": [MH],
               "merger.linear_fc2.weight": [L, MH], "merger.linear_fc2.bias": [L]})
def build(dtype, size, prefix="model.visual.", mutate=None, meta=True):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = {"format": "pt"}
    for i, (k, s) in enumerate(shapes.items()):
        n = 1
        for d in s:
            n *= d
        b = bytes((i * 7 + j) % 251 for j in range(n * size))
        hdr[prefix + k] = {"dtype": dtype, "shape": s, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    if mutate:
        mutate(hdr)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data
def w(name, b):
    open(f"{out}/{name}", "wb").write(b)
w("mini-bf16", build("BF16", 2))
w("mini-f16-visual", build("F16", 2, "visual."))
w("mini-f32-noprefix", build("F32", 4, "", meta=False))
def overlap(h):
    h["model.visual.merger.norm.bias"]["data_offsets"] = list(h["model.visual.merger.norm.weight"]["data_offsets"])
w("mini-overlap", build("BF16", 2, mutate=overlap))
def past_end(h):
    o = h["model.visual.merger.linear_fc2.bias"]["data_offsets"]
    h["model.visual.merger.linear_fc2.bias"]["data_offsets"] = [o[0] + 4096, o[1] + 4096]
w("mini-past-end", build("BF16", 2, mutate=past_end))
def i16(h):
    h["model.visual.merger.norm.bias"]["dtype"] = "I16"
w("mini-i16", build("BF16", 2, mutate=i16))
w("mini-truncated", build("BF16", 2)[:3000])
w("header-len-huge", struct.pack("<Q", 1 << 62) + b"{}")
PYEOF

# manifests: ok and error lines, a non-UTF-8 path with *_b64, a torn last line
{
    printf '%s\n' '{"input":"a/b.jpg","output":"b.jpg.npy.zst","status":"ok","kind":"image","width":320,"height":240,"resized":[320,256],"grid_thw":[1,16,20],"shape":[80,64],"dtype":"f32","model":"f3f0b23266936d11","seconds":0.2}'
    printf '%s\n' '{"input":"bad.jpg","status":"error","error":"bad.jpg: corrupt JPEG data: Bogus Huffman table definition","kind":"image","model":"f3f0b23266936d11","seconds":4e-05}'
    printf '%s\n' '{"input":"caf\ufffd.png","input_b64":"Y2Fm6S5wbmc=","output":"caf\ufffd.png.npy.zst","output_b64":"Y2Fm6S5wbmcubnB5LnpzdA==","status":"ok","kind":"image"}'
    printf '%s\n' '{"input":"v.mp4","output":"v.mp4.npy.zst","status":"ok","kind":"video","frame_indices":[0,5,10,15],"timestamps":[0,0.25,0.5,0.75],"fps":20,"duration":2.4,"rotation":90}'
    printf '%s' '{"input":"torn.jpg","output":"torn.jp'
} > "$D/manifest/mixed"
printf '%s\n' '{"input":"x.jpg","output":"x.jpg.npy.zst","status":"ok"}' '{"input":"x.jpg","status":"error","error":"x"}' > "$D/manifest/later-error"

# npy: one array per dtype, scalars, empty and 8-d shapes
$PY - "$D/npy" <<'PYEOF'
import numpy as np, sys
out = sys.argv[1]
r = np.random.RandomState(1)
np.save(f"{out}/f4.npy", r.randn(6, 64).astype("<f4"))
np.save(f"{out}/f8.npy", r.randn(3).astype("<f8"))
np.save(f"{out}/f2.npy", r.randn(2, 3, 4).astype("<f2"))
np.save(f"{out}/i8.npy", np.arange(5, dtype="<i8"))
np.save(f"{out}/i4.npy", np.arange(12, dtype="<i4").reshape(3, 4))
np.save(f"{out}/u1.npy", np.arange(10, dtype="u1"))
np.save(f"{out}/scalar.npy", np.float32(3.5))
np.save(f"{out}/empty.npy", np.zeros((0, 7), "<f4"))
np.save(f"{out}/8d.npy", np.zeros((1, 2, 1, 2, 1, 2, 1, 2), "<f4"))
PYEOF

# tars: WebDataset samples with metadata before and after their images, a .json that is not
# JSON, a .txt with a NUL and bytes that are not UTF-8, two images of one key, a gzip'd one
$PY - "$D/tar" fixtures/media/images/png_gray_128x72.png <<'PYEOF'
import gzip, io, sys, tarfile
out, png = sys.argv[1], open(sys.argv[2], "rb").read()
def tar(name, members, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for n, data in members:
            ti = tarfile.TarInfo(n)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    open(f"{out}/{name}", "wb").write(buf.getvalue())
tar("meta", [("a.cls", b" 3\n"), ("a.png", png), ("a.json", b'{"caption": "x", "n": [1, 2.5]}'),
             ("a.txt", b"a\x00b\xff"), ("b.json", b"{bad"), ("b.png", png), ("c.png", png),
             ("c.1.png", png), ("c.txt", b"two"), ("lonely.txt", b"none")])
tar("meta.gz", [("d/k.json", b"[[[]]]"), ("d/k.png", png), ("d/k.cls", b"dog")], "w:gz")
PYEOF
