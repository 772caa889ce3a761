#!/usr/bin/env bats
# The tar layout's integrity after compact and on resume: a damaged shard in which every sample
# is dead goes at compact; compact keeps OUT/pooled/pooled.jsonl pointing at the samples (or
# removes it); an input tar or input file changed since its ok line is redone.
# Oracles: Python's tarfile, json, numpy and zstandard (tar_check.py; the scripts below).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    A=(--device cpu --model "$MODEL")
}

# mk_tar OUT.tar IMAGE CAPTION [MTIME]: a WebDataset tar of one sample s0 (s0.jpg, s0.txt), made
# with Python's tarfile; the file's mtime set to MTIME seconds when given.
mk_tar() {
    "$PY" - "$@" <<'PYEOF'
import io, os, sys, tarfile
out, img, cap = sys.argv[1:4]
mt = int(sys.argv[4]) if len(sys.argv) > 4 else None
with tarfile.open(out, "w") as t:
    for name, data in (("s0.jpg", open(img, "rb").read()), ("s0.txt", cap.encode())):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
if mt is not None:
    os.utime(out, (mt, mt))
PYEOF
}

# pooled_check OUT: every row of OUT/pooled/ is the sample pooled.jsonl names: its "output" shard
# opens with tarfile, an .npy member's array data starts at "offset", and np.load of that member
# equals the row of pooled.npy; that sample is the one the manifest's latest line names.
pooled_check() {
    run "$PY" - "$1" <<'PYEOF'
import io, json, os, sys, tarfile
import numpy as np
out = sys.argv[1]
latest = {}
for l in open(os.path.join(out, "manifest.jsonl")):
    r = json.loads(l)
    latest[r["input"]] = r
P = np.load(os.path.join(out, "pooled", "pooled.npy"))
n = 0
for l in open(os.path.join(out, "pooled", "pooled.jsonl")):
    r = json.loads(l)
    if r["row"] is None:
        continue
    t = tarfile.open(os.path.join(out, r["output"]))
    m = [m for m in t.getmembers() if m.name.endswith(".npy") and m.offset_data <= r["offset"] < m.offset_data + m.size]
    assert len(m) == 1, r
    a = np.load(io.BytesIO(t.extractfile(m[0]).read()))
    assert m[0].offset_data + m[0].size - a.nbytes == r["offset"], (r, m[0].offset_data)
    assert np.array_equal(a.reshape(-1), P[r["row"]]), r
    ml = latest[r["input"]]
    assert (ml["shard"], ml["offset"]) == (r["output"], r["offset"]), (ml, r)
    n += 1
assert n == len(P) == len(latest), (n, len(P), len(latest))
print("ok", n)
PYEOF
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "compact removes a damaged shard whose samples were all redone; every shard then reads" {
    "$PY" - "$T/ds1.tar" "$IMG" <<'PYEOF'
import io, os, sys, tarfile
out, d = sys.argv[1:3]
with tarfile.open(out, "w") as t:
    for i, f in enumerate(sorted(os.listdir(d))):
        data = open(os.path.join(d, f), "rb").read()
        ti = tarfile.TarInfo("k%03d%s" % (i, os.path.splitext(f)[1]))
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
PYEOF
    n=$(ls "$IMG" | wc -l)
    run "$MVEMBED" "${A[@]}" --out "$T/od" --layout tar --shard-samples 5 "$T/ds1.tar"
    [ "$status" -eq 0 ]
    [ -f "$T/od/shard-00002.tar" ]
    # cut inside its first sample's array (data at byte 640, more than 1 KiB of it): every sample
    # of it is damaged
    truncate -s 1000 "$T/od/shard-00002.tar"
    run "$MVEMBED" "${A[@]}" --out "$T/od" --layout tar "$T/ds1.tar"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "missing or damaged" ]]
    # no latest line points into the damaged shard now (json), and tarfile cannot read it
    run "$PY" - "$T/od" <<'PYEOF'
import json, sys, tarfile
latest = {}
for l in open(sys.argv[1] + "/manifest.jsonl"):
    r = json.loads(l)
    latest[r["input"]] = r
assert all(r["shard"] != "shard-00002.tar" for r in latest.values()), latest
try:
    tarfile.open(sys.argv[1] + "/shard-00002.tar").getmembers()
    print("readable")
except (tarfile.ReadError, EOFError):
    print("unreadable")
PYEOF
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = unreadable ]
    run "$MVEMBED" manifest compact "$T/od"
    echo "$output"
    [ "$status" -eq 0 ]
    [ ! -e "$T/od/shard-00002.tar" ]
    [[ "$output" =~ "unreadable" ]]
    tar_check "$T/od" --ok "$n" --one-sample
}

@test "compact of a tar-layout OUT keeps OUT/pooled/pooled.jsonl naming each sample's shard and offset" {
    mkdir "$T/rr"
    cp "$IMG"/*.jpg "$T/rr/"
    one="$T/rr/$(ls "$T/rr" | head -1)"
    run "$MVEMBED" "${A[@]}" --out "$T/pc" --layout tar --pool mean "$T/rr"
    [ "$status" -eq 0 ]
    run "$MVEMBED" "${A[@]}" --out "$T/pc" --layout tar --pool mean --force "$one"
    [ "$status" -eq 0 ]
    run "$MVEMBED" "${A[@]}" --out "$T/pc" --layout tar --pool mean "$T/rr"
    [ "$status" -eq 0 ]
    pooled_check "$T/pc"
    run "$MVEMBED" manifest compact "$T/pc"
    echo "$output"
    [ "$status" -eq 0 ]
    msg=$output
    pooled_check "$T/pc"
    [[ "$msg" =~ "pooled.jsonl" ]]
    [[ "$msg" =~ "1 shards rewritten" ]]
    tar_check "$T/pc" --one-sample
    # a sample redone without --pool mean: that run removes the pooled index it made stale
    run "$MVEMBED" "${A[@]}" --out "$T/ps" --layout tar --pool mean "$T/rr"
    [ "$status" -eq 0 ]
    cp -r "$T/ps/pooled" "$T/pooled.kept"
    run "$MVEMBED" "${A[@]}" --out "$T/ps" --layout tar "$one"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "pooled/ removed: its rows were replaced" ]]
    [ ! -e "$T/ps/pooled" ]
    # an index left stale all the same (as builds before that rule left them) cannot be mended by
    # compact: it is removed, and compact says so
    cp -r "$T/pooled.kept" "$T/ps/pooled"
    run "$MVEMBED" manifest compact "$T/ps"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "pooled/ removed" ]]
    [ ! -e "$T/ps/pooled" ]
    tar_check "$T/ps" --one-sample
}

@test "a member of an input tar changed since its ok line is redone (size, mtime, bytes, its sample's metadata); an unchanged one is not" {
    for lay in files tar; do
        o="$T/o-$lay"
        mk_tar "$T/mut.tar" "$IMG/jpeg_baseline_420_320x240.jpg" "old caption"
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" "$T/mut.tar"
        [ "$status" -eq 0 ]
        # another image and caption: another file (mtime)
        mk_tar "$T/mut.tar" "$IMG/jpeg_exif3_117x199.jpg" "NEW caption"
        run "$MVEMBED" "${A[@]}" --out "$T/fresh-$lay" --layout "$lay" "$T/mut.tar"
        [ "$status" -eq 0 ]
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" "$T/mut.tar"
        echo "$output"
        [ "$status" -eq 0 ]
        [[ "$output" =~ "changed since it was embedded" ]]
        [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
        # unchanged now: skipped
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" "$T/mut.tar"
        [[ "$output" =~ "0 ok, 0 failed, 1 skipped" ]]
        # the tar written again with the same members (the tar's own size and mtime are not the
        # member's): nothing to redo
        mk_tar "$T/mut.tar" "$IMG/jpeg_exif3_117x199.jpg" "NEW caption" 1600000000
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" "$T/mut.tar"
        [[ "$output" =~ "0 ok, 0 failed, 1 skipped" ]]
        # a caption of the same length, the member's size and mtime unchanged: the line's XXH64
        # (the member's bytes and its sample's .json/.txt/.cls) sees it, --input-hash or not
        mk_tar "$T/mut.tar" "$IMG/jpeg_exif3_117x199.jpg" "LAST captio" 1600000000
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" "$T/mut.tar"
        echo "$output"
        [[ "$output" =~ "XXH64" ]]
        [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
        run "$MVEMBED" "${A[@]}" --out "$o" --layout "$lay" --input-hash "$T/mut.tar"
        [[ "$output" =~ "0 ok, 0 failed, 1 skipped" ]]
        # what a reader sees: the latest line's caption, and the array of the new image (the one a
        # fresh OUT made from it)
        run "$PY" - "$o" "$T/fresh-$lay" "$lay" <<'PYEOF'
import io, json, os, sys, tarfile
import numpy as np, zstandard
def latest(out):
    r = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))][-1]
    if r.get("shard"):
        t = tarfile.open(os.path.join(out, r["shard"]))
        meta = json.load(t.extractfile(r["key"] + ".json"))
        assert meta["txt"] == r["txt"], (meta, r)
        a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
    else:
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(open(os.path.join(out, r["output"]), "rb").read())
        a = np.load(io.BytesIO(raw))
    return r, a
r, a = latest(sys.argv[1])
f, b = latest(sys.argv[2])
assert r["txt"] == "LAST captio" and r["input_xxh64"], r
assert (r["width"], r["height"]) == (f["width"], f["height"]) and np.array_equal(a, b), (r, f)
print("ok")
PYEOF
        echo "$output"
        [ "$status" -eq 0 ]
    done
}

@test "tar layout: an input file changed since its ok line is redone" {
    mkdir "$T/f" "$T/g"
    cp "$IMG/jpeg_baseline_420_320x240.jpg" "$T/f/a.jpg"
    cp "$IMG/jpeg_exif3_117x199.jpg" "$T/g/a.jpg"
    run "$MVEMBED" "${A[@]}" --out "$T/o" --layout tar "$T/f"
    [ "$status" -eq 0 ]
    run "$MVEMBED" "${A[@]}" --out "$T/fresh" --layout tar "$T/g"
    [ "$status" -eq 0 ]
    cp "$T/g/a.jpg" "$T/f/a.jpg"
    run "$MVEMBED" "${A[@]}" --out "$T/o" --layout tar "$T/f"
    echo "$output"
    [[ "$output" =~ "changed since it was embedded" ]]
    [[ "$output" =~ "1 ok, 0 failed, 0 skipped" ]]
    run "$PY" - "$T/o" "$T/fresh" <<'PYEOF'
import io, json, os, sys, tarfile
import numpy as np
def latest(out):
    r = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))][-1]
    t = tarfile.open(os.path.join(out, r["shard"]))
    return r, np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
(r, a), (f, b) = latest(sys.argv[1]), latest(sys.argv[2])
assert (r["width"], r["height"]) == (f["width"], f["height"]) and np.array_equal(a, b), (r, f)
print("ok")
PYEOF
    echo "$output"
    [ "$status" -eq 0 ]
    tar_check "$T/o" --ok 1
}
