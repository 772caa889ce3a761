#!/usr/bin/env bats
# Input names a dataset holds that a run must take as a careful user expects. A WebDataset tar made
# on macOS holds an AppleDouble member ._x.jpg beside each x.jpg (and hidden folders such as
# .thumbs/): a directory walk passes over such names, and WebDataset's key rule (a basename's part
# before its first dot) gives ._x.jpg no key; the tar input passes them over the same way (counted,
# named by -v), and --hidden takes them. An input whose output file name (its name and ".npy.zst")
# is over the file system's limit on a name fails before it is embedded, naming the limit. Oracles:
# Python's tarfile (the tar and its members), json (manifest lines), the webdataset key regular
# expression, os.pathconf (the limit).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir -p "$T/in"
    "$PY" - "$T/in/shard.tar" fixtures/media/images <<'PY'
import io, os, sys, tarfile
out, src = sys.argv[1], sys.argv[2]
jpgs = sorted(f for f in os.listdir(src) if f.endswith(".jpg"))[:3]
with tarfile.open(out, "w") as t:
    for i, f in enumerate(jpgs):
        data = open(os.path.join(src, f), "rb").read()
        for name, blob in ((f"s{i}.jpg", data), (f"._s{i}.jpg", b"\0\5\26\7" + b"\0" * 80),
                           (f"sub/.thumbs/s{i}.jpg", data)):
            ti = tarfile.TarInfo(name)
            ti.size = len(blob)
            t.addfile(ti, io.BytesIO(blob))
PY
}

@test "tar members with a hidden component are passed over as in a directory walk; --hidden takes them" {
    run "$MVEMBED" -v --device cpu --model "$MODEL" --layout tar --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T/in/shard.tar" "$T/o" "$output" <<'PY'
import json, re, sys, tarfile
tar, out, log = sys.argv[1], sys.argv[2], sys.argv[3]
BASE_RE = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset's key rule
names = tarfile.open(tar).getnames()
hidden = [n for n in names if any(c.startswith(".") for c in n.split("/"))]
keyed = [n for n in names if n not in hidden and BASE_RE.match(n)]
assert len(hidden) == 6 and len(keyed) == 3, names
lines = [json.loads(l) for l in open(out + "/manifest.jsonl", encoding="utf-8")]
got = sorted(l["input"].split("shard.tar/", 1)[1] for l in lines)
assert got == sorted(keyed), got
assert all(l["status"] == "ok" for l in lines), lines
for n in hidden:  # each named by -v as passed over
    assert re.search(re.escape("shard.tar/" + n) + r".*hidden", log), n
samples = [m for sh in sorted(__import__("glob").glob(out + "/shard-*.tar")) for m in tarfile.open(sh).getnames()]
assert len([m for m in samples if m.endswith(".npy")]) == 3, samples
PY
    echo "$output"
    [ "$status" -eq 0 ]
    run "$MVEMBED" --device cpu --model "$MODEL" --layout tar --hidden --out "$T/o2" "$T/in"
    echo "$output"
    [ "$status" -eq 2 ] # the AppleDouble members are not images: they fail, the others are embedded
    run "$PY" - "$T/o2" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/manifest.jsonl", encoding="utf-8")]
ok = sorted(l["input"].split("shard.tar/", 1)[1] for l in lines if l["status"] == "ok")
bad = sorted(l["input"].split("shard.tar/", 1)[1] for l in lines if l["status"] != "ok")
assert ok == sorted([f"s{i}.jpg" for i in range(3)] + [f"sub/.thumbs/s{i}.jpg" for i in range(3)]), ok
assert bad == [f"._s{i}.jpg" for i in range(3)], bad
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "an input whose output name would pass the file system's limit fails before it is embedded, naming the limit; --layout tar takes it" {
    mkdir -p "$T/long"
    long=$("$PY" -c 'import os, sys; print("a" * (os.pathconf(sys.argv[1], "PC_NAME_MAX") - 6) + ".jpg")' "$T")
    cp fixtures/media/images/jpeg_gray_200x149.jpg "$T/long/$long"
    cp fixtures/media/images/jpeg_gray_200x149.jpg "$T/long/short.jpg"
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" "$T/long"
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" - "$T/o" "$long" "$output" <<'PY'
import json, os, sys
out, long, log = sys.argv[1], sys.argv[2], sys.argv[3]
limit = os.pathconf(out, "PC_NAME_MAX")
want = len((long + ".npy.zst").encode())
assert want > limit
lines = {os.path.basename(l["input"]): l for l in map(json.loads, open(out + "/manifest.jsonl", encoding="utf-8"))}
bad, ok = lines[long], lines["short.jpg"]
assert bad["status"] == "error" and f"{want} bytes" in bad["error"] and f"{limit}-byte limit" in bad["error"], bad
assert ok["status"] == "ok" and os.path.exists(os.path.join(out, ok["output"])), ok
# failed before its forward: -v names a forward's output for the short input only
assert "short.jpg ->" in log and (long + " ->") not in log, log
assert sorted(os.listdir(out)) == sorted(f for f in os.listdir(out) if not f.startswith(".tmp-"))
PY
    echo "$output"
    [ "$status" -eq 0 ]
    run "$MVEMBED" --device cpu --model "$MODEL" --layout tar --out "$T/ot" "$T/long"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$PY" - "$T/ot" <<'PY'
import glob, json, sys, tarfile
lines = [json.loads(l) for l in open(sys.argv[1] + "/manifest.jsonl", encoding="utf-8")]
assert len(lines) == 2 and all(l["status"] == "ok" for l in lines), lines
npys = [m for sh in glob.glob(sys.argv[1] + "/shard-*.tar") for m in tarfile.open(sh).getnames() if m.endswith(".npy")]
assert len(npys) == 2, npys
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
