#!/usr/bin/env bats
# The completion marker (issue 33, item 2): OUT/_SUCCESS, or OUT/_SUCCESS-KKKKK-of-NNNNN for
# --shard K/N, written only by a run that went through every input it owns (failed inputs
# included), never by one killed, interrupted or fatal; a run removes its naming's stale marker
# before it does any work. Oracles: the file system, Python's json over the manifest lines.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    small_set "$T/in"
    for i in 1 2 3 4 5 6; do cp "$IMG/png_rgb_odd_173x97.png" "$T/in/more$i.png"; done
}

args() { echo -q --device cpu --threads 1 --jobs 1 --model "$MODEL"; }

# check_marker MARKER MANIFEST SHARD: the marker names a record that exists and is complete, its
# run, counts equal to that run's lines in MANIFEST, and SHARD ("null" or "K/N")
check_marker() {
    "$PY" - "$@" <<'PYEOF'
import json, os, sys
marker, man, shard = sys.argv[1:]
m = json.load(open(marker))
out = os.path.dirname(marker)
r = json.load(open(os.path.join(out, m["record"])))
assert m["status"] == "complete" and r["status"] == "complete", (m, r["status"])
assert m["run"] == r["run"] and m["manifest"] == os.path.basename(man) == r["manifest"], m
assert r["marker"] == os.path.basename(marker), r["marker"]
want = None if shard == "null" else dict(zip(("k", "n"), map(int, shard.split("/"))))
assert m["shard"] == want == r["shard"], (m["shard"], want)
mine = [json.loads(l) for l in open(man, "rb")]
mine = [l for l in mine if l.get("run") == m["run"]]
ok = sum(l["status"] == "ok" for l in mine)
c = m["counts"]
assert c == r["counts"], (c, r["counts"])
assert c["ok"] == ok and c["failed"] == len(mine) - ok, (c, ok, len(mine))
assert c["inputs"] == c["ok"] + c["failed"] + c["skipped"], c
print("failed=%d" % c["failed"])
PYEOF
}

# first_run OUT: a complete run over two of the inputs, which writes OUT/_SUCCESS
first_run() {
    mkdir "$T/first"
    mv "$T/in/more5.png" "$T/in/more6.png" "$T/first/"
    run mvembed $(args) --out "$1" "$T/first"
    [ "$status" -eq 0 ]
    [ -f "$1/_SUCCESS" ]
}

# start_fed OUT: a run reading its paths from a FIFO the test keeps open (fd 7), fed three new
# inputs: once their lines are in, it waits for more, so a signal finds it mid-run (pid in $pid)
start_fed() {
    local before
    before=$(wc -l < "$1/manifest.jsonl")
    mkfifo "$T/paths"
    "$MVEMBED" $(args) --out "$1" - < "$T/paths" 2> "$T/err" &
    pid=$!
    exec 7> "$T/paths"
    ls "$T/in"/more* | head -3 >&7
    wait_lines "$1/manifest.jsonl" $((before + 3))
}

@test "a run with a corrupt input writes the completion marker, and its record says failed=1 with the cause" {
    cp "$ROOT/fixtures/bad/truncated.jpg" "$T/in/corrupt.jpg"
    run mvembed $(args) --out "$T/o" "$T/in"
    [ "$status" -eq 2 ]
    [ -f "$T/o/_SUCCESS" ]
    run check_marker "$T/o/_SUCCESS" "$T/o/manifest.jsonl" null
    echo "$output"
    [ "$output" = failed=1 ]
    run "$PY" -c '
import json, os, sys
out = sys.argv[1]
m = json.load(open(out + "/_SUCCESS"))
r = json.load(open(os.path.join(out, m["record"])))
[bad] = [json.loads(l) for l in open(out + "/manifest.jsonl") if json.loads(l)["status"] != "ok"]
assert r["counts"]["failed"] == 1, r["counts"]
[(cause, f)] = r["failures"].items()
assert f["count"] == 1 and f["example"] == bad["error"] and f["example_input"] == bad["input"], f
assert bad["input"].endswith("corrupt.jpg"), bad
print(cause)' "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = decode ]
    # no temporary file of the marker or the record is left
    [ -z "$(find "$T/o" -name '.tmp-*')" ]
}

@test "kill -9 mid-run leaves no completion marker: the stale one of the earlier run was removed first" {
    first_run "$T/o"
    start_fed "$T/o"
    [ ! -e "$T/o/_SUCCESS" ]
    kill -9 "$pid"
    wait "$pid" || rc=$?
    exec 7>&-
    [ "$rc" -eq 137 ]
    [ ! -e "$T/o/_SUCCESS" ]
    [ -z "$(ls "$T/o" | grep SUCCESS)" ]
    # the rerun that gets through writes it again
    run mvembed $(args) --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    run check_marker "$T/o/_SUCCESS" "$T/o/manifest.jsonl" null
    [ "$output" = failed=0 ]
}

@test "an interrupted (SIGINT) run leaves no completion marker, and its record says interrupted" {
    first_run "$T/o"
    start_fed "$T/o"
    kill -INT "$pid"
    sleep 0.5
    exec 7>&- # a run reading paths from stdin ends at the end of its input
    wait "$pid" || rc=$?
    cat "$T/err"
    [ "$rc" -eq 130 ]
    [ ! -e "$T/o/_SUCCESS" ]
    run "$PY" -c '
import glob, json, sys
recs = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/run-*.json")]
print(sorted((r["status"], r["marker"]) for r in recs))' "$T/o"
    echo "$output"
    [ "$output" = "[('complete', '_SUCCESS'), ('interrupted', None)]" ]
}

@test "sharded runs each write their own completion marker; a rerun that dies removes only its own" {
    for k in 0 1 2; do
        run mvembed $(args) --out "$T/o" --shard "$k/3" "$T/in"
        [ "$status" -eq 0 ]
    done
    [ ! -e "$T/o/_SUCCESS" ]
    [ "$(ls "$T/o" | grep -c SUCCESS)" -eq 3 ]
    for k in 0 1 2; do
        run check_marker "$T/o/_SUCCESS-0000$k-of-00003" "$T/o/manifest-0000$k-of-00003.jsonl" "$k/3"
        echo "$output"
        [ "$output" = failed=0 ]
    done
    # the three markers' ok counts add up to every input once
    run "$PY" -c '
import glob, json, sys
print(sum(json.load(open(p))["counts"]["ok"] for p in glob.glob(sys.argv[1] + "/_SUCCESS-*")))' "$T/o"
    [ "$output" -eq "$(ls "$T/in" | wc -l)" ]
    # a rerun of shard 1 killed mid-run leaves shard 1 without a marker, the others kept
    mkfifo "$T/paths"
    "$MVEMBED" $(args) --force --out "$T/o" --shard 1/3 - < "$T/paths" 2> "$T/err" &
    pid=$!
    exec 7> "$T/paths"
    for _ in $(seq 1200); do [ -e "$T/o/_SUCCESS-00001-of-00003" ] || break; sleep 0.05; done
    kill -9 "$pid"
    wait "$pid" || true
    exec 7>&-
    [ ! -e "$T/o/_SUCCESS-00001-of-00003" ]
    [ -f "$T/o/_SUCCESS-00000-of-00003" ] && [ -f "$T/o/_SUCCESS-00002-of-00003" ]
}

@test "a fatal run (writes failing: a file-size limit) leaves no completion marker; a refused one keeps it" {
    run mvembed $(args) --out "$T/o" "$T/in"
    [ -f "$T/o/_SUCCESS" ]
    # refused before it changes anything (a layout switch): OUT as it was, the marker still true
    run mvembed $(args) --layout tar --out "$T/o" "$T/in"
    [ "$status" -eq 1 ]
    [ -f "$T/o/_SUCCESS" ]
    # outputs over 8 KiB fail to be written (EFBIG, SIGXFSZ ignored): a fatal error mid-run
    run bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' _ "$MVEMBED" $(args) --force --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "${lines[-1]}" =~ "File too large" ]]
    [ ! -e "$T/o/_SUCCESS" ]
    run "$PY" -c '
import glob, json, sys
print(sorted(json.load(open(p))["status"] for p in glob.glob(sys.argv[1] + "/run-*.json")))' "$T/o"
    echo "$output"
    [ "$output" = "['complete', 'fatal', 'fatal']" ] # the refused run's record too
}

@test "--walk-rules: a listed path gone since the list was made (OUT's _SUCCESS) is passed over by its name; a gone x.jpg fails" {
    run mvembed $(args) --out "$T/in/emb" "$T/in"
    [ -f "$T/in/emb/_SUCCESS" ]
    find "$T/in" -type f -print0 > "$T/list" # OUT's files too, as find lists them
    printf '%s\0' "$T/in/gone.txt" "$T/in/.gone.png" "$T/in/gone.jpg" >> "$T/list"
    rm "$T/in/emb/_SUCCESS" # as the next run of a list in chunks (xargs) removes it first
    run mvembed $(args) -v --force --out "$T/in/emb" --walk-rules -0 - < "$T/list"
    echo "$output"
    [ "$status" -eq 2 ]
    # gone.jpg is the only failure: "No such file or directory"
    run "$PY" -c '
import json, sys
bad = [l for l in map(json.loads, open(sys.argv[1] + "/manifest.jsonl")) if l["status"] != "ok"]
print([(l["input"].rsplit("/", 1)[1], l["error"].rsplit(": ", 1)[1]) for l in bad])' "$T/in/emb"
    [ "$output" = "[('gone.jpg', 'No such file or directory')]" ]
    [ -f "$T/in/emb/_SUCCESS" ] # written again: this run got through its list
}
