#!/usr/bin/env bats
# A hostile environment, again: inputs whose size reads as 0 but which hold bytes (/proc), devices
# and FIFOs among the inputs; an --out under a loop of symbolic links; input mtimes past 2262
# (beyond int64 nanoseconds) and before 1970, through a resume; a 64 KiB stack (ulimit -s 64).
# Every run is under `timeout -k`, so that a hang fails instead of blocking. Oracles: Python's
# json, os.stat / os.strerror, numpy (with zstandard), cmp, the shell's exit statuses.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
}

@test "a /proc file (size 0, bytes inside), a device, a FIFO: each fails by its own cause, the batch goes on" {
    mkfifo fifo.png
    : > empty.png
    run timeout -k 5 60 "$MVEMBED" --device cpu --model "$MODEL" --out o /proc/self/status \
        /dev/zero /dev/urandom fifo.png empty.png "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" - o/manifest.jsonl <<'PYEOF'
import json, os, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
assert os.stat("/proc/self/status").st_size == 0 and open("/proc/self/status", "rb").read()
err = rows["/proc/self/status"]["error"]
# its bytes were read: it is no image, and not an "empty file"
assert err.startswith("/proc/self/status: ") and "not an image" in err and "empty" not in err, err
for dev in ("/dev/zero", "/dev/urandom", "fifo.png"):
    assert rows[dev]["status"] == "error" and rows[dev]["error"].startswith(dev + ": not a regular file"), rows[dev]
assert rows["empty.png"]["error"] == "empty.png: empty file", rows["empty.png"]
ok = [r for r in rows.values() if r["status"] == "ok"]
assert len(ok) == 1 and ok[0]["input"].endswith("png_gray_128x72.png"), ok
PYEOF
}

@test "--out under a loop of symbolic links: exit 1 naming the link and the cause; nothing made" {
    ln -s loopA loopA
    run timeout -k 5 60 "$MVEMBED" --device cpu --model "$MODEL" --out loopA/sub "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 1 ]
    cause=$("$PY" -c '
import errno, os
try:
    os.stat("loopA/sub")
except OSError as x:
    assert x.errno == errno.ELOOP
    print(os.strerror(x.errno).lower())')
    [ -n "$cause" ]
    [[ "$output" == *"loopA/sub: $cause: loopA is a symbolic link (to loopA) in a loop of symbolic links"* ]]
    [ "$(ls -A)" = "loopA" ]
    # an input under the loop: its error line says the same
    run timeout -k 5 60 "$MVEMBED" --device cpu --model "$MODEL" --out o loopA/x.png "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    "$PY" - o/manifest.jsonl "$cause" <<'PYEOF'
import json, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
assert rows["loopA/x.png"]["error"] == "loopA/x.png: %s: loopA is a symbolic link (to loopA) in a loop of symbolic links" % sys.argv[2], rows
PYEOF
}

# mtimes_check OUT: each input's latest line's input_mtime_ns is its st_mtime_ns as Python reads
# it, saturated to int64; where saturated, input_mtime_s holds its whole seconds
mtimes_check() {
    "$PY" - "$1/manifest.jsonl" <<'PYEOF'
import json, os, sys
latest = {r["input"]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
for r in latest.values():
    st = os.stat(r["input"])
    ns = max(min(st.st_mtime_ns, 2**63 - 1), -2**63)
    assert r["input_mtime_ns"] == ns, (r["input"], r["input_mtime_ns"], st.st_mtime_ns)
    if ns != st.st_mtime_ns:
        assert r["input_mtime_s"] == st.st_mtime_ns // 10**9, r
PYEOF
}

@test "mtimes after 2262 and before 1970: recorded unwrapped; resume skips them, and redoes a changed one" {
    mkdir in
    cp "$IMG/png_gray_128x72.png" in/late.png
    cp "$IMG/png_rgb_320x256.png" in/early.png
    touch -d '2300-01-01' in/late.png
    touch -d '1950-01-01' in/early.png
    run timeout -k 5 120 "$MVEMBED" -q --device cpu --model "$MODEL" --out o in
    [ "$status" -eq 0 ]
    mtimes_check o
    run timeout -k 5 120 "$MVEMBED" --device cpu --model "$MODEL" --out o in
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"0 ok, 0 failed, 2 skipped"* ]]
    # a later mtime, beyond int64 nanoseconds as the first: redone; the other is not
    touch -d '2300-01-02' in/late.png
    run timeout -k 5 120 "$MVEMBED" --device cpu --model "$MODEL" --out o in
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"1 ok, 0 failed, 1 skipped"* ]]
    touch -d '1950-01-02' in/early.png
    run timeout -k 5 120 "$MVEMBED" --device cpu --model "$MODEL" --out o in
    echo "$output"
    [[ "$output" == *"in/early.png: changed since it was embedded"* ]]
    [[ "$output" == *"1 ok, 0 failed, 1 skipped"* ]]
    "$PY" - o/manifest.jsonl <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
# two runs embedded both; each later run redid the one changed
assert sorted(r["input"] for r in rows[:2]) == ["in/early.png", "in/late.png"], rows
assert [r["input"] for r in rows[2:]] == ["in/late.png", "in/early.png"], rows
assert all(r["status"] == "ok" for r in rows), rows
PYEOF
    mtimes_check o
}

@test "ulimit -s 64: images, videos and the tar layout embed, resume, as without the limit" {
    lim=64
    if ldd "$MVEMBED" | grep -q libasan; then lim=512; fi # ASan's frames are larger
    mkdir in
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" "$ROOT/fixtures/media/videos/h264_3frames.mp4" in/
    run timeout -k 5 300 "$MVEMBED" -q --device cpu --model "$MODEL" --out ref in
    [ "$status" -eq 0 ]
    for layout in files tar; do
        run timeout -k 5 300 bash -c 'ulimit -s "$1" && for i in 1 2; do "$2" -v --device cpu --model "$3" --layout "$4" --out "s-$4" in || exit; done' \
            _ "$lim" "$MVEMBED" "$MODEL" "$layout"
        echo "$output" | tail -3
        [ "$status" -eq 0 ]
        [[ "$output" == *"0 ok, 0 failed, 3 skipped"* ]] # the second run: a resume
    done
    same_bytes ref s-files
    "$PY" - s-tar ref <<'PYEOF'
import io, json, os, sys, tarfile
import numpy as np, zstandard
out, ref = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), "rb")]
assert len(rows) == 3 and all(r["status"] == "ok" for r in rows), rows
for r in rows:
    with tarfile.open(os.path.join(out, r["shard"])) as t:
        a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
    name = os.path.join(ref, os.path.basename(r["input"]) + ".npy.zst")
    b = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(name, "rb").read())))
    assert a.dtype == b.dtype and np.array_equal(a, b), r["input"]
PYEOF
}
