#!/usr/bin/env bats
# What a reader of --pool mean's pooled directories, manifest merge / compact / failed and tar
# compact gets after long histories of runs into one OUT (inputs changed on disk, retries,
# --force, shards of other counts, fix-ups without --shard), in both layouts: each index line is
# its input's newest manifest line (an ok row equal to numpy's mean of that input's output, or
# row null for an input whose newest line failed), never an older one. Oracles: the README's
# load_pooled as written, numpy, zstandard, Python's json and tarfile.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# readers_agree OUT: over every pooled directory of OUT (pooled/, pooled-*-of-*/), read with the
# README's load_pooled: rows numbered 0.. in index order; each index line names an input whose
# newest line over OUT's manifests (greatest (time, seq)) is that line (an ok row: the same run,
# seq and output or shard+offset, the row numpy's f64 mean of that output read with zstandard or
# tarfile) or an error line (row null). Prints "ok DIRS" or each disagreement.
readers_agree() {
    sed -n '/^<!-- test\/bats\/59-pooled-many-runs.bats runs this block/,/^```$/p' "$ROOT/README.md" |
        sed '1,2d;$d' > "$T/reader.py"
    "$PY" - "$T/reader.py" "$1" <<'PYEOF'
import glob, io, json, os, sys, tarfile
import numpy as np, zstandard
reader, out = sys.argv[1:3]
ns = {}
exec(open(reader).read(), ns)
key = lambda r: os.path.realpath(r.get("input_abs", r["input"]))
latest = {}
for m in glob.glob(os.path.join(out, "manifest*.jsonl")):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        k = key(r)
        if k not in latest or (r["time"], r["seq"]) >= (latest[k]["time"], latest[k]["seq"]):
            latest[k] = r
def output_of(r):
    if "shard" in r:
        with tarfile.open(os.path.join(out, r["shard"])) as t:
            a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
    else:
        with open(os.path.join(out, r["output"]), "rb") as f:
            a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))
    if r["dtype"] == "bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)
bad = []
dirs = sorted(os.path.basename(d) for d in glob.glob(os.path.join(out, "pooled*")) if os.path.isdir(d))
for stem in dirs:
    P, idx = ns["load_pooled"](out, stem)
    rows = [x["row"] for x in idx if x["row"] is not None]
    if rows != list(range(P.shape[0])):
        bad.append((stem, "rows", rows, P.shape))
    for x in idx:
        r = latest.get(os.path.realpath(x["input"]))
        if r is None:
            bad.append((stem, x["input"], "no manifest line"))
        elif x["row"] is None:
            if r["status"] == "ok":
                bad.append((stem, x["input"], "listed as failed, newest line is ok"))
        elif r["status"] != "ok":
            bad.append((stem, x["input"], "a row, newest line is an error"))
        elif (x["run"], x["seq"], x["output"], x.get("offset")) != (r["run"], r["seq"], r.get("shard", r["output"]), r.get("offset")):
            bad.append((stem, x["input"], "row of an older line"))
        elif not np.allclose(P[x["row"]], output_of(r).mean(axis=0), rtol=1e-6, atol=1e-6):
            bad.append((stem, x["input"], "row is not the mean of its output"))
for b in bad:
    print("BAD", b)
print("ok" if not bad else "bad", len(dirs))
PYEOF
}

# fixup_after_shards LAYOUT_ARGS...: --shard 0/2 and 1/2 over $T/in (bad.png fails), then bad.png
# made an image and the README's retry (manifest failed -0 | mvembed -0 -) without --shard
fixup_after_shards() {
    mkdir -p "$T/in"
    cp "$IMG"/jpeg_gray_200x149.jpg "$IMG"/png_rgb_320x256.png "$IMG"/png_gray_128x72.png "$T/in/"
    printf 'not an image' > "$T/in/bad.png"
    cd "$T"
    for sh in 0/2 1/2; do
        run "$MVEMBED" -q --device cpu --model "$MODEL" --out o --pool mean --shard "$sh" "$@" in
        [ "$status" -le 2 ]
    done
    run readers_agree o
    echo "$output"
    [ "$output" = "ok 2" ]
    cp "$IMG"/png_rgba_160x120.png in/bad.png
    "$MVEMBED" manifest failed o -0 | "$MVEMBED" -q --device cpu --model "$MODEL" --out o --pool mean "$@" -0 -
    run "$MVEMBED" manifest failed o
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    run readers_agree o
    echo "$output"
    [ "${lines[-1]:0:3}" = "ok " ]
}

@test "files layout: a fix-up without --shard leaves no pooled-K-of-N/ listing the fixed input as failed" {
    fixup_after_shards
}

@test "tar layout: a fix-up without --shard leaves no pooled-K-of-N/ listing the fixed input as failed" {
    fixup_after_shards --layout tar
}
