#!/usr/bin/env bats
# WebDataset tar inputs as a careful dataset user expects them: a tar cut short (plain, gzip, zstd,
# xz) has every sample before the damage embedded and one error line naming the cause; a .json
# with a UTF-8 BOM is read as Python's json.loads(bytes) reads it (webdataset's decoder); keys
# keep a leading "./" as webdataset's base_plus_ext does, output names stay free of "."; a key met
# again is a sample of its own with its own output, a name repeated within a sample (which
# webdataset refuses: "duplicate file name") fails the sample; tars found walking a directory are
# read as shards. Oracles: Python's tarfile, gzip/zlib, lzma and zstandard build and read the
# inputs, json reads the manifests, numpy + zstandard load the outputs, GNU tar, cmp.
load test_helper

setup() {
    T=$BATS_TEST_TMPDIR
    IMG="$ROOT/fixtures/media/images"
    cd "$T"
}

emb() { "$MVEMBED" -q --device cpu --model "$MODEL" "$@"; }

# as_alone FIRST SECOND TAR: o/TAR/a.png and o/TAR/a.png#2 are byte for byte the outputs of the
# images FIRST and SECOND embedded alone (into ref/, as one.png and two.png)
as_alone() {
    cp "$1" one.png
    cp "$2" two.png
    emb --out ref one.png two.png
    cmp "o/$3/a.png.npy.zst" ref/one.png.npy.zst
    cmp "o/$3/a.png#2.npy.zst" ref/two.png.npy.zst
}

# mktar TAR SPEC...: a tar made with Python's tarfile (compressed as TAR's name says: .gz, .zst,
# .xz); each SPEC is NAME=@FILE (the file's bytes) or NAME=TEXT (UTF-8), or NAME=bom:TEXT (a UTF-8
# BOM, then TEXT); members in the order given
mktar() {
    "$PY" - "$@" <<'PYEOF'
import gzip, io, lzma, sys, tarfile, zstandard
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    for spec in sys.argv[2:]:
        name, val = spec.split("=", 1)
        data = (open(val[1:], "rb").read() if val.startswith("@") else
                b"\xef\xbb\xbf" + val[4:].encode() if val.startswith("bom:") else val.encode())
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
raw, out = buf.getvalue(), sys.argv[1]
raw = (gzip.compress(raw) if out.endswith(".gz") else lzma.compress(raw) if out.endswith(".xz") else
       zstandard.ZstdCompressor().compress(raw) if out.endswith(".zst") else raw)
open(out, "wb").write(raw)
PYEOF
}

# samples TAR N: N samples sNN = an image (the fixtures in turn, again from the first when all
# are used) + sNN.txt "caption NN"
samples() {
    local specs=() imgs=("$IMG"/*.png "$IMG"/*.jpg "$IMG"/*.webp) i f
    for ((i = 0; i < $2; i++)); do
        f=${imgs[$((i % ${#imgs[@]}))]}
        specs+=("s$(printf %02d $i).${f##*.}=@$f" "s$(printf %02d $i).txt=caption $i")
    done
    mktar "$1" "${specs[@]}"
}

# check_cut FULL CUT OUT: the samples of tar FULL whose members and the header after them lie in
# what Python decompresses of CUT (its first bytes) are ok in OUT/manifest.jsonl, with their
# captions; every other image member has no ok line; the line for the tar names a truncated
# stream; prints the number ok
check_cut() {
    "$PY" - "$@" <<'PYEOF'
import io, json, lzma, os, sys, tarfile, zlib, zstandard
full, cut, out = sys.argv[1:4]
b = open(cut, "rb").read()
if cut.endswith(".gz"):
    d = zlib.decompressobj(31).decompress(b)
elif cut.endswith(".xz"):
    d = lzma.LZMADecompressor().decompress(b)
elif cut.endswith(".zst"):
    d = zstandard.ZstdDecompressor().decompressobj().decompress(b)
else:
    d = b
ms = tarfile.open(full).getmembers()
want = {}
for i, m in enumerate(ms):
    end = ms[i + 1].offset + 512 if i + 1 < len(ms) else len(d) + 1
    key = m.name.partition(".")[0]
    want[key] = want.get(key, True) and m.offset_data + m.size <= len(d) and end <= len(d)
imgs = {m.name for m in ms if not m.name.endswith(".txt")}
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
pre = os.path.basename(cut) + "/"
ok = {l["input"][len(pre):]: l for l in lines if l["status"] == "ok" and l["input"].startswith(pre)}
good = {n for n in imgs if want[n.partition(".")[0]]}
assert set(ok) == good, (sorted(ok), sorted(good))
assert 0 < len(good) < len(imgs), (len(good), len(imgs))
for n, l in ok.items():
    assert l["txt"] == "caption %d" % int(n[1:3]), l
tarline = [l for l in lines if l["input"] == os.path.basename(cut)]
assert len(tarline) == 1 and "truncated" in tarline[0]["error"].lower(), tarline
print(len(good))
PYEOF
}

@test "a tar cut short (plain mid-member, .tar.gz, .tar.zst, .tar.xz): samples before the cut ok, the rest an error naming the cause, the batch goes on" {
    samples full.tar 40   # over 128 KiB, so that a cut zstd frame has whole blocks before the cut
    "$PY" -c '
import gzip, lzma, sys, zstandard
raw = open("full.tar", "rb").read()
for ext, z in (("gz", gzip.compress), ("xz", lzma.compress), ("zst", zstandard.ZstdCompressor(level=1).compress)):
    c = z(raw)
    open("full.tar." + ext, "wb").write(c)
    open("cut.tar." + ext, "wb").write(c[: len(c) * 7 // 10])
open("cut.tar", "wb").write(raw[: len(raw) * 7 // 10 + 100])'
    cp "$IMG/png_gray_128x72.png" after.png
    emb --out full full.tar
    for c in cut.tar cut.tar.gz cut.tar.zst cut.tar.xz; do
        run emb --out "o-$c" "$c" after.png
        echo "$output"
        [ "$status" -eq 2 ]
        [[ "$output" =~ "mvembed: $c: tar unreadable after member " ]]
        grep -qF '"input":"after.png","output":"after.png.npy.zst","status":"ok"' "o-$c/manifest.jsonl"
        n=$(check_cut full.tar "$c" "o-$c")
        echo "$c: $n samples ok"
        # each ok output is the uncut tar's, byte for byte
        for f in $(cd "o-$c/$c" && ls); do cmp "o-$c/$c/$f" "full/full.tar/$f"; done
    done
}

@test "a small .tar.gz cut short: its first samples still embedded (not the whole tar failed)" {
    samples small.tar 4
    "$PY" -c '
import gzip
c = gzip.compress(open("small.tar", "rb").read())
open("small.tar.gz", "wb").write(c[: len(c) * 7 // 10])'
    run emb --out o small.tar.gz
    echo "$output"
    [ "$status" -eq 2 ]
    [[ ! "$output" =~ "not a readable tar file" ]]
    [[ "$output" =~ "gzip stream truncated" ]]
    check_cut small.tar small.tar.gz o
}

@test "a sample's .json starting with a UTF-8 BOM: read as Python's json.loads(bytes) reads it (webdataset's decoder)" {
    mktar bom.tar "k.png=@$IMG/png_gray_128x72.png" 'k.json=bom:{"url": "http://x/k", "n": 1}' \
        "m.jpg=@$IMG/jpeg_gray_200x149.jpg" 'm.json={"url": "http://x/m"}'
    run emb --out o bom.tar
    echo "$output"
    [ "$status" -eq 0 ]
    "$PY" - <<'PYEOF'
import json, tarfile
t = tarfile.open("bom.tar")
lines = {json.loads(l)["input"]: json.loads(l) for l in open("o/manifest.jsonl")}
for img, js in (("k.png", "k.json"), ("m.jpg", "m.json")):
    l = lines["bom.tar/" + img]
    assert l["status"] == "ok" and l["json"] == json.loads(t.extractfile(js).read()), l
PYEOF
}

@test "member names with a leading ./ (GNU tar -cf x.tar ./dir): webdataset's keys, output names without '.' components" {
    mkdir -p src/dir
    cp "$IMG/png_gray_128x72.png" src/dir/a.png
    echo "cap a" > src/dir/a.txt
    cp "$IMG/jpeg_gray_200x149.jpg" src/b.jpg
    (cd src && tar -cf ../x.tar ./dir/a.png ./dir/a.txt ./b.jpg)
    # and a tar where ./a.png and a.png are two samples (keys ./a and a), a.txt with a.png only
    mktar y.tar "./a.png=@$IMG/png_gray_128x72.png" "a.png=@$IMG/jpeg_gray_200x149.jpg" "a.txt=cap"
    run emb --out o x.tar y.tar
    echo "$output"
    [ "$status" -eq 0 ]
    "$PY" - <<'PYEOF'
import json, os, re, tarfile, io, numpy as np, zstandard
def base_plus_ext(path):  # webdataset.tariterators.base_plus_ext
    m = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", path)
    return (m.group(1), m.group(2)) if m else (None, None)
lines = [json.loads(l) for l in open("o/manifest.jsonl")]
assert all(l["status"] == "ok" for l in lines), lines
names = tarfile.open("x.tar").getnames()
assert "./dir/a.png" in names, names
keys = {l["input"]: l["input_key"] for l in lines}
want = {"x.tar/dir/a.png": base_plus_ext("./dir/a.png")[0], "x.tar/b.jpg": base_plus_ext("./b.jpg")[0]}
for k, v in want.items():
    assert keys[k] == v, (keys, want)
cap = {l["input_key"]: l.get("txt") for l in lines}
assert cap["./dir/a"] == "cap a\n" and cap["./a"] is None and cap["a"] == "cap", cap
ys = sorted(l["output"] for l in lines if l["input"].startswith("y.tar/"))
assert len(ys) == 2 and len(set(ys)) == 2, ys
for root, dirs, files in os.walk("o"):
    for f in files + dirs:
        p = os.path.relpath(os.path.join(root, f), "o")
        assert "." not in p.split("/") and ".." not in p.split("/"), p
for l in lines:
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open("o/" + l["output"], "rb").read(), max_output_size=1 << 26)))
    assert list(a.shape) == l["shape"], (a.shape, l)
PYEOF
    # y.tar's two images are each their own: outputs as for the images alone
    as_alone "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" y.tar
}

@test "a key met again after another sample: a sample of its own, with its own output and caption; resumed as such" {
    mktar d.tar "a.png=@$IMG/png_gray_128x72.png" "a.txt=first" "b.jpg=@$IMG/jpeg_gray_200x149.jpg" \
        "a.png=@$IMG/png_rgb_320x256.png" "a.txt=third"
    run emb --out o d.tar
    echo "$output"
    [ "$status" -eq 0 ]
    "$PY" - <<'PYEOF'
import json, tarfile
lines = {json.loads(l)["input"]: json.loads(l) for l in open("o/manifest.jsonl")}
assert sorted(lines) == ["d.tar/a.png", "d.tar/a.png#2", "d.tar/b.jpg"], sorted(lines)
ms = tarfile.open("d.tar").getmembers()
t = tarfile.open("d.tar")
txts = [t.extractfile(m).read().decode() for m in ms if m.name == "a.txt"]
assert lines["d.tar/a.png"]["txt"] == txts[0] and lines["d.tar/a.png#2"]["txt"] == txts[1], lines
assert lines["d.tar/a.png"]["input_key"] == lines["d.tar/a.png#2"]["input_key"] == "a"
assert "txt" not in lines["d.tar/b.jpg"], lines
assert all(l["status"] == "ok" for l in lines.values())
PYEOF
    as_alone "$IMG/png_gray_128x72.png" "$IMG/png_rgb_320x256.png" d.tar
    run "$MVEMBED" --device cpu --model "$MODEL" --out o d.tar
    [ "$status" -eq 0 ]
    [[ "$output" =~ "0 ok, 0 failed, 3 skipped" ]]
}

@test "a name repeated within a sample (a.png a.txt a.txt, a.png a.png): webdataset refuses it; its images fail, named apart, the rest goes on" {
    mktar r.tar "a.png=@$IMG/png_gray_128x72.png" "a.txt=one" "a.TXT=two" \
        "b.png=@$IMG/png_gray_128x72.png" "b.png=@$IMG/png_rgb_320x256.png" \
        "c.jpg=@$IMG/jpeg_gray_200x149.jpg" "c.txt=cap c"
    run emb --out o r.tar
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "r.tar/a.png: sample a of the tar holds two .txt members" ]]
    [[ "$output" =~ "r.tar/b.png#2: sample b of the tar holds two .png members" ]]
    "$PY" - <<'PYEOF'
import json
lines = [json.loads(l) for l in open("o/manifest.jsonl")]
st = {l["input"]: l["status"] for l in lines}
assert len(st) == len(lines), lines  # one line each: no input's line hides another's
assert st == {"r.tar/a.png": "error", "r.tar/b.png": "error", "r.tar/b.png#2": "error", "r.tar/c.jpg": "ok"}, st
c = [l for l in lines if l["input"] == "r.tar/c.jpg"][0]
assert c["txt"] == "cap c", c
PYEOF
    [ ! -e o/r.tar/a.png.npy.zst ] && [ ! -e o/r.tar/b.png.npy.zst ]
}

@test "a directory holding tar shards (DIR/000.tar, DIR/sub/001.tar.gz): read as shards, named as the tars given from DIR" {
    mkdir -p ds/sub
    samples ds/000.tar 3
    samples ds/sub/001.tar.gz 2
    cp "$IMG/png_gray_128x72.png" ds/x.png
    run emb --out o ds
    echo "$output"
    [ "$status" -eq 0 ]
    (cd ds && emb --out "$T/ref" 000.tar sub/001.tar.gz x.png)
    same_bytes o ref
    "$PY" - <<'PYEOF'
import json, tarfile
a = sorted((json.loads(l)["output"], json.loads(l).get("txt"), json.loads(l)["input"]) for l in open("o/manifest.jsonl"))
b = sorted((json.loads(l)["output"], json.loads(l).get("txt"), "ds/" + json.loads(l)["input"]) for l in open("ref/manifest.jsonl"))
assert a == b, (a, b)
n = sum(1 for m in tarfile.open("ds/000.tar") if not m.name.endswith(".txt"))
n += sum(1 for m in tarfile.open("ds/sub/001.tar.gz") if not m.name.endswith(".txt"))
assert len(a) == n + 1, (len(a), n)
PYEOF
}
