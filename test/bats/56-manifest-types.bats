#!/usr/bin/env bats
# The manifest's numbers and the texts that describe the program (issue 33, item 7): reals are
# written as reals every JSON reader keeps (30.0, not 3e+01), every field has one JSON type in
# every kind of line, pandas reads the ok lines' integer fields as int64; --version and
# the man page agree; --help, the man page and the README say the pooled directory's rule.
# Oracles: the ffmpeg CLI makes the video and ffprobe says its rate and length; Python's json,
# pandas and tarfile read what was written; the filesystem says what a run left.
load test_helper

setup() {
    T=$BATS_TEST_TMPDIR
    IMG="$ROOT/fixtures/media/images"
    cd "$T"
    mkdir in
    # 30 frames a second for exactly 1 s: fps and duration are integral reals
    ffmpeg -v error -f lavfi -i testsrc=size=64x48:rate=30:duration=1 -c:v mpeg4 in/clip30.mp4
}

# field_types MANIFEST...: every field's values (array elements, for arrays) have one Python type
# across all the lines given, none of them null; prints "ok" (json and cls carry the sample's
# own values and are left out)
field_types() {
    "$PY" - "$@" <<'PYEOF'
import json, sys
types = {}
for path in sys.argv[1:]:
    for l in open(path, "rb"):
        for k, v in json.loads(l).items():
            if k in ("json", "cls"):
                continue
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                types.setdefault(k, set()).add(type(x).__name__)
bad = {k: t for k, t in types.items() if len(t) != 1 or "NoneType" in t}
assert not bad, bad
for k in ("fps", "duration", "timestamps", "seconds", "time"):
    assert types[k] == {"float"}, (k, types[k])
for k in ("width", "height", "bytes", "offset", "rotation", "frame_indices", "input_bytes", "input_mtime_ns", "seq"):
    assert types[k] == {"int"}, (k, types[k])
print("ok")
PYEOF
}

@test "manifest reals: fps and duration of a 30 fps, 1 s video are 30.0 and 1.0, no exponent, as ffprobe says" {
    run mvembed -q --device cpu --model "$MODEL" --out o in/clip30.mp4
    [ "$status" -eq 0 ]
    cat o/manifest.jsonl
    grep -q '"fps":30.0,' o/manifest.jsonl
    grep -q '"duration":1.0,' o/manifest.jsonl
    grep -q '"timestamps":\[0.0,' o/manifest.jsonl
    # no number in exponent form: every value here is of an ordinary magnitude
    ! grep -qE '[:,[]-?[0-9][0-9.]*[eE]' o/manifest.jsonl
    rate=$(ffprobe -v error -select_streams v:0 -show_entries stream=avg_frame_rate -of csv=p=0 in/clip30.mp4)
    len=$(ffprobe -v error -show_entries format=duration -of csv=p=0 in/clip30.mp4)
    "$PY" - o/manifest.jsonl "$rate" "$len" <<'PYEOF'
import json, sys
from fractions import Fraction
r = json.loads(open(sys.argv[1]).readline())
assert type(r["fps"]) is float and r["fps"] == float(Fraction(sys.argv[2])), r
assert type(r["duration"]) is float and abs(r["duration"] - float(sys.argv[3])) < 0.05, r
assert all(type(t) is float for t in r["timestamps"]), r
PYEOF
}

@test "manifest types: one JSON type a field, never null, in every kind of line; pandas reads ok lines' integers as int64, exactly" {
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" in/
    cp "$ROOT/fixtures/bad/empty.jpg" in/broken.jpg
    mkdir s && cp "$IMG/png_rgb_320x256.png" s/k.png && echo 'a caption' > s/k.txt && : > s/bad.jpg
    (cd s && tar -cf ../shard.tar k.png k.txt bad.jpg)
    run mvembed -q --device cpu --model "$MODEL" --out files in shard.tar
    [ "$status" -eq 2 ]
    run mvembed -q --device cpu --model "$MODEL" --out tars --layout tar in shard.tar
    [ "$status" -eq 2 ]
    mkdir x && for s in tars/shard-*.tar; do tar -x -f "$s" -C x; done
    grep -q '"status":"error"' files/manifest.jsonl
    grep -q '"kind":"video"' files/manifest.jsonl
    grep -q '"input":"shard.tar/k.png"' files/manifest.jsonl
    run field_types files/manifest.jsonl tars/manifest.jsonl x/*.json
    echo "$output"
    [ "$output" = ok ]
    # pandas: the ok lines of one kind of input (image files, video files, tar members) hold the
    # same integer fields, so
    # read_json gives int64 columns holding exactly what json reads; beside error lines, which
    # leave ok-only fields out, only the fields every line holds keep int64 (pandas makes a gap
    # NaN); reals read back as json reads them
    run "$PY" - <<'PYEOF'
import io, json
import pandas as pd
ints = {"width", "height", "bytes", "offset", "rotation", "input_bytes", "input_mtime_ns", "schema", "seq"}
reals = {"fps", "duration", "seconds", "time"}
for out in ("files", "tars"):
    recs = [json.loads(l) for l in open(f"{out}/manifest.jsonl")]
    for kind in ("image", "video", "tar member"):
        lines = [json.dumps(r) for r in recs if r["status"] == "ok" and
                 ("input_key" in r if kind == "tar member" else r["kind"] == kind and "input_key" not in r)]
        if not lines:
            continue
        df = pd.read_json(io.StringIO("\n".join(lines)), lines=True, precise_float=True)
        mine = [json.loads(l) for l in lines]
        for c in df.columns:
            if c in ints:
                assert str(df[c].dtype) == "int64", (out, kind, c, df[c].dtype)
                assert [int(x) for x in df[c]] == [r[c] for r in mine], (out, kind, c)
            if c in reals:
                assert [float(x) for x in df[c]] == [float(r[c]) for r in mine], (out, kind, c)
    df = pd.read_json(f"{out}/manifest.jsonl", lines=True)
    assert (df["status"] == "error").sum() >= 2, df["status"]
    for c in ("schema", "seq"):
        assert str(df[c].dtype) == "int64", (out, c, df[c].dtype)
print("ok")
PYEOF
    echo "$output"
    [ "$output" = ok ]
}

@test "--version and the docs agree: the man page names the version the binary prints and speaks of no older one" {
    run mvembed --version
    [ "$status" -eq 0 ]
    v=${output#mvembed }
    [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]
    grep -q "^\.TH MVEMBED 1 .*\"mvembed $v\"" "$ROOT/man/mvembed.1"
    # the run record says the same version
    mvembed -q --device cpu --model "$MODEL" --out o "$IMG/png_gray_128x72.png"
    "$PY" -c 'import glob, json, sys; r = json.load(open(glob.glob("o/run-*.json")[0])); assert r["mvembed_version"] == sys.argv[1], r' "$v"
    # every version mvembed has had is this one (git: mv_version.h never said another): no text
    # may speak of older or earlier versions of mvembed, or name another mvembed version
    run git -C "$ROOT" log --format= -p -- include/mv_version.h
    [ "$status" -eq 0 ]
    [ -z "$(echo "$output" | grep -E '^[-+]#define MV_VERSION ' | grep -v "\"$v\"")" ]
    run grep -n -i -E '(older|earlier|previous|prior) versions?\b|mvembed [0-9]+\.[0-9]' \
        "$ROOT/man/mvembed.1" "$ROOT/README.md" "$ROOT"/docs/*.md
    echo "$output"
    [ -z "$(echo "$output" | grep -v -i -e pillow -e transformers -e "mvembed $v")" ]
}

@test "--help, the man page and the README state the pooled rule the run follows: OUT/pooled/, either layout, failed inputs listed" {
    cp "$IMG/png_gray_128x72.png" in/
    cp "$ROOT/fixtures/bad/empty.jpg" in/broken.jpg
    run mvembed -q --device cpu --model "$MODEL" --out o --layout tar --pool mean in/png_gray_128x72.png in/broken.jpg
    [ "$status" -eq 2 ]
    # the behaviour: written with a failed input, in the tar layout, under OUT/pooled/
    [ -f o/pooled/pooled.npy ] && [ -f o/pooled/pooled.jsonl ] && [ ! -e o/pooled.npy ]
    "$PY" -c 'import json, sys; rows = [json.loads(l) for l in open("o/pooled/pooled.jsonl")]; assert sorted(r["row"] is None for r in rows) == [False, True], rows'
    run mvembed --help
    help=$(echo "$output" | sed -n '/--pool/,/^  *--[a-z]/p')
    echo "$help"
    [[ "$help" == *"OUT/pooled/"* ]]
    [[ "$help" == *"exit 0 or 2"* ]]
    [[ "$help" == *"either layout"* ]]
    [[ "$help" != *"files layout"* ]]
    grep -q 'directory \\fIOUT\\fR/pooled/' "$ROOT/man/mvembed.1"
    grep -q 'exit status 0 or 2' "$ROOT/man/mvembed.1"
    tr -s '\n ' ' ' < "$ROOT/README.md" |
        grep -qF 'a run that goes through its inputs (exit 0 or 2, either layout) also writes `OUT/pooled/`'
}
