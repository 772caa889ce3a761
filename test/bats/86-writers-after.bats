#!/usr/bin/env bats
# What OUT says after runs end badly or overlap: a tar that was damaged and is whole again leaves
# no failure behind (manifest failed, compact, pooled rows) in either layout, while one still
# damaged stays failed; a run killed (kill -9) while it redoes inputs leaves no pooled rows that
# look current.
# Oracles: Python's tarfile (the members and where they end), json over OUT, os.path.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
    mkdir src
    for f in png_gray_128x72.png jpeg_gray_200x149.jpg png_rgb_320x256.png webp_lossless_alpha_120x90.webp; do
        cp "$IMG/$f" src/
    done
    tar -C src -cf good.tar .
    # the same members, then a damaged header block where the end of the archive would be
    "$PY" - good.tar bad.tar <<'PYEOF'
import sys, tarfile
t = tarfile.open(sys.argv[1])
end = max(m.offset_data + (m.size + 511) // 512 * 512 for m in t.getmembers())
data = open(sys.argv[1], "rb").read()[:end]
open(sys.argv[2], "wb").write(data + bytes(range(256)) * 2 + bytes(1024))
PYEOF
}

emb() { "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" "$@"; }

# newest OUT: "input status" of each input's newest line (time, then seq), sorted
newest() {
    "$PY" - "$1" <<'PYEOF'
import glob, json, os, sys
by = {}
for m in glob.glob(os.path.join(sys.argv[1], "manifest*.jsonl")):
    for l in open(m):
        r = json.loads(l)
        if r["input"] not in by or (r["time"], r["seq"]) > (by[r["input"]]["time"], by[r["input"]]["seq"]):
            by[r["input"]] = r
print("\n".join(sorted("%s %s" % (i, r["status"]) for i, r in by.items())))
PYEOF
}

@test "a tar damaged, then whole again: no failure left in manifest failed, compact or pooled rows" {
    n=$("$PY" -c 'import tarfile,sys; print(sum(m.isfile() for m in tarfile.open(sys.argv[1])))' good.tar)
    for layout in files tar; do
        rm -rf O
        cp bad.tar in.tar
        run emb --layout "$layout" --out O in.tar
        [ "$status" -eq 2 ]
        [ "$("$MVEMBED" manifest failed O | grep -cx in.tar)" -eq 1 ]
        cp good.tar in.tar
        run emb --layout "$layout" --out O in.tar
        echo "$output"
        [ "$status" -eq 0 ]
        run "$MVEMBED" manifest failed O
        [ "$status" -eq 0 ]
        [ -z "$output" ]
        [ "$(newest O | grep -c ' ok$')" -eq "$n" ]
        # the retry recipe has nothing left to do, and a --pool run leaves nobody out
        "$MVEMBED" manifest failed O -0 | emb --layout "$layout" --out O -0 -
        run emb --layout "$layout" --pool mean --out O in.tar
        [ "$status" -eq 0 ]
        "$PY" - O "$n" <<'PYEOF'
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "pooled", "pooled.jsonl"))]
assert len(rows) == int(sys.argv[2]) and all(r["status"] == "ok" for r in rows), rows
PYEOF
        "$MVEMBED" manifest compact O
        "$PY" - O <<'PYEOF'
import json, os, sys
lines = [json.loads(l) for l in open(os.path.join(sys.argv[1], "manifest.jsonl"))]
assert all(r["status"] == "ok" for r in lines), [r for r in lines if r["status"] != "ok"]
PYEOF
    done
}

@test "a tar still damaged on the next run stays failed" {
    cp bad.tar in.tar
    run emb --out O in.tar
    [ "$status" -eq 2 ]
    run emb --out O in.tar
    [ "$status" -eq 2 ]
    [ "$("$MVEMBED" manifest failed O | grep -cx in.tar)" -eq 1 ]
    [ "$(newest O | grep -cx 'in.tar error')" -eq 1 ]
    "$MVEMBED" manifest compact O
    [ "$(newest O | grep -cx 'in.tar error')" -eq 1 ]
}

@test "kill -9 during a run that redoes inputs: no pooled directory left presenting old rows" {
    for layout in files tar; do
        rm -rf O data paths
        mkdir data
        cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" "$IMG/png_rgb_320x256.png" data/
        run emb --layout "$layout" --pool mean --out O data
        [ "$status" -eq 0 ]
        [ -f O/pooled/pooled.npy ]
        cp "$IMG/png_rgb_odd_173x97.png" data/png_gray_128x72.png # changed: its row is old now
        # paths come through a FIFO the test holds open: the run stays up, then is killed
        mkfifo paths
        "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --layout "$layout" --out O - <paths &
        pid=$!
        exec 7>paths
        echo data/png_gray_128x72.png >&7
        for _ in $(seq 1 200); do [ -e O/pooled ] || break; sleep 0.1; done
        kill -9 "$pid"
        exec 7>&-
        wait "$pid" || true
        "$PY" -c 'import os, sys; assert not os.path.exists(sys.argv[1] + "/pooled"), "stale pooled/"' O
    done
}

@test "a run that gets through while another is live writes no _SUCCESS; the last one to get through does" {
    mkdir data
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" "$IMG/png_rgb_320x256.png" data/
    for end in finish kill; do
        rm -rf O paths
        mkfifo paths
        "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out O - <paths 2>errA &
        pid=$!
        exec 7>paths
        echo data/png_gray_128x72.png >&7
        for _ in $(seq 1 200); do grep -q '"status":"ok"' O/manifest.jsonl 2>/dev/null && break; sleep 0.1; done
        run "$MVEMBED" --device cpu --threads 1 --model "$MODEL" --out O data/jpeg_gray_200x149.jpg
        echo "$output"
        [ "$status" -eq 0 ]
        [[ "$output" == *"no completion marker: 1 other run still writes into O (run "* ]]
        "$PY" -c 'import os, sys; assert not os.path.exists(sys.argv[1] + "/_SUCCESS")' O
        if [ "$end" = kill ]; then
            kill -9 "$pid"
            exec 7>&-
            wait "$pid" || true
            "$PY" -c 'import os, sys; assert not os.path.exists(sys.argv[1] + "/_SUCCESS")' O
        else
            echo data/png_rgb_320x256.png >&7
            exec 7>&-
            wait "$pid"
            # the marker names the run that wrote it last, with its own counts (json)
            "$PY" - O <<'PYEOF'
import glob, json, os, sys
out = sys.argv[1]
m = json.load(open(os.path.join(out, "_SUCCESS")))
rec = json.load(open(os.path.join(out, m["record"])))
assert m["run"] == rec["run"] and m["counts"] == rec["counts"] and rec["counts"]["ok"] == 2, (m, rec)
PYEOF
        fi
    done
}

@test "manifest failed without -0: a name holding a newline is left out and said, never split in two" {
    mkdir d
    printf 'not an image' > "d/x
y.jpg"
    printf 'not an image' > d/z.jpg
    run "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out O d
    [ "$status" -eq 2 ]
    run "$MVEMBED" manifest failed O
    echo "$output"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "d/z.jpg" ]
    [[ "${lines[1]}" == *"1 failed input left out of this list: its name holds a newline"* ]]
    [ "${#lines[@]}" -eq 2 ]
    # with -0 both come through byte for byte, and the retry recipe does both
    "$MVEMBED" manifest failed O -0 > list
    "$PY" -c 'import sys; l = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
assert sorted(l) == [b"d/x\ny.jpg", b"d/z.jpg"], l' list
}

@test "two runs at once naming the same files two ways (relative, from /): one output per file" {
    mkdir ds
    for i in $(seq 1 60); do cp "$IMG/png_rgb_320x256.png" "ds/i$i.png"; done
    find ds -type f | sort > rel.lst
    sed "s|^|$T/|" rel.lst > abs.lst
    "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out O - <rel.lst &
    a=$!
    (cd / && "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out "$T/O" - <"$T/abs.lst")
    wait "$a"
    "$PY" - O 60 <<'PYEOF'
import io, json, os, sys
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
files = {os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs
         if f.endswith(".npy.zst")}
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
ok = [r for r in lines if r["status"] == "ok"]
assert len(files) == n, (len(files), sorted(files)[:4])
assert {r["output"] for r in ok} == files and len(ok) == n, (len(ok), len(files))
for r in ok:
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(os.path.join(out, r["output"]), "rb")).read()))
    assert list(a.shape) == r["shape"], r
PYEOF
}

@test "--shard K/N tasks side by side: a task that gets through writes its own marker at once" {
    mkdir data
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" "$IMG/png_rgb_320x256.png" data/
    mkfifo paths
    "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --shard 1/2 --out O - <paths &
    pid=$!
    exec 7>paths
    for _ in $(seq 1 200); do [ -e O/.mvembed.lock ] && break; sleep 0.1; done
    run "$MVEMBED" --device cpu --threads 1 --model "$MODEL" --shard 0/2 --out O data
    echo "$output"
    [[ "$status" -eq 0 || "$status" -eq 2 ]]
    "$PY" - O <<'PYEOF'
import json, os, sys
m = json.load(open(os.path.join(sys.argv[1], "_SUCCESS-00000-of-00002")))
assert m["shard"] == {"k": 0, "n": 2}, m
PYEOF
    exec 7>&-
    wait "$pid"
    [ -e O/_SUCCESS-00001-of-00002 ]
}

@test "--pool mean by shards: a task redoing its inputs leaves the other shards' pooled directories" {
    mkdir data
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" "$IMG/png_rgb_320x256.png" \
       "$IMG/png_rgb_odd_173x97.png" "$IMG/jpeg_exif6_168x104.jpg" data/
    for k in 0 1; do
        run "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --pool mean --shard "$k/2" --out O data
        [ "$status" -eq 0 ]
    done
    [ -d O/pooled-00000-of-00002 ] && [ -d O/pooled-00001-of-00002 ]
    # change one of shard 0's inputs (as its manifest names it) and rerun shard 0 only
    f=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["input"])' \
        O/manifest-00000-of-00002.jsonl)
    cp "$IMG/webp_lossless_alpha_120x90.webp" "$f"
    run "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --pool mean --shard 0/2 --out O data
    [ "$status" -eq 0 ]
    "$PY" - O <<'PYEOF'
import json, os, sys
out = sys.argv[1]
for k in (0, 1):
    rows = [json.loads(l) for l in open(os.path.join(out, "pooled-%05d-of-00002" % k, "pooled.jsonl"))]
    assert rows and all(r["status"] == "ok" for r in rows), (k, rows)
PYEOF
}
