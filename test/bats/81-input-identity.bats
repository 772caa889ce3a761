#!/usr/bin/env bats
# One input keeps one output name in an OUT, however it is named and from wherever mvembed runs:
# the README's retry recipe (`manifest failed -0 | mvembed -0 -`) and a later walk of the same
# directory, a path list first and a walk later, and a resume from another working directory
# (relative and absolute paths) leave exactly one output per input and redo nothing done.
# Oracles: Python's os.walk and json over OUT, numpy + zstandard loading the outputs, sha256.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
    mkdir -p data/sub
    cp "$IMG/jpeg_gray_200x149.jpg" data/
    cp "$IMG/png_rgb_320x256.png" data/sub/
}

emb() { "$MVEMBED" --device cpu --threads 1 --model "$MODEL" "$@"; }

# one_output_each OUT N: N inputs (their paths resolved from here); each input's newest line (by its order: time, then seq) is ok,
# names an existing file whose array (numpy after zstandard) has the recorded shape; every ok line
# of an input names that one file; OUT holds exactly those N .npy.zst files (os.walk). Prints the
# output names, sorted, one a line.
one_output_each() {
    "$PY" - "$1" "$2" <<'PYEOF'
import glob, io, json, os, sys
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
by = {}
for m in sorted(glob.glob(os.path.join(out, "manifest*.jsonl"))):
    for i, l in enumerate(open(m, encoding="utf-8")):
        r = json.loads(l)
        by.setdefault(os.path.realpath(r["input"]), []).append(r)
assert len(by) == n, (len(by), n, sorted(by))
names = set()
for inp, rs in by.items():
    newest = max(rs, key=lambda r: (r["time"], r["seq"]))
    assert newest["status"] == "ok", (inp, newest)
    oks = {r["output"] for r in rs if r["status"] == "ok"}
    assert oks == {newest["output"]}, (inp, oks)
    p = os.path.join(out, newest["output"])
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(p, "rb")).read()))
    assert list(a.shape) == newest["shape"], (p, a.shape, newest["shape"])
    names.add(newest["output"])
files = {os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs
         if f.endswith(".npy.zst")}
assert files == names, (sorted(files), sorted(names))
print("\n".join(sorted(names)))
PYEOF
}

# last_counts OUT: "ok failed skipped" of the newest run record in OUT
last_counts() {
    "$PY" -c '
import glob, json, sys
r = max((json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")), key=lambda r: r["finished_at"])
c = r["counts"]
print(c["ok"], c["failed"], c["skipped"])' "$1"
}

@test "the retry recipe, then a walk of the same directory: one output per input, the later walk skips them all" {
    echo junk > data/sub/bad.jpg
    run emb --out OUT data
    echo "$output"
    [ "$status" -eq 2 ]
    [ "$(last_counts OUT)" = "2 1 0" ]
    cp "$IMG/png_gray_128x72.png" data/sub/bad.jpg # the user fixes the file
    run bash -c 'set -o pipefail; "$1" manifest failed OUT -0 | "$1" --device cpu --threads 1 --model "$2" --out OUT -0 -' \
        _ "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts OUT)" = "1 0 0" ]
    cp OUT/manifest.jsonl before.jsonl
    run emb --out OUT data
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts OUT)" = "0 0 3" ]
    cmp before.jsonl OUT/manifest.jsonl # nothing redone
    run one_output_each OUT 3
    echo "$output"
    [ "$status" -eq 0 ]
    # each keeps the name the walk first gave it, the retried input included
    [ "$output" = "$(printf '%s\n' jpeg_gray_200x149.jpg.npy.zst sub/bad.jpg.npy.zst sub/png_rgb_320x256.png.npy.zst)" ]
    [ -z "$("$MVEMBED" manifest failed OUT)" ]
}

@test "a path list first, a walk of its directory later: the listed input is skipped under its first name" {
    run bash -c 'printf "data/sub/png_rgb_320x256.png\0" | "$1" --device cpu --threads 1 --model "$2" --out OUT -0 -' \
        _ "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    run emb --out OUT data
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts OUT)" = "1 0 1" ]
    run one_output_each OUT 2
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf '%s\n' data/sub/png_rgb_320x256.png.npy.zst jpeg_gray_200x149.jpg.npy.zst)" ]
    # and a path list again, then the file as an argument: still skipped, still one output each
    cp OUT/manifest.jsonl before.jsonl
    run bash -c 'printf "data/jpeg_gray_200x149.jpg\0./data/sub//png_rgb_320x256.png\0" | "$1" --device cpu --threads 1 --model "$2" --out OUT -0 - data/sub/png_rgb_320x256.png' \
        _ "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    cmp before.jsonl OUT/manifest.jsonl
    run one_output_each OUT 2
    [ "$status" -eq 0 ]
}

@test "a resume from another working directory (relative, then absolute paths) skips every input and writes nothing" {
    mkdir x && mv data x/
    (cd x && emb -q --out OUT data)
    [ "$(last_counts x/OUT)" = "2 0 0" ]
    sums() { (cd x/OUT && find . -name '*.npy.zst' -exec sha256sum {} + | sort); }
    sums > before.sums
    cp x/OUT/manifest.jsonl before.jsonl
    run emb --out x/OUT x/data
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts x/OUT)" = "0 0 2" ]
    run emb --out "$T/x/OUT" "$T/x/data"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts x/OUT)" = "0 0 2" ]
    # from a directory below it too, through ..
    mkdir x/data/deeper
    run bash -c 'cd x/data/deeper && "$1" --device cpu --threads 1 --model "$2" --out ../../OUT ../../data' _ "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts x/OUT)" = "0 0 2" ]
    cmp before.jsonl x/OUT/manifest.jsonl
    sums | diff before.sums -
    cd x
    run one_output_each OUT 2
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "from another working directory, a failed input retried ok: manifest failed lists none, compact and pooled/ keep one entry each" {
    mkdir w && mv data w/ && cd w
    echo junk > data/bad.jpg
    run emb --pool mean --out OUT data
    [ "$status" -eq 2 ]
    cp "$IMG/png_gray_128x72.png" data/bad.jpg
    cd "$T"
    run emb --pool mean --out w/OUT w/data
    echo "$output"
    [ "$status" -eq 0 ]
    cd w
    run "$MVEMBED" manifest failed OUT
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    run "$MVEMBED" manifest compact OUT
    [ "$status" -eq 0 ]
    "$PY" - "$ROOT/README.md" <<'PYEOF'
import io, json, os, re, sys
import numpy as np, zstandard
readme = open(sys.argv[1]).read()
exec(re.search(r"(def load_pooled\(.*?\n)(?=```)", readme, re.S).group(1)) # the README's reader
lines = [json.loads(l) for l in open("OUT/manifest.jsonl")]
# one line per file after compact, whatever directory each run started in, and every one ok
files = [os.path.realpath(l["input"]) for l in lines]
assert len(files) == len(set(files)) == 3 and all(l["status"] == "ok" for l in lines), lines
rows, index = load_pooled("OUT")
assert len(index) == 3 and sorted(x["row"] for x in index) == [0, 1, 2], index
for x in index: # each row the mean of that input's own output (a --pool run stores the mean)
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open("OUT/" + x["output"], "rb").read())))
    assert np.allclose(rows[x["row"]], a.reshape(-1, a.shape[-1]).mean(0), rtol=1e-6, atol=1e-7), x
newest = {os.path.realpath(l["input"]): l["input"] for l in lines}
assert sorted(x["input"] for x in index) == sorted(newest.values()), (index, newest)
PYEOF
}
