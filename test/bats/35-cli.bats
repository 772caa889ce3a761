#!/usr/bin/env bats
# The command line as shell pipelines use it: stdin path lists, xargs, resume, --force, errors.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/data/a" "$T/data/b"
    cp "$IMG/png_rgb_320x256.png" "$IMG/jpeg_gray_200x149.jpg" "$T/data/a/"
    cp "$IMG/webp_lossy_192x128.webp" "$T/data/b/"
    cp "$IMG/png_palette_trns_144x96.png" "$T/data/b/with space.png"
    printf 'not an image\n' > "$T/data/notes.txt"
}

count_ok() { grep -c '"status":"ok"' "$1/manifest.jsonl"; }

@test "a directory argument: outputs mirror the tree, non-media files are not taken" {
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [ "$status" -eq 0 ]
    [ -f "$T/o/a/png_rgb_320x256.png.npy.zst" ]
    [ -f "$T/o/b/with space.png.npy.zst" ]
    [ "$(count_ok "$T/o")" -eq 4 ]
    ! grep -q notes.txt "$T/o/manifest.jsonl"
}

@test "find -print0 | mvembed -0 - gives the same files, at the same names, as the directory walk" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o1" "$T/data"
    cd "$T/data" && find . -type f ! -name '*.txt' -print0 | "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o2" -0 -
    [ "$(count_ok "$T/o2")" -eq 4 ]
    for f in a/png_rgb_320x256.png a/jpeg_gray_200x149.jpg b/webp_lossy_192x128.webp "b/with space.png"; do
        cmp "$T/o2/$f.npy.zst" "$T/o1/$f.npy.zst"
    done
}

@test "newline-separated paths on stdin" {
    run bash -c "ls '$T'/data/a/* | '$MVEMBED' -q --device cpu --model '$MODEL' --out '$T/o' -"
    [ "$status" -eq 0 ]
    [ "$(count_ok "$T/o")" -eq 2 ]
}

@test "xargs -n 3 batches into one OUT: every input exactly once" {
    cd "$T/data" && find . -type f -print0 | xargs -0 -n 3 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" || true
    run "$PY" -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["input"] for l in open(sys.argv[1])); print(len(c), max(c.values()))' "$T/o/manifest.jsonl"
    [ "$output" = "5 1" ]
    [ "$(count_ok "$T/o")" -eq 4 ]
}

@test "resume skips inputs already ok; --force redoes them" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    touch -d '2000-01-01' "$T/o/a/png_rgb_320x256.png.npy.zst"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "0 ok, 0 failed, 4 skipped" ]]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq 4 ]
    [ "$(stat -c %Y "$T/o/a/png_rgb_320x256.png.npy.zst")" -lt 1000000000 ]
    # an output deleted by hand is redone
    rm "$T/o/b/webp_lossy_192x128.webp.npy.zst"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [[ "$output" =~ "1 ok, 0 failed, 3 skipped" ]]
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --force "$T/data"
    [[ "$output" =~ "4 ok, 0 failed, 0 skipped" ]]
    [ "$(stat -c %Y "$T/o/a/png_rgb_320x256.png.npy.zst")" -gt 1000000000 ]
}

@test "bad inputs get manifest errors, exit 2, the rest succeeds" {
    B="$ROOT/fixtures/bad"
    cp "$B/empty.jpg" "$B/truncated.jpg" "$B/truncated.png" "$B/x.jpg" "$B/bad_huffman.jpg" \
       "$B/bomb_100000x100000.png" "$T/data/"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [ "$status" -eq 2 ]
    [ "$(count_ok "$T/o")" -eq 4 ]
    [ "$(grep -c '"status":"error"' "$T/o/manifest.jsonl")" -eq 6 ]
    echo "$output"
    [[ "$output" =~ "mvembed: $T/data/empty.jpg: empty file" ]]
    [[ "$output" =~ "mvembed: $T/data/x.jpg: not an image or video (unrecognised file type)" ]]
    [[ "$output" =~ "mvembed: $T/data/bomb_100000x100000.png: " ]]
    for f in empty.jpg truncated.jpg truncated.png x.jpg bad_huffman.jpg bomb_100000x100000.png; do
        [ ! -e "$T/o/$f.npy.zst" ]
    done
    # no temp files left behind
    [ -z "$(find "$T/o" -name '.tmp-*')" ]
}

@test "a file named twice (a/x and ./a//x normalise alike) is one input: embedded once, not an error" {
    cd "$T/data"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" a/png_rgb_320x256.png ./a//png_rgb_320x256.png
    [ "$status" -eq 0 ]
    [ "$(count_ok "$T/o")" -eq 1 ]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq 1 ]
}

@test "usage errors exit 1 with a hint" {
    run mvembed --model "$MODEL" "$T/data"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "mvembed: no output directory: give --out DIR" ]
    run mvembed --model "$MODEL" --out "$T/o" --fps 2 --num-frames 4 "$T/data"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "mvembed: --fps and --num-frames are mutually exclusive" ]
    run mvembed --out "$T/o" "$T/data"
    [ "${lines[0]}" = "mvembed: no model: give --model DIR or set MVEMBED_MODEL" ]
    MVEMBED_MODEL="$MODEL" run mvembed -q --device cpu --out "$T/o" "$T/data/a"
    [ "$status" -eq 0 ]
}

@test "--cuda-residual, --cudnn-graph: a bad value is a usage error; the CPU backend's bytes do not change" {
    run mvembed --model "$MODEL" --out "$T/o" --cuda-residual f16 "$T/data/a"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "mvembed: --cuda-residual must be f32 or bf16: f16" ]
    run mvembed --model "$MODEL" --out "$T/o" --cudnn-graph dense "$T/data/a"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "mvembed: --cudnn-graph must be auto or ragged: dense" ]
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o1" "$T/data/a"
    [ "$status" -eq 0 ]
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o2" --cuda-residual bf16 --cudnn-graph ragged "$T/data/a"
    [ "$status" -eq 0 ]
    n=0
    for f in "$T/o1"/*.npy.zst; do
        cmp "$f" "$T/o2/$(basename "$f")"
        n=$((n + 1))
    done
    [ "$n" -eq 2 ]
}

@test "CUDA options with the CPU backend: one line names them, -q silences it, the bytes do not change" {
    run mvembed --device cpu --model "$MODEL" --out "$T/o1" --inflight 3 --gpu 1 --attention cudnn "$T/data/a"
    [ "$status" -eq 0 ]
    [[ "$output" == *"mvembed: the CPU backend does not use --inflight, --gpu, --attention (CUDA options)"* ]]
    run mvembed --device cpu --model "$MODEL" --out "$T/o2" --cuda-residual bf16 "$T/data/a"
    [ "$status" -eq 0 ]
    [[ "$output" == *"mvembed: the CPU backend does not use --cuda-residual (CUDA option)"* ]]
    run mvembed --device cpu --model "$MODEL" --out "$T/o3" "$T/data/a"
    [ "$status" -eq 0 ]
    [[ "$output" != *"does not use"* ]]
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o4" --inflight 3 "$T/data/a"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    n=0
    for f in "$T/o3"/*.npy.zst; do
        for d in o1 o2 o4; do cmp "$f" "$T/$d/$(basename "$f")"; done
        n=$((n + 1))
    done
    [ "$n" -eq 2 ]
}

# refused VALUE MESSAGE OPTION...: the run is a usage error (exit 1) whose first line is
# "mvembed: MESSAGE: VALUE...", and nothing is written
refused() {
    local msg=$1
    shift
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$@" "$T/data"
    echo "$output"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "mvembed: $msg" ]
    [ "${lines[1]}" = "Try 'mvembed --help'." ]
    [ ! -e "$T/o" ]
}

@test "--batch-tokens beyond a 64-bit integer is a usage error, not 2^63-1" {
    refused "--batch-tokens must be a positive integer: 99999999999999999999 (out of range)" \
        --batch-tokens 99999999999999999999
    refused "--batch-tokens must be a positive integer: 12abc" --batch-tokens 12abc
}

@test "--max-pixels beyond a 64-bit integer is a usage error, not 2^63-1" {
    refused "--max-pixels must be a positive integer: 99999999999999999999 (out of range)" \
        --max-pixels 99999999999999999999
}

@test "--max-decode-pixels beyond a 64-bit integer is a usage error, not 2^63-1" {
    refused "--max-decode-pixels must be a positive integer: 99999999999999999999 (out of range)" \
        --max-decode-pixels 99999999999999999999
}

@test "--timeout nan, inf or past 1e9 seconds is a usage error" {
    refused "--timeout must be a number of seconds (0 to 1e9): nan" --timeout nan
    refused "--timeout must be a number of seconds (0 to 1e9): inf (out of range)" --timeout inf
    refused "--timeout must be a number of seconds (0 to 1e9): 1e400 (out of range)" --timeout 1e400
    refused "--fps must be a positive number (at most 1e6): nan" --fps nan
    refused "--fps must be a positive number (at most 1e6): inf (out of range)" --fps inf
}

@test "real-valued options take decimal numbers only: hexadecimal is a usage error, not 16" {
    refused "--fps must be a positive number (at most 1e6): 0x10" --fps 0x10
    refused "--timeout must be a number of seconds (0 to 1e9): -0X1p3" --timeout -0X1p3
}

@test "--shard 0/4294967297 is a usage error, not shard 0 of 1" {
    refused "--shard must be K/N with 0 <= K < N, auto/N, or none: 0/4294967297" --shard 0/4294967297
    refused "--shard must be K/N with 0 <= K < N, auto/N, or none: 4294967296/4294967297" --shard 4294967296/4294967297
    refused "--shard must be K/N with 0 <= K < N, auto/N, or none: 0/ 2" --shard "0/ 2"
}

@test "integer options beyond their bounds or the type say so" {
    refused "--zstd-level must be 1..19: 99999999999999999999 (out of range)" --zstd-level 99999999999999999999
    refused "--jobs must be 1..1024: 1025" --jobs 1025
    refused "--max-frames must be 1..100000: 100001" --max-frames 100001
    refused "--jobs must be 1..1024:  2" --jobs " 2"
    refused "--writers must be 1..64: 0" --writers 0
    refused "--writers must be 1..64: 65" --writers 65
}

@test "unwritable OUT is a fatal error (exit 1)" {
    touch "$T/file"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/file/o" "$T/data"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "mvembed: cannot create the output directory (--out): $T/file: "* ]]
}

@test "--help and the man page document the same options" {
    run "$MVEMBED" --help
    [ "$status" -eq 0 ]
    help=$(echo "$output" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
    man=$(grep -oE -- '\\-\\-[a-z]([a-z0-9]|\\-)+' "$ROOT/man/mvembed.1" | sed 's/\\//g' | sort -u)
    echo "help only: $(comm -23 <(echo "$help") <(echo "$man"))"
    echo "man only: $(comm -13 <(echo "$help") <(echo "$man"))"
    [ "$help" = "$man" ]
}

@test "--progress: files done of the total, rates per stage, ETA; -q silences it" {
    run mvembed --progress --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: 4/4 done, 0 failed, 0 skipped | decode " ]]
    [[ "$output" =~ "patches/s | written " ]]
    run mvembed -q --force --device cpu --model "$MODEL" --out "$T/o" "$T/data"
    [ -z "$output" ]
}

@test "--help says that tar files are read, with the suffixes the man page lists" {
    run mvembed --help
    [ "$status" -eq 0 ]
    # every suffix the man page's DESCRIPTION names for tar input is in --help too
    sufs=$(sed -n '/whose name ends in .tar/,/any case/p' "$ROOT/man/mvembed.1" | grep -oE '\.tar(\.[a-z0-9]+)?|\.tgz' | sort -u)
    [ "$(echo "$sufs" | wc -l)" -ge 5 ]
    for s in $sufs; do
        echo "suffix $s"
        [[ "$output" == *"$s"* ]]
    done
    [[ "$output" =~ "WebDataset shard" ]]
}
