#!/usr/bin/env bats
# --out-dtype: auto (the default: f16 for bf16 tokens, f32 for an output past f16's range),
# bf16 (<u2 bit patterns, the manifest's dtype "bfloat16"), in the files and tar layouts and with
# --pool mean. No GPU here: the test hook MVEMBED_TEST_OUT_BF16=1 rounds the CPU tower's tokens
# to bf16 as the CUDA bf16 tower's are. Oracles: numpy (bf16 rounding by integer arithmetic on
# the f32 bits, float16 round trips, comparisons), zstd -d, Python's json and tarfile.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMGS="$ROOT/fixtures/media/images"
    WRITEBENCH="${WRITEBENCH:-$ROOT/build/writebench}"
}

# check OUT_F32 OUT_X MODE: every ok line of OUT_X's manifest against OUT_F32's output of the same
# input, by numpy. MODE bf16: <u2 holding the f32 values rounded to nearest even bf16, dtype
# "bfloat16". MODE auto: <f2 with dtype "f16" exactly when numpy's float16 conversion of the f32
# values makes no Inf, and then equal to it bit for bit; else <f4 "f32", the same bytes. MODE f32:
# <f4 "f32", the same bytes. Prints the dtypes seen and how many values f16 did not hold exactly.
check() {
    "$PY" - "$@" <<'EOF'
import collections, io, json, subprocess, sys
import numpy as np
f32, other, mode = sys.argv[1:]
def load(path):
    return np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", path], check=True,
                                             capture_output=True).stdout))
ref = {}
for l in open(f"{f32}/manifest.jsonl"):
    r = json.loads(l)
    assert r["status"] == "ok" and r["dtype"] == "f32", r
    ref[r["input"]] = load(f"{f32}/{r['output']}")
seen = collections.Counter()
for l in open(f"{other}/manifest.jsonl"):
    r = json.loads(l)
    assert r["status"] == "ok", r
    a, f = load(f"{other}/{r['output']}"), ref.pop(r["input"])
    assert f.dtype == np.float32 and a.shape == f.shape == tuple(r["shape"]), (r, a.shape, f.shape)
    if mode == "bf16":
        u = f.view(np.uint32).astype(np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        assert r["dtype"] == "bfloat16" and a.dtype == np.dtype("<u2"), (r["dtype"], a.dtype)
        assert (a == want).all(), r["input"]
    elif mode == "f32":
        assert r["dtype"] == "f32" and (a.view(np.uint32) == f.view(np.uint32)).all(), r["input"]
    else:
        with np.errstate(over="ignore"):
            h = f.astype(np.float16)
        fits = bool(np.isfinite(h).all())
        want = "f16" if fits else "f32"
        assert r["dtype"] == want and a.dtype == (np.float16 if fits else np.float32), (r, a.dtype)
        if fits:
            assert (a.view(np.uint16) == h.view(np.uint16)).all(), r["input"]
            seen["inexact"] += int((h.astype(np.float32) != f).sum())
        else:
            assert (a.view(np.uint32) == f.view(np.uint32)).all(), r["input"]
    seen[r["dtype"]] += 1
assert not ref, sorted(ref)
print(" ".join(f"{k}={v}" for k, v in sorted(seen.items())))
EOF
}

@test "--out-dtype bf16 writes <u2 holding the f32 output rounded to bf16; the README's reader widens it exactly" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/f" "$IMGS"
    mvembed -q --device cpu --model "$MODEL" --out "$T/b" --out-dtype bf16 "$IMGS"
    run check "$T/f" "$T/b" bf16
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "bfloat16=21" ]
    # the README's bf16 reader, as written, against numpy's widening of the rounded bits
    sed -n '/^<!-- test\/bats\/38-out-dtype.bats runs this block/,/^```$/p' "$ROOT/README.md" | sed '1,2d;$d' > "$T/reader.py"
    grep -q 'def load_bf16' "$T/reader.py"
    run "$PY" - "$T/reader.py" "$T/f" "$T/b" <<'EOF'
import io, json, subprocess, sys
import numpy as np
ns = {}
exec(open(sys.argv[1]).read(), ns)
f32, b = sys.argv[2:]
n = 0
for l in open(f"{b}/manifest.jsonl"):
    r = json.loads(l)
    got = ns["load_bf16"](f"{b}/{r['output']}")
    f = np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", f"{f32}/{r['output']}"],
                                          check=True, capture_output=True).stdout))
    assert got.dtype == np.float32 and got.shape == f.shape
    rel = np.abs(got - f) / np.maximum(np.abs(f), np.finfo(np.float32).tiny)
    assert rel.max() <= 2.0 ** -8, rel.max()       # bf16: 8 significant bits, round to nearest
    assert (got.view(np.uint32) & 0xFFFF == 0).all()
    n += 1
print(n)
EOF
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = 21 ]
}

@test "--out-dtype auto on an f32 tower (the CPU) writes the f32 files, as the default does" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/f" --out-dtype f32 "$IMGS"
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --out-dtype auto "$IMGS"
    mvembed -q --device cpu --model "$MODEL" --out "$T/d" "$IMGS"
    same_bytes "$T/f" "$T/a"
    same_bytes "$T/f" "$T/d"
    run check "$T/f" "$T/a" f32
    [ "$status" -eq 0 ]
    [ "$output" = "f32=21" ]
    # the same fingerprint as f32's: a rerun with either skips every input
    run mvembed --device cpu --model "$MODEL" --out "$T/a" --out-dtype f32 "$IMGS"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "21 skipped" ]]
}

@test "--out-dtype auto on bf16 tokens writes f16 as numpy rounds them, in both layouts" {
    export MVEMBED_TEST_OUT_BF16=1
    mvembed -q --device cpu --model "$MODEL" --out "$T/f" --out-dtype f32 "$IMGS"
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" "$IMGS"
    run check "$T/f" "$T/a" auto
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ f16= ]] # the fixtures' tokens all fit: numpy says which
    # tar layout: each member's .npy and its manifest line say the same type
    mvembed -q --device cpu --model "$MODEL" --out "$T/t" --layout tar "$IMGS"
    run "$PY" - "$T/t" "$T/a" <<'EOF'
import glob, io, json, sys, tarfile
import numpy as np
t, a = sys.argv[1:]
files = {json.loads(l)["input"]: json.loads(l)["dtype"] for l in open(f"{a}/manifest.jsonl")}
n = 0
for l in open(f"{t}/manifest.jsonl"):
    r = json.loads(l)
    with tarfile.open(f"{t}/{r['shard']}") as tf:
        arr = np.load(io.BytesIO(tf.extractfile(r["key"] + ".npy").read()))
    assert r["dtype"] == files[r["input"]] == {"float16": "f16", "float32": "f32"}[arr.dtype.name], r
    n += 1
print(n)
EOF
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = 21 ]
}

@test "--out-dtype auto: f32 for an output past f16's range, f16 rounded as numpy rounds the rest" {
    # bf16 values; then one too small for f16 to keep its 8 bits, one at f16's rounding edge, one
    # past it. numpy decides each file's type (no Inf in its float16 conversion) and its values.
    run "$PY" - "$T" <<'EOF'
import sys
import numpy as np
rng = np.random.default_rng(7)
f = rng.standard_normal((30, 64)).astype(np.float32)
u = f.view(np.uint32).astype(np.uint64)
b = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
b[np.abs(b) < 2.0 ** -14] = 0.5  # no subnormal f16 by chance
tiny, edge, big = b.copy(), b.copy(), b.copy()
tiny[3, 5] = np.uint32(0x36810000).view(np.float32)  # bf16 (1 + 2^-7) 2^-18: f16 has 7 bits there
edge[4, 2] = -65504.0  # f16's largest
edge[9, 9] = np.nextafter(np.float32(65520), np.float32(0))  # rounds to 65504
big[7, 1] = 70000.0  # above f16's largest: Inf in float16
np.seterr(over="ignore")  # 70000 becomes inf in float16: that is the point
for name, a in (("plain", b), ("tiny", tiny), ("edge", edge), ("big", big)):
    h = a.astype(np.float16)
    np.save(f"{sys.argv[1]}/{name}.npy", a)
    exact = (h.astype(np.float32) == a).all()
    print(name, "f16" if np.isfinite(h).all() else "f32", "exact" if exact else "rounded")
EOF
    echo "$output"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "plain f16 exact" ] && [ "${lines[1]}" = "tiny f16 rounded" ]
    [ "${lines[2]}" = "edge f16 rounded" ] && [ "${lines[3]}" = "big f32 rounded" ]
    for name in plain tiny edge big; do
        mkdir "$T/$name"
        run "$WRITEBENCH" "$T/$name" 1 1 1 2 auto 1 "$T/$name.npy"
        echo "$output"
        [ "$status" -eq 0 ]
        zstd -q -d -c "$T/$name/w00000.npy.zst" > "$T/$name.out.npy"
        run "$PY" - "$T/$name.out.npy" "$T/$name.npy" <<'EOF'
import sys
import numpy as np
a, f = np.load(sys.argv[1]), np.load(sys.argv[2])
with np.errstate(over="ignore"):
    h = f.astype(np.float16)
want = h if np.isfinite(h).all() else f
assert a.dtype == want.dtype and (a.view(np.uint8) == want.view(np.uint8)).all(), (a.dtype, want.dtype)
print(a.dtype)
EOF
        echo "$name: $output"
        [ "$status" -eq 0 ]
        if [ "$name" = big ]; then [ "$output" = float32 ]; else [ "$output" = float16 ]; fi
    done
}

@test "--pool mean: auto writes f32 means (not bf16 values); bf16 writes <u2 files and pooled.npy" {
    export MVEMBED_TEST_OUT_BF16=1
    mvembed -q --device cpu --model "$MODEL" --out "$T/f" --out-dtype f32 --pool mean "$IMGS"
    mvembed -q --device cpu --model "$MODEL" --out "$T/a" --pool mean "$IMGS"
    same_bytes "$T/f" "$T/a"
    grep -q '"dtype":"f32"' "$T/a/manifest.jsonl"
    ! grep -q '"dtype":"f16"' "$T/a/manifest.jsonl"
    mvembed -q --device cpu --model "$MODEL" --out "$T/b" --out-dtype bf16 --pool mean "$IMGS"
    run check "$T/f" "$T/b" bf16
    [ "$status" -eq 0 ]
    [ "$output" = "bfloat16=21" ]
    run "$PY" -c 'import numpy as np,sys; p=np.load(sys.argv[1]); f=np.load(sys.argv[2]); u=f.view(np.uint32).astype(np.uint64); print(p.dtype, p.shape==f.shape and bool((p==((u+0x7FFF+((u>>16)&1))>>16).astype(np.uint16)).all()))' \
        "$T/b/pooled/pooled.npy" "$T/f/pooled/pooled.npy"
    echo "$output"
    [ "$output" = "uint16 True" ]
}
