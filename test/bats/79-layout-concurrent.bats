#!/usr/bin/env bats
# One layout per OUT, also for runs that start at once: a tar-layout run and a files-layout run
# started milliseconds apart into one OUT, a files run after a tar run that was killed before its
# first shard was complete (no manifest line yet), and OUTs that earlier versions left: one
# files-only, one holding both layouts.
# Oracles: Python's os.listdir/os.walk, json, tarfile (tar_check.py), zstandard and numpy.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    inputs "$T/in" a 2
    N=$(ls "$T/in" | wc -l)
}

# layout_of OUT N: what OUT holds, by the file system and the manifest: prints "files" or "tar",
# and fails unless exactly one layout is there (no .npy.zst beside a shard-*.tar, every manifest
# line of that layout) and N inputs are ok in it; the files layout's outputs each zstd-decompress
# and np.load to the manifest's shape, finite
layout_of() {
    run "$PY" - "$1" "$2" <<'EOF'
import io, json, os, sys
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
npy = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".npy.zst")]
shards = [f for f in os.listdir(out) if f.startswith("shard-") and f.endswith(".tar")]
assert not (npy and shards), f"both layouts: {len(npy)} .npy.zst and {len(shards)} shards"
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8")]
kinds = {"tar" if "shard" in r else "files" for r in lines if r["status"] == "ok"}
assert len(kinds) == 1, kinds
kind = kinds.pop()
assert (kind == "tar") == bool(shards) and (kind == "files") == bool(npy), (kind, len(npy), len(shards))
ok = {r["input"]: r for r in lines if r["status"] == "ok"}
assert len(ok) == n, (len(ok), n)
if kind == "files":
    assert len(npy) == n, len(npy)
    for r in ok.values():
        with open(os.path.join(out, r["output"]), "rb") as f:
            a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))
        assert list(a.shape) == r["shape"] and np.isfinite(a).all(), r["output"]
print(kind)
EOF
    echo "$output"
    [ "$status" -eq 0 ]
    got=${lines[-1]}
}

@test "a tar run and a files run started 0-49 ms apart into one OUT: at least one is refused (exit 1), never both layouts" {
    for try in 1 2 3 4 5 6 7 8; do
        o="$T/o$try"
        delay=$(( (try - 1) * 7 ))  # 0, 7, ... 49 ms
        first=tar
        [ $((try % 2)) -eq 0 ] && first=files  # even tries: the files run starts first
        if [ "$first" = tar ]; then
            "$MVEMBED" -q --device cpu --model "$MODEL" --out "$o" --layout tar "$T/in" 2> "$T/err-tar" &
            p1=$!
            sleep "$(printf 0.%03d "$delay")"
            "$MVEMBED" -q --device cpu --model "$MODEL" --out "$o" "$T/in" 2> "$T/err-files" &
            p2=$!
            rt=0; rf=0
            wait "$p1" || rt=$?
            wait "$p2" || rf=$?
        else
            "$MVEMBED" -q --device cpu --model "$MODEL" --out "$o" "$T/in" 2> "$T/err-files" &
            p1=$!
            sleep "$(printf 0.%03d "$delay")"
            "$MVEMBED" -q --device cpu --model "$MODEL" --out "$o" --layout tar "$T/in" 2> "$T/err-tar" &
            p2=$!
            rt=0; rf=0
            wait "$p1" || rf=$?
            wait "$p2" || rt=$?
        fi
        echo "try $try ($first first, +${delay} ms): tar exit $rt, files exit $rf"
        cat "$T/err-tar" "$T/err-files"
        if [ "$rt" -eq 1 ] && [ "$rf" -eq 1 ]; then # each saw the other: both refused, OUT untouched
            grep -qF "$o holds the files layout" "$T/err-tar"
            grep -qF "$o holds the tar layout" "$T/err-files"
            [ -z "$(ls -A "$o" | grep -e '^shard-' -e '^\.tmp-tar-' -e '^\.mvembed-tar\.json$' -e '\.npy\.zst$')" ]
            [ ! -s "$o/manifest.jsonl" ]
            continue
        fi
        layout_of "$o" "$N"
        kept=$got
        if [ "$kept" = tar ]; then
            [ "$rt" -eq 0 ]
            [ "$rf" -eq 1 ]
            grep -qF "$o holds the tar layout" "$T/err-files"
            grep -qF -- "--layout files would mix two layouts in one output directory; use another --out, or --layout tar" "$T/err-files"
            tar_check "$o" --ok "$N" --one-sample
        else
            [ "$rf" -eq 0 ]
            [ "$rt" -eq 1 ]
            grep -qF "$o holds the files layout" "$T/err-tar"
            grep -qF -- "--layout tar would mix two layouts in one output directory; use another --out, or --layout files" "$T/err-tar"
            [ -z "$(ls -A "$o" | grep -e '^shard-' -e '^\.tmp-tar-' -e '^\.mvembed-tar\.json$')" ]
        fi
    done
}

@test "a files run after a tar run killed before its first complete shard (no manifest line) is refused; the tar run resumes" {
    # the tar run's temporary shard waits 20 s once created: it is killed there
    MVEMBED_TEST_PAUSE_TAR_OPEN=20000 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/in" 2> /dev/null &
    pid=$!
    for _ in $(seq 500); do ls -A "$T/o" 2>/dev/null | grep -q '^\.tmp-tar-' && break; sleep 0.02; done
    kill -9 "$pid"
    wait "$pid" || true
    ls -A "$T/o" | grep -q '^\.tmp-tar-'
    [ ! -s "$T/o/manifest.jsonl" ]  # no line yet
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o holds the tar layout"*"--layout files would mix two layouts in one output directory"* ]]
    [ -z "$(find "$T/o" -name '*.npy.zst')" ]
    [ ! -s "$T/o/manifest.jsonl" ]
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    layout_of "$T/o" "$N"
    [ "$got" = tar ]
    tar_check "$T/o" --ok "$N" --one-sample
}

@test "an OUT holding both layouts (as earlier versions left it) refuses either; a files-layout OUT refuses a tar run, takes a files run" {
    # a files-layout OUT, and one that a files run and a tar run at once mixed (.npy.zst outputs
    # and shards, each input's newest line a tar one: the tar run ended last)
    mvembed -q --device cpu --model "$MODEL" --out "$T/f" "$T/in"
    mvembed -q --device cpu --model "$MODEL" --out "$T/t" --layout tar "$T/in"
    cp -r "$T/f" "$T/m"
    cp "$T"/t/shard-*.tar "$T/t/.mvembed-tar.json" "$T/m/"
    cat "$T/t/manifest.jsonl" >> "$T/m/manifest.jsonl"
    tar_check "$T/m" --ok "$N"  # every tar sample readable, as the older version left it
    [ -n "$(find "$T/m" -name '*.npy.zst')" ]
    ls -A "$T/m" | grep -v '^run-' | sort > "$T/ls-mixed"
    for layout in tar files; do
        run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/m" --layout "$layout" "$T/in"
        echo "$layout: $output"
        [ "$status" -eq 1 ]
        [[ "$output" == *"$T/m holds both layouts ("*"): mvembed does not sort them apart; use another --out"* ]]
        ls -A "$T/m" | grep -v '^run-' | sort | cmp - "$T/ls-mixed"  # not repaired, nothing written
    done
    # the files-layout OUT: a tar run is refused, nothing written
    ls -A "$T/f" | grep -v '^run-' | sort > "$T/ls-before"
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/f" --layout tar "$T/in"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/f holds the files layout ($N inputs, such as "*"--layout tar would mix two layouts"* ]]
    ls -A "$T/f" | grep -v '^run-' | sort | cmp - "$T/ls-before"
    # a files run goes on
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/f" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"0 ok, 0 failed, $N skipped"* ]]
    layout_of "$T/f" "$N"
    [ "$got" = files ]
}
