#!/usr/bin/env bats
# Faults (issue 7): kill -9 in the middle of a run then a resumed run, a full disk, SIGINT. The
# promise: outputs and manifest equal to an uninterrupted run (byte-identical outputs, each input
# exactly once, no temp files left), never a file marked ok that is not complete, exit 130 on
# SIGINT. Inputs: the fixture images four times over (a/ b/ c/ d/, 84 files), the tiny model, the
# CPU tower with one thread (-j 1: fast and deterministic on a busy 2-core CI machine).
load test_helper

setup_file() {
    local F="$BATS_FILE_TMPDIR"
    mkdir -p "$F/in"
    for d in a b c d; do cp -r "$ROOT/fixtures/media/images" "$F/in/$d"; done
    "$MVEMBED" -q -j 1 --device cpu --model "$ROOT/fixtures/model-tiny" --out "$F/ref" "$F/in"
}

setup() {
    T="$BATS_TEST_TMPDIR"
    IN="$BATS_FILE_TMPDIR/in"
    REF="$BATS_FILE_TMPDIR/ref"
    N=$(find "$IN" -type f | wc -l)
    MNT=
}

teardown() {
    if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi
}

args() { echo -q -j 1 --device cpu --model "$MODEL"; }

# start OUT: runs the batch in the background (pid in $pid)
start() { "$MVEMBED" $(args) --out "$1" "$IN" 2>"$T/stderr" & pid=$!; }

# no_temps DIR: no ".tmp-*" file anywhere under DIR
no_temps() {
    local left
    left=$(find "$1" -name '.tmp-*')
    [ -z "$left" ] || { echo "temp files left: $left"; return 1; }
}

# ok_complete OUT: every manifest line is whole JSON; every "ok" line's output exists, is a
# complete zstd frame and is byte-identical to the uninterrupted run's.
ok_complete() {
    "$PY" - "$1" "$REF" <<'PYEOF'
import filecmp, json, os, subprocess, sys
out, ref = sys.argv[1], sys.argv[2]
for raw in open(os.path.join(out, "manifest.jsonl"), "rb"):
    assert raw.endswith(b"\n"), "torn manifest line: %r" % raw
    r = json.loads(raw)
    if r["status"] != "ok":
        continue
    p = os.path.join(out, r["output"])
    subprocess.run(["zstd", "-q", "-t", p], check=True)
    assert filecmp.cmp(p, os.path.join(ref, r["output"]), shallow=False), p
PYEOF
}

# consistent OUT: ok_complete and no temp files.
consistent() {
    no_temps "$1"
    ok_complete "$1"
}

# same_as_ref OUT: the manifest lists every input exactly once, as the uninterrupted run does
# (all fields but "seconds" and the order: run, seq, time), and the output files are the same set, byte for byte.
same_as_ref() {
    consistent "$1"
    "$PY" - "$1" "$REF" "$N" <<'PYEOF'
import collections, filecmp, json, os, sys
out, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(d):
    rows = [json.loads(l) for l in open(os.path.join(d, "manifest.jsonl"), "rb")]
    for r in rows:
        for k in ("seconds", "run", "seq", "time"): # per run and per line
            r.pop(k, None)
    return rows
a, b = load(out), load(ref)
c = collections.Counter(r["input"] for r in a)
dup = [k for k, v in c.items() if v != 1]
assert not dup, "inputs listed more than once: %s" % dup
assert len(a) == n, "%d manifest lines for %d inputs" % (len(a), n)
key = lambda r: r["input"]
assert sorted(a, key=key) == sorted(b, key=key), "manifest differs from the uninterrupted run"
def files(d): # run records (run-RUN.json) and the completion marker (_SUCCESS) are per run
    return sorted(os.path.relpath(os.path.join(p, f), d) for p, _, fs in os.walk(d) for f in fs
                  if not (p == d and f.startswith("run-") and f.endswith(".json")) and not (p == d and f == "_SUCCESS")
                  if f != "manifest.jsonl")
fa, fb = files(out), files(ref)
assert fa == fb, "output files differ: %s" % sorted(set(fa) ^ set(fb))
for f in fa:
    if f == ".mvembed.lock":
        continue  # bookkeeping, not an output: it names the runs that were live in OUT
    assert filecmp.cmp(os.path.join(out, f), os.path.join(ref, f), shallow=False), f
PYEOF
}

@test "the uninterrupted reference run is complete" {
    [ "$(wc -l <"$REF/manifest.jsonl")" -eq "$N" ]
    ! grep -q '"status":"error"' "$REF/manifest.jsonl"
    [ "$N" -ge 40 ] # four copies of the fixture images
}

@test "kill -9 in the middle, then resume: outputs and manifest equal an uninterrupted run" {
    start "$T/o"
    wait_lines "$T/o/manifest.jsonl" 5
    kill -9 "$pid"
    wait "$pid" || rc=$?
    [ "$rc" -eq 137 ]
    done_lines=$(wc -l <"$T/o/manifest.jsonl")
    echo "killed after $done_lines of $N"
    [ "$done_lines" -lt "$N" ]
    run "$MVEMBED" $(args) --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    same_as_ref "$T/o"
}

@test "kill -9 three times at different points, then resume: still equal, each input once" {
    # kill points well before the 84th line: a run does the last ~30 inputs in under half a
    # second, and with its third kill at 50 a loaded CI machine once let it finish first
    for at in 3 15 30; do
        start "$T/o"
        wait_lines "$T/o/manifest.jsonl" "$at"
        kill -9 "$pid"
        wait "$pid" || true
        ok_complete "$T/o" # (temp files of the killed run may stay until the next run)
    done
    [ "$(wc -l <"$T/o/manifest.jsonl")" -lt "$N" ]
    run "$MVEMBED" $(args) --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    same_as_ref "$T/o"
}

@test "a temp file left by a killed run (dead pid) is removed by the resumed run" {
    start "$T/o"
    wait_lines "$T/o/manifest.jsonl" 5
    kill -9 "$pid"
    wait "$pid" || true
    # what a kill -9 during a write leaves behind, in a directory the resumed run still writes to
    sh -c 'exit 0' & dead=$!
    wait "$dead"
    mkdir -p "$T/o/d"
    echo partial >"$T/o/d/.tmp-$dead-abc123"
    run "$MVEMBED" $(args) --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    same_as_ref "$T/o"
}

@test "full disk (64 KiB tmpfs as OUT): clean error, status 1, nothing marked ok that is incomplete; resume after freeing space" {
    MNT="$T/full"
    mkdir "$MNT"
    if mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null; then
        run "$MVEMBED" $(args) --out "$MNT/o" "$IN"
        [ "$status" -eq 1 ]
        echo "$output"
        [[ "${lines[-1]}" =~ ^"mvembed: $MNT/o/".*": No space left on device"$ ]]
        consistent "$MNT/o"
        [ "$(wc -l <"$MNT/o/manifest.jsonl")" -lt "$N" ]
        mount -o remount,size=64m "$MNT"
        run "$MVEMBED" $(args) --out "$MNT/o" "$IN"
        [ "$status" -eq 0 ]
        same_as_ref "$MNT/o"
    else
        # No mount (not root, no CAP_SYS_ADMIN): a file-size limit makes writes fail the same way
        # (EFBIG instead of ENOSPC); SIGXFSZ is ignored so that write() returns the error.
        MNT=
        run bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' _ "$MVEMBED" $(args) --out "$T/o" "$IN"
        [ "$status" -eq 1 ]
        echo "$output"
        [[ "${lines[-1]}" =~ ^"mvembed: $T/o/".*": File too large"$ ]]
        consistent "$T/o"
        run "$MVEMBED" $(args) --out "$T/o" "$IN"
        [ "$status" -eq 0 ]
        same_as_ref "$T/o"
    fi
}

@test "SIGINT: exits 130, finished work kept and complete, no temp files; resume completes the rest" {
    start "$T/o"
    wait_lines "$T/o/manifest.jsonl" 5
    kill -INT "$pid"
    wait "$pid" || rc=$?
    [ "$rc" -eq 130 ]
    cat "$T/stderr"
    grep -qE '^mvembed: interrupted; [0-9]+ done' "$T/stderr"
    consistent "$T/o"
    n_done=$(wc -l <"$T/o/manifest.jsonl")
    [ "$n_done" -lt "$N" ]
    # every output on disk is one the manifest lists as ok (in-flight work finished or discarded)
    [ "$(find "$T/o" -name '*.npy.zst' | wc -l)" -eq "$(grep -c '"status":"ok"' "$T/o/manifest.jsonl")" ]
    run "$MVEMBED" $(args) --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    same_as_ref "$T/o"
}

@test "SIGHUP (a dropped ssh connection) and SIGQUIT behave like SIGINT: 129 / 131, run record says interrupted" {
    local sig code
    for sig in HUP:129 QUIT:131; do
        code=${sig#*:}
        sig=${sig%:*}
        rm -rf "$T/o"
        start "$T/o"
        wait_lines "$T/o/manifest.jsonl" 5
        rc=0
        kill -"$sig" "$pid"
        wait "$pid" || rc=$?
        echo "SIG$sig: exit $rc"
        [ "$rc" -eq "$code" ]
        consistent "$T/o"
        "$PY" - "$T/o" <<'PYEOF'
import glob, json, sys
recs = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")]
assert len(recs) == 1 and recs[0]["status"] == "interrupted", recs
PYEOF
        [ ! -e "$T/o/_SUCCESS" ]
        run "$MVEMBED" $(args) --out "$T/o" "$IN"
        [ "$status" -eq 0 ]
        same_as_ref "$T/o"
    done
}

@test "a SIGHUP ignored when the run starts (nohup) stays ignored: the run completes" {
    bash -c 'trap "" HUP; exec "$@"' _ "$MVEMBED" $(args) --out "$T/o" "$IN" 2>"$T/stderr" &
    pid=$!
    wait_lines "$T/o/manifest.jsonl" 2
    kill -HUP "$pid"
    rc=0
    wait "$pid" || rc=$?
    cat "$T/stderr"
    [ "$rc" -eq 0 ]
    same_as_ref "$T/o"
}

@test "SIGTERM behaves like SIGINT (status 143)" {
    start "$T/o"
    wait_lines "$T/o/manifest.jsonl" 5
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    [ "$rc" -eq 143 ]
    consistent "$T/o"
    run "$MVEMBED" $(args) --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    same_as_ref "$T/o"
}
