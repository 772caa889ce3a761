#!/usr/bin/env bats
# Many writers of one OUT with --pool mean: an array resubmitted with another shard count (--shard
# K/2 runs, then --shard K/3) leaves no pooled directory of the old count beside the new ones, so
# a reader of every pooled-*-of-*/ directory gets each input's row once (either layout); and the
# README's pooled reader gets one run's pair (rows and index) while another run replaces the
# directory between its two reads. Oracles: numpy (pooled.npy, the outputs after zstandard or out
# of their tar with tarfile), json (the indexes and manifests).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    jpg_png_set "$T/in"
}

# all_pooled_once OUT N: over every pooled-*-of-*/ directory of OUT, each of the N inputs has
# exactly one row, equal to its pooled output ([1, H]; a file, or a tar sample read with tarfile)
# (pooled_check.py); prints "ok N DIRS"
all_pooled_once() {
    pooled_check "$1" "$2" --dirs 'pooled-*-of-*' --exact
}

# array_then_three LAYOUT_ARGS...: --shard 0/2 and 1/2, then 0/3, 1/3 and 2/3, over $T/in into $T/o
array_then_three() {
    for sh in 0/2 1/2 0/3 1/3 2/3; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean --shard "$sh" "$@" "$T/in"
        echo "$output"
        [ "$status" -eq 0 ]
    done
}

@test "files layout --pool mean: --shard K/2 runs, then --shard K/3: every pooled-*-of-*/ together hold each input once" {
    array_then_three
    [ ! -e "$T/o/pooled-00000-of-00002" ]
    [ ! -e "$T/o/pooled-00001-of-00002" ]
    all_pooled_once "$T/o" "$N"
}

@test "tar layout --pool mean: --shard K/2 runs, then --shard K/3: every pooled-*-of-*/ together hold each input once" {
    array_then_three --layout tar
    all_pooled_once "$T/o" "$N"
    [ "$output" = "ok $N 3" ]
}

@test "the README's pooled reader, with a run replacing pooled/ between its two reads, gets one run's pair" {
    mkdir -p "$T/more"
    mv "$T"/in/png_* "$T/more/"
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    sed -n '/^<!-- test\/bats\/59-pooled-many-runs.bats runs this block/,/^```$/p' "$ROOT/README.md" |
        sed '1,2d;$d' > "$T/reader.py"
    # np.load is wrapped: once the reader has read one file of OUT/pooled/, a run over more inputs
    # replaces the directory (more rows), before the reader goes on
    run "$PY" - "$T/reader.py" "$T/o" "$MVEMBED" "$MODEL" "$T/more" <<'PY'
import io, json, os, subprocess, sys
import numpy as np, zstandard
reader, out, mv, model, more = sys.argv[1:6]
real_load = np.load
def load(*a, **k):
    r = real_load(*a, **k)
    if not load.done:
        load.done = True
        subprocess.run([mv, "-q", "--device", "cpu", "--model", model, "--out", out, "--pool", "mean", more],
                       check=True)
    return r
load.done = False
np.load = load
ns = {}
exec(open(reader).read(), ns)
rows, idx = ns["load_pooled"](out)
np.load = real_load
assert load.done
n_idx = sum(x["row"] is not None for x in idx)
assert rows.shape[0] == n_idx, ("rows", rows.shape[0], "index rows", n_idx)
for x in idx:
    with open(os.path.join(out, x["output"]), "rb") as f:
        a = real_load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))
    assert np.array_equal(rows[x["row"]], a[0].astype(np.float32)), x["input"]
print("ok", rows.shape[0])
PY
    echo "$output"
    [ "$status" -eq 0 ]
    # the run did replace it: pooled/ holds every input now
    run "$PY" -c 'import numpy as np, sys; print(np.load(sys.argv[1]).shape[0])' "$T/o/pooled/pooled.npy"
    [ "$output" = "$N" ]
}
