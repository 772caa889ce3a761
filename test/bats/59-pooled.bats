#!/usr/bin/env bats
# --pool mean's pooled directory (issue 30, item 10): OUT/pooled/ holds pooled.npy and its index
# pooled.jsonl, which change together (one directory put in place in one rename); a run writes it
# over its ok inputs and lists the left-out ones, says on stderr what it wrote, in both layouts.
# Oracles: numpy (np.load, np.memmap at the manifest's offsets), the zstd CLI, Python's json.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    mkdir -p "$T/in"
    cp "$IMG"/png_rgb_odd_173x97.png "$IMG"/jpeg_exif6_168x104.jpg "$IMG"/png_gray_128x72.png "$T/in/"
}

# rows_match OUT LAYOUT: every indexed row of OUT/pooled/pooled.npy equals the output its line
# names (the .npy.zst file, or the tar sample at the manifest's offset); left-out lines name the
# inputs whose newest manifest line is an error
rows_match() {
    "$PY" - "$@" <<'PYEOF'
import glob, io, json, os, subprocess, sys
import numpy as np
out, layout = sys.argv[1:]
P = np.load(f"{out}/pooled/pooled.npy")
idx = [json.loads(l) for l in open(f"{out}/pooled/pooled.jsonl")]
newest = {}
for m in sorted(glob.glob(f"{out}/manifest*.jsonl")):
    for l in open(m):
        r = json.loads(l)
        newest[r["input"]] = r
rows = [x for x in idx if x["row"] is not None]
assert [x["row"] for x in rows] == list(range(P.shape[0])), idx
for x in idx:
    r = newest[x["input"]]
    if x["row"] is None:
        assert r["status"] == "error" and x["error"] == r["error"], (x, r)
        continue
    assert r["status"] == "ok", (x, r)
    if layout == "files":
        a = np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", f"{out}/{x['output']}"],
                                              check=True, stdout=subprocess.PIPE).stdout))
    else:
        a = np.memmap(f"{out}/{r['shard']}", mode="r", dtype="<f4" if r["dtype"] == "f32" else "<f2",
                      offset=r["offset"], shape=tuple(r["shape"]))
    assert a.shape == (1, P.shape[1]) and P[x["row"]].tobytes() == np.asarray(a[0]).tobytes(), x
print("ok", P.shape[0], len(idx) - len(rows))
PYEOF
}

@test "a rerun with new settings and one broken input rewrites pooled.npy over the ok inputs and lists the broken one" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    printf 'not an image' > "$T/in/bad.png"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --pool mean --max-pixels 40000 "$T/in"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "/pooled/: pooled.npy holds 3 rows, one per ok input; pooled.jsonl indexes them and lists the 1 input left out" ]]
    run rows_match "$T/o" files
    echo "$output"
    [ "$output" = "ok 3 1" ]
    # one directory, nothing beside it
    [ -z "$(ls -A "$T/o" | grep -i pool | grep -v '^pooled$')" ]
    [ "$(ls -A "$T/o/pooled" | sort | tr '\n' ' ')" = "pooled.jsonl pooled.npy " ]
}

@test "--layout tar --pool mean writes the pooled directory from the tar samples" {
    printf 'not an image' > "$T/in/bad.png"
    run mvembed --device cpu --model "$MODEL" --out "$T/t" --layout tar --pool mean "$T/in"
    [ "$status" -eq 2 ]
    [[ "$output" =~ "pooled.npy holds 3 rows" ]]
    run rows_match "$T/t" tar
    echo "$output"
    [ "$output" = "ok 3 1" ]
    # resumed: the skipped inputs' rows come from their samples, read back at their offsets; the
    # broken input, now an image, is done and becomes a row (its newest line is ok)
    cp "$IMG"/png_rgb_odd_173x97.png "$T/in/bad.png"
    run mvembed --device cpu --model "$MODEL" --out "$T/t" --layout tar --pool mean "$T/in"
    [ "$status" -eq 0 ]
    run rows_match "$T/t" tar
    [ "$output" = "ok 4 0" ]
}

@test "an interrupted run that changed outputs removes the pooled directory it made stale" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    [ -d "$T/o/pooled" ]
    mkfifo "$T/fifo"
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean --max-pixels 40000 - <"$T/fifo" 2>"$T/err" & pid=$!
    exec 7>"$T/fifo"
    ls "$T"/in/*.png >&7 # two of the three inputs, redone with the new setting; then it waits for more
    for _ in $(seq 500); do
        [ "$(wc -l <"$T/o/manifest.jsonl")" -ge 5 ] && break
        sleep 0.02
    done
    [ "$(wc -l <"$T/o/manifest.jsonl")" -eq 5 ]
    kill -INT "$pid"
    exec 7>&-
    rc=0
    wait "$pid" || rc=$?
    cat "$T/err"
    [ "$rc" -eq 130 ]
    [ ! -e "$T/o/pooled" ]
    [[ "$(cat "$T/err")" =~ "pooled/ removed: this run ended early" ]]
}

@test "without RENAME_EXCHANGE (NFS) the pooled directory is still replaced whole" {
    preload=$(fs_shim "$T")
    export FS_SHIM_NOLOCK=1 FS_SHIM_RENAME2=all # an NFS client mounted nolock
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    run env LD_PRELOAD="$preload" "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean \
        --max-pixels 40000 "$T/in"
    [ "$status" -eq 0 ]
    run rows_match "$T/o" files
    [ "$output" = "ok 3 0" ]
    [ -z "$(ls -A "$T/o" | grep -i pool | grep -v '^pooled$')" ]
}

@test "pooled.npy and pooled.jsonl left in OUT by an earlier build are removed once OUT/pooled/ is written" {
    mkdir -p "$T/o"
    "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros((5, 64), np.float32))' "$T/o/pooled.npy"
    printf '{"row":0,"input":"gone.jpg","output":"gone.jpg.npy.zst","status":"ok"}\n' > "$T/o/pooled.jsonl"
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "pooled.npy and pooled.jsonl of an earlier build removed: they are in pooled/ now" ]]
    [ ! -e "$T/o/pooled.npy" ] && [ ! -e "$T/o/pooled.jsonl" ]
    run rows_match "$T/o" files
    [ "$output" = "ok 3 0" ]
}
