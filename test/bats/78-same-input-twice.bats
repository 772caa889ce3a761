#!/usr/bin/env bats
# The same input named twice in one run (overlapping `xargs -n` lists, `find` output and a path
# typed again, a tar given twice) is one input: embedded once, one ok line, not failed; two
# different inputs that map to one output name still fail. Oracles: Python's json over the
# manifests, numpy + zstandard loading the outputs, tarfile (tar_check.py), cmp.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    # 40 inputs, each fixture image in turn, so that outputs differ from one another
    mkdir -p "$T/camA"
    local imgs=("$IMG"/*) i
    for i in $(seq 0 39); do
        f=${imgs[$((i % ${#imgs[@]}))]}
        cp "$f" "$T/camA/$(printf %02d "$i").${f##*.}"
    done
}

emb() { "$MVEMBED" -q --device cpu --model "$MODEL" "$@"; }

# one_ok_each OUT N: every input in OUT's manifests has exactly one line, it is ok, and there are
# N inputs; prints nothing else
one_ok_each() {
    "$PY" -c '
import glob, json, os, sys
by = {}
for m in glob.glob(os.path.join(sys.argv[1], "manifest*.jsonl")):
    for l in open(m, encoding="utf-8"):
        r = json.loads(l)
        by.setdefault(r["input"], []).append(r["status"])
bad = {i: s for i, s in by.items() if s != ["ok"]}
assert not bad, bad
assert len(by) == int(sys.argv[2]), (len(by), sys.argv[2])' "$1" "$2"
}

# same_arrays DIR_A DIR_B: the same .npy.zst names (at least one) in both, each pair equal as
# numpy arrays (shape, dtype and values) after zstandard decompression
same_arrays() {
    "$PY" -c '
import glob, io, os, sys
import numpy as np, zstandard
def load(p):
    return np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(p, "rb")).read()))
a, b = sys.argv[1], sys.argv[2]
na = sorted(os.path.relpath(p, a) for p in glob.glob(a + "/**/*.npy.zst", recursive=True))
nb = sorted(os.path.relpath(p, b) for p in glob.glob(b + "/**/*.npy.zst", recursive=True))
assert na and na == nb, (na, nb)
for n in na:
    x, y = load(os.path.join(a, n)), load(os.path.join(b, n))
    assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), n
print(len(na), "arrays equal")' "$1" "$2"
}

@test "an input named first and last among 40 (overlapping lists): embedded once, exit 0, nothing failed" {
    cd "$T"
    first=$(ls camA | head -1)
    f=camA/$first
    mapfile -t rest < <(ls -d camA/* | sed -n 2,40p)
    run emb --out o "$f" "${rest[@]}" "$f"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    one_ok_each o 40
    run "$MVEMBED" manifest failed o
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    # the outputs are those of a run naming each input once
    emb --out solo "$f" "${rest[@]}"
    same_arrays o solo
    # a plain rerun skips them all and adds no line
    cp o/manifest.jsonl before.jsonl
    run "$MVEMBED" --device cpu --model "$MODEL" --out o "$f" "${rest[@]}" "$f"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed, 41 skipped" ]]
    cmp before.jsonl o/manifest.jsonl
}

@test "one input named as a/x, ./a//x and twice through its directory (relative and absolute): embedded once" {
    cd "$T"
    mkdir a
    cp "$IMG/png_rgb_320x256.png" a/x.png
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out o a/x.png ./a//x.png
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "./a//x.png: named again in this run: embedded once" ]]
    [[ "$output" =~ " 1 ok, 0 failed, 1 skipped" ]]
    one_ok_each o 1
    emb --out solo a/x.png
    same_arrays o solo
    # a directory given as a relative and as an absolute path: the same files, the same names
    run emb --out od camA "$T/camA"
    echo "$output"
    [ "$status" -eq 0 ]
    one_ok_each od 40
    emb --out solod camA
    same_arrays od solod
}

@test "a tar given twice (x.tar x.tar, x.tar ./x.tar): each member embedded once, exit 0" {
    cd "$T"
    tar -C camA -cf x.tar 00.jpg 01.jpg 02.jpg
    run emb --out o x.tar x.tar
    echo "$output"
    [ "$status" -eq 0 ]
    one_ok_each o 3
    run "$MVEMBED" manifest failed o
    [ -z "$output" ]
    emb --out solo x.tar
    same_arrays o solo
    # --layout tar: one sample per member, each member's one line ok
    run emb --out ot --layout tar x.tar ./x.tar
    echo "$output"
    [ "$status" -eq 0 ]
    one_ok_each ot 3
    tar_check "$T/ot" --ok 3 --one-sample
}

@test "--layout tar, a file named twice: one sample, one ok line, exit 0" {
    cd "$T"
    run emb --out ot --layout tar camA/00.jpg camA/01.jpg camA/00.jpg
    echo "$output"
    [ "$status" -eq 0 ]
    one_ok_each ot 2
    tar_check "$T/ot" --ok 2 --one-sample
    run "$MVEMBED" manifest failed ot
    [ -z "$output" ]
}

@test "two different inputs with one output name still fail, beside one input named twice" {
    mkdir -p "$T/d/cam1" "$T/d/cam2"
    cp "$IMG/png_rgb_320x256.png" "$T/d/cam1/IMG_1.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/d/cam2/IMG_1.png"
    run emb --out "$T/o" "$T/d/cam1" "$T/d/cam2" "$T/d/cam1"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "$T/d/cam2/IMG_1.png: output name IMG_1.png.npy.zst is already used by another input of this run" ]]
    # cam1's is one ok line, cam2's one error line; only cam2's is failed
    "$PY" -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1] + "/manifest.jsonl")]
by = {}
for r in ls:
    by.setdefault(r["input"], []).append(r["status"])
assert by == {sys.argv[2]: ["ok"], sys.argv[3]: ["error"]}, by' "$T/o" "$T/d/cam1/IMG_1.png" "$T/d/cam2/IMG_1.png"
    run "$MVEMBED" manifest failed "$T/o"
    [ "$output" = "$T/d/cam2/IMG_1.png" ]
    # the output is cam1's image's
    emb --out "$T/solo" "$T/d/cam1"
    same_arrays "$T/o" "$T/solo"
}
