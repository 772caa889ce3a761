#!/usr/bin/env bats
# A careful dataset user's second pass: in --layout tar, one input spelled two ways in one run
# (relative and from /, through '..' or a symbolic link to its directory) is one sample, as a later
# run and compact already take it. Oracles: Python's json over the manifests, tarfile grouping samples as WebDataset does
# (tar_check.py), numpy + zstandard loading the outputs.
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
