#!/usr/bin/env bats
# A careful dataset user's checks on WebDataset tars as people make and damage them: a tar cut
# short inside a member's data names that member as cut, not the tar "after" it. Oracles: the
# `tar` CLI and Python's tarfile (where the tar ends and which member it cuts), json (manifest).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMGS="$ROOT/fixtures/media/images"
}

@test "a tar cut inside a member's data: that member's error says it is cut, not 'after this member'" {
    mkdir -p "$T/src"
    cp "$IMGS/png_gray_128x72.png" "$T/src/a.png"
    cp "$IMGS/png_rgb_320x256.png" "$T/src/b.png"
    (cd "$T/src" && tar cf "$T/full.tar" a.png b.png)
    head -c 4000 "$T/full.tar" > "$T/cut.tar"
    # the oracle: tarfile finds b.png's header inside the cut file and its data past the end
    "$PY" - "$T/cut.tar" <<'PY'
import os, sys, tarfile
t = tarfile.open(sys.argv[1])
a, b = t.next(), t.next()  # headers only: b.png's data is past the end
assert (a.name, b.name) == ("a.png", "b.png"), (a.name, b.name)
assert a.offset_data + a.size <= b.offset < os.path.getsize(sys.argv[1]) < b.offset_data + b.size
PY
    ! tar tvf "$T/cut.tar" >/dev/null 2>&1
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/cut.tar"
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" - "$T/o/manifest.jsonl" <<'PY'
import json, sys
recs = {r["input"].rsplit("/", 1)[-1]: r for r in map(json.loads, open(sys.argv[1]))}
assert recs["a.png"]["status"] == "ok", recs["a.png"]
b = recs["b.png"]
assert b["status"] == "error", b
assert "after this member" not in b["error"], b["error"]
assert "cut short or damaged inside this member" in b["error"], b["error"]
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
