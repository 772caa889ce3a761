#!/usr/bin/env bats
# Two runs into one OUT at once: one with other settings (another output fingerprint: --out-dtype
# f16, --pool mean, another model) than the run live there is refused before it writes anything;
# runs of the same settings go on side by side, and --pool mean runs rebuilding OUT/pooled/ while
# neighbours replace outputs all succeed with a pooled/ that matches the outputs.
# The live run is made certain: it reads its input paths from a FIFO, so it holds OUT (its
# manifest open) until the test writes them.
# Oracles: Python's os.walk, json, numpy (np.load after zstandard), the README's pooled reader.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    small_set "$T/in"
}

# live_start OUT [ARGS...]: a run into OUT (pid in $live, stderr in $T/err-live) that reads its
# input paths from the FIFO $T/paths, held open on fd 7; returns once it has opened its manifest
live_start() {
    local out=$1
    shift
    mkfifo "$T/paths"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$out" "$@" - < "$T/paths" 2> "$T/err-live" &
    live=$!
    exec 7> "$T/paths"
    for _ in $(seq 1500); do [ -e "$out/manifest.jsonl" ] && break; sleep 0.02; done
    [ -e "$out/manifest.jsonl" ]
}

# live_finish: gives the live run its inputs ($T/in's files) and waits for it: exit 0
live_finish() {
    ls "$T"/in/* >&7
    exec 7>&-
    local rc=0
    wait "$live" || rc=$?
    cat "$T/err-live"
    [ "$rc" -eq 0 ]
}

# listing OUT: every path under OUT (os.walk), sorted, one a line
listing() {
    "$PY" -c 'import os, sys
out = sys.argv[1]
for p in sorted(os.path.relpath(os.path.join(r, f), out) for r, ds, fs in os.walk(out) for f in fs + ds):
    print(p)' "$1"
}

@test "a run with other settings than the run live in OUT (--out-dtype f16, --pool mean, another model) is refused before it writes; one with the same settings goes on" {
    # another model: the tiny model with other preprocessing numbers (another fingerprint)
    cp -r "$MODEL" "$T/model2"
    "$PY" -c 'import json, sys
p = sys.argv[1] + "/preprocessor_config.json"
c = json.load(open(p)); c["image_mean"] = [0.4, 0.4, 0.4]; json.dump(c, open(p, "w"))' "$T/model2"
    live_start "$T/o"
    listing "$T/o" > "$T/before"
    n=0
    for args in "--out-dtype f16" "--pool mean" "--model $T/model2"; do
        n=$((n + 1))
        # shellcheck disable=SC2086 # the words of $args are options
        run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" $args "$T/in"
        echo "$args: exit $status: $output"
        [ "$status" -eq 1 ]
        echo "$output" > "$T/refused-$n"
        [[ "$output" == *"$T/o: another run is writing into it with other settings (run "*", pid $live on "*"wait until that run has finished"*"or use another --out"* ]]
        # nothing new in OUT but this run's own record (status fatal, the refusal its error)
        listing "$T/o" > "$T/after"
        "$PY" - "$T/o" "$T/before" "$T/after" "$T/refused-$n" <<'EOF'
import json, os, sys
out, before, after, msg = sys.argv[1:]
new = set(open(after).read().split()) - set(open(before).read().split())
gone = set(open(before).read().split()) - set(open(after).read().split())
assert not gone, gone
assert len(new) == 1, new
rec = json.load(open(os.path.join(out, new.pop())))
assert rec["status"] == "fatal" and "another run is writing into it" in rec["fatal_error"], rec
assert f'this run\'s fingerprint is {rec["fingerprint"]})' in open(msg).read(), rec["fingerprint"]
assert rec["counts"]["ok"] == 0 and rec["bytes_written"] == 0, rec
os.unlink(os.path.join(out, "run-" + rec["run"] + ".json"))  # the next listing compares again
EOF
    done
    # the same settings: not refused, writes the live run's inputs beside it (paths as it reads
    # them); the live run, given them next, finds them embedded meanwhile and skips them
    run bash -c 'ls "$1"/* | "$2" -q --device cpu --model "$3" --out "$4" -' _ "$T/in" "$MVEMBED" "$MODEL" "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    live_finish
    # OUT: every ok line and output of the live run's settings; the refusals named its run and
    # fingerprint; every output f32 [rows, 64], as its line says
    "$PY" - "$T/o" "$live" "$T"/refused-* <<'EOF'
import io, json, os, sys
import numpy as np, zstandard
out, pid, msgs = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
assert len(lines) == 5 and all(r["status"] == "ok" for r in lines), lines
fps = {r["model"] for r in lines}
assert len(fps) == 1, fps
fp = fps.pop()
recs = [json.load(open(os.path.join(out, f))) for f in os.listdir(out) if f.startswith("run-")]
live = [r for r in recs if r["fingerprint"] == fp]
assert len(live) == 2 and all(r["status"] == "complete" for r in live), recs
assert sorted((r["counts"]["ok"], r["counts"]["skipped"]) for r in live) == [(0, 5), (5, 0)], live
for m in msgs:
    text = open(m).read()
    assert f"pid {pid} on " in text and f"fingerprint {fp};" in text, text
    assert any(f"(run {r['run']}, pid {pid} on " in text for r in live), text
npy = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".npy.zst")]
assert len(npy) == 5, npy
for r in lines:
    with open(os.path.join(out, r["output"]), "rb") as f:
        a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))
    assert a.dtype == np.float32 and list(a.shape) == r["shape"] and a.shape[0] > 1, (r, a.dtype, a.shape)
assert not os.path.exists(os.path.join(out, "pooled"))
print("ok", fp)
EOF
}

@test "--pool mean runs side by side with --force over overlapping inputs all succeed; a run of other settings beside them is refused; pooled/ matches the outputs" {
    inputs "$T/in" a 1
    mvembed -q --device cpu --model "$MODEL" --out "$T/tok" "$T/in"  # token outputs, for the means
    # a --pool run live in OUT: a run without --pool cannot replace the outputs it will pool
    live_start "$T/o" --pool mean --force
    run "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --force "$T/in"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o: another run is writing into it with other settings (run "*", pid $live on "*")"* ]]
    live_finish
    # three --pool runs at once over overlapping parts of the inputs, again and again
    mapfile -t f < <(ls "$T"/in/*)
    n=${#f[@]}
    for round in 1 2 3 4; do
        pids=()
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean --force "${f[@]:0:$((n * 2 / 3))}" 2> "$T/e1" &
        pids+=($!)
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean --force "${f[@]:$((n / 3))}" 2> "$T/e2" &
        pids+=($!)
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean --force "${f[@]}" 2> "$T/e3" &
        pids+=($!)
        for k in 0 1 2; do
            rc=0
            wait "${pids[$k]}" || rc=$?
            echo "round $round run $((k + 1)): exit $rc"
            cat "$T/e$((k + 1))"
            [ "$rc" -eq 0 ]
        done
    done
    # pooled/ by the README's reader: one row per input, each the np.load'ed pooled output of the
    # input's newest line, and the f64 mean of its token output
    sed -n '/^<!-- test\/bats\/59-pooled-many-runs.bats runs this block/,/^```$/p' "$ROOT/README.md" |
        sed '1,2d;$d' > "$T/reader.py"
    "$PY" - "$T/reader.py" "$T/o" "$T/tok" "$n" <<'EOF'
import io, json, os, sys
import numpy as np, zstandard
reader, out, tok, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ns = {}
exec(open(reader).read(), ns)
P, idx = ns["load_pooled"](out)
def load(path):
    with open(path, "rb") as f:
        return np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(f).read()))
newest = {}
for l in open(os.path.join(out, "manifest.jsonl")):
    r = json.loads(l)
    newest[r["input"]] = r
assert len(newest) == n and all(r["status"] == "ok" and r["shape"] == [1, P.shape[1]] for r in newest.values())
assert P.shape[0] == n and [x["row"] for x in idx] == list(range(n)), (P.shape, idx)
assert [x["input"] for x in idx] == sorted(newest), idx
for x in idx:
    r = newest[x["input"]]
    assert (x["run"], x["seq"], x["output"]) == (r["run"], r["seq"], r["output"]), (x, r)
    assert np.array_equal(load(os.path.join(out, r["output"]))[0], P[x["row"]]), x
    t = load(os.path.join(tok, os.path.basename(x["input"]) + ".npy.zst")).astype(np.float64)
    m = t.mean(axis=0)
    assert np.abs(P[x["row"]] - m).max() <= 1e-6 * np.abs(m).max(), x["input"]
print("ok", P.shape)
EOF
}
