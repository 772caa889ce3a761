#!/usr/bin/env bats
# A hostile environment, more of it: a sharded model whose index names a shard outside the model
# directory (or no file name at all) is refused naming that entry as written; signals stop a run
# whose path list yields only entries passed over; `manifest failed` into a pipe its reader
# closed ends as --help does.
# Oracles: Python's json (the index as written), the shell's exit statuses.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T"
}

# sharded_model DIR VALUE_JSON: a copy of the tiny model whose model.safetensors.index.json maps
# every tensor to model.safetensors, and one more vision tensor name to VALUE_JSON
sharded_model() {
    cp -r "$MODEL" "$1"
    "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
d, extra = sys.argv[1], json.loads(sys.argv[2])
with open(d + "/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
wm = {k: "model.safetensors" for k in names}
wm["model.visual.extra.weight"] = extra
json.dump({"metadata": {}, "weight_map": wm}, open(d + "/model.safetensors.index.json", "w"))
PYEOF
}

@test "a model index naming a shard outside the directory, or no name: refused, the entry as written" {
    sharded_model m1 '"../../../etc/passwd"'
    run "$MVEMBED" --device cpu --model m1 --out o1 "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"m1/model.safetensors.index.json: shard name '../../../etc/passwd' must be a plain file name"* ]]
    sharded_model m2 '5'
    run "$MVEMBED" --device cpu --model m2 --out o2 "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"m2/model.safetensors.index.json: weight_map entry 'model.visual.extra.weight' is not a file name"* ]]
    # and the index as it should be: the model loads
    sharded_model m3 '"model.safetensors"'
    run "$MVEMBED" -q --device cpu --model m3 --out o3 "$IMG/png_gray_128x72.png"
    [ "$status" -eq 0 ]
}

@test "SIGTERM stops a run whose endless path list yields only entries passed over" {
    for src in "yes /etc/passwd" "yes ''"; do
        "$MVEMBED" --device cpu --threads 1 --model "$MODEL" --out o --walk-rules - < <($src) 2>err &
        pid=$!
        sleep 1
        kill -TERM "$pid"
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid"
            echo "still running 10 s after SIGTERM ($src)"
            false
        fi
        run wait "$pid"
        [ "$status" -eq 143 ]
        grep -q "interrupted" err
    done
}

@test "manifest failed into a pipe its reader closes: 141 without a word; a full disk: the cause" {
    mkdir O
    "$PY" - O/manifest.jsonl <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:  # 20000 failures: more than a pipe holds
    for i in range(20000):
        f.write(json.dumps({"input": "d/x%06d.jpg" % i, "status": "error", "error": "unreadable",
                            "schema": 5, "run": "0123456789abcdef", "seq": i + 1, "time": 1.0 + i}) + "\n")
PYEOF
    run bash -c '"$0" manifest failed O | head -1; echo "status ${PIPESTATUS[0]}"' "$MVEMBED"
    echo "$output"
    [ "${lines[0]}" = "d/x000000.jpg" ]
    [ "${lines[1]}" = "status 141" ]
    [ "${#lines[@]}" -eq 2 ]
    run bash -c '"$0" manifest failed O >/dev/full' "$MVEMBED"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: cannot write to standard output: No space left on device" ]
}

@test "tar layout stopped by a file size limit: the run record counts what the manifest holds" {
    mkdir big
    for i in $(seq 1 30); do cp "$IMG/png_gray_128x72.png" "big/i$i.png"; done
    run bash -c 'ulimit -f 40; exec "$0" -q --device cpu --threads 1 --model "$1" --layout tar --out o big' \
        "$MVEMBED" "$MODEL"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"File too large (that shard is not kept: the next run redoes its inputs)"* ]]
    "$PY" - o <<'PYEOF'
import glob, json, os, sys
out = sys.argv[1]
rec = json.load(open(glob.glob(os.path.join(out, "run-*.json"))[0]))
ok = sum(json.loads(l)["status"] == "ok" for l in open(os.path.join(out, "manifest.jsonl")))
assert rec["counts"]["ok"] == ok, (rec["counts"], ok)
PYEOF
    # and the next run, without the limit, does the rest: every input once
    run "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --layout tar --out o big
    [ "$status" -eq 0 ]
    "$PY" - o <<'PYEOF'
import json, os, sys
ok = {json.loads(l)["input"] for l in open(os.path.join(sys.argv[1], "manifest.jsonl"))
      if json.loads(l)["status"] == "ok"}
assert len(ok) == 30, len(ok)
PYEOF
}

@test "out of file descriptors (ulimit -n) is the run's failure, not its inputs': exit 1, no _SUCCESS" {
    mkdir d1 d2
    cp "$IMG/png_gray_128x72.png" d1/
    cp "$IMG/jpeg_gray_200x149.jpg" d2/
    fatal=0
    for n in $(seq 4 16) 64; do # from too few to start at all to enough
        rm -rf o
        status=0
        output=$(bash -c 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n "$2"
                          exec "$0" -q --device cpu --threads 1 --model "$1" --out o d1 d2' \
                 "$MVEMBED" "$MODEL" "$n" 2>&1) || status=$?
        echo "ulimit -n $n: status $status: $output"
        [ "$status" -ne 2 ] # never "these inputs failed" for the process's own limit
        if [ "$status" -eq 1 ] && [[ "$output" == *"Too many open files"* ]]; then
            fatal=$((fatal + 1))
            "$PY" -c 'import os, sys; assert not os.path.exists(sys.argv[1] + "/_SUCCESS")' o
        fi
    done
    [ "$fatal" -ge 1 ]
    [ "$status" -eq 0 ] # and with 64 the run works
}

@test "OMP_NUM_THREADS in the environment does not override --threads (100000 of them: no crash)" {
    mkdir d
    cp "$IMG/png_gray_128x72.png" "$IMG/jpeg_gray_200x149.jpg" d/
    run "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out o1 d
    [ "$status" -eq 0 ]
    OMP_NUM_THREADS=100000 run timeout 120 "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out o2 d
    echo "$output"
    [ "$status" -eq 0 ]
    same_bytes o1 o2
}

@test "OUT's lock file replaced by a FIFO: refused saying what it is, no wait" {
    mkdir O
    mkfifo O/.mvembed.lock
    run timeout 60 "$MVEMBED" -q --device cpu --threads 1 --model "$MODEL" --out O "$IMG/png_gray_128x72.png"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"O/.mvembed.lock: cannot open OUT's lock file: not a regular file"* ]]
    "$PY" -c 'import os, stat, sys; assert stat.S_ISFIFO(os.lstat(sys.argv[1]).st_mode)' O/.mvembed.lock
}
