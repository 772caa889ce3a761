#!/usr/bin/env bats
# One input spelled two ways in one run (relative and from /, through '..' or a symbolic link to
# its directory, its directory and itself as `find DIR -print0` lists them) is one input: one
# sample in --layout tar, one output file in the files layout, as a later run, manifest compact
# and pooled/ take it. Oracles: Python's json over the manifests, tarfile grouping samples as
# WebDataset does (tar_check.py), find over OUT, numpy + zstandard loading the outputs.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/in"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/in/b.jpg"
    ln -s in "$T/lnk"
}

emb() { "$MVEMBED" -q --device cpu --model "$MODEL" "$@"; }

# inputs_of OUT: each input_abs (else input) of OUT's ok lines, with how many ok lines it has
inputs_of() {
    "$PY" -c '
import glob, json, os, sys, collections
c = collections.Counter()
for m in glob.glob(os.path.join(sys.argv[1], "manifest*.jsonl")):
    for l in open(m, encoding="utf-8"):
        r = json.loads(l)
        if r["status"] == "ok":
            c[r.get("input_abs", r["input"])] += 1
for k, v in sorted(c.items()):
    print(v, k)' "$1"
}

# one_sample_each OUT N: N inputs with one ok line each, and N samples in OUT's shards as a
# WebDataset reader groups them (tar_check.py) and as tarfile lists the .npy members
one_sample_each() {
    run inputs_of "$1"
    echo "$output"
    [ "${#lines[@]}" -eq "$2" ]
    [ "$(echo "$output" | awk '$1 != 1' | wc -l)" -eq 0 ]
    tar_check "$1" --ok "$2" --one-sample
    "$PY" - "$1" "$2" <<'PYEOF'
import glob, os, sys, tarfile
n = sum(1 for s in glob.glob(os.path.join(sys.argv[1], "shard-*.tar")) for m in tarfile.open(s) if m.name.endswith(".npy"))
assert n == int(sys.argv[2]), n
PYEOF
}

@test "--layout tar, a file and a tar named relative, from /, through a linked directory and by their directory: one sample each" {
    cd "$T"
    tar -cf in.tar -C in a.png b.jpg
    run emb --out ot --layout tar in/a.png "$T/in/a.png" lnk/a.png in/../in/a.png in in.tar "$T/in.tar"
    echo "$output"
    [ "$status" -eq 0 ]
    one_sample_each "$T/ot" 4 # what a WebDataset reader sees: four samples, one per input
    # compact finds nothing to remove: no sample was a duplicate
    run "$MVEMBED" manifest compact ot
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "(4 ok, 0 not ok)" ]]
    [[ ! "$output" =~ "dead samples" ]]
}

@test "--layout tar from find -print0 without -type f (the directory and its files): one sample per file" {
    cd "$T"
    find in -print0 | emb --out ot --layout tar -0 -
    one_sample_each "$T/ot" 2
}

# one_output_each OUT N: OUT/manifest.jsonl has N ok lines, one per input (input_abs), each
# naming an output file numpy + zstandard load with the line's shape; OUT holds exactly those
# N .npy.zst files, none left over that no line names
one_output_each() {
    run "$PY" - "$1" "$2" <<'PYEOF'
import collections, glob, io, json, os, sys
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
recs = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8")]
ok = [r for r in recs if r["status"] == "ok"]
per_input = collections.Counter(r.get("input_abs", r["input"]) for r in ok)
assert len(per_input) == n and all(v == 1 for v in per_input.values()), per_input
named = set()
for r in ok:
    with open(os.path.join(out, r["output"]), "rb") as f:
        a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(f.read())))
    assert list(a.shape) == r["shape"], (r["input"], a.shape)
    named.add(r["output"])
files = {os.path.relpath(p, out) for p in glob.glob(os.path.join(out, "**", "*.npy.zst"), recursive=True)}
assert files == named, ("files no line names", sorted(files - named))
print("ok", len(ok), "lines,", len(files), "files")
PYEOF
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "files layout, a file named relative and from /, through a linked directory and by its directory: one output each" {
    cd "$T"
    run emb --out o in/a.png "$T/in/a.png" lnk/a.png in/../in/a.png in
    echo "$output"
    [ "$status" -eq 0 ]
    one_output_each "$T/o" 2
    # compact keeps every output a line names; a rerun skips every spelling
    run "$MVEMBED" manifest compact o
    [ "$status" -eq 0 ]
    one_output_each "$T/o" 2
    run "$MVEMBED" --device cpu --model "$MODEL" --out o in/a.png "$T/in/a.png" lnk/a.png in
    echo "$output"
    [[ "$output" =~ "0 ok, 0 failed, 5 skipped" ]] # a.png three ways, and in: a.png, b.jpg
}

@test "files layout from find -print0 without -type f (the directory and its files): one output per file" {
    cd "$T"
    find in -print0 | emb --out o -0 -
    one_output_each "$T/o" 2
    # a spelling whose name another input took fails; the input's next spelling still embeds it
    mkdir -p "$T/other"
    cp "$IMG/webp_lossy_192x128.webp" "$T/other/a.png"
    # other/a.png and in/a.png both want the name a.png: in/a.png found under in fails with
    # "already used", and its file argument spelling then embeds it under in/a.png
    run emb --out o2 other in in/a.png
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" -c '
import json, sys
last = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    last[r.get("input_abs", r["input"])] = r["status"]
print(sorted(last.values()))' "$T/o2/manifest.jsonl"
    echo "$output"
    [ "$output" = "['ok', 'ok', 'ok']" ]
}

@test "files layout --pool mean over one file named two ways: one pooled row, one output" {
    cd "$T"
    emb --out o --pool mean in/a.png "$T/in/b.jpg" in
    one_output_each "$T/o" 2
    run "$PY" -c '
import json, numpy as np, sys
rows = np.load(sys.argv[1] + "/pooled/pooled.npy")
idx = [json.loads(l) for l in open(sys.argv[1] + "/pooled/pooled.jsonl")]
assert rows.shape[0] == len(idx) == 2, (rows.shape, idx)
print("ok")' "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
}
