#!/usr/bin/env bats
# `mvembed manifest failed OUT [-0]` (issue 33, item 3): the inputs whose newest line, over every
# manifest of OUT, failed, byte for byte, so that `manifest failed OUT -0 | mvembed ... -0 -`
# retries them. Oracles: Python's json over the manifests (newest: of one run the higher seq, of
# two runs the later time), os.listdir's bytes, the file system.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    GOOD="$IMG/png_rgb_320x256.png"
    BAD="$ROOT/fixtures/bad/truncated.jpg"
}

args() { echo -q --device cpu --threads 1 --model "$MODEL"; }

# newest_failed OUT: the inputs (as bytes, one repr a line, sorted) whose newest line over every
# manifest of OUT is not ok, and on the last line "lines N" (lines read)
newest_failed() {
    "$PY" - "$1" <<'PYEOF'
import base64, glob, json, os, sys
out = sys.argv[1]
newest, n = {}, 0
for p in sorted(glob.glob(os.path.join(out, "manifest*.jsonl"))):
    for raw in open(p, "rb"):
        r = json.loads(raw)
        n += 1
        key = base64.b64decode(r["input_b64"]) if "input_b64" in r else r["input"].encode()
        order = (r["time"], r["seq"]) # every line here has an order; within a run seq decides
        if key not in newest or order > newest[key][0]:
            newest[key] = (order, r["status"])
for k in sorted(k for k, (_, st) in newest.items() if st != "ok"):
    print(repr(k))
print("lines", n)
PYEOF
}

# listed FILE: the NUL-separated names in FILE, one repr a line, sorted
listed() {
    "$PY" -c 'import sys; [print(repr(x)) for x in sorted(open(sys.argv[1], "rb").read().split(b"\0")[:-1])]' "$1"
}

@test "manifest failed -0 piped into a rerun retries the failures: afterwards every input's newest line is ok" {
    mkdir "$T/in"
    cp "$GOOD" "$T/in/a.png"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/in/b.jpg"
    cp "$BAD" "$T/in/c.jpg"
    cp "$BAD" "$T/in/d e.jpg"
    find "$T/in" -type f -print0 | mvembed $(args) --out "$T/o" -0 - || rc=$?
    [ "${rc:-0}" -eq 2 ]
    mvembed manifest failed "$T/o" -0 > "$T/failed"
    run listed "$T/failed"
    want=$(newest_failed "$T/o" | grep -v '^lines')
    echo "$output"
    [ "$output" = "$want" ]
    [ "${#lines[@]}" -eq 2 ]
    # the default is one a line
    [ "$(mvembed manifest failed "$T/o" | sort)" = "$(printf '%s\n' "$T/in/c.jpg" "$T/in/d e.jpg" | sort)" ]
    # fix the files, retry exactly the failures
    cp "$GOOD" "$T/in/c.jpg"
    cp "$GOOD" "$T/in/d e.jpg"
    run bash -c 'set -o pipefail; "$1" manifest failed "$2" -0 | "$1" --device cpu --threads 1 --model "$3" --out "$2" -0 -' \
        _ "$MVEMBED" "$T/o" "$MODEL"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "2 ok, 0 failed, 0 skipped" ]]
    run newest_failed "$T/o"
    [ "$output" = "lines 6" ] # four inputs, two retried: none failed by its newest line
    [ -z "$(mvembed manifest failed "$T/o")" ]
    # the retried outputs took the names the first run would have given them
    [ -f "$T/o/$T/in/c.jpg.npy.zst" ] && [ -f "$T/o/$T/in/d e.jpg.npy.zst" ]
}

@test "manifest failed: a non-UTF-8 name comes through byte for byte, and its retry succeeds" {
    mkdir "$T/in"
    "$PY" -c 'import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2].encode() + b"/bad\xff\xfe name.jpg")' "$BAD" "$T/in"
    cp "$GOOD" "$T/in/ok.png"
    run mvembed $(args) --out "$T/o" "$T/in/ok.png" - < <(find "$T/in" -name 'bad*')
    [ "$status" -eq 2 ]
    mvembed manifest failed "$T/o" -0 > "$T/failed"
    run "$PY" -c '
import os, sys
d = sys.argv[1].encode()
[name] = [n for n in os.listdir(d) if n.startswith(b"bad")]
got = open(sys.argv[2], "rb").read()
assert got == d + b"/" + name + b"\0", (got, name)
print("same bytes")' "$T/in" "$T/failed"
    echo "$output"
    [ "$output" = "same bytes" ]
    "$PY" -c 'import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2].encode() + b"/bad\xff\xfe name.jpg")' "$GOOD" "$T/in"
    mvembed $(args) --out "$T/o" -0 - < "$T/failed"
    run newest_failed "$T/o"
    [ "$output" = "lines 3" ]
}

@test "manifest failed over a sharded OUT lists the failures of every shard manifest; a fix-up run's ok line wins" {
    mkdir "$T/in"
    for i in 1 2 3 4 5 6; do cp "$BAD" "$T/in/bad$i.jpg"; cp "$GOOD" "$T/in/ok$i.png"; done
    for k in 0 1 2; do
        run mvembed $(args) --out "$T/o" --shard "$k/3" "$T/in"
        [ "$status" -eq 0 ] || [ "$status" -eq 2 ]
    done
    # the failures lie in more than one shard manifest
    run "$PY" -c '
import glob, json, sys
print(sum(any(json.loads(l)["status"] != "ok" for l in open(p)) for p in glob.glob(sys.argv[1] + "/manifest-*.jsonl")))' "$T/o"
    [ "$output" -ge 2 ]
    mvembed manifest failed "$T/o" -0 > "$T/failed"
    run listed "$T/failed"
    [ "${#lines[@]}" -eq 6 ]
    [ "$output" = "$(newest_failed "$T/o" | grep -v '^lines')" ]
    # bad3 fixed by a fix-up run of its own (manifest.jsonl): its older error lines are outlived
    cp "$GOOD" "$T/in/bad3.jpg"
    mvembed $(args) --out "$T/o" --shard none "$T/in/bad3.jpg"
    [ -f "$T/o/manifest.jsonl" ]
    mvembed manifest failed "$T/o" -0 > "$T/failed"
    run listed "$T/failed"
    echo "$output"
    [ "${#lines[@]}" -eq 5 ]
    [[ "$output" != *bad3* ]]
    [ "$output" = "$(newest_failed "$T/o" | grep -v '^lines')" ]
}

@test "manifest failed lists a tar with failed members once; piping it into a rerun redoes those members only" {
    mkdir "$T/m"
    cp "$GOOD" "$T/m/a.png"
    cp "$BAD" "$T/m/b.jpg"
    cp "$BAD" "$T/m/c.jpg"
    tar cf "$T/x.tar" -C "$T/m" a.png b.jpg c.jpg
    run mvembed $(args) --out "$T/o" "$T/x.tar"
    [ "$status" -eq 2 ]
    run newest_failed "$T/o"
    [ "${#lines[@]}" -eq 3 ] # two members failed
    mvembed manifest failed "$T/o" -0 > "$T/failed"
    run listed "$T/failed"
    [ "$output" = "$("$PY" -c 'import sys; print(repr(sys.argv[1].encode()))' "$T/x.tar")" ]
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/m/b.jpg"
    cp "$IMG/jpeg_gray_200x149.jpg" "$T/m/c.jpg"
    tar cf "$T/x.tar" -C "$T/m" a.png b.jpg c.jpg
    run bash -c '"$1" --device cpu --threads 1 --model "$3" --out "$2" -0 - < "$4"' _ "$MVEMBED" "$T/o" "$MODEL" "$T/failed"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "2 ok, 0 failed, 1 skipped" ]]
    run newest_failed "$T/o"
    [ "$output" = "lines 5" ]
}

@test "manifest failed: a missing OUT, or a directory that is no mvembed OUT, is an error naming it (exit 1)" {
    run mvembed manifest failed "$T/nothere"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $T/nothere: No such file or directory" ]
    mkdir "$T/plain"
    run mvembed manifest failed "$T/plain" -0
    [ "$status" -eq 1 ]
    [[ "$output" =~ ^"mvembed: $T/plain: not an mvembed output directory" ]]
    run mvembed manifest failed
    [ "$status" -eq 1 ]
    [[ "$output" =~ "mvembed manifest failed OUT [-0]" ]]
}

@test "manifest failed with standard output closed exits 1 saying so: the list is never lost unsaid" {
    mkdir "$T/in"
    cp "$BAD" "$T/in/c.jpg"
    run mvembed $(args) --out "$T/o" "$T/in"
    [ "$status" -eq 2 ]
    [ -n "$(newest_failed "$T/o" | grep -v '^lines')" ]
    run bash -c '"$0" manifest failed "$1" >&-' "$MVEMBED" "$T/o"
    echo "$output"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: manifest failed: standard output is closed: the list of failed inputs would be lost" ]
}
