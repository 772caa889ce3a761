#!/usr/bin/env bats
# WebDataset input keeps its metadata: a sample's key and its .json, .txt and .cls members ride on
# the record of each of its image members (the manifest line and, with --layout tar, the sample's
# .json member), wherever they come in the sample. Oracle: Python's tarfile writes the shards and
# reads the output shards, Python's json reads both sides; the expected values are what Python
# wrote.
load test_helper

setup() {
    T=$BATS_TEST_TMPDIR
    IMG="$ROOT/fixtures/media/images"
    cd "$T"
}

# mktar TAR SPEC...: a tar made with Python's tarfile; each SPEC is NAME=@FILE (the file's bytes),
# NAME=hex:HEX (those bytes) or NAME=TEXT (UTF-8 text), members in the order given
mktar() {
    "$PY" - "$@" <<'PYEOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for spec in sys.argv[2:]:
        name, val = spec.split("=", 1)
        data = (open(val[1:], "rb").read() if val.startswith("@") else
                bytes.fromhex(val[4:]) if val.startswith("hex:") else val.encode())
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
PYEOF
}

# check_meta MANIFEST TAR: every ok line of a member of TAR carries its sample's metadata exactly
# as the tar holds it (Python reads the tar: key = name up to the first '.' of the basename)
check_meta() {
    "$PY" - "$1" "$2" <<'PYEOF'
import base64, json, os, sys, tarfile
lines = [json.loads(l) for l in open(sys.argv[1], "rb")]
tarpath = sys.argv[2]
samples = {}
for m in tarfile.open(tarpath):
    d, b = os.path.split(m.name)
    key, _, ext = b.partition(".")
    samples.setdefault(os.path.join(d, key), {})[ext] = m
t = tarfile.open(tarpath)
n = 0
for l in lines:
    member = l["input"][len(tarpath) + 1:]
    d, b = os.path.split(member)
    key = os.path.join(d, b.partition(".")[0])
    s = samples[key]
    assert l["input_key"] == key, l
    if "json" in s:
        assert l["json"] == json.loads(t.extractfile(s["json"]).read()), l
    else:
        assert "json" not in l, l
    if "txt" in s:
        raw = t.extractfile(s["txt"]).read()
        try:
            if b"\0" in raw:  # a NUL is carried in txt_b64 only, as bytes that are not UTF-8
                raise UnicodeDecodeError("utf-8", raw, 0, 1, "NUL")
            assert l["txt"] == raw.decode("utf-8") and "txt_b64" not in l, l
        except UnicodeDecodeError:
            assert base64.b64decode(l["txt_b64"]) == raw, l
            assert l["txt"] == raw.decode("utf-8", "replace").replace("\0", "\ufffd"), l
    else:
        assert "txt" not in l, l
    if "cls" in s:
        raw = t.extractfile(s["cls"]).read().decode().strip()
        try:
            want = int(raw)
        except ValueError:
            want = raw
        assert l["cls"] == want and type(l["cls"]) is type(want), (l, want)
    else:
        assert "cls" not in l, l
    n += 1
print(n)
PYEOF
}

@test "WebDataset metadata: each manifest line carries its sample's key, .json, .txt and .cls as Python wrote them" {
    mktar 00000.tar \
        'a.cls= 7
' "a.jpg=@$IMG/jpeg_gray_200x149.jpg" \
        'a.json={"url": "https://example.com/a.jpg", "caption": "un chat \u00e9 \"q\"",
  "size": [200, 149], "score": 0.125, "nsfw": null}' \
        'a.txt=a cat
on a mat' \
        'sub/b.json={"url": "https://example.com/b.png", "id": -9223372036854775808, "h": 1.5e300}' \
        "sub/b.png=@$IMG/png_gray_128x72.png" 'sub/b.cls=dog ' \
        "c.webp=@$IMG/webp_lossy_192x128.webp" 'c.txt=only a caption'
    run mvembed -q --device cpu --model "$MODEL" --out o 00000.tar
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(grep -c '"status":"ok"' o/manifest.jsonl)" -eq 3 ]
    run check_meta o/manifest.jsonl 00000.tar
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = 3 ]
    # and the line is one line: the .json's own newlines are gone
    [ "$(wc -l < o/manifest.jsonl)" -eq 3 ]
}

@test "WebDataset metadata: --layout tar writes it into each sample's .json member too" {
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.json={"caption": "x", "w": 200}' 'a.txt=t a' 'a.cls=3' \
        "b.png=@$IMG/png_gray_128x72.png" 'b.txt=t b'
    run mvembed -q --device cpu --model "$MODEL" --out o --layout tar in.tar
    [ "$status" -eq 0 ]
    run check_meta o/manifest.jsonl in.tar
    echo "$output"
    [ "$output" = 2 ]
    run "$PY" - o in.tar <<'PYEOF'
import glob, json, sys, tarfile
src = tarfile.open(sys.argv[2])
want = {m.name.partition(".")[0]: {} for m in src}
for m in src:
    k, _, ext = m.name.partition(".")
    if ext in ("json", "txt", "cls"):
        want[k][ext] = src.extractfile(m).read()
n = 0
for shard in glob.glob(sys.argv[1] + "/shard-*.tar"):
    t = tarfile.open(shard)
    for m in t:
        if m.name.endswith(".json"):
            j = json.loads(t.extractfile(m).read())
            w = want[j["input_key"]]
            assert j.get("json") == (json.loads(w["json"]) if "json" in w else None), j
            assert j.get("txt") == (w["txt"].decode() if "txt" in w else None), j
            assert j.get("cls") == (int(w["cls"]) if "cls" in w else None), j
            n += 1
print(n)
PYEOF
    echo "$output"
    [ "$output" = 2 ]
}

@test "WebDataset metadata: a .txt that is not UTF-8 (or holds a NUL) is txt with U+FFFD and txt_b64 with its exact bytes" {
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.txt=hex:ff4361c7e920ee0a' \
        "b.jpg=@$IMG/jpeg_gray_200x149.jpg" 'b.txt=hex:610062'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    [ "$status" -eq 0 ]
    run check_meta o/manifest.jsonl in.tar
    echo "$output"
    [ "$output" = 2 ]
    [ "$(grep -c '"txt_b64":' o/manifest.jsonl)" -eq 2 ]
    # the lines read back: a second run skips both
    run mvembed --device cpu --model "$MODEL" --out o in.tar
    [[ "$output" == *" 0 ok, 0 failed, 2 skipped"* ]]
}

@test "WebDataset metadata: lines with metadata read back (resume skips them); a .json a manifest cannot hold fails its sample" {
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.json={"id": 12345678901234567890}' \
        "b.jpg=@$IMG/jpeg_gray_200x149.jpg" 'b.json={"id": 123, "deep": [[[[{"x": ["\u00e9", 1e-300]}]]]]}' 'b.txt=t' 'b.cls=4'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    echo "$output"
    [ "$status" -eq 2 ]
    # Python reads it (an integer over 64 bits); jansson, which reads the manifest back, does not
    "$PY" -c 'import json; json.loads("{\"id\": 12345678901234567890}")'
    [[ "$output" == *"in.tar/a.jpg: tar member a.json is not JSON that a manifest can hold: too big integer"* ]]
    run check_meta <(grep '"status":"ok"' o/manifest.jsonl) in.tar
    [ "$output" = 1 ]
    run mvembed --device cpu --model "$MODEL" --out o in.tar
    [[ "$output" == *" 0 ok, 1 failed, 1 skipped"* ]]
}

@test "WebDataset metadata: a metadata member over 1 MiB fails its sample, naming the member; the batch goes on" {
    "$PY" -c 'import sys; open("big.txt", "w").write("x" * (1024 * 1024 + 1)); open("edge.txt", "w").write("y" * (1024 * 1024))'
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.txt=@big.txt' \
        "b.png=@$IMG/png_gray_128x72.png" 'b.txt=@edge.txt'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"in.tar/a.jpg: tar member a.txt of 1048577 bytes is over the 1048576-byte limit on a metadata member"* ]]
    "$PY" - o/manifest.jsonl <<'PYEOF'
import json, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1]))}
assert rows["in.tar/a.jpg"]["status"] == "error" and "a.txt" in rows["in.tar/a.jpg"]["error"], rows
assert rows["in.tar/b.png"]["status"] == "ok" and rows["in.tar/b.png"]["txt"] == "y" * (1 << 20)
PYEOF
}

@test "WebDataset metadata: a .json that is not JSON fails its sample, naming the member and the cause" {
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.json={"caption": "x",}' \
        "b.png=@$IMG/png_gray_128x72.png" 'b.json=[1, 2]'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" - o/manifest.jsonl <<'PYEOF'
import json, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1]))}
try:
    json.loads('{"caption": "x",}')
    raise SystemExit("Python reads it")
except json.JSONDecodeError:
    pass
e = rows["in.tar/a.jpg"]
assert e["status"] == "error" and e["error"].startswith("in.tar/a.jpg: tar member a.json is not JSON"), e
assert "line 1, column" in e["error"], e
assert rows["in.tar/b.png"]["status"] == "ok" and rows["in.tar/b.png"]["json"] == [1, 2]
PYEOF
}

@test "WebDataset metadata: members before and after the image, and after a streamed (over 16 MiB) image, all carried" {
    cp "$IMG/png_gray_128x72.png" big.png
    truncate -s 17M big.png # over the size from which image members are streamed
    mktar in.tar 'a.json={"where": "before"}' 'a.cls=1' "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.txt=after' \
        "big.png=@big.png" 'big.json={"where": "after a streamed image"}' 'big.txt=after too' \
        'c.txt=before' "c.png=@$IMG/png_gray_128x72.png" 'c.cls=x y'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    echo "$output"
    [ "$status" -eq 0 ]
    run check_meta o/manifest.jsonl in.tar
    echo "$output"
    [ "$output" = 3 ]
    grep -q '"json":{"where":"after a streamed image"}' o/manifest.jsonl
}

@test "WebDataset metadata: every image of a key carries the whole sample's metadata; metadata alone makes no line" {
    mktar in.tar "a.jpg=@$IMG/jpeg_gray_200x149.jpg" 'a.json={"n": 1}' "a.png=@$IMG/png_gray_128x72.png" \
        'a.txt=both' 'lonely.txt=no image' 'lonely.json={}' "z.left.jpg=@$IMG/jpeg_gray_200x149.jpg" \
        "z.right.jpg=@$IMG/jpeg_gray_200x149.jpg" 'z.txt=a pair'
    run mvembed -q --device cpu --model "$MODEL" --out o in.tar
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(wc -l < o/manifest.jsonl)" -eq 4 ]
    ! grep -q lonely o/manifest.jsonl
    run check_meta o/manifest.jsonl in.tar
    echo "$output"
    [ "$output" = 4 ]
}

@test "a sample whose metadata fails (a .json that is not JSON) names its key on its error line" {
    mktar s.tar "d/k1.png=@$IMG/png_gray_128x72.png" "d/k1.json={bad" \
        "d/k2.png=@$IMG/png_gray_128x72.png" "d/k2.json={\"a\": 1}"
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out o s.tar
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" - <<'PYEOF'
import json, tarfile
rows = {r["input"]: r for r in map(json.loads, open("o/manifest.jsonl"))}
for m in tarfile.open("s.tar").getmembers():
    if m.name.endswith(".png"):
        r = rows["s.tar/" + m.name]
        key = m.name.rsplit("/", 1)[0] + "/" + m.name.rsplit("/", 1)[1].split(".", 1)[0]
        assert r["input_key"] == key, (r, key)
assert rows["s.tar/d/k1.png"]["status"] == "error" and "k1.json" in rows["s.tar/d/k1.png"]["error"]
assert "json" not in rows["s.tar/d/k1.png"], rows["s.tar/d/k1.png"]
assert rows["s.tar/d/k2.png"]["status"] == "ok" and rows["s.tar/d/k2.png"]["json"] == {"a": 1}
print("ok")
PYEOF
}
