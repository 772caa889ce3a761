#!/usr/bin/env bats
# --pool mean's OUT/pooled/ over several runs into one OUT: it indexes every run's pooled outputs
# (runs side by side under xargs -P, a retry of one file, --force on one file), is never left
# listing outputs a later run without --pool replaced, and says when its rows are bfloat16.
# Oracles: numpy (np.load of pooled.npy and of the token outputs after `zstd -d`, their f64 mean),
# Python's json over pooled.jsonl and the manifest; the README's pooled reader as written.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# tokens IN TOK: a separate run without --pool writes IN's token outputs into TOK
tokens() {
    mvembed -q --device cpu --model "$MODEL" --out "$2" "$1"
}

# pooled_ok OUT TOK [bf16]: OUT/pooled/ is current: its rows are exactly the inputs whose newest
# manifest line is a pooled ([1, H]) ok line, in byte order, failed ones listed with row null, and
# each row is the numpy mean of the input's token output in TOK within 1e-6 relative (bf16: within
# bf16's rounding, the rows widened by the README's reader). Prints "ok ROWS LEFT".
pooled_ok() {
    sed -n '/^<!-- test\/bats\/59-pooled-many-runs.bats runs this block/,/^```$/p' "$ROOT/README.md" |
        sed '1,2d;$d' > "$T/reader.py"
    "$PY" - "$T/reader.py" "$@" <<'PYEOF'
import io, json, os, subprocess, sys
import numpy as np
reader, out, tok = sys.argv[1:4]
bf16 = len(sys.argv) > 4
ns = {}
exec(open(reader).read(), ns)
P, idx = ns["load_pooled"](out)
raw = np.load(f"{out}/pooled/pooled.npy")
def npz(path):
    return np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", path], check=True,
                                             stdout=subprocess.PIPE).stdout))
newest = {}
for l in open(f"{out}/manifest.jsonl"):
    r = json.loads(l)
    newest[r["input"]] = r
H = P.shape[1]
want_rows = sorted(i for i, r in newest.items() if r["status"] == "ok" and r["shape"] == [1, H])
want_left = sorted(i for i, r in newest.items() if r["status"] == "error")
rows = [x for x in idx if x["row"] is not None]
assert [x["input"] for x in idx] == sorted(x["input"] for x in idx), "not in input order"
assert [x["input"] for x in rows] == want_rows, ([x["input"] for x in rows], want_rows)
assert [x["input"] for x in idx if x["row"] is None] == want_left, idx
assert [x["row"] for x in rows] == list(range(P.shape[0])), (len(rows), P.shape)
for x in idx:
    if x["row"] is None:
        assert x["error"] == newest[x["input"]]["error"], x
        continue
    r = newest[x["input"]]
    assert x["output"] == r["output"], (x, r)
    assert raw.dtype == (np.uint16 if bf16 else np.float32), raw.dtype
    if bf16:  # pooled.jsonl says what the <u2 rows are, as the manifest does
        assert x.get("dtype") == r["dtype"] == "bfloat16", (x, r)
    # the token run was given IN: its outputs are named by the file names
    t = npz(f"{tok}/{os.path.basename(x['input'])}.npy.zst").astype(np.float64)
    assert t.ndim == 2 and t.shape[0] > 1 and t.shape[1] == H, t.shape
    m = t.mean(axis=0)
    err = np.abs(P[x["row"]].astype(np.float64) - m).max() / np.abs(m).max()
    assert err <= (2.0 ** -8 if bf16 else 1e-6), (x["input"], err)
print("ok", len(rows), len(idx) - len(rows))
PYEOF
}

@test "a later run without --pool that redoes listed inputs removes pooled/; a --pool run rebuilds it" {
    mkdir -p "$T/in"
    cp "$IMG"/png_rgb_320x256.png "$T/in/a.png"
    cp "$IMG"/jpeg_baseline_420_320x240.jpg "$T/in/b.jpg"
    mvembed -q --device cpu --pool mean --model "$MODEL" --out "$T/o" "$T/in"
    cp "$IMG"/webp_lossy_192x128.webp "$T/in/a.png"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    # no pooled/ that lists a.png and b.jpg as ok rows: their newest lines are token outputs now
    if [ -e "$T/o/pooled" ]; then
        run "$PY" -c 'import json,sys
idx=[json.loads(l) for l in open(sys.argv[1]+"/pooled/pooled.jsonl")]
print(sum(x["row"] is not None for x in idx))' "$T/o"
        echo "stale pooled/ rows: $output"
        [ "$output" = "0" ]
    fi
    [[ "$output" =~ "/pooled/ removed: its rows were replaced; a --pool mean run rebuilds it" ]]
    # a --pool mean run makes it again over both, from this content
    run mvembed --device cpu --pool mean --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    tokens "$T/in" "$T/tok"
    run pooled_ok "$T/o" "$T/tok"
    echo "$output"
    [ "$output" = "ok 2 0" ]
}

@test "runs side by side under xargs -P 2 keep every run's rows in pooled/" {
    mkdir -p "$T/in"
    for f in "$IMG"/*.png "$IMG"/*.webp "$IMG"/jpeg_baseline_420_320x240.jpg "$IMG"/jpeg_gray_200x149.jpg; do
        cp "$f" "$T/in/"
    done
    n=$(ls "$T/in" | wc -l)
    [ "$n" -ge 12 ]
    ls -d "$T/in"/* | xargs -P 2 -n $(( (n + 1) / 2 )) "$MVEMBED" -q --device cpu -j 1 --pool mean \
        --model "$MODEL" --out "$T/o"
    tokens "$T/in" "$T/tok"
    run pooled_ok "$T/o" "$T/tok"
    echo "$output"
    [ "$output" = "ok $n 0" ]
}

@test "a retry of the one failed file (manifest failed | -0 -) and --force on one file keep the other rows" {
    mkdir -p "$T/in"
    cp "$IMG"/png_rgb_odd_173x97.png "$IMG"/jpeg_exif6_168x104.jpg "$IMG"/png_gray_128x72.png "$T/in/"
    printf 'not an image' > "$T/in/bad.png"
    run mvembed -q --device cpu --pool mean --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 2 ]
    tokens "$T/in" "$T/tok" || true # bad.png fails there too
    run pooled_ok "$T/o" "$T/tok"
    [ "$output" = "ok 3 1" ]
    # the README's retry: only the failed file, now an image
    cp "$IMG"/png_rgba_160x120.png "$T/in/bad.png"
    "$MVEMBED" manifest failed "$T/o" -0 | "$MVEMBED" -q --device cpu --pool mean --model "$MODEL" --out "$T/o" -0 -
    rm -r "$T/tok"
    tokens "$T/in" "$T/tok"
    run pooled_ok "$T/o" "$T/tok"
    echo "$output"
    [ "$output" = "ok 4 0" ]
    # --force on one file
    mvembed -q --device cpu --pool mean --force --model "$MODEL" --out "$T/o" "$T/in/png_gray_128x72.png"
    run pooled_ok "$T/o" "$T/tok"
    echo "$output"
    [ "$output" = "ok 4 0" ]
}

@test "--out-dtype bf16 --pool mean: pooled.jsonl says bfloat16 and the README's reader widens the rows" {
    mkdir -p "$T/in"
    cp "$IMG"/png_rgb_odd_173x97.png "$IMG"/jpeg_exif6_168x104.jpg "$T/in/"
    mvembed -q --device cpu --pool mean --out-dtype bf16 --model "$MODEL" --out "$T/o" "$T/in"
    tokens "$T/in" "$T/tok"
    run pooled_ok "$T/o" "$T/tok" bf16
    echo "$output"
    [ "$output" = "ok 2 0" ]
}
