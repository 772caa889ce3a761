#!/usr/bin/env bats
# A hostile environment: the CPU time limit (ulimit -t, RLIMIT_CPU), as batch schedulers (LSF's
# CPULIMIT, PBS's cput) set it. Past the soft limit the kernel sends SIGXCPU (then again each CPU
# second, and SIGKILL at the hard limit). Its default action used to end the run mid-write without
# a word: temp files left in OUT, no run record saying why. It must stop the run as SIGTERM does:
# work in flight finished, OUT consistent, the cause said, 128 + SIGXCPU; a rerun completes; and
# never a corrupted heap (the signal taken on a thread of its own, never inside a oneDNN kernel).
# Oracles: Python's json, os.listdir, tarfile and numpy; zstandard.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    # 840 images (40 copies of the fixtures): a few CPU seconds, so the 1 s limit falls mid-run
    "$PY" -c 'import os, shutil, sys
src, dst = sys.argv[1:3]
os.makedirs(dst)
for i in range(40):
    for n in os.listdir(src):
        shutil.copyfile(os.path.join(src, n), os.path.join(dst, f"i-{i}-{n}"))' "$ROOT/fixtures/media/images" "$T/in"
}

# check OUT LAYOUT [partial]: every input's newest line is ok (partial: inputs without a line
# allowed) and its output loads with numpy (from its shard with tarfile in the tar layout); no
# temp file in OUT; the run records parse; OUT/pooled (when there) lists each input once, its row
# the newest line's mean vector
check() {
    "$PY" - "$T/in" "$1" "$2" "${3:-}" <<'EOF'
import io, json, os, sys, tarfile, numpy as np, zstandard
ind, out, layout, partial = sys.argv[1:5]
names = os.listdir(out)
odd = [n for n in names if n.startswith(".tmp") or "tmp" in n]
assert not odd, odd
records = [json.load(open(f"{out}/{n}")) for n in names if n.startswith("run-")]
newest = {}
for line in open(f"{out}/manifest.jsonl", "rb"):
    j = json.loads(line)
    k = j["input"]
    if k not in newest or (j["time"], j["seq"]) >= (newest[k]["time"], newest[k]["seq"]):
        newest[k] = j
want = {os.path.join(ind, n) for n in os.listdir(ind)}
assert set(newest) <= want
if not partial:
    assert set(newest) == want, len(want - set(newest))
tars = {}
def load(j):
    if layout == "tar":
        if j["shard"] not in tars:
            tars[j["shard"]] = tarfile.open(f"{out}/{j['shard']}")
        t = tars[j["shard"]]
        return np.load(io.BytesIO(t.extractfile(t.getmember(j["key"] + ".npy")).read()))
    raw = open(f"{out}/{j['output']}", "rb").read()
    assert len(raw) == j["bytes"], j
    return np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(raw)))
vec = {}
for k, j in newest.items():
    assert j["status"] == "ok", j
    a = load(j)
    assert a.shape == tuple(j["shape"]) and np.isfinite(a).all(), j
    vec[k] = a.reshape(-1)
if os.path.isdir(f"{out}/pooled"):
    rows = np.load(f"{out}/pooled/pooled.npy")
    index = [json.loads(l) for l in open(f"{out}/pooled/pooled.jsonl")]
    assert sorted(e["input"] for e in index) == sorted(newest)
    for e in index:
        assert np.array_equal(rows[e["row"]], vec[e["input"]]), e
print(len(newest), "inputs,", [r["status"] for r in records])
EOF
}

# limited LAYOUT: a --pool mean run into $T/o under a 1 s soft CPU time limit (no hard one)
limited() {
    run bash -c 'ulimit -S -t 1 && exec "$@"' _ "$MVEMBED" -q --device cpu --model "$MODEL" --pool mean \
        --layout "$1" --out "$T/o" "$T/in"
    echo "status $status: $output"
}

@test "ulimit -t (SIGXCPU): the run stops as on SIGTERM, says why, leaves no temp file; a rerun completes" {
    for layout in files tar; do
        rm -rf "$T/o"
        limited "$layout"
        [ "$status" -eq 152 ] # 128 + SIGXCPU
        [[ "$output" == *"CPU time limit reached (ulimit -t): stopped; "*" done and kept (run again to resume)"* ]]
        run check "$T/o" "$layout" partial
        echo "$output"
        [ "$status" -eq 0 ]
        [[ "$output" == *"['interrupted']" ]]
        run "$MVEMBED" -q --device cpu --model "$MODEL" --pool mean --layout "$layout" --out "$T/o" "$T/in"
        [ "$status" -eq 0 ]
        run check "$T/o" "$layout"
        echo "$output"
        [ "$status" -eq 0 ]
        [[ "$output" == "840 inputs, "* ]]
    done
}

# oneDNN's JIT GEMM (the CPU tower's GEMMs) points the stack pointer into the heap; SIGXCPU is
# raised on the thread that used up the CPU second, mostly one inside such a kernel, and a handler
# run there had the kernel write its signal frame over the heap: "free(): invalid pointer",
# "corrupted size vs. prev_size" one run in ten, more under load. Twelve runs at once, each
# under its own 1 s limit: each stops as the first case says, none aborts.
@test "ulimit -t on twelve runs at once: each stops saying why (152), no heap corruption, OUT sound" {
    local i pids=()
    for i in $(seq 12); do
        bash -c 'ulimit -S -t 1 && exec "$@"' _ "$MVEMBED" -q --device cpu --model "$MODEL" \
            --out "$T/o$i" "$T/in" >"$T/log$i" 2>&1 &
        pids+=($!)
    done
    local bad=0 st
    for i in $(seq 12); do
        st=0
        wait "${pids[$((i - 1))]}" || st=$?
        echo "run $i: $st $(cat "$T/log$i")"
        [ "$st" -eq 152 ] && grep -q "CPU time limit reached (ulimit -t): stopped; " "$T/log$i" || bad=1
    done
    [ "$bad" -eq 0 ]
    for i in $(seq 12); do
        run check "$T/o$i" files partial
        echo "$output"
        [ "$status" -eq 0 ]
    done
}

@test "SIGTERM while the path list on stdin is silent: the run stops at once (143), its finished work kept" {
    # a producer that hands one path, then says nothing for a minute (a slow find, a queue): the
    # stop must not wait for its next line (it waited until the producer wrote or closed)
    local img="$T/in/$(ls "$T/in" | head -1)"
    ( { printf '%s\0' "$img"; sleep 60; } | { rc=0; "$MVEMBED" -q --device cpu --model "$MODEL" -0 --out "$T/o" - \
        2>"$T/err" || rc=$?; echo $rc >"$T/rc"; date +%s.%N >"$T/end"; } ) &
    wait_lines "$T/o/manifest.jsonl" 1
    sleep 0.5
    local pid t0
    pid=$(pgrep -f -- "--out $T/o -" | head -1)
    [ -n "$pid" ]
    t0=$(date +%s.%N)
    kill -TERM "$pid"
    for _ in $(seq 200); do [ -f "$T/end" ] && break; sleep 0.05; done
    pkill -f "sleep 60" || true
    cat "$T/err"
    [ -f "$T/end" ] # within 10 s, not after the producer's minute
    [ "$(cat "$T/rc")" -eq 143 ]
    "$PY" -c 'import sys; assert float(sys.argv[2]) - float(sys.argv[1]) < 10' "$t0" "$(cat "$T/end")"
    grep -q '^mvembed: interrupted; 1 done and kept' "$T/err"
    "$PY" - "$T/o" "$img" <<'PYEOF'
import io, json, sys, numpy as np, zstandard
out, img = sys.argv[1:3]
rows = [json.loads(l) for l in open(out + "/manifest.jsonl", "rb")]
assert [r["input"] for r in rows] == [img] and rows[0]["status"] == "ok", rows
a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(out + "/" + rows[0]["output"], "rb").read())))
assert a.ndim == 2 and a.shape[0] > 0
PYEOF
}
