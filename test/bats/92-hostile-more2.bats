#!/usr/bin/env bats
# A hostile environment, once more: a path list on standard input with NUL bytes in it but read
# by lines (a find -print0 list given without -0), or with CRLF line ends and no final newline;
# an input whose reads fail with EIO (a bad sector, through the LD_PRELOAD shim fs_shim); tar
# members met while the process is out of file descriptors (ulimit -n).
# Every run is under `timeout -k`, so that a hang fails instead of blocking. Oracles: Python's
# json, os.strerror, numpy (with zstandard), the shell's exit statuses.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
}

# loads OUT: every ok line's output loads with numpy in the shape the line says; prints the
# inputs of the ok lines, sorted, one a line
loads() {
    "$PY" - "$1" <<'PYEOF'
import io, json, sys
import numpy as np, zstandard
o = sys.argv[1]
ok = []
for r in map(json.loads, open(o + "/manifest.jsonl", "rb")):
    if r["status"] == "ok":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(open(o + "/" + r["output"], "rb").read())
        assert list(np.load(io.BytesIO(raw)).shape) == r["shape"], r
        ok.append(r["input"])
print("\n".join(sorted(ok)))
PYEOF
}

@test "a NUL in a path list read by lines is refused saying -0 is needed; CRLF lines and -0 lists embed every path" {
    cp "$IMG/png_gray_128x72.png" a.png
    cp "$IMG/jpeg_gray_200x149.jpg" b.jpg
    cp "$IMG/webp_lossy_192x128.webp" c.webp
    # find -print0 output given without -0: not the first path alone, silently
    run timeout -k 5 60 bash -c 'printf "a.png\0b.jpg\0c.webp\0" | "$0" --device cpu --model "$1" --out o1 -' \
        "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'<stdin>: a NUL byte in a path list read by lines, after "a.png": NUL-separated paths (find -print0) need -0 (--null)'* ]]
    [ -z "$(loads o1)" ]
    [ ! -e o1/_SUCCESS ]
    # a NUL in the middle of a later line: the same
    run timeout -k 5 60 bash -c 'printf "a.png\nb.jpg\0junk\nc.webp\n" | "$0" --device cpu --model "$1" --out o2 -' \
        "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'after "b.jpg": NUL-separated paths'* ]]
    [ ! -e o2/_SUCCESS ]
    # the same list with -0 embeds the three
    run timeout -k 5 60 bash -c 'printf "a.png\0b.jpg\0c.webp\0" | "$0" --device cpu --model "$1" --out o3 -0 -' \
        "$MVEMBED" "$MODEL"
    [ "$status" -eq 0 ]
    [ "$(loads o3)" = "$(printf 'a.png\nb.jpg\nc.webp')" ]
    # a list written on Windows (CRLF), its last line without a line end: the paths without the CR
    run timeout -k 5 60 bash -c 'printf "a.png\r\nb.jpg\r\nc.webp" | "$0" --device cpu --model "$1" --out o4 -' \
        "$MVEMBED" "$MODEL"
    [ "$status" -eq 0 ]
    [ "$(loads o4)" = "$(printf 'a.png\nb.jpg\nc.webp')" ]
}

@test "an input whose reads fail with EIO: its error line gives the cause; the batch goes on, exit 2" {
    preload=$(fs_shim "$T")
    cp "$IMG/png_gray_128x72.png" BAD.png
    cp "$IMG/jpeg_gray_200x149.jpg" BAD.jpg
    cp "$IMG/webp_lossy_192x128.webp" good.webp
    FS_SHIM_EIO=BAD FS_SHIM_LOG="$T/shim.log" LD_PRELOAD="$preload" \
        run timeout -k 5 60 "$MVEMBED" --device cpu --model "$MODEL" --out o BAD.png good.webp BAD.jpg
    echo "$output"
    [ "$status" -eq 2 ]
    grep -q 'pread: EIO' shim.log # the shim was in the way
    "$PY" - o/manifest.jsonl <<'PYEOF'
import errno, json, os, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
for bad in ("BAD.png", "BAD.jpg"):
    assert rows[bad]["error"] == "%s: read error: %s" % (bad, os.strerror(errno.EIO)), rows[bad]
assert rows["good.webp"]["status"] == "ok", rows
PYEOF
    [ "$(loads o)" = "good.webp" ]
}

@test "tar members met out of file descriptors (ulimit -n) fail the run, not themselves: exit 1, no _SUCCESS" {
    mkdir in
    cp "$IMG"/*.png in/
    tar cf in/shard.tar -C "$IMG" .
    fatal=0
    for n in $(seq 16 2 48) 256; do # from too few to enough
        for layout in tar files; do # files last: loads reads its outputs
            rm -rf o
            status=0
            output=$(bash -c 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n "$2"
                              exec "$0" -q --device cpu --threads 1 --jobs 8 --writers 4 --layout "$3" \
                                   --model "$1" --out o in' \
                     "$MVEMBED" "$MODEL" "$n" "$layout" 2>&1) || status=$?
            echo "ulimit -n $n, $layout: status $status: ${output:0:300}"
            [ "$status" -eq 0 ] || [ "$status" -eq 1 ] # never 2: no input failed by the process's limit
            "$PY" - o "$status" <<'PYEOF'
import json, os, sys
o, status = sys.argv[1], int(sys.argv[2])
rows = list(map(json.loads, open(o + "/manifest.jsonl", "rb"))) if os.path.exists(o + "/manifest.jsonl") else []
assert not [r for r in rows if r["status"] == "error"], [r["error"] for r in rows if r["status"] == "error"]
assert os.path.exists(o + "/_SUCCESS") == (status == 0)
PYEOF
            [ "$status" -eq 1 ] && fatal=$((fatal + 1))
        done
    done
    [ "$fatal" -ge 1 ]
    [ "$status" -eq 0 ] # with 256 the run works
    [ "$(loads o | wc -l)" -eq $(( $(ls "$IMG"/*.png | wc -l) + $(ls "$IMG" | wc -l) )) ]
}
