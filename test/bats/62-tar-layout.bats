#!/usr/bin/env bats
# --layout tar (WebDataset shards), --shard-size, resume per shard, --pool mean and pooled.npy.
# Oracles: GNU tar and Python's tarfile read the shards, numpy reads the arrays (np.load of the
# extracted members, np.memmap at the recorded offsets) and computes the f64 means; the files
# layout's outputs (zstd -d + numpy) are the reference arrays.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IN="$ROOT/fixtures/media"
}

# files OUT [ARGS...]: a files-layout run of the fixtures into OUT
files_run() {
    local out=$1
    shift
    mvembed -q --device cpu --model "$MODEL" --out "$out" "$@" "$IN"
}

@test "tar layout: tar -x + np.load, np.memmap at the recorded offset and tarfile all equal the files layout bit for bit" {
    files_run "$T/files"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/tar" --layout tar --shard-size 40K "$IN"
    [ "$status" -eq 0 ]
    ls "$T/tar"/shard-*.tar
    [ "$(ls "$T/tar"/shard-*.tar | wc -l)" -gt 2 ] # 40K shards: several of them
    [ -z "$(ls -A "$T/tar" | grep -v -e '^shard-[0-9]\{5\}\.tar$' -e '^manifest.jsonl$' -e '^run-[0-9a-f]\{16\}\.json$' -e '^_SUCCESS$' -e '^\.mvembed\.lock$' -e '^\.mvembed-tar\.json$')" ]
    mkdir "$T/x"
    for s in "$T/tar"/shard-*.tar; do
        tar -x -f "$s" -C "$T/x"
        [ "$(stat -c %s "$s")" -le $((40 * 1024)) ]
    done
    run "$PY" - "$T/files" "$T/tar" "$T/x" <<'EOF'
import glob, io, json, os, subprocess, sys, tarfile
import numpy as np
files, tar, x = sys.argv[1:]
ref = {}
for l in open(f"{files}/manifest.jsonl"):
    r = json.loads(l)
    assert r["status"] == "ok", r
    raw = subprocess.run(["zstd", "-q", "-d", "-c", f"{files}/{r['output']}"], check=True,
                         stdout=subprocess.PIPE).stdout
    ref[r["input"]] = np.load(io.BytesIO(raw))
recs = [json.loads(l) for l in open(f"{tar}/manifest.jsonl")]
assert sorted(r["input"] for r in recs) == sorted(ref), "every input once in the manifest"
for r in recs:
    a = ref[r["input"]]
    assert r["status"] == "ok" and r["shape"] == list(a.shape) and r["dtype"] == "f32"
    assert "." not in r["key"] and r["output"] == r["shard"] and r["offset"] % 64 == 0, r
    # tar -x + np.load
    b = np.load(f"{x}/{r['key']}.npy")
    assert b.dtype == a.dtype and b.shape == a.shape and b.tobytes() == a.tobytes(), r["input"]
    assert json.load(open(f"{x}/{r['key']}.json"))["input"] == r["input"]
    # np.memmap straight into the tar
    m = np.memmap(f"{tar}/{r['shard']}", mode="r", dtype="<f4", offset=r["offset"], shape=tuple(r["shape"]))
    assert m.tobytes() == a.tobytes(), r["input"]
# tarfile, grouping members by key as WebDataset does (name up to the first dot)
samples, n_members = {}, 0
for s in sorted(glob.glob(f"{tar}/shard-*.tar")):
    with tarfile.open(s) as t:
        for mem in t.getmembers():
            n_members += 1
            key, ext = mem.name.split(".", 1)
            assert ext in ("npy", "json") and (key, ext) not in samples.get(key, {}), mem.name
            d = t.extractfile(mem).read()
            samples.setdefault(key, {})[ext] = (d, os.path.basename(s), mem.offset_data)
assert n_members == 2 * len(ref) and len(samples) == len(ref)
seen = set()
for key, smp in samples.items():
    rec = json.loads(smp["json"][0])
    a = np.load(io.BytesIO(smp["npy"][0]))
    assert rec["key"] == key and rec["shard"] == smp["npy"][1] and rec["input"] not in seen
    seen.add(rec["input"])
    assert a.tobytes() == ref[rec["input"]].tobytes()
    hdr = len(smp["npy"][0]) - a.nbytes  # NPY header length, from numpy's own parse
    assert rec["offset"] == smp["npy"][2] + hdr, (rec["offset"], smp["npy"][2], hdr)
print("ok", len(recs), "inputs in", len(glob.glob(f"{tar}/shard-*.tar")), "shards")
EOF
    echo "$output"
    [[ "${lines[-1]}" =~ ^ok ]]
}

@test "tar layout with --out-dtype f16: np.memmap as <f2 equals the files layout" {
    files_run "$T/files" --out-dtype f16
    mvembed -q --device cpu --model "$MODEL" --out "$T/tar" --layout tar --out-dtype f16 "$IN"
    # default 1G: no shard is full, so each writer thread completes its one open shard at the end
    ls "$T/tar"/shard-00000.tar
    [ "$(ls "$T/tar"/*.tar | wc -l)" -le 8 ]
    run "$PY" - "$T/files" "$T/tar" <<'EOF'
import io, json, subprocess, sys
import numpy as np
files, tar = sys.argv[1:]
ref = {}
for l in open(f"{files}/manifest.jsonl"):
    r = json.loads(l)
    raw = subprocess.run(["zstd", "-q", "-d", "-c", f"{files}/{r['output']}"], check=True, stdout=subprocess.PIPE).stdout
    ref[r["input"]] = np.load(io.BytesIO(raw))
n = 0
for l in open(f"{tar}/manifest.jsonl"):
    r = json.loads(l)
    assert r["dtype"] == "f16"
    m = np.memmap(f"{tar}/{r['shard']}", mode="r", dtype="<f2", offset=r["offset"], shape=tuple(r["shape"]))
    assert ref[r["input"]].dtype == np.float16 and m.tobytes() == ref[r["input"]].tobytes()
    n += 1
assert n == len(ref)
print("ok", n)
EOF
    echo "$output"
    [[ "$output" =~ ^ok ]]
}

@test "two --shard K/2 --layout tar runs into one OUT: distinct shard names and keys, every input once" {
    for k in 0 1; do
        run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 30K --shard "$k/2" "$IN"
        [ "$status" -eq 0 ]
        ls "$T/o/shard-0000$k-of-00002-00000.tar"
    done
    ls "$T/o"
    [ -z "$(ls -A "$T/o" | grep -v -e '^shard-0000[01]-of-00002-[0-9]\{5\}\.tar$' -e '^manifest-0000[01]-of-00002\.jsonl$' -e '^run-0000[01]-of-00002-[0-9a-f]\{16\}\.json$' -e '^_SUCCESS-0000[01]-of-00002$' -e '^\.mvembed\.lock$' -e '^\.mvembed-tar\.json$')" ]
    files_run "$T/files"
    run "$PY" - "$T/o" "$T/files" <<'EOF'
import glob, json, sys, tarfile
o, files = sys.argv[1:]
want = sorted(json.loads(l)["input"] for l in open(f"{files}/manifest.jsonl"))
recs = [json.loads(l) for m in sorted(glob.glob(f"{o}/manifest-*-of-00002.jsonl")) for l in open(m)]
assert sorted(r["input"] for r in recs) == want, "the two shards cover every input once"
keys, inputs = [], []
for s in sorted(glob.glob(f"{o}/shard-*.tar")):
    with tarfile.open(s) as t:
        for mem in t.getmembers():
            if mem.name.endswith(".json"):
                keys.append(mem.name.split(".")[0])
                inputs.append(json.loads(t.extractfile(mem).read())["input"])
assert len(set(keys)) == len(keys) == len(want), "keys unique across both runs"
assert sorted(inputs) == want
print("ok", len(want), "inputs,", len(glob.glob(f"{o}/shard-*.tar")), "shards")
EOF
    echo "$output"
    [[ "$output" =~ ^ok ]]
    # a second run of shard 1 has nothing to do and writes no new shard
    n=$(ls "$T/o"/shard-*.tar | wc -l)
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard 1/2 "$IN"
    [[ "$output" =~ " 0 ok, 0 failed, " ]]
    [ "$(ls "$T/o"/shard-*.tar | wc -l)" -eq "$n" ]
}

@test "tar layout: kill -9 mid-shard, resume redoes only the open shard's inputs; every input once, no temp files" {
    mkdir "$T/in"
    for i in $(seq -w 1 20); do
        cp "$IN/images/png_rgb_odd_173x97.png" "$T/in/a$i.png"
        cp "$IN/images/jpeg_exif6_168x104.jpg" "$T/in/b$i.jpg"
    done
    # about 8.5 KB a sample: 2 samples a shard. The paths come through a FIFO the test keeps
    # open, so the run waits for more input with its shards open: no race with its speed.
    mkfifo "$T/paths"
    "$MVEMBED" -q --device cpu --threads 1 --jobs 1 --model "$MODEL" --out "$T/o" --layout tar \
        --shard-size 20K - < "$T/paths" 2> "$T/err1" &
    pid=$!
    exec 7> "$T/paths"
    ls "$T/in"/* | head -11 >&7
    for _ in $(seq 1 1200); do
        # some shards complete and one open (its temporary file present); 11 inputs in
        [ "$(cat "$T/o/manifest.jsonl" 2>/dev/null | wc -l)" -ge 4 ] && ls "$T/o"/.tmp-tar-* >/dev/null 2>&1 && break
        sleep 0.05
    done
    sleep 1 # the 11 inputs are through the pipeline; the run waits on the FIFO
    kill -9 "$pid"
    wait "$pid" || true
    exec 7>&-
    done1=$(wc -l < "$T/o/manifest.jsonl")
    echo "after kill: $done1 manifest lines; $(ls -A "$T/o" | tr '\n' ' ')"
    [ "$done1" -ge 4 ] && [ "$done1" -lt 40 ] # killed mid-run
    ls "$T/o"/.tmp-tar-*-shard-*.tar # with a shard open
    # every line points into a complete shard; remember those shards' bytes
    "$PY" -c '
import json, sys, os
for l in sys.stdin:
    r = json.loads(l)
    assert os.path.isfile(sys.argv[1] + "/" + r["shard"]), r["shard"]' "$T/o" < "$T/o/manifest.jsonl"
    (cd "$T/o" && sha256sum shard-*.tar) > "$T/sums1"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard-size 20K "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " $((40 - done1)) ok, 0 failed, $done1 skipped" ]]
    (cd "$T/o" && sha256sum -c "$T/sums1") # the complete shards are untouched
    [ -z "$(ls -A "$T/o" | grep -v -e '^shard-[0-9]\{5\}\.tar$' -e '^manifest.jsonl$' -e '^run-[0-9a-f]\{16\}\.json$' -e '^_SUCCESS$' -e '^\.mvembed\.lock$' -e '^\.mvembed-tar\.json$')" ] # no temp files
    run "$PY" - "$T/o" "$T/in" <<'EOF'
import glob, json, os, sys, tarfile
o, ind = sys.argv[1:]
want = sorted(os.path.join(ind, f) for f in os.listdir(ind))
inputs = []
for s in sorted(glob.glob(f"{o}/shard-*.tar")):
    with tarfile.open(s) as t:
        inputs += [json.loads(t.extractfile(m).read())["input"] for m in t.getmembers() if m.name.endswith(".json")]
assert sorted(inputs) == want, "every input exactly once across the complete shards"
recs = [json.loads(l) for l in open(f"{o}/manifest.jsonl")]
assert sorted(r["input"] for r in recs) == want and all(os.path.isfile(f"{o}/{r['shard']}") for r in recs)
print("ok", len(want))
EOF
    echo "$output"
    [[ "$output" =~ ^ok ]]
}

@test "--pool mean: numpy's f64 mean of the token output within 1e-6, files and tar layouts; pooled.npy rows in index order" {
    files_run "$T/tok"
    files_run "$T/pf" --pool mean
    run mvembed -q --device cpu --model "$MODEL" --out "$T/pt" --pool mean --layout tar "$IN"
    [ "$status" -eq 0 ]
    [ -f "$T/pf/pooled/pooled.npy" ] && [ -f "$T/pf/pooled/pooled.jsonl" ]
    [ -f "$T/pt/pooled/pooled.npy" ] && [ -f "$T/pt/pooled/pooled.jsonl" ]
    run "$PY" - "$T/tok" "$T/pf" "$T/pt" <<'EOF'
import io, json, subprocess, sys
import numpy as np
tok, pf, pt = sys.argv[1:]
def zload(p):
    return np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", p], check=True, stdout=subprocess.PIPE).stdout))
want, kinds = {}, set()
for l in open(f"{tok}/manifest.jsonl"):
    r = json.loads(l)
    want[r["input"]] = zload(f"{tok}/{r['output']}").astype(np.float64).mean(axis=0)
    kinds.add(r["kind"])
assert kinds == {"image", "video"}
def close(got, ref):
    return np.abs(got.astype(np.float64) - ref).max() <= 1e-6 * np.abs(ref).max()
per_input = {}
for l in open(f"{pf}/manifest.jsonl"):
    r = json.loads(l)
    a = zload(f"{pf}/{r['output']}")
    assert a.shape == (1, want[r["input"]].size) and r["shape"] == list(a.shape) and a.dtype == np.float32
    assert close(a[0], want[r["input"]]), r["input"]
    per_input[r["input"]] = (a[0], r["output"])
n = 0
for l in open(f"{pt}/manifest.jsonl"):
    r = json.loads(l)
    m = np.memmap(f"{pt}/{r['shard']}", mode="r", dtype="<f4", offset=r["offset"], shape=tuple(r["shape"]))
    assert m.shape == (1, want[r["input"]].size) and close(m[0], want[r["input"]]), r["input"]
    n += 1
assert n == len(want) == len(per_input)
P = np.load(f"{pf}/pooled/pooled.npy")
idx = [json.loads(l) for l in open(f"{pf}/pooled/pooled.jsonl")]
assert P.shape == (len(want), next(iter(want.values())).size) and P.dtype == np.float32
assert [x["row"] for x in idx] == list(range(len(idx))) and sorted(x["input"] for x in idx) == sorted(want)
for x in idx:
    v, out = per_input[x["input"]]
    assert x["output"] == out and P[x["row"]].tobytes() == v.tobytes(), x
print("ok", len(idx), "pooled rows")
EOF
    echo "$output"
    [[ "$output" =~ ^ok ]]
}

@test "--pool mean: the pooled directory covers the ok inputs, lists the failed one, and counts skipped inputs" {
    mkdir "$T/in"
    cp "$IN/images/png_rgb_odd_173x97.png" "$IN/images/jpeg_exif6_168x104.jpg" "$T/in/"
    printf 'not an image' > "$T/in/bad.png"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    [ "$status" -eq 2 ]
    run "$PY" -c '
import json, sys
import numpy as np
P = np.load(sys.argv[1] + "/pooled/pooled.npy")
idx = [json.loads(l) for l in open(sys.argv[1] + "/pooled/pooled.jsonl")]
bad = [x for x in idx if x["row"] is None]
assert P.shape[0] == 2 and len(idx) == 3 and [x["input"][-7:] for x in bad] == ["bad.png"], idx
assert bad[0]["status"] == "error" and "not an image" in bad[0]["error"], bad
print("ok")' "$T/o"
    [ "$output" = ok ]
    rm "$T/in/bad.png"
    cp "$IN/images/png_gray_128x72.png" "$T/in/"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 1 ok, 0 failed, 2 skipped" ]]
    run "$PY" -c '
import json, sys
import numpy as np
P = np.load(sys.argv[1] + "/pooled/pooled.npy")
idx = [json.loads(l) for l in open(sys.argv[1] + "/pooled/pooled.jsonl")]
rows = [x for x in idx if x["row"] is not None]
assert P.shape[0] == len(rows) == 3 and [x["input"] for x in idx] == sorted(x["input"] for x in idx)
# bad.png is gone from the input folder, but its newest manifest line is still its error
assert [x["input"][-7:] for x in idx if x["row"] is None] == ["bad.png"], idx
print("ok")' "$T/o"
    [ "$output" = ok ]
}

@test "the README's np.memmap reader runs as written on a tar-layout OUT" {
    files_run "$T/files"
    mkdir "$T/r"
    mvembed -q --device cpu --model "$MODEL" --out "$T/r/emb" --layout tar --shard-size 64K "$IN"
    # what a user runs: the README's recipe ("Tar shards without copying"), taken from the README
    readme_recipe "Tar shards without copying" > "$T/reader.py"
    grep -q np.memmap "$T/reader.py"
    run bash -c "cd '$T/r' && '$PY' '$T/reader.py'"
    [ "$status" -eq 0 ]
    echo "$output" > "$T/printed"
    # it printed one line per input, with the key of the manifest and the files layout's shape
    run "$PY" - "$T/printed" "$T/files" "$T/r/emb" <<'EOF'
import io, json, subprocess, sys
import numpy as np
printed, files, emb = sys.argv[1:]
got = {}
for l in open(printed):
    path, key, shape = l.rstrip("\n").split(" ", 2)
    got[path] = (key, shape)
keys = {json.loads(l)["input"]: json.loads(l)["key"] for l in open(f"{emb}/manifest.jsonl")}
n = 0
for l in open(f"{files}/manifest.jsonl"):
    r = json.loads(l)
    a = np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", f"{files}/{r['output']}"], check=True, stdout=subprocess.PIPE).stdout))
    assert got[r["input"]] == (keys[r["input"]], str(a.shape)), (r["input"], got[r["input"]], a.shape)
    n += 1
assert n == len(got)
print("ok", n)
EOF
    echo "$output"
    [[ "$output" =~ ^ok ]]
}

@test "--layout, --shard-size, --zstd-level and --pool refuse bad values and combinations" {
    run mvembed --model "$MODEL" --out "$T/o" --layout zip "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--layout must be files or tar: zip" ]]
    for bad in 0 -5 1X 12KB7 ""; do
        run mvembed --model "$MODEL" --out "$T/o" --layout tar --shard-size "$bad" "$IN"
        [ "$status" -eq 1 ]
        [[ "$output" =~ "--shard-size must be a positive size" ]]
    done
    run mvembed --model "$MODEL" --out "$T/o" --pool max "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--pool must be none or mean: max" ]]
    # a size for shards the files layout does not make is refused, not ignored
    run mvembed --model "$MODEL" --out "$T/o" --shard-size 1G "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--shard-size needs --layout tar" ]]
    [ ! -e "$T/o" ]
    # and a compression level for members that are not compressed
    run mvembed --model "$MODEL" --out "$T/o" --layout tar --zstd-level 5 "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "--zstd-level applies to the files layout's .npy.zst outputs: --layout tar writes uncompressed .npy members" ]]
    [ ! -e "$T/o" ]
}
