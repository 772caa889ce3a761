#!/usr/bin/python3
"""tar_check.py - what a reader of a tar-layout OUT sees, by Python's tarfile, json, numpy and
xxhash (none of them mvembed's code).

  tar_check.py OUT [--ok N] [--one-sample] [--dtype f16] [--max-samples N [--some-full]]

Reads every manifest*.jsonl in OUT line by line (the latest line of an input wins) and checks
each input whose latest line is ok: its shard opens with tarfile and holds <key>.npy and
<key>.json; the .npy member is "bytes" long, its XXH64 is "xxh64", np.load gives "shape" and the
dtype, every value is finite; the .json member is the manifest's record. --ok N: exactly N such
inputs. --one-sample: iterating every shard-*.tar as WebDataset does (members grouped by the name
up to the first dot), each ok input is the input of exactly one sample, and no other sample is
seen. --max-samples N: every shard-*.tar holds at most N samples (members grouped by key as
WebDataset groups them, each sample exactly one .npy and one .json), --some-full: one holds N;
prints "samples per shard: ..." (in name order). Prints "ok ..." last, or fails with an assertion.
"""
import glob
import io
import json
import os
import sys
import tarfile

import numpy as np
import xxhash

out = sys.argv[1]
args = sys.argv[2:]
want_ok = int(args[args.index("--ok") + 1]) if "--ok" in args else None
dtype = args[args.index("--dtype") + 1] if "--dtype" in args else None

latest = {}
for m in sorted(glob.glob(os.path.join(out, "manifest*.jsonl"))):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        latest[r["input"]] = r
ok = {i: r for i, r in latest.items() if r["status"] == "ok"}
members = {}
for r in ok.values():
    s = r["shard"]
    if s not in members:
        with tarfile.open(os.path.join(out, s)) as t:
            members[s] = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    npy = members[s][r["key"] + ".npy"]
    assert len(npy) == r["bytes"], (r["input"], len(npy), r["bytes"])
    assert xxhash.xxh64(npy).hexdigest() == r["xxh64"], r["input"]
    a = np.load(io.BytesIO(npy))
    assert list(a.shape) == r["shape"] and a.dtype == {"f32": "<f4", "f16": "<f2"}[r["dtype"]], r
    assert np.isfinite(a).all(), r["input"]
    if dtype:
        assert r["dtype"] == dtype, r
    assert json.loads(members[s][r["key"] + ".json"]) == r, r["input"]
if want_ok is not None:
    assert len(ok) == want_ok, (len(ok), want_ok, sorted(latest))
if "--one-sample" in args:
    seen = {}
    for s in sorted(glob.glob(os.path.join(out, "shard-*.tar"))):
        with tarfile.open(s) as t:
            for m in t.getmembers():
                if m.name.endswith(".json"):
                    rec = json.loads(t.extractfile(m).read())
                    seen.setdefault(rec["input"], []).append((os.path.basename(s), m.name))
    many = {i: v for i, v in seen.items() if len(v) != 1}
    assert not many, ("inputs with several samples", many)
    assert sorted(seen) == sorted(ok), ("samples a reader sees", sorted(set(seen) ^ set(ok)))
if "--max-samples" in args:
    cap = int(args[args.index("--max-samples") + 1])
    counts = []
    for s in sorted(glob.glob(os.path.join(out, "shard-*.tar"))):
        with tarfile.open(s) as t:
            groups = {}
            for m in t.getmembers():
                key, _, ext = m.name.partition(".")
                groups.setdefault(key, []).append(ext)
        assert all(sorted(v) == ["json", "npy"] for v in groups.values()), (s, groups)
        assert len(groups) <= cap, (os.path.basename(s), len(groups), "samples, more than", cap)
        counts.append(len(groups))
    print("samples per shard:", " ".join(map(str, counts)))
    assert counts, "no shards"
    if "--some-full" in args:
        assert max(counts) == cap, ("no shard holds", cap, counts)
print("ok", len(ok), "inputs verified in", len(members), "shards")
