#!/usr/bin/env bats
# Runs that meet OUT's inputs spelled another way: --layout tar resumed from another working
# directory (relative and absolute paths, loose files and the members of an input tar) skips what
# is done; a --shard K/N retry of one task's failures, listed by `manifest failed`, redoes exactly
# the inputs that task held; and an OUT the umask leaves unwritable is named with its cause and
# not left behind.
# Oracles: Python's json and tarfile over OUT, os.path, numpy + zstandard loading outputs.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
}

teardown() {
    if [ -n "${D:-}" ]; then rm -rf "$D"; fi
}

emb() { "$MVEMBED" --device cpu --threads 1 --model "$MODEL" "$@"; }

# last_counts OUT: "ok failed skipped" of the newest run record in OUT
last_counts() {
    "$PY" -c '
import glob, json, sys
r = max((json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")), key=lambda r: r["finished_at"])
c = r["counts"]
print(c["ok"], c["failed"], c["skipped"])' "$1"
}

# tar_state OUT: manifest lines, then samples (.npy members over every shard, read by tarfile)
tar_state() {
    "$PY" - "$1" <<'PYEOF'
import glob, json, os, sys, tarfile
out = sys.argv[1]
lines = [json.loads(l) for m in glob.glob(os.path.join(out, "manifest*.jsonl")) for l in open(m)]
npys = sum(1 for s in glob.glob(os.path.join(out, "shard-*.tar"))
           for n in tarfile.open(s).getnames() if n.endswith(".npy"))
print(len(lines), npys)
PYEOF
}

@test "tar layout: a resume from another directory, relative or absolute, skips what is done" {
    mkdir -p data/sub other src
    cp "$IMG/jpeg_gray_200x149.jpg" data/
    cp "$IMG/png_rgb_320x256.png" data/sub/
    cp "$IMG/png_gray_128x72.png" src/k1.png
    printf 'a caption' > src/k1.txt
    cp "$IMG/jpeg_exif6_168x104.jpg" src/k2.jpg
    tar -C src -cf data/part.tar k1.png k1.txt k2.jpg
    run emb --layout tar --out O data
    [ "$status" -eq 0 ]
    [ "$(last_counts O)" = "4 0 0" ]
    before=$(tar_state O)
    [ "$before" = "4 4" ]
    cd other
    run emb --layout tar --out ../O ../data
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(last_counts ../O)" = "0 0 4" ]
    run emb --layout tar --out ../O "$T/data/sub" "$T/data/part.tar"
    [ "$status" -eq 0 ]
    [ "$(last_counts ../O)" = "0 0 3" ]
    cd "$T"
    [ "$(tar_state O)" = "$before" ]
    # each line records the input's path from /, which a run from anywhere finds it by
    "$PY" - O "$T" <<'PYEOF'
import json, os, sys
out, root = sys.argv[1], os.path.realpath(sys.argv[2])
for l in open(os.path.join(out, "manifest.jsonl")):
    r = json.loads(l)
    assert r["status"] == "ok", r
    assert r["input_abs"] == os.path.join(root, r["input"]), r
PYEOF
}

@test "--shard K/N: one task's retry of the failures redoes the inputs that task held, not others" {
    mkdir data
    for i in 1 2 3 4 5 6 7 8 9 10; do printf 'not an image %d' "$i" > "data/img$i.jpg"; done
    cp "$IMG/png_rgb_320x256.png" data/good.png
    for k in 0 1; do
        run emb --shard "$k/2" --out O data
        [ "$status" -eq 2 ]
    done
    for i in 1 2 3 4 5 6 7 8 9 10; do cp "$IMG/jpeg_gray_200x149.jpg" "data/img$i.jpg"; done
    # the README's retry recipe, run for task 1 only: paths as the manifests recorded them
    "$MVEMBED" manifest failed O -0 > failed.lst
    run emb --shard 1/2 --out O -0 - < failed.lst
    echo "$output"
    [ "$status" -eq 0 ]
    "$PY" - O <<'PYEOF'
import io, json, os, sys
import numpy as np, zstandard
out = sys.argv[1]
held, newest = {}, {}
for k in (0, 1):
    for l in open(os.path.join(out, "manifest-%05d-of-00002.jsonl" % k)):
        r = json.loads(l)
        inp = os.path.realpath(r["input"])
        if r["status"] == "error":
            held.setdefault(inp, k)
        if inp not in newest or (r["time"], r["seq"]) > (newest[inp]["time"], newest[inp]["seq"]):
            newest[inp] = r
assert len(held) == 10 and set(held.values()) == {0, 1}, held
for inp, k in held.items():
    r = newest[inp]
    if k == 1:  # task 1's failures: redone, each output whole
        assert r["status"] == "ok", (inp, r)
        a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(
            open(os.path.join(out, r["output"]), "rb")).read()))
        assert list(a.shape) == r["shape"], (inp, a.shape)
    else:       # task 0's: left to task 0
        assert r["status"] == "error", (inp, r)
PYEOF
}

@test "--shard K/N: a walk after a listed run takes the inputs each shard held; progress counts them" {
    mkdir data
    for i in 1 2 3 4 5 6 7 8 9 10; do printf 'not an image %d' "$i" > "data/img$i.jpg"; done
    for k in 0 1; do # named one by one: each holds the name data/imgN.jpg.npy.zst
        run emb --shard "$k/2" --out O data/img*.jpg
        [ "$status" -eq 2 ]
    done
    for i in 1 2 3 4 5 6 7 8 9 10; do cp "$IMG/jpeg_gray_200x149.jpg" "data/img$i.jpg"; done
    for k in 1 0; do # then walked: found as imgN.jpg under data/, kept in the shard that held it
        SLURM_JOB_ID=1 emb --shard "$k/2" --out O data 2>"log$k"
        cat "log$k"
        "$PY" - O "$k" "log$k" <<'PYEOF'
import json, os, re, sys
out, k, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
first, last = {}, {}
for l in open(os.path.join(out, "manifest-%05d-of-00002.jsonl" % k)):  # one writer: in order
    r = json.loads(l)
    first.setdefault(r["input"], r)
    last[r["input"]] = r
held = {i for i, r in first.items() if r["status"] == "error"}
done = {i for i, r in last.items() if r["status"] == "ok"}
assert len(held) > 0 and held <= done, (held, done)   # each failure of shard k redone by shard k
assert all(r["output"] == i + ".npy.zst" for i, r in last.items() if r["status"] == "ok"), last
last = [l for l in open(log) if re.match(r"mvembed: \d+/\d+ done", l)][-1]
m = re.match(r"mvembed: (\d+)/(\d+) done, (\d+) failed, (\d+) skipped", last)
assert m and m.group(1) == m.group(2) == str(len(held)) and m.group(3) == "0", last
PYEOF
    done
    [ "$(ls O/data | wc -l)" -eq 10 ]
}

@test "umask 0777, 0222, 0177, 0477: the message names the umask and OUT is not left behind" {
    D=$(mktemp -d /tmp/mvembed-bats.XXXXXX)
    chmod 755 "$D"
    cp -r "$MODEL" "$D/m" && chmod -R a+rX "$D/m"
    mkdir -m 777 "$D/w"
    cp "$IMG/png_gray_128x72.png" "$D/w/in.png"
    chmod a+r "$D/w/in.png"
    as_user=()
    if [ "$(id -u)" -eq 0 ]; then # root writes anywhere: run as nobody
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    fi
    for case in "0777 O1 000" "0222 O2/a/b 555" "0177 O3 600" "0477 O4 300"; do
        set -- $case
        run timeout 120 "${as_user[@]}" bash -c 'umask "$1"; exec "$2" -q --device cpu --model "$3" --out "$4" "$5"' \
            _ "$1" "$MVEMBED" "$D/m" "$D/w/$2" "$D/w/in.png"
        echo "$output"
        [ "$status" -eq 1 ]
        top=${2%%/*}
        [[ "$output" == *"mvembed made $D/w/$top with mode $3, as the umask $1 asks"* ]]
        "$PY" -c 'import os, sys; assert not os.path.lexists(sys.argv[1]), sys.argv[1]' "$D/w/$top"
    done
    # a umask that leaves the owner its permissions makes an OUT that works
    run timeout 120 "${as_user[@]}" bash -c 'umask 027; exec "$1" -q --device cpu --model "$2" --out "$3" "$4"' \
        _ "$MVEMBED" "$D/m" "$D/w/O5" "$D/w/in.png"
    [ "$status" -eq 0 ]
    "$PY" -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1] + "/manifest.jsonl")]
assert [x["status"] for x in r] == ["ok"], r' "$D/w/O5"
}
