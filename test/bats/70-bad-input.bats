#!/usr/bin/env bats
# Bad inputs (issue 7): every file in fixtures/bad/ (see its README.md) and the ones that cannot be
# committed (an unreadable file, a FIFO, symlink loops, non-UTF-8 names: made here, at run time,
# in the test's temp dir) each get one manifest error line with a clear message naming the file;
# the batch goes on, exits 2, and nothing hangs (every run is under `timeout`; video decoding has
# a per-input limit, --timeout).
load test_helper

B="$ROOT/fixtures/bad"
IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    MAN="$T/o/manifest.jsonl"
    D=
}

teardown() {
    if [ -n "$D" ]; then rm -rf "$D"; fi
}

# embed PATH...: runs the CLI (CPU, quiet) into $T/o under a 120 s guard against hangs.
embed() { run timeout 120 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$@"; }

# field_of INPUT FIELD: prints FIELD of the manifest line whose input is exactly INPUT's bytes
# (input_b64 when present); fails unless there is exactly one such line.
field_of() {
    "$PY" - "$MAN" "$1" "$2" <<'PYEOF'
import base64, json, os, sys
want = os.fsencode(sys.argv[2])
hits = []
for raw in open(sys.argv[1], "rb"):
    r = json.loads(raw)
    got = base64.b64decode(r["input_b64"]) if "input_b64" in r else r["input"].encode()
    if got == want:
        hits.append(r)
if len(hits) != 1:
    sys.exit("%d manifest lines for %r" % (len(hits), want))
v = hits[0].get(sys.argv[3])
print(v if isinstance(v, str) else json.dumps(v))
PYEOF
}

# expect_error INPUT MESSAGE: INPUT has exactly one line, status error, error == MESSAGE.
expect_error() {
    run field_of "$1" status
    [ "$status" -eq 0 ] && [ "$output" = "error" ]
    run field_of "$1" error
    [ "$status" -eq 0 ]
    echo "error: $output"
    [ "$output" = "$2" ]
}

@test "zero-byte file" {
    embed "$B/empty.jpg" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    expect_error "$B/empty.jpg" "$B/empty.jpg: empty file"
    [ "$(field_of "$IMG/png_gray_128x72.png" status)" = ok ]
}

@test "truncated JPEG, PNG and WebP" {
    embed "$B/truncated.jpg" "$B/truncated.png" "$B/truncated.webp"
    [ "$status" -eq 2 ]
    expect_error "$B/truncated.jpg" "$B/truncated.jpg: truncated JPEG data (image file is truncated)"
    expect_error "$B/truncated.png" "$B/truncated.png: corrupt PNG data: unexpected end of file (image file is truncated)"
    expect_error "$B/truncated.webp" "$B/truncated.webp: corrupt WebP data: not enough data (image file is truncated)"
}

@test "truncated GIF, BMP and TIFF" {
    embed "$B/truncated.gif" "$B/truncated.bmp" "$B/truncated.tif" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    expect_error "$B/truncated.gif" "$B/truncated.gif: truncated GIF data (image file is truncated)"
    expect_error "$B/truncated.bmp" "$B/truncated.bmp: truncated BMP data (image file is truncated)"
    expect_error "$B/truncated.tif" "$B/truncated.tif: truncated TIFF data (image file is truncated)"
    [ "$(field_of "$IMG/png_gray_128x72.png" status)" = ok ]
    # PIL refuses them too
    run "$PY" -c '
import sys
from PIL import Image
for f in sys.argv[1:]:
    try:
        Image.open(f).convert("RGB")
        print("PIL decodes", f)
    except OSError as e:
        print("PIL:", e)' "$B/truncated.gif" "$B/truncated.bmp" "$B/truncated.tif"
    echo "$output"
    [ "$(echo "$output" | grep -c '^PIL: image file is truncated')" -eq 3 ]
}

@test "GIF, BMP and TIFF headers claiming 4 to 10 Gpixels: refused before allocating, quickly" {
    SECONDS=0
    embed "$B/bomb_65535x65535.gif" "$B/bomb_100000x100000.bmp" "$B/bomb_100000x100000.tif"
    [ "$status" -eq 2 ]
    [ "$SECONDS" -lt 30 ]
    expect_error "$B/bomb_65535x65535.gif" \
        "$B/bomb_65535x65535.gif: image size 65535x65535 (4294836225 pixels) exceeds the limit of 178956970 pixels (decompression bomb guard)"
    for f in bomb_100000x100000.bmp bomb_100000x100000.tif; do
        expect_error "$B/$f" \
            "$B/$f: image size 100000x100000 (10000000000 pixels) exceeds the limit of 178956970 pixels (decompression bomb guard)"
    done
}

@test "truncated MP4s: cut in the middle of the data, and before the moov box" {
    embed "$B/video_truncated.mp4" "$B/video_no_moov.mp4"
    [ "$status" -eq 2 ]
    expect_error "$B/video_truncated.mp4" \
        "$B/video_truncated.mp4: decode failed at frame 26 of 48: file is truncated (the container lists more frames)"
    expect_error "$B/video_no_moov.mp4" "$B/video_no_moov.mp4: Invalid data found when processing input"
}

@test "wrong extension: a text file named .jpg is refused; a PNG named .jpg decodes by its content" {
    cp "$IMG/png_gray_128x72.png" "$T/photo.jpg"
    embed "$B/x.jpg" "$T/photo.jpg"
    [ "$status" -eq 2 ]
    expect_error "$B/x.jpg" "$B/x.jpg: not an image or video (unrecognised file type)"
    [ "$(field_of "$T/photo.jpg" status)" = ok ]
    [ "$(field_of "$T/photo.jpg" shape)" = "[8, 64]" ]
}

@test "PNG whose header claims 100000x100000: refused before allocating, quickly" {
    SECONDS=0
    embed "$B/bomb_100000x100000.png"
    [ "$status" -eq 2 ]
    [ "$SECONDS" -lt 30 ]
    expect_error "$B/bomb_100000x100000.png" \
        "$B/bomb_100000x100000.png: image size 100000x100000 (10000000000 pixels) exceeds the limit of 178956970 pixels (decompression bomb guard)"
}

@test "JPEG with a broken Huffman table" {
    embed "$B/bad_huffman.jpg"
    [ "$status" -eq 2 ]
    expect_error "$B/bad_huffman.jpg" "$B/bad_huffman.jpg: corrupt JPEG data: Bogus Huffman table definition"
}

@test "MP4 with no video stream (audio only)" {
    embed "$B/video_no_video_stream.mp4"
    [ "$status" -eq 2 ]
    expect_error "$B/video_no_video_stream.mp4" "$B/video_no_video_stream.mp4: no video stream"
}

@test "unreadable file (mode 000; run as nobody when we are root, who reads anything)" {
    mkdir -m 755 "$T/u"
    cp "$IMG/png_gray_128x72.png" "$T/u/locked.png"
    chmod 000 "$T/u/locked.png"
    if [ "$(id -u)" -eq 0 ]; then
        # nobody needs to reach the binary, the model and OUT: a world-readable copy of the model
        # and a world-writable OUT under a world-traversable directory
        D=$(mktemp -d /tmp/mvembed-bats.XXXXXX)
        chmod 755 "$D"
        cp -r "$MODEL" "$D/m" && chmod -R a+rX "$D/m"
        mkdir -m 777 "$D/o"
        mv "$T/u" "$D/u"
        run timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$MVEMBED" -q --device cpu --model "$D/m" --out "$D/o" "$D/u/locked.png"
        f="$D/u/locked.png"
        MAN="$D/o/manifest.jsonl"
    else
        embed "$T/u/locked.png"
        f="$T/u/locked.png"
    fi
    [ "$status" -eq 2 ]
    expect_error "$f" "$f: Permission denied"
}

@test "FIFO: named on the command line it is refused without being opened; in a directory it is skipped" {
    mkdir "$T/d"
    mkfifo "$T/fifo.jpg" "$T/d/clip.mp4"
    cp "$IMG/png_gray_128x72.png" "$T/d/"
    embed "$T/fifo.jpg" "$T/d"
    [ "$status" -eq 2 ]
    expect_error "$T/fifo.jpg" "$T/fifo.jpg: not a regular file"
    [ "$(field_of "$T/d/png_gray_128x72.png" status)" = ok ]
    ! grep -q clip.mp4 "$T/o/manifest.jsonl"
}

@test "directory symlink loop: reported once, the walk finishes" {
    mkdir -p "$T/in/sub"
    cp "$IMG/png_gray_128x72.png" "$T/in/sub/"
    ln -s .. "$T/in/sub/up"
    embed "$T/in"
    [ "$status" -eq 2 ]
    expect_error "$T/in/sub/up" "$T/in/sub/up: symlink loop: leads back to directory '$T/in' already being walked"
    [ "$(field_of "$T/in/sub/png_gray_128x72.png" status)" = ok ]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq 2 ]
}

@test "file symlink loop (a link to itself)" {
    ln -s self.jpg "$T/self.jpg"
    embed "$T/self.jpg"
    [ "$status" -eq 2 ]
    expect_error "$T/self.jpg" "$T/self.jpg: a symbolic link (to $(readlink "$T/self.jpg")) in a loop of symbolic links"
}

@test "dangling symbolic links, named and met in a walk: each fails alone, saying where it leads" {
    mkdir "$T/d"
    ln -s "$T/nowhere.png" "$T/d/gone.png"
    ln -s missing.jpg "$T/named.jpg"
    cp "$IMG/png_gray_128x72.png" "$T/d/"
    embed "$T/named.jpg" "$T/d"
    [ "$status" -eq 2 ]
    expect_error "$T/named.jpg" "$T/named.jpg: a dangling symbolic link (to $(readlink "$T/named.jpg"), which does not exist)"
    expect_error "$T/d/gone.png" "$T/d/gone.png: a dangling symbolic link (to $(readlink "$T/d/gone.png"), which does not exist)"
    [ "$(field_of "$T/d/png_gray_128x72.png" status)" = ok ]
    # the run record counts them as unreadable inputs
    "$PY" -c 'import json,glob,sys; r=json.load(open(glob.glob(sys.argv[1]+"/run-*.json")[0])); assert r["failures"]["unreadable"]["count"] == 2, r["failures"]' "$T/o"
}

@test "non-UTF-8 file names: exact bytes kept in input_b64 / output_b64, for successes and errors" {
    mkdir "$T/n"
    good="$T/n/caf$(printf '\xe9').png"
    bad="$T/n/tr$(printf '\xff\xfe').png"
    cp "$IMG/png_gray_128x72.png" "$good"
    cp "$B/truncated.png" "$bad"
    embed "$T/n"
    [ "$status" -eq 2 ]
    [ "$(field_of "$good" status)" = ok ]
    [ "$(field_of "$good" output_b64)" = "$(printf 'caf\xe9.png.npy.zst' | base64)" ]
    [ -f "$T/o/caf$(printf '\xe9').png.npy.zst" ]
    # the "error" text carries U+FFFD for each invalid byte (the exact bytes are in input_b64)
    expect_error "$bad" "$T/n/tr$(printf '\xef\xbf\xbd\xef\xbf\xbd').png: corrupt PNG data: unexpected end of file (image file is truncated)"
}

@test "per-input decode time limit: videos and images over --timeout fail, each with its own error" {
    V="$ROOT/fixtures/media/videos/h264_192x128_24fps.mp4"
    embed --timeout 0.000001 "$V" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 2 ]
    expect_error "$V" "$V: open: time limit exceeded"
    expect_error "$IMG/png_gray_128x72.png" "$IMG/png_gray_128x72.png: PNG decode stopped: time limit exceeded (--timeout)"
}

@test "the whole bad corpus in one batch: one error line each, good inputs ok, exit 2, no output for a bad input" {
    mkdir "$T/all"
    cp "$B"/* "$T/all/"
    rm -f "$T/all/README.md"
    mkfifo "$T/all/fifo.png"
    ln -s . "$T/all/loop"
    ln -s self.jpg "$T/all/self.jpg"
    cp "$B/truncated.jpg" "$T/all/bad$(printf '\x80').jpg"
    cp "$IMG/jpeg_gray_200x149.jpg" "$IMG/webp_lossy_192x128.webp" "$T/all/"
    SECONDS=0
    committed=$(ls "$B" | grep -vc '^README')
    embed "$T/all"
    [ "$status" -eq 2 ]
    [ "$SECONDS" -lt 100 ]
    "$PY" - "$T/o/manifest.jsonl" "$committed" <<'PYEOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
n = collections.Counter(r["input"] for r in rows)
assert all(c == 1 for c in n.values()), n
ok = sorted(r["input"].rsplit("/", 1)[1] for r in rows if r["status"] == "ok")
assert ok == ["jpeg_gray_200x149.jpg", "webp_lossy_192x128.webp"], ok
errs = [r for r in rows if r["status"] == "error"]
# the committed bad files + loop + self.jpg + the non-UTF-8 one (the FIFO is skipped in a walk)
assert len(errs) == int(sys.argv[2]) + 3, [r["input"] for r in errs]
for r in errs:
    assert r["error"] and "\n" not in r["error"] and "output" not in r, r
PYEOF
    [ "$(ls "$T/o" | grep -c '\.npy\.zst$')" -eq 2 ]
}
