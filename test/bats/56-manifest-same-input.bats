#!/usr/bin/env bats
# One input, several spellings: "in", "./in/" and "/abs/in" name the same input (resume treats
# them so), so `manifest compact`, `merge` and `failed` fold their lines as one input's: the newest
# line wins, and each output file (files layout) or each input's sample (tar layout) is left with
# exactly one line, the one describing its bytes. Oracles: Python's json over the manifests,
# numpy + zstandard over the outputs, tarfile over the shards, os.path.realpath for "same file".
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    mkdir "$T/in"
    cp "$IMG/png_rgb_320x256.png" "$T/in/a.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/in/b.jpg"
    cd "$T" # the runs get relative paths: the manifests record them as given
}

emb() { mvembed -q --device cpu --threads 1 --model "$MODEL" "$@"; }

# change: every input gets other pixels (another size: other shapes, other bytes)
change() {
    cp "$IMG/webp_lossy_192x128.webp" "$T/in/a.png"
    cp "$IMG/png_rgba_160x120.png" "$T/in/b.jpg"
}

# one_line_each OUT LAYOUT BEFORE...: OUT/manifest.jsonl holds one line per input file (by
# realpath), and it is that file's newest line over the manifests BEFORE (copies taken before the
# rewrite; newest: of one run the higher seq, of two the later time). Files layout: each output
# file has at most one ok line (none: its input failed since), whose shape, dtype and bytes are the
# file's (numpy), and every ok line names a file. Tar layout:
# the shards hold one sample per input (tarfile), the one its ok line names, with its shape.
one_line_each() {
    "$PY" - "$@" <<'PYEOF'
import glob, io, json, os, sys, tarfile
import numpy as np, zstandard
out, layout, before = sys.argv[1], sys.argv[2], sys.argv[3:]
rp = lambda r: os.path.realpath(r["input"])
newest = {}
for p in before:
    for l in open(p):
        r = json.loads(l)
        if rp(r) not in newest or (r["time"], r["seq"]) > (newest[rp(r)]["time"], newest[rp(r)]["seq"]):
            newest[rp(r)] = r
kept = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
by_in = {}
for r in kept:
    by_in.setdefault(rp(r), []).append(r)
assert sorted(by_in) == sorted(newest), (sorted(by_in), sorted(newest))
for k, v in by_in.items():
    assert len(v) == 1, ("lines of one input", k, v)
    assert v[0] == newest[k], ("not the newest line", v[0], newest[k])
dt = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}
ok = [r for r in kept if r["status"] == "ok"]
if layout == "files":
    files = sorted(os.path.relpath(p, out) for p in glob.glob(out + "/**/*.npy.zst", recursive=True))
    for f in files:
        m = [r for r in ok if r["output"] == f]
        assert len(m) <= 1, ("ok lines for", f, m)
        if not m: # its input failed since: the input's one line is an error
            continue
        raw = zstandard.ZstdDecompressor().stream_reader(open(os.path.join(out, f), "rb")).read()
        a = np.load(io.BytesIO(raw))
        assert list(a.shape) == m[0]["shape"], (f, a.shape, m[0]["shape"])
        assert a.dtype == np.dtype(dt[m[0]["dtype"]]), (f, a.dtype, m[0]["dtype"])
        assert os.path.getsize(os.path.join(out, f)) == m[0]["bytes"], f
    assert all(r["output"] in files for r in ok), (files, ok)
else:
    samples = {}
    for p in sorted(glob.glob(os.path.join(out, "shard-*.tar"))):
        with tarfile.open(p) as t:
            for mem in t.getmembers():
                if mem.name.endswith(".json"):
                    rec = json.load(t.extractfile(mem))
                    key = mem.name[:-5]
                    a = np.load(io.BytesIO(t.extractfile(key + ".npy").read()))
                    samples.setdefault(rp(rec), []).append((os.path.basename(p), key, list(a.shape)))
    for k, v in samples.items():
        assert len(v) == 1, ("samples of one input", k, v)
    assert sorted(samples) == sorted(rp(r) for r in ok), (sorted(samples), ok)
    for r in ok:
        assert samples[rp(r)][0] == (r["shard"], r["key"], r["shape"]), (samples[rp(r)], r)
print("ok", len(kept), "lines")
PYEOF
}

@test "compact after a rerun as /abs/in: one ok line per output file, and it describes the file" {
    emb --out o in
    change
    run emb --out o "$T/in" # "changed since it was embedded ...; redoing it"
    [ "$status" -eq 0 ]
    cp o/manifest.jsonl before
    run mvembed manifest compact o
    echo "$output"
    [ "$status" -eq 0 ]
    run one_line_each o files before
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "compact after a rerun as ./in/ with --out-dtype f16: one line per input, the f16 one" {
    emb --out o in
    change
    run emb --out o --out-dtype f16 ./in/
    [ "$status" -eq 0 ]
    cp o/manifest.jsonl before
    run mvembed manifest compact o
    [ "$status" -eq 0 ]
    run one_line_each o files before
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$("$PY" -c 'import json,sys; print({json.loads(l)["dtype"] for l in open(sys.argv[1])})' o/manifest.jsonl)" = "{'f16'}" ]
}

@test "an input that fails as /abs/in after an ok line as in: its error line wins in compact and failed" {
    emb --out o in
    cp "$ROOT/fixtures/bad/truncated.jpg" "$T/in/b.jpg"
    run emb --out o "$T/in"
    [ "$status" -eq 2 ]
    cp o/manifest.jsonl before
    # manifest failed names it once; the other input's newest line is ok
    run mvembed manifest failed o
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$("$PY" -c 'import os,sys; print(os.path.realpath(sys.argv[1]))' "$output")" = "$(realpath in/b.jpg)" ]
    run mvembed manifest compact o
    [ "$status" -eq 0 ]
    run one_line_each o files before
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "manifest failed: a failure as in that a rerun as /abs/in fixed is not listed" {
    cp "$ROOT/fixtures/bad/truncated.jpg" "$T/in/b.jpg"
    run emb --out o in
    [ "$status" -eq 2 ]
    [ "$(mvembed manifest failed o)" = in/b.jpg ]
    cp "$IMG/png_rgba_160x120.png" "$T/in/b.jpg"
    run emb --out o "$T/in"
    [ "$status" -eq 0 ]
    # the oracle: every input file's newest line is ok
    run "$PY" -c '
import json, os, sys
newest = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    k = os.path.realpath(r["input"])
    if k not in newest or (r["time"], r["seq"]) > newest[k][0]:
        newest[k] = ((r["time"], r["seq"]), r["status"])
assert len(newest) == 2 and all(st == "ok" for _, st in newest.values()), newest' o/manifest.jsonl
    [ "$status" -eq 0 ]
    run mvembed manifest failed o
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "merge of shard manifests holding in and /abs/in lines: one ok line per output file" {
    for k in 0 1; do emb --out o --shard "$k/2" in; done
    change
    for k in 0 1; do
        run emb --out o --shard "$k/2" "$T/in"
        [ "$status" -eq 0 ]
    done
    cat o/manifest-*-of-*.jsonl > before
    run mvembed manifest merge o
    echo "$output"
    [ "$status" -eq 0 ]
    run one_line_each o files before
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "tar layout: compact after --force as /abs/in leaves one sample per input in the shards" {
    emb --out o --layout tar in
    run emb --out o --layout tar --force "$T/in"
    [ "$status" -eq 0 ]
    cp o/manifest.jsonl before
    run mvembed manifest compact o
    echo "$output"
    [ "$status" -eq 0 ]
    run one_line_each o tar before
    echo "$output"
    [ "$status" -eq 0 ]
    # and a later run as given first neither redoes nor adopts anything: still one sample each
    run emb --out o --layout tar in
    [ "$status" -eq 0 ]
    run one_line_each o tar before
    echo "$output"
    [ "$status" -eq 0 ]
}
