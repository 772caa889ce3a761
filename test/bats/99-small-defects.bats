#!/usr/bin/env bats
# Small defects: what `manifest compact` reports for the tar layout, which error a fatal run prints
# first, and --pool mean's unsharded and --shard directories in one OUT.
# Oracles: Python's json (lines a manifest holds), numpy (pooled arrays: pooled_check.py).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
}

# compact_said OUTPUT: checks each "compacted M: A lines -> B (C ok, D not ok)" line of OUTPUT
# against what manifest M holds now, as Python's json reads it
compact_said() {
    "$PY" - "$1" <<'PYEOF'
import json, re, sys
said = re.findall(r"compacted (\S+): (\d+) lines -> (\d+) \((\d+) ok, (\d+) not ok\)", sys.argv[1])
assert said, sys.argv[1]
for path, before, after, ok, notok in said:
    recs = [json.loads(l) for l in open(path) if l.strip()]
    n_ok = sum(r.get("status") == "ok" for r in recs)
    assert (int(after), int(ok), int(notok)) == (len(recs), n_ok, len(recs) - n_ok), (path, after, ok, notok, len(recs), n_ok)
    print(path, before, "->", len(recs))
PYEOF
}

@test "tar compact: the line counts printed are those the manifests hold once dead samples' lines are out" {
    small_set "$T/in"
    IMG="$T/in"
    tar_run "$T/o" -q
    [ "$status" -eq 0 ]
    # a sharded --force rerun: the shard manifest's lines are newer, so manifest.jsonl's lines
    # for those inputs name dead samples, and compact takes them out of manifest.jsonl
    tar_run "$T/o" -q --shard 0/2 --force
    [ "$status" -eq 0 ]
    tar_run "$T/o" -q --shard 1/2 --force
    [ "$status" -eq 0 ]
    run "$MVEMBED" manifest compact --all "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "compacted shards: "[1-9][0-9]*" dead samples" ]]
    compact_said "$output"
    tar_check "$T/o" --ok 5 --one-sample
}

@test "a fatal write error: the cause (the output and errno's text) is told first, the run record's failure after it" {
    small_set "$T/in"
    efbig=$("$PY" -c 'import errno, os; print(os.strerror(errno.EFBIG))')
    local layout
    for layout in files tar; do
        rm -rf "$T/o"
        # 1 KiB a file: no output fits, nor does the run record (SIGXFSZ ignored: write() fails)
        run bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' _ "$MVEMBED" -q --device cpu --model "$MODEL" \
            --layout $layout --out "$T/o" "$T/in"
        echo "--layout $layout: status $status"
        echo "$output"
        [ "$status" -eq 1 ]
        # the first line names an output of OUT (a .npy.zst, or a shard) and the cause
        [[ "${lines[0]}" =~ ^"mvembed: $T/o/"[^:]*(\.npy\.zst|shard-[0-9]+\.tar)": ".*"$efbig" ]]
        [[ ! "${lines[0]}" =~ "/.tmp-" ]]
        # the run record could not be written either, and says so after the cause
        [ "${#lines[@]}" -ge 2 ]
        [[ "${lines[-1]}" =~ ^"mvembed: $T/o/.tmp-"[0-9]+"-run-"[0-9a-f]+".json: write: $efbig"$ ]]
        [ "$(find "$T/o" -name 'run-*.json' | wc -l)" -eq 0 ]
    done
}
