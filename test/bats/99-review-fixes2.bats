#!/usr/bin/env bats
# Review fixes: a --shard K/N tar run's pooled directory whose rows another naming embedded under
# another relative path (so its index names them from /) stays when the other shards end.
# Oracles: json (the manifests, the pooled indexes), tarfile + numpy (the samples, the rows).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/in"
    cp "$ROOT"/fixtures/media/images/*.jpg "$ROOT"/fixtures/media/images/*.png "$T/in/"
    N=$(ls "$T/in" | wc -l)
}

@test "tar --pool mean: a fix-up run from inside the folder, then --shard 0/2, 1/2 from above: both shards' pooled directories stay, every input once" {
    (cd "$T/in" && "$MVEMBED" --device cpu --model "$MODEL" --out ../o --layout tar --pool mean .)
    cd "$T"
    for sh in 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out o --layout tar --pool mean --shard "$sh" in
        echo "$output"
        [ "$status" -eq 0 ]
    done
    run "$PY" - "$T/o" "$N" <<'PY'
import glob, io, json, os, sys, tarfile
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
latest = {}
for m in glob.glob(out + "/manifest*.jsonl"):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        k = os.path.realpath(r["input_abs"])
        if k not in latest or (r["time"], r["seq"]) > (latest[k]["time"], latest[k]["seq"]):
            latest[k] = r
assert len(latest) == n and all(r["status"] == "ok" for r in latest.values()), len(latest)
seen = []
for k in (0, 1):
    d = f"{out}/pooled-{k:05d}-of-00002"
    assert os.path.isdir(d), ("missing", d, sorted(os.listdir(out)))
    rows = np.load(d + "/pooled.npy")
    idx = [json.loads(l) for l in open(d + "/pooled.jsonl", encoding="utf-8")]
    assert rows.shape[0] == len(idx), (d, rows.shape, len(idx))
    for x in idx:
        key = os.path.realpath(os.path.join(out, "..", x["input"]))
        r = latest[key]
        with tarfile.open(os.path.join(out, r["shard"])) as t:
            a = np.load(io.BytesIO(t.extractfile(r["key"] + ".npy").read()))
        assert np.allclose(rows[x["row"]], a.astype(np.float64).mean(axis=0), atol=1e-6), x["input"]
        seen.append(key)
assert len(seen) == len(set(seen)) == n, ("rows", len(seen), "distinct", len(set(seen)), "inputs", n)
print("ok", n)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
