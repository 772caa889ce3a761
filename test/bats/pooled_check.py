#!/usr/bin/python3
"""pooled_check.py - what a reader of an OUT's pooled directories sees, by Python's json, numpy,
zstandard and tarfile (none of them mvembed's code).

  pooled_check.py OUT N [--dirs NAMES|GLOB] [--base DIR] [--key realpath|input] [--exact]

Takes each input's newest line over every OUT/manifest*.jsonl (the greatest (time, seq)) and
asserts there are N inputs, each newest line ok. Then, for each pooled directory of OUT: its
pooled.npy has one row per line of its pooled.jsonl, and each line's row equals numpy's mean
(float64, atol 1e-6) over the first axis of that input's newest output: the .npy.zst file the
line's "output" names (read with zstandard) or, for a line with a "shard", the <key>.npy sample
of that tar (read with tarfile). The directories together index each of the N inputs exactly
once. Prints "ok N DIRS" (DIRS: how many directories were read) or fails with an assertion.

  --dirs   comma-separated directory names under OUT, each of which must exist (default
           pooled-00000-of-00002,pooled-00001-of-00002), or a glob (with * or ?) under OUT,
           e.g. 'pooled-*-of-*'
  --key    how an index line is matched to a manifest line: realpath (default) compares
           os.path.realpath of the manifest's input_abs (its input if it has none) with that of
           the index line's input; input compares the two "input" strings as written
  --base   the directory a relative input of an index line is resolved from (default: the
           current directory); only with --key realpath
  --exact  each output is one row ([1, H]) and the pooled row is equal to it, bit for bit
"""
import collections
import glob
import io
import json
import os
import sys
import tarfile

import numpy as np
import zstandard

out, n = sys.argv[1], int(sys.argv[2])
args = sys.argv[3:]


def opt(name, default):
    return args[args.index(name) + 1] if name in args else default


dirs_arg = opt("--dirs", "pooled-00000-of-00002,pooled-00001-of-00002")
base = opt("--base", os.getcwd())
by = opt("--key", "realpath")
exact = "--exact" in args
assert by in ("realpath", "input"), ("--key", by)


def manifest_key(r):
    if by == "input":
        return r["input"]
    return os.path.realpath(r.get("input_abs", r["input"]))


def index_key(x):
    if by == "input":
        return x["input"]
    return os.path.realpath(os.path.join(base, x["input"]))


latest = {}
for m in glob.glob(os.path.join(out, "manifest*.jsonl")):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        k = manifest_key(r)
        if k not in latest or (r["time"], r["seq"]) > (latest[k]["time"], latest[k]["seq"]):
            latest[k] = r
bad = sorted(k for k, r in latest.items() if r["status"] != "ok")
assert len(latest) == n and not bad, ("inputs", len(latest), "want", n, "not ok", bad)

if "*" in dirs_arg or "?" in dirs_arg:
    dirs = sorted(d for d in glob.glob(os.path.join(out, dirs_arg)) if os.path.isdir(d))
else:
    dirs = [os.path.join(out, d) for d in dirs_arg.split(",")]
    for d in dirs:
        assert os.path.isdir(d), ("missing", d, sorted(os.listdir(out)))


def output_of(r):
    if "shard" in r:
        with tarfile.open(os.path.join(out, r["shard"])) as t:
            return np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
    with open(os.path.join(out, r["output"]), "rb") as f:
        return np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))


seen = collections.Counter()
for d in dirs:
    rows = np.load(os.path.join(d, "pooled.npy"))
    idx = [json.loads(l) for l in open(os.path.join(d, "pooled.jsonl"), encoding="utf-8")]
    assert rows.shape[0] == len(idx), (d, rows.shape, len(idx))
    for x in idx:
        k = index_key(x)
        assert k in latest, ("index names an input no manifest has", d, x["input"])
        a = output_of(latest[k])
        if exact:
            assert a.shape[0] == 1 and np.array_equal(rows[x["row"]], a[0]), (d, x["input"])
        else:
            assert np.allclose(rows[x["row"]], a.astype(np.float64).mean(axis=0), atol=1e-6), (d, x["input"])
        seen[k] += 1
twice = sorted(k for k, c in seen.items() if c > 1)
assert not twice and len(seen) == n, ("dirs", [os.path.basename(d) for d in dirs], "rows", sum(seen.values()),
                                      "distinct", len(seen), "inputs", n, "twice", twice)
print("ok", n, len(dirs))
