#!/usr/bin/env bats
# A hostile environment (issue 31): closed standard descriptors, a broken pipe on stderr, empty
# arguments, links inside OUT, FIFOs in the Hugging Face cache, odd tar members, interrupts. Each
# test names the behaviour it holds; the oracles are Python's json/tarfile, the filesystem and
# the ffmpeg CLI. Every run is under `timeout`, so that a hang fails instead of blocking.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    MAN="$T/o/manifest.jsonl"
}

# all_json FILE: every line of FILE is one whole JSON object; prints the number of lines
all_json() {
    "$PY" - "$1" <<'PYEOF'
import json, sys
n = 0
for raw in open(sys.argv[1], "rb"):
    assert raw.endswith(b"\n"), "torn line: %r" % raw
    assert isinstance(json.loads(raw), dict), raw
    n += 1
print(n)
PYEOF
}

# inputs_of FILE: the manifest's "input" fields, sorted, one per line
inputs_of() {
    "$PY" -c 'import json,sys; print("\n".join(sorted(json.loads(l)["input"] for l in open(sys.argv[1],"rb"))))' "$1"
}

@test "closed stderr at start: no message lands in the manifest" {
    echo junk > "$T/bad.jpg"
    # default device (auto: a "no usable GPU" line), a failing input and the summary: three
    # messages that a manifest opened as descriptor 2 would receive
    local st=0
    timeout 120 "$MVEMBED" -j 1 --model "$MODEL" --out "$T/o" "$IMG/png_rgb_320x256.png" "$T/bad.jpg" \
        2>&- || st=$?
    [ "$st" -eq 2 ]
    run all_json "$MAN"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = 2 ]
}

@test "closed stdin at start: the manifest is never read back as the path list of -" {
    local st
    for i in 1 2 3; do
        st=0
        timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" \
            "$IMG/png_rgb_320x256.png" - <&- 2>"$T/err" || st=$?
        echo "run $i: $st $(cat "$T/err")"
        [ "$st" -eq 0 ]
    done
    [ "$(inputs_of "$MAN" | sort -u)" = "$IMG/png_rgb_320x256.png" ]
}

@test "a broken pipe on stderr never stops the run: every manifest line, exit 2" {
    mkdir "$T/in"
    for i in $(seq 200); do echo "not an image $i" > "$T/in/bad$i.jpg"; done
    cp "$IMG"/* "$T/in/"
    local n
    n=$(find "$T/in" -type f | wc -l)
    [ "$n" -eq 221 ]
    timeout 300 "$MVEMBED" -v -j 1 --device cpu --progress-every 0.01 --model "$MODEL" --out "$T/o" "$T/in" 2>&1 \
        | head -c 1 >/dev/null
    local st=("${PIPESTATUS[@]}")
    echo "mvembed exited ${st[0]}"
    [ "${st[0]}" -eq 2 ]
    run all_json "$MAN"
    [ "$output" = 221 ]
    "$PY" - "$MAN" <<'PYEOF'
import collections, json, sys
c = collections.Counter(json.loads(l)["status"] for l in open(sys.argv[1], "rb"))
assert c == {"ok": 21, "error": 200}, c
PYEOF
}

@test "--out '' is a usage error that names the empty option; an OUT that cannot be made is named" {
    cd "$T"
    run timeout 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out '' "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"--out must not be empty"* ]]
    [ -z "$(ls -A "$T")" ]
    # an OUT that cannot be made says which directory could not be made
    echo x > "$T/afile"
    run timeout 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/afile/o" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == "mvembed: cannot create the output directory (--out): $T/afile: a regular file, not a directory (on the way to $T/afile/o)" ]]
    # OUT itself a file: that one message, no run record tried inside it first
    run timeout 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/afile" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == "mvembed: cannot create the output directory (--out): $T/afile: a regular file, not a directory" ]]
}

@test "a FIFO as refs/main in the Hugging Face cache is refused, not waited on" {
    local repo=$T/hc/models--Org--Tiny c=1111111111111111111111111111111111111111
    mkdir -p "$repo/refs" "$repo/snapshots/$c"
    cp "$MODEL"/* "$repo/snapshots/$c/"
    mkfifo "$repo/refs/main"
    run env HF_HUB_CACHE="$T/hc" timeout 30 "$MVEMBED" -q --device cpu --model Org/Tiny --out "$T/o" \
        "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$repo/refs/main: not a regular file (a fifo)"* ]]
    # the same cache with refs/main a regular file naming the snapshot: the model loads
    rm "$repo/refs/main"
    printf '%s' "$c" > "$repo/refs/main"
    run env HF_HUB_CACHE="$T/hc" timeout 60 "$MVEMBED" -q --device cpu --model Org/Tiny --out "$T/o" \
        "$IMG/png_rgb_320x256.png"
    [ "$status" -eq 0 ]
}

@test "a symlink inside OUT that leads outside fails that input; nothing is written outside" {
    mkdir -p "$T/in/d" "$T/in/e/f" "$T/in/g" "$T/outside" "$T/abs" "$T/o/e" "$T/o/inner"
    cp "$IMG/png_rgb_320x256.png" "$T/in/d/x.png"
    cp "$IMG/png_rgb_320x256.png" "$T/in/e/f/y.png"
    cp "$IMG/png_rgb_320x256.png" "$T/in/g/z.png"
    cp "$IMG/png_gray_128x72.png" "$T/in/ok.png"
    ln -s ../outside "$T/o/d"         # relative, up and out
    ln -s "$T/abs" "$T/o/e/f"         # absolute, one level down
    for run_no in 1 2; do             # the second run resumes: still nothing outside
        run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/in"
        echo "run $run_no: $output"
        [ "$status" -eq 2 ]
        [ -z "$(find "$T/outside" "$T/abs" -mindepth 1)" ]
    done
    "$PY" - "$MAN" "$T/in" <<'PYEOF'
import json, sys
last = {}
for l in open(sys.argv[1], "rb"):
    r = json.loads(l)
    last[r["input"][len(sys.argv[2]) + 1:]] = r
for k in ("d/x.png", "e/f/y.png"):
    r = last[k]
    assert r["status"] == "error", r
    assert "symbolic link" in r["error"] and "leads outside the output directory" in r["error"], r
for k in ("g/z.png", "ok.png"):
    assert last[k]["status"] == "ok", last[k]
assert set(last) == {"d/x.png", "e/f/y.png", "g/z.png", "ok.png"}, last
PYEOF
    [ -f "$T/o/g/z.png.npy.zst" ]
    [ -L "$T/o/d" ] && [ -L "$T/o/e/f" ]
}

@test "what the walk passes over is counted by reason, -v names it, a run with no input says so" {
    mkdir -p "$T/in/.thumbs" "$T/in/sub"
    echo x > "$T/in/a.heic"
    echo x > "$T/in/a.avif"
    echo x > "$T/in/README.txt"
    cp "$IMG/png_gray_128x72.png" "$T/in/.thumbs/t.png"
    mkfifo "$T/in/sub/f.png"
    run timeout 60 "$MVEMBED" --device cpu -j 1 --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"0 ok, 0 failed, 0 skipped in "*"; passed over: not an image or video name: 3, hidden: 1, not a regular file: 1"* ]]
    [[ "$output" == *"mvembed: no input found in the given paths"* ]]
    # -q: no summary, but the empty run is still told
    run timeout 60 "$MVEMBED" -q --device cpu -j 1 --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" == "mvembed: no input found in the given paths; passed over: "* ]]
    # -v names each entry passed over, with its reason; OUT inside the input is one of them
    run timeout 60 "$MVEMBED" -v --device cpu -j 1 --model "$MODEL" --out "$T/in/o" "$T/in"
    for want in "$T/in/a.heic: passed over (not an image or video name)" \
                "$T/in/a.avif: passed over (not an image or video name)" \
                "$T/in/README.txt: passed over (not an image or video name)" \
                "$T/in/.thumbs: passed over (hidden)" \
                "$T/in/sub/f.png: passed over (not a regular file)" \
                "$T/in/o: passed over (the output directory)"; do
        [[ "$output" == *"mvembed: $want"* ]] || { echo "missing: $want"; echo "$output"; false; }
    done
    # a run that has inputs: the counts on the summary line, no "no input" line
    rm -r "$T/in/o"
    cp "$IMG/png_gray_128x72.png" "$T/in/ok.png"
    run timeout 60 "$MVEMBED" --device cpu -j 1 --model "$MODEL" --out "$T/o2" "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" == *"1 ok, 0 failed, 0 skipped in "*"; passed over: not an image or video name: 3, hidden: 1, not a regular file: 1"* ]]
    [[ "$output" != *"no input found"* ]]
}

@test "a run with no input says what would take the passed-over ones, only options not given, and OUT's own rule" {
    mkdir -p "$T/in"
    cp "$IMG/png_gray_128x72.png" "$T/in/a.png"
    echo x > "$T/in/README.txt"
    # OUT is the input directory: everything lies inside OUT
    run bash -c 'cd "$1" && "$2" -q --all-files --device cpu -j 1 --model "$3" --out . .' _ "$T/in" "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == "mvembed: no input found in the given paths; passed over: the output directory: 1 (-v names them; files inside the output directory are never inputs: give an --out outside the inputs)" ]]
    # names passed over: --all-files is suggested only when it was not given
    mkdir "$T/txt"
    echo x > "$T/txt/README.txt"
    run "$MVEMBED" -q --device cpu -j 1 --model "$MODEL" --out "$T/o" "$T/txt"
    [[ "$output" == "mvembed: no input found in the given paths; passed over: not an image or video name: 1 (-v names them; --all-files takes other names)" ]]
}

@test "--walk-rules: a find | xargs path list gets the inputs a directory walk gets" {
    cd "$T"
    mkdir -p data/a data/.thumbs data/b/.cache data/emb
    cp "$IMG/png_gray_128x72.png" data/a/one.png
    cp "$IMG/webp_lossy_192x128.webp" data/two.webp
    cp "$IMG/png_rgb_320x256.png" data/.thumbs/one.png
    cp "$IMG/png_rgb_320x256.png" data/b/.cache/c.png
    cp "$IMG/png_rgb_320x256.png" data/.hidden.png
    cp "$IMG/png_rgb_320x256.png" data/emb/stray.png # an image inside OUT
    echo '{}' > data/meta.json
    echo readme > data/README.txt
    mkfifo data/b/pipe.png
    # the oracle: a directory walk, OUT inside the data
    run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out data/emb data
    [ "$status" -eq 0 ]
    find data -type f -print0 | sort -z > list # OUT's files included
    run bash -c 'xargs -0 -n 3 "$1" -q -j 1 --device cpu --model "$2" --out data/emb --walk-rules < list' _ \
        "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    # nothing failed: the only lines are of runs (chunks of 3) whose paths were all passed over
    [ -z "$(echo "$output" | grep -v '^mvembed: no input found in the given paths; passed over: ')" ]
    # the same list through standard input, -0 -, with -v naming each path passed over
    # hidden directories and OUT itself listed too: passed over, not walked
    (find data -type f -print0; printf '%s\0' data/.thumbs data/b/.cache data/emb) > files
    run timeout 120 "$MVEMBED" -v -j 1 --device cpu --model "$MODEL" --out data/emb --walk-rules -0 - < files
    [ "$status" -eq 0 ]
    for want in "data/README.txt: passed over (not an image or video name)" \
                "data/.thumbs/one.png: passed over (hidden)" \
                "data/b/.cache/c.png: passed over (hidden)" \
                "data/emb/stray.png: passed over (the output directory)" \
                "data/.thumbs: passed over (hidden)" \
                "data/emb: passed over (the output directory)"; do
        [[ "$output" == *"mvembed: $want"* ]] || { echo "missing: $want"; echo "$output"; false; }
    done
    "$PY" - data/emb/manifest.jsonl <<'PYEOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
assert all(r["status"] == "ok" for r in rows), rows
c = collections.Counter(r["input"] for r in rows)
# the walk's two inputs, once each: the listed runs find them done (an input keeps the name
# the walk gave it), and never anything the walk passed over
assert c == {"data/a/one.png": 1, "data/two.webp": 1}, c
import os
npy = sorted(os.path.relpath(os.path.join(r, f), "data/emb") for r, _, fs in os.walk("data/emb")
             for f in fs if f.endswith(".npy.zst"))
assert npy == ["a/one.png.npy.zst", "two.webp.npy.zst"], npy
PYEOF
    # without --walk-rules the same list fails the non-media files
    run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out data/emb3 -0 - < files
    [ "$status" -eq 2 ]
}

@test "a tar member name over 4095 bytes gets its own error line, whole and with its reason" {
    "$PY" - "$T/s.tar" "$IMG/png_gray_128x72.png" <<'PYEOF'
import io, sys, tarfile
data = open(sys.argv[2], "rb").read()
long = ("x" * 200 + "/") * 21          # 4221 bytes of folders
names = ["ok.png", long + "a.png", long + "b.png"]  # the two long ones equal in 4095 bytes
assert names[1][:4095] == names[2][:4095]
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for n in names:
        ti = tarfile.TarInfo(n)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
with tarfile.open(sys.argv[1]) as t:     # the oracle reads the names back whole
    assert [m.name for m in t.getmembers()] == names
PYEOF
    run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/s.tar"
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" - "$MAN" "$T/s.tar" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
assert len(rows) == 3, rows
ok = [r for r in rows if r["status"] == "ok"]
assert [r["input"] for r in ok] == [sys.argv[2] + "/ok.png"], ok
bad = [r for r in rows if r["status"] != "ok"]
assert len(bad) == 2, bad
for r in bad:
    e = r["error"]
    assert "tar member name of 4226 bytes is over the 4095-byte limit" in e, e
    assert "already used" not in e, e
    assert len(r["input"]) < 1024, len(r["input"])
PYEOF
}

@test "EXIF orientation as PIL reads it: several values (the first counts), other types, duplicates" {
    mkdir -p "$T/in"
    "$PY" - "$T/in" <<'PYEOF'
import io, struct, sys
import numpy as np
from PIL import Image
def blob(entries, be=False, extra=b""):
    e = ">" if be else "<"
    ifd = struct.pack(e + "H", len(entries))
    for typ, count, val in entries:  # val: 4 bytes inline, or (payload) stored after the IFD
        if isinstance(val, tuple):
            ptr = 8 + 2 + 12 * len(entries) + 4 + len(extra)
            extra += val[0]
            val = struct.pack(e + "I", ptr)
        ifd += struct.pack(e + "HHI", 0x0112, typ, count) + val.ljust(4, b"\0")
    return b"Exif\0\0" + (b"MM\0*" if be else b"II*\0") + struct.pack(e + "I", 8) + ifd + b"\0\0\0\0" + extra
H = lambda *v: struct.pack("<%dH" % len(v), *v)
cases = {
    "short_6_1": [(3, 2, H(6, 1))],                       # the issue's case: two values, inline
    "short_8_1_1": [(3, 3, (H(8, 1, 1),))],               # three: stored out of line
    "short_1_6": [(3, 2, H(1, 6))],
    "long_3_1": [(4, 2, (struct.pack("<II", 3, 1),))],
    "sshort_7_1": [(8, 2, struct.pack("<hh", 7, 1))],
    "slong_5_1": [(9, 2, (struct.pack("<ii", 5, 1),))],
    "sbyte_6_1": [(6, 2, b"\x06\x01")],
    "byte_6": [(1, 1, b"\x06")],                          # bytes to PIL: no rotation
    "undefined_6": [(7, 1, b"\x06")],
    "rational_12_2": [(5, 1, (struct.pack("<II", 12, 2),))],
    "rational_den0": [(5, 1, (struct.pack("<II", 6, 0),))],
    "float_6": [(11, 1, struct.pack("<f", 6.0))],
    "float_6_5": [(11, 1, struct.pack("<f", 6.5))],
    "double_8": [(12, 1, (struct.pack("<d", 8.0),))],
    "ifd_type_6_1": [(13, 2, (struct.pack("<II", 6, 1),))],
    "long8_5": [(16, 1, (struct.pack("<Q", 5),))],
    "unknown_type_then_6": [(14, 1, H(3, 0)), (3, 1, H(6, 0))],
    "dup_3_then_6": [(3, 1, H(3, 0)), (3, 1, H(6, 0))],   # the later entry wins
    "dup_6_then_byte": [(3, 1, H(6, 0)), (1, 1, b"\x03")],
    "bad_offset_then_6": [(3, 3, struct.pack("<I", 90000)), (3, 1, H(6, 0))],
    "count0": [(3, 0, b"")],
}
rng = np.random.default_rng(31)
px = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
for name, entries in cases.items():
    b = io.BytesIO()
    Image.fromarray(px).save(b, "JPEG", quality=95, exif=blob(entries))
    open("%s/%s.jpg" % (sys.argv[1], name), "wb").write(b.getvalue())
b = io.BytesIO()  # big-endian, two values
Image.fromarray(px).save(b, "JPEG", quality=95, exif=blob([(3, 2, struct.pack(">HH", 6, 1))], be=True))
open("%s/be_short_6_1.jpg" % sys.argv[1], "wb").write(b.getvalue())
PYEOF
    run timeout 300 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" --dump-stages "$T/d" "$T/in"
    [ "$status" -eq 0 ]
    "$PY" - "$T/in" "$T/d" <<'PYEOF'
import os, sys, warnings
import numpy as np
from PIL import Image, ImageOps
warnings.simplefilter("ignore")  # PIL warns of the extra values
src, dump = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(src))
assert len(names) == 22, names
rotated = 0
bad = []
for n in names:
    want = np.asarray(ImageOps.exif_transpose(Image.open(os.path.join(src, n))).convert("RGB"))
    got = np.asarray(Image.open(os.path.join(dump, n, "decoded.png")).convert("RGB"))
    rotated += want.shape[:2] != (24, 40)
    if got.shape != want.shape or not (got == want).all():
        bad.append("%s: ours %s, PIL %s" % (n, got.shape, want.shape))
assert not bad, bad
assert rotated >= 10, rotated  # the crafted tags do rotate (PIL says so), not only flip
PYEOF
}

# run_limited FSIZE AS ARGS...: runs mvembed with RLIMIT_FSIZE (which bounds what a memfd may
# hold) and, unless it is an ASan build (whose shadow memory needs the address space),
# RLIMIT_AS; prints "STATUS PEAK_RSS_KB" of the child (Python's resource module)
run_limited() {
    local fsize=$1 as=$2
    shift 2
    if ldd "$MVEMBED" | grep -q libasan; then as=0; fi
    "$PY" - "$fsize" "$as" "$MVEMBED" "$@" <<'PYEOF'
import resource, subprocess, sys
fsize, as_ = int(sys.argv[1]), int(sys.argv[2])
def limits():
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if as_:
        resource.setrlimit(resource.RLIMIT_AS, (as_, as_))
r = subprocess.run(sys.argv[3:], preexec_fn=limits, stderr=subprocess.DEVNULL, timeout=300)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PYEOF
}

@test "sparse tar members: over --max-member-bytes each fails alone, large images stream, memory stays flat" {
    cd "$T"
    mkdir m
    cp "$IMG/png_gray_128x72.png" m/ok.png
    for i in 1 2 3 4 5 6; do # a PNG followed by 4 GiB - 1 of holes, as in the issue
        cp "$IMG/png_gray_128x72.png" "m/big$i.png"
        truncate -s $((4 * 1024 * 1024 * 1024 - 1)) "m/big$i.png"
    done
    cp "$IMG/png_gray_128x72.png" m/mid.png
    truncate -s 200M m/mid.png # under the default bound, over what a memfd may hold here
    (cd m && tar -S -cf ../s.tar ok.png big1.png big2.png big3.png big4.png big5.png big6.png mid.png)
    rm -r m
    [ "$(stat -c %s s.tar)" -lt 1000000 ]
    "$PY" -c 'import tarfile,sys; m=tarfile.open(sys.argv[1]).getmembers(); assert sum(x.size==4*2**30-1 for x in m)==6 and [x for x in m if x.name=="mid.png"][0].size==200*2**20, m' s.tar
    # 100 MiB for any file or memfd, 3 GiB of address space
    # the baseline: the same run over a tar of the one small member (a build's libraries, CUDA's
    # runtime among them, take memory of their own)
    cp "$IMG/png_gray_128x72.png" ok.png
    tar -cf small.tar ok.png
    run run_limited $((100 << 20)) $((3 << 30)) -q -j 1 --device cpu --model "$MODEL" --out o0 small.tar
    local st0 rss0
    read -r st0 rss0 <<<"$output"
    [ "$st0" -eq 0 ]
    run run_limited $((100 << 20)) $((3 << 30)) -q -j 1 --device cpu --model "$MODEL" --out o s.tar
    echo "$output (baseline $rss0 KiB)"
    local st rss
    read -r st rss <<<"$output"
    [ "$st" -eq 2 ]
    [ "$rss" -lt $((rss0 + 100 * 1024)) ] # KiB: the 200 MiB member was never held
    "$PY" - o/manifest.jsonl <<'PYEOF'
import json, sys
rows = {json.loads(l)["input"]: json.loads(l) for l in open(sys.argv[1], "rb")}
assert len(rows) == 8, rows
for i in range(1, 7):
    r = rows["s.tar/big%d.png" % i]
    assert r["status"] == "error" and "tar member of 4294967295 bytes is over the" in r["error"] \
        and "--max-member-bytes" in r["error"], r
for k in ("s.tar/ok.png", "s.tar/mid.png"):
    assert rows[k]["status"] == "ok" and rows[k]["width"] == 128, rows[k]
PYEOF
    # the bound is the option's: 1M fails the 200 MiB member alone, before reading it
    run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out o2 --max-member-bytes 1M s.tar
    [ "$status" -eq 2 ]
    [[ "$output" == *"s.tar/mid.png: tar member of 209715200 bytes is over the 1048576-byte bound"* ]]
    [ "$(grep -c '"status":"ok"' o2/manifest.jsonl)" -eq 1 ]
    run timeout 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out o3 --max-member-bytes 0 s.tar
    [ "$status" -eq 1 ]
}

@test "an interrupt stops the decode in flight: exit soon after SIGINT, no line for the clip" {
    cd "$T"
    # two seconds of 1080p encoded once, then repeated without re-encoding: 2-minute clips that
    # take many seconds each to decode
    ffmpeg -v error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 2 -c:v libx264 -preset ultrafast \
        -pix_fmt yuv420p s.mp4
    mkdir in
    for k in 1 2 3; do ffmpeg -v error -stream_loop 59 -i s.mp4 -c copy "in/clip$k.mp4"; done
    [ "$("$PY" -c 'import json,subprocess,sys; print(round(float(json.loads(subprocess.run(["ffprobe","-v","error","-show_entries","format=duration","-of","json",sys.argv[1]],capture_output=True).stdout)["format"]["duration"])))' in/clip1.mp4)" -eq 120 ]
    "$MVEMBED" -q -j 1 --jobs 1 --device cpu --model "$MODEL" --out o in 2>err & pid=$!
    sleep 4 # the model is loaded, the first clip is decoding
    kill -INT "$pid"
    local t0 st=0
    t0=$(date +%s.%N)
    wait "$pid" || st=$?
    local took
    took=$("$PY" -c 'import sys,time; print(time.time() - float(sys.argv[1]))' "$t0")
    echo "exit $st after ${took}s: $(cat err)"
    [ "$st" -eq 130 ]
    "$PY" -c 'import sys; assert float(sys.argv[1]) < 4.0, sys.argv[1]' "$took"
    # the clip stopped in its decode is not failed: no line, so the next run does it
    [ ! -s o/manifest.jsonl ]
    [ -z "$(find o -name '.tmp-*')" ]
    [[ "$(cat err)" == *"interrupted; 0 done and kept"* ]]
}

@test "a manifest that is a symlink out of OUT or a FIFO is refused, nothing written through it" {
    mkdir -p "$T/o" "$T/o2"
    echo keep > "$T/outside.jsonl"
    ln -s ../outside.jsonl "$T/o/manifest.jsonl"
    run timeout 60 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o/manifest.jsonl: the manifest is a symbolic link, not a regular file: refused"* ]]
    [ "$(cat "$T/outside.jsonl")" = keep ]
    mkfifo "$T/o2/manifest.jsonl"
    run timeout 60 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o2" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o2/manifest.jsonl: the manifest is a FIFO, not a regular file: refused"* ]]
}

@test "a FIFO among the shard manifests is refused by runs and by merge, never waited on" {
    mkdir -p "$T/o3"
    mkfifo "$T/o3/manifest-00000-of-00002.jsonl"
    run timeout 60 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o3" "$IMG/png_rgb_320x256.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"manifest-00000-of-00002.jsonl: not a regular file (a fifo)"* ]]
    run timeout 60 "$MVEMBED" manifest merge "$T/o3"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"not a regular file (a fifo)"* ]]
}

@test "a failed input under a 3000-byte path: its error line ends with the cause a short path gets" {
    short="$T/in/bad.jpg"
    mkdir -p "$T/in"
    cp "$ROOT/fixtures/bad/truncated.jpg" "$short"
    deep="$T/in"
    for i in $(seq 13); do deep="$deep/$(printf 'd%.0s' $(seq 240))"; done
    mkdir -p "$deep"
    cp "$ROOT/fixtures/bad/truncated.jpg" "$deep/bad.jpg"
    run timeout 120 "$MVEMBED" -q -j 1 --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 2 ]
    "$PY" - "$MAN" "$short" "$deep/bad.jpg" <<'PYEOF'
import json, sys
rows = {r["input"]: r for r in map(json.loads, open(sys.argv[1], "rb"))}
short, deep = rows[sys.argv[2]], rows[sys.argv[3]]
assert len(sys.argv[3]) > 3000 and short["status"] == deep["status"] == "error", (short, deep)
cause = short["error"].split(sys.argv[2])[-1]  # what follows the path in the short one's message
assert len(cause) > 10, short["error"]
assert deep["error"].endswith(cause), (cause, deep["error"][-200:])
assert len(deep["error"]) < 1024 and " ... " in deep["error"], len(deep["error"])
PYEOF
}

@test "a small stack limit (ulimit -s) does not crash the run's threads: same outputs as without it" {
    mkdir "$T/in"
    cp "$IMG"/png_*.png "$ROOT"/fixtures/media/videos/* "$T/in/" # FFmpeg's decoders: deep frames
    run timeout 120 "$MVEMBED" -q --device cpu -j 2 --model "$MODEL" --out "$T/ref" "$T/in"
    [ "$status" -eq 0 ]
    # 224 KiB: the decode and tower threads overflowed it; the main thread of a CUDA-linked build
    # needs about 192. Under AddressSanitizer (make test-asan sets ASAN_OPTIONS) frames carry
    # redzones: the main thread's own stack needs more there
    local lim=224
    [ -z "${ASAN_OPTIONS:-}" ] || lim=4096
    run timeout 120 bash -c 'ulimit -s "$1" && shift && exec "$@"' _ "$lim" "$MVEMBED" -q --device cpu -j 2 \
        --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    "$PY" - "$T/ref" "$T/o" <<'PYEOF'
import json, os, sys
a, b = ({r["input"]: r for r in map(json.loads, open(os.path.join(d, "manifest.jsonl")))} for d in sys.argv[1:3])
assert a.keys() == b.keys() and all(r["status"] == "ok" for r in b.values()), (a.keys(), b)
for k, r in a.items():
    assert open(os.path.join(sys.argv[1], r["output"]), "rb").read() == \
        open(os.path.join(sys.argv[2], b[k]["output"]), "rb").read(), k
print("ok", len(a))
PYEOF
}
