#!/usr/bin/env bats
# Review fixes, third round. Oracles: Python's json, os.listdir.
load test_helper

# nohup sets SIGHUP ignored: `nohup mvembed manifest compact OUT` must not end on a hangup. The
# temp file's guard (mv_place_guard_begin) set a handler for it anyway, so a SIGHUP while the
# compacted manifest was written ended the command with 129 and the compaction undone.
@test "manifest compact under nohup is not ended by SIGHUP while it writes" {
    T="$BATS_TEST_TMPDIR"
    mkdir "$T/o"
    "$PY" - "$T/o/manifest.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(60000):
        for s in (1, 2):
            f.write(json.dumps({"input": f"/data/in/{i}.jpg", "output": f"x/{i}.jpg.npy.zst", "status": "ok",
                                "kind": "image", "shape": [30, 64], "dtype": "f32", "bytes": 7211,
                                "model": "919f4c255e465915", "schema": 5, "run": "cf9ab32b70a21bf4",
                                "seq": 2 * i + s, "time": 1796617094.0 + s}, separators=(",", ":")) + "\n")
PYEOF
    nohup "$MVEMBED" manifest compact "$T/o" > /dev/null 2> "$T/err" &
    local p=$!
    sleep 0.3
    while kill -0 "$p" 2> /dev/null; do
        kill -HUP "$p" 2> /dev/null || true
        sleep 0.002
    done
    local rc=0
    wait "$p" || rc=$?
    cat "$T/err"
    [ "$rc" -eq 0 ]
    "$PY" - "$T/o" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
assert not [n for n in os.listdir(out) if n.startswith(".tmp")], os.listdir(out)
lines = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
assert len(lines) == 60000, len(lines)
assert len({l["input"] for l in lines}) == 60000
assert all(l["seq"] % 2 == 0 for l in lines)  # the newest line of each input kept
PYEOF
}
