#!/usr/bin/env bats
# A careful dataset user runs the readers the README and the man page show, as written, on OUTs
# a real dataset gives them: an input redone by a rerun (a second line), an input whose redo
# failed (its older output still on disk), two names that differ only in bytes that are not
# UTF-8 (the same "input" string, told apart by input_b64). Oracles: Python's json (the newest
# line of each input, in file order), tarfile, numpy.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# odd_names DIR: two images whose names differ only in a byte that is not UTF-8
odd_names() {
    mkdir -p "$1"
    cp "$IMG/png_gray_128x72.png" "$1/a"$'\xff'".png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$1/a"$'\xfe'".png"
}

# newest OUT: "input shape" of the newest line of each input that is ok, one a line, sorted
newest() {
    "$PY" - "$1" <<'PY'
import json, sys
latest = {}
for l in open(sys.argv[1] + "/manifest.jsonl", encoding="utf-8"):
    r = json.loads(l)
    latest[r.get("input_b64", r["input"])] = r
for r in sorted(f'{r["input"]} {tuple(r["shape"])}' for r in latest.values() if r["status"] == "ok"):
    print(r)
PY
}

@test "README files reader: each input once, by its newest line; an input failed since is not read" {
    mkdir -p "$T/in"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    cp "$IMG/png_rgb_320x256.png" "$T/in/b.png"
    odd_names "$T/in"
    mvembed -q --device cpu --model "$MODEL" --out "$T/emb" "$T/in"
    # a.png turns into something that fails, b.png into another image: both redone
    cp "$ROOT/README.md" "$T/in/a.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/in/b.png"
    touch -d '+1 min' "$T/in/a.png" "$T/in/b.png"
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/emb" "$T/in"
    [ "$status" -eq 2 ]
    [ -f "$T/emb/a.png.npy.zst" ] # the older output stays on disk, no newest line names it
    sed -n '/^<!-- test\/bats\/60-datasets.bats runs this block/,/^```$/p' "$ROOT/README.md" | sed '1,2d;$d' > "$T/reader.py"
    cd "$T"
    run "$PY" reader.py
    echo "$output"
    [ "$status" -eq 0 ]
    # it printed "input (tokens, hidden) dtype": the newest ok line of each input, once
    printf '%s\n' "${lines[@]}" | sed 's/ [a-z0-9]*$//' | sort > got
    newest emb > want
    diff want got
    [ "$(wc -l < want)" -eq 3 ]
}

@test "README tar memmap reader: two names differing only in non-UTF-8 bytes are both read" {
    odd_names "$T/in"
    cd "$T"
    mvembed -q --device cpu --model "$MODEL" --out emb --layout tar in
    readme_recipe "Tar shards without copying" > reader.py
    grep -q np.memmap reader.py
    run "$PY" reader.py
    echo "$output"
    [ "$status" -eq 0 ]
    # "input key (tokens, hidden)": each key names a .npy member of its shard (tarfile)
    printf '%s\n' "${lines[@]}" > printed
    run "$PY" - <<'PY'
import glob, json, tarfile
members = {m.name for t in glob.glob("emb/shard-*.tar") for m in tarfile.open(t)}
got = sorted((l.split(" ", 2)[0] + " " + l.split(" ", 2)[2]) for l in open("printed").read().splitlines())
keys = [l.split(" ", 2)[1] for l in open("printed").read().splitlines()]
assert all(k + ".npy" in members for k in keys), (keys, members)
assert len(set(keys)) == len(keys) == 2, keys
want = sorted(f'{r["input"]} {tuple(r["shape"])}' for r in map(json.loads, open("emb/manifest.jsonl")))
assert got == want, (got, want)
print("ok", got)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "man page EXAMPLES reader: loads each newest ok output, non-UTF-8 names included" {
    mkdir -p "$T/in"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    odd_names "$T/in"
    cd "$T"
    mvembed -q --device cpu --model "$MODEL" --out O in
    cp "$ROOT/README.md" in/a.png
    touch -d '+1 min' in/a.png
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out O in
    [ "$status" -eq 2 ]
    # the block between "Read an output from Python:" and .fi, as the man page shows it
    sed -n '/^Read an output from Python:/,/^\.fi/p' "$ROOT/man/mvembed.1" | sed '1,3d;$d' | sed 's/^    //' > reader.py
    grep -q zstandard reader.py
    run "$PY" - <<'PY'
import base64, builtins, json, os
import numpy as np
opened = []
def logged_open(p, *a, **k):
    if str(p).endswith(".npy.zst"):
        opened.append(os.fsencode(p))
    return builtins.open(p, *a, **k)
ns = {"open": logged_open}
exec(open("reader.py").read(), ns)
latest = {}
for l in open("O/manifest.jsonl"):
    r = json.loads(l)
    latest[r.get("input_b64", r["input"])] = r
want = sorted(b"O/" + (base64.b64decode(r["output_b64"]) if "output_b64" in r else r["output"].encode())
              for r in latest.values() if r["status"] == "ok")
assert sorted(opened) == want and len(want) == 2, (opened, want)
assert ns["emb"].ndim == 2 and ns["emb"].dtype == np.float32, ns["emb"]
print("ok", opened)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
