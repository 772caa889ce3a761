#!/usr/bin/env bats
# Many writers and crashes into one OUT, both layouts: what manifest merge and compact say where
# OUT's file system offers no locks (an NFS client mounted nolock), so that they cannot tell a run
# is writing into OUT, and when another merge or compact holds OUT; what kill -9 leaves (a temp
# output in a subdirectory no later run writes into, a pooled rebuild's temp directory) is gone
# after the next compact or rebuild. Oracles: json (the manifests), numpy + zstandard / tarfile
# (the outputs), find (what is left in OUT).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    jpg_png_set "$T/in"
}

@test "without locks (NFS nolock), manifest merge and compact say they cannot tell a run writes into OUT, both layouts" {
    preload=$(fs_shim "$T")
    for layout in files tar; do
        o="$T/o-$layout"
        for sh in 0/2 1/2; do
            mvembed -q --device cpu --model "$MODEL" --out "$o" --layout "$layout" --shard "$sh" "$T/in"
        done
        for cmd in "merge $o" "compact --all $o"; do
            run env LD_PRELOAD="$preload" FS_SHIM_NOLOCK=1 "$MVEMBED" manifest $cmd
            echo "$layout $cmd: $output"
            [ "$status" -eq 0 ]
            [[ "$output" == *"$o: warning: the file system offers no locks: manifest ${cmd%% *} cannot tell whether a run is writing into it"* ]]
        done
        # what it rewrote is every input's line, each naming its array (json, numpy)
        run "$PY" - "$o" "$N" <<'PY'
import io, json, os, sys, tarfile
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
recs = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8")]
assert len(recs) == n and len({r["input"] for r in recs}) == n, len(recs)
for r in recs:
    assert r["status"] == "ok", r
    if "shard" in r:
        with tarfile.open(os.path.join(out, r["shard"])) as t:
            a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
    else:
        with open(os.path.join(out, r["output"]), "rb") as f:
            a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(f.read())))
    assert list(a.shape) == r["shape"], r["input"]
print("ok", len(recs))
PY
        echo "$output"
        [ "$output" = "ok $N" ]
    done
}

@test "manifest compact while another merge or compact holds OUT is refused naming that, not a run" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    cp "$T/o/manifest.jsonl" "$T/before"
    # a merge holds OUT's lock exclusively (as a process on another machine of a shared mount would)
    hold_lock "$T/o/.mvembed.lock"
    run mvembed manifest compact "$T/o"
    kill "$holder"
    wait "$holder" || true
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o: another manifest merge or compact is rewriting its manifests"* ]]
    [[ "$output" != *"an mvembed run is writing"* ]]
    cmp "$T/before" "$T/o/manifest.jsonl"
    # once it has ended, compact goes on
    run mvembed manifest compact "$T/o"
    [ "$status" -eq 0 ]
}

@test "files layout: a temp output a killed run left in a subdirectory goes with the next manifest compact" {
    mkdir -p "$T/top/sub"
    mv "$T"/in/*.png "$T/top/sub/"
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/top"
    # what kill -9 leaves while an output is written: its unlocked temp file, of a pid that is gone
    sleep 30 & gone=$!
    kill "$gone"
    wait "$gone" || true
    head -c 300 "$T/o/sub/"*.png.npy.zst > "$T/o/sub/.tmp-$gone-abcdef"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/top" # nothing left to write
    [ "$status" -eq 0 ]
    run mvembed manifest compact "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    run find "$T/o" -name '.tmp*'
    echo "left: $output"
    [ -z "$output" ]
    # the outputs are as they were: every line's file reads (numpy + zstandard)
    "$PY" - "$T/o" <<'PY'
import io, json, os, sys
import numpy as np, zstandard
out = sys.argv[1]
for line in open(os.path.join(out, "manifest.jsonl"), encoding="utf-8"):
    r = json.loads(line)
    with open(os.path.join(out, r["output"]), "rb") as f:
        a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(f.read())))
    assert list(a.shape) == r["shape"], r["input"]
PY
}

@test "--pool mean: the temporary pooled directory a run killed while rebuilding it left goes with the next rebuild" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    # what kill -9 leaves while OUT/pooled/ is rebuilt: its temporary directory, of a pid that is gone
    sleep 30 & gone=$!
    kill "$gone"
    wait "$gone" || true
    mkdir "$T/o/.tmp-$gone-pooled" "$T/o/.tmp-$gone-pooled-00001-of-00002"
    cp "$T"/o/pooled/* "$T/o/.tmp-$gone-pooled/"
    head -c 100 "$T/o/pooled/pooled.npy" > "$T/o/.tmp-$gone-pooled-00001-of-00002/pooled.npy"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    [ "$status" -eq 0 ]
    run find "$T/o" -name '.tmp*'
    echo "left: $output"
    [ -z "$output" ]
    pooled_check "$T/o" "$N" --dirs pooled
}

@test "a redo with other settings killed just after an output took its name: its line is never the old file's" {
    # an f32 OUT redone with --out-dtype f16 and kill -9'd right after a new file took an existing
    # output's name (fs_shim's pause): the newest line of that input said dtype f32 and the old
    # size while the file held f16 data (a reader trusting the manifest got another array); the
    # line now goes in before the new file takes the name, the old file removed first
    preload=$(fs_shim "$T")
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    LD_PRELOAD="$preload" FS_SHIM_PAUSE_PLACED="$T/go" \
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --out-dtype f16 "$T/in" 2>"$T/err" &
    local pid=$!
    for _ in $(seq 600); do [ -e "$T/go.waiting" ] && break; sleep 0.05; done
    [ -e "$T/go.waiting" ]
    kill -9 "$pid"
    wait "$pid" || true
    # each input's newest line against the file under its name: same dtype and size, or no file
    check_lines() {
        "$PY" - "$T/o" <<'PY'
import io, json, os, sys
import numpy as np, zstandard
out = sys.argv[1]
newest = {}
for l in open(os.path.join(out, "manifest.jsonl"), "rb"):
    r = json.loads(l)
    if r["input"] not in newest or (r["time"], r["seq"]) >= (newest[r["input"]]["time"], newest[r["input"]]["seq"]):
        newest[r["input"]] = r
missing = 0
for r in newest.values():
    assert r["status"] == "ok", r
    p = os.path.join(out, r["output"])
    if not os.path.exists(p):
        missing += 1
        continue
    assert os.path.getsize(p) == r["bytes"], (r["input"], r["bytes"], os.path.getsize(p))
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(p, "rb").read())))
    assert a.dtype == {"f32": np.float32, "f16": np.float16}[r["dtype"]], (r["input"], r["dtype"], a.dtype)
print(len(newest), missing)
PY
    }
    run check_lines
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | awk '{print $2}')" -le 1 ] # the one being placed, at most
    # the next run with those settings completes: every line f16, every file there and matching
    mvembed -q --device cpu --model "$MODEL" --out "$T/o" --out-dtype f16 "$T/in"
    run check_lines
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "$N 0" ]
}
