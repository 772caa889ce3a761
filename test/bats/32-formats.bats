#!/usr/bin/env bats
# GIF, BMP and TIFF against PIL, computed here by python3-pil: every crafted file of
# fixtures/formats (scripts/make_fixture_formats.py) decodes to the bytes of HF's load_image
# (Image.open, ImageOps.exif_transpose, convert("RGB")) — compared on --dump-stages' decoded.png —
# with the two rules the man page states: 16-bit grey is scaled (v >> 8) where PIL clips to 255,
# and a TIFF's orientation is applied once, as Pillow 10.1 and later do (6.2 to 10.0 apply it
# twice). Every file of fixtures/unsupported fails with the message its README gives, and PIL 9.4
# reads it or refuses it as the README says. Directories take .gif .bmp .tif .tiff files.
load test_helper

FMT="$ROOT/fixtures/formats"
UNS="$ROOT/fixtures/unsupported"

setup_file() {
    # one CPU run over every crafted file, with the stages dumped
    export RUN="$BATS_FILE_TMPDIR/all"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$RUN/out" --dump-stages "$RUN/dump" \
        "$ROOT/fixtures/formats" "$ROOT/fixtures/unsupported" >"$RUN.log" 2>&1 || true
}

@test "every crafted GIF, BMP and TIFF decodes to PIL's pixels, byte for byte" {
    run "$PY" - "$FMT" "$RUN/out/manifest.jsonl" "$RUN/dump" <<'PYEOF'
import json, os, struct, sys
import numpy as np
import PIL
from PIL import Image, ImageOps
fmt, man, dump = sys.argv[1:4]
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
             4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
             6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}

def tiff_orientation_patched(path):
    """The file with IFD0's Orientation entry set to 1, and the value it had (PIL's: the first)."""
    d = bytearray(open(path, "rb").read())
    e = "<" if d[:2] == b"II" else ">"
    big = struct.unpack(e + "H", d[2:4])[0] == 43
    ifd = struct.unpack(e + "Q", d[8:16])[0] if big else struct.unpack(e + "I", d[4:8])[0]
    n = struct.unpack(e + ("Q" if big else "H"), d[ifd:ifd + (8 if big else 2)])[0]
    for i in range(n):
        at = ifd + (8 + 20 * i if big else 2 + 12 * i)
        tag, typ = struct.unpack(e + "HH", d[at:at + 4])
        if tag == 274:
            assert typ == 3, typ
            v = at + (12 if big else 8)
            o = struct.unpack(e + "H", d[v:v + 2])[0]
            d[v:v + 2] = struct.pack(e + "H", 1)
            return bytes(d), o
    return None, 1

def pil_rgb(path):
    im = Image.open(path)
    if im.format == "TIFF":
        # the orientation, applied once: PIL decodes the file with the tag at 1 and PIL's own
        # transpose turns it (Pillow >= 10.1 gives exactly this from load_image; 6.2 .. 10.0 turn
        # it twice, on load and in exif_transpose)
        patched, o = tiff_orientation_patched(path)
        if patched is not None:
            tmp = os.path.join(os.environ["BATS_TEST_TMPDIR"], "o1.tif")
            open(tmp, "wb").write(patched)
            im = Image.open(tmp)
            im.load()
            if o in TRANSPOSE:
                im = im.transpose(TRANSPOSE[o])
    else:
        im = ImageOps.exif_transpose(im)
    if im.mode in ("I;16", "I;16B"):
        # 16-bit grey: the documented rule, v >> 8 of PIL's samples (PIL's convert clips to 255)
        g = (np.asarray(im).astype(np.uint16) >> 8).astype(np.uint8)
        return np.stack([g] * 3, -1), im.size
    return np.asarray(im.convert("RGB")), im.size

rows = {}
for line in open(man):
    r = json.loads(line)
    rows[os.path.basename(r["input"])] = r
n, kinds = 0, {}
for name in sorted(os.listdir(fmt)):
    r = rows.get(name)
    assert r and r["status"] == "ok", (name, r)
    want, size = pil_rgb(os.path.join(fmt, name))
    got = np.asarray(Image.open(os.path.join(dump, name, "decoded.png")))
    assert got.shape == want.shape, (name, got.shape, want.shape)
    bad = int((got != want).any(-1).sum())
    assert bad == 0, f"{name}: {bad} pixels differ from PIL"
    assert [r["width"], r["height"]] == list(size), (name, r["width"], r["height"], size)
    kinds[name.split("_")[0][:3]] = kinds.get(name.split("_")[0][:3], 0) + 1
    n += 1
print("ok", n, sorted(kinds.items()), "Pillow", PIL.__version__)
PYEOF
    echo "$output"
    [[ "${lines[-1]}" == "ok "* ]]
    n=$(echo "${lines[-1]}" | cut -d' ' -f2)
    [ "$n" -eq "$(ls "$FMT" | wc -l)" ] && [ "$n" -ge 80 ]
}

@test "16-bit grey TIFF follows the 16-bit PNG rule: scaled (v >> 8) where PIL clips to white" {
    run "$PY" - "$FMT" "$RUN/dump" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
fmt, dump = sys.argv[1:3]
n = 0
for name in sorted(os.listdir(fmt)):
    im = Image.open(os.path.join(fmt, name))
    if im.mode not in ("I;16", "I;16B"):
        continue
    v = np.asarray(im).astype(np.uint16)
    clipped = np.asarray(im.convert("RGB"))[..., 0]
    assert (clipped == np.minimum(v, 255)).all(), name         # what PIL's convert("RGB") gives
    ours = np.asarray(Image.open(os.path.join(dump, name, "decoded.png")))[..., 0]
    assert (ours == v >> 8).all() and len(np.unique(ours)) > 50, name
    n += 1
print("ok", n)
PYEOF
    echo "$output"
    [ "${lines[-1]}" = "ok 2" ]
    grep -q 'TIFF.*16-bit grey' "$ROOT/man/mvembed.1"
}

@test "the refused variants fail with the messages fixtures/unsupported/README.md gives, PIL 9.4 as it says" {
    run "$PY" - "$UNS" "$RUN/out/manifest.jsonl" <<'PYEOF'
import json, os, re, sys
from PIL import Image
uns, man = sys.argv[1:3]
rows = {os.path.basename(json.loads(l)["input"]): json.loads(l) for l in open(man)}
table = {}
for line in open(os.path.join(uns, "README.md")):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 5 and cells[0].startswith("`"):
        table[cells[0].strip("`")] = (cells[2], cells[4].strip("`"))
files = sorted(n for n in os.listdir(uns) if n != "README.md")
assert sorted(table) == files, (sorted(table), files)
for name in files:
    pil_verdict, msg = table[name]
    r = rows[name]
    assert r["status"] == "error" and r["error"] == os.path.join(uns, name) + ": " + msg, (name, r)
    try:
        Image.open(os.path.join(uns, name)).convert("RGB")
        verdict = "decodes"
    except Exception as e:
        verdict = "refuses"
    assert pil_verdict.startswith(verdict), (name, verdict, pil_verdict)
print("ok", len(files))
PYEOF
    echo "$output"
    [[ "${lines[-1]}" == "ok "* ]]
    [ "$(echo "${lines[-1]}" | cut -d' ' -f2)" -ge 15 ]
}

@test "directories take .gif .bmp .tif .tiff files, any case; the type comes from the bytes" {
    mkdir -p "$BATS_TEST_TMPDIR/in"
    cp "$FMT/gif_interlaced_99x45.gif" "$BATS_TEST_TMPDIR/in/a.GIF"
    cp "$FMT/bmp_rle8_79x43.bmp" "$BATS_TEST_TMPDIR/in/b.bmp"
    cp "$FMT/tif_rgb_lzw_45x29.tif" "$BATS_TEST_TMPDIR/in/c.Tif"
    cp "$FMT/tif_rgb_tiles_45x29.tif" "$BATS_TEST_TMPDIR/in/d.tiff"
    cp "$FMT/tif_rgb_tiles_45x29.tif" "$BATS_TEST_TMPDIR/in/e.heic"   # not an image extension
    cp "$FMT/bmp_24bit_45x23.bmp" "$BATS_TEST_TMPDIR/in/f.png"        # a BMP named .png
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/o" "$BATS_TEST_TMPDIR/in"
    [ "$status" -eq 0 ]
    run "$PY" -c '
import json, sys
rows = sorted((json.loads(l)["output"], json.loads(l)["status"]) for l in open(sys.argv[1]))
print(rows)' "$BATS_TEST_TMPDIR/o/manifest.jsonl"
    echo "$output"
    [ "$output" = "[('a.GIF.npy.zst', 'ok'), ('b.bmp.npy.zst', 'ok'), ('c.Tif.npy.zst', 'ok'), ('d.tiff.npy.zst', 'ok'), ('f.png.npy.zst', 'ok')]" ]
}
