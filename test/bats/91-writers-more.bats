#!/usr/bin/env bats
# Many writers into one OUT, more cases: a tar run starting while another commits a shard must
# not take that shard for the orphan of a killed run (adopting it would append its samples'
# lines a second time). Oracles: Python's json, tarfile and numpy (tar_check.py), /proc/locks.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "a tar run starting while another names its shard does not adopt that shard: one ok line per input" {
    preload=$(fs_shim "$T")
    small_set "$T/in"
    mkdir -p "$T/a" "$T/b"
    mv "$T"/in/jpeg_gray_200x149.jpg "$T"/in/png_rgb_320x256.png "$T"/in/webp_lossy_192x128.webp "$T/a/"
    mv "$T"/in/* "$T/b/"
    # run A stops just after its shard has its name: its lines are not appended yet, and it holds
    # the shard's lock and the manifest's flock
    LD_PRELOAD="$preload" FS_SHIM_PAUSE_RENAMED="$T/go" \
        "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/a" 2>"$T/err-a" & a=$!
    for _ in $(seq 1500); do [ -e "$T/go.waiting" ] && break; sleep 0.02; done
    [ -e "$T/go.waiting" ]
    ls "$T"/o/shard-*.tar
    # run B reads OUT's manifest (no line of A's shard in it yet), then waits for the flock
    ino=$(stat -c %i "$T/o/manifest.jsonl")
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --layout tar "$T/b" 2>"$T/err-b" & b=$!
    for _ in $(seq 1500); do grep -q -- "-> FLOCK .*:$ino " /proc/locks && break; sleep 0.02; done
    grep -q -- "-> FLOCK .*:$ino " /proc/locks
    # A appends its lines and lets its shard go; B then finds the shard named by lines it had not read
    touch "$T/go"
    ra=0 rb=0
    wait "$a" || ra=$?
    wait "$b" || rb=$?
    cat "$T/err-a" "$T/err-b"
    [ "$ra" -eq 0 ]
    [ "$rb" -eq 0 ]
    run grep -c adopted "$T/err-b"
    [ "$output" = 0 ]
    tar_check "$T/o" --ok 5 --one-sample
    run "$PY" -c '
import collections, json, sys
c = collections.Counter(json.loads(l)["input"] for l in open(sys.argv[1]))
assert len(c) == 5 and set(c.values()) == {1}, c
print("ok")' "$T/o/manifest.jsonl"
    echo "$output"
    [ "$output" = ok ]
}

@test "tar layout, --force reruns with another --shard count, then merge and compact: one sample per input, every line's sample exists" {
    small_set "$T/in"
    for k in 0 1; do
        mvembed --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard "$k/2" "$T/in"
    done
    for k in 0 1 2; do
        mvembed --device cpu --model "$MODEL" --out "$T/o" --layout tar --force --shard "$k/3" "$T/in"
    done
    run mvembed manifest merge "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    run mvembed manifest compact "$T/o"
    echo "$output"
    [ "$status" -eq 0 ]
    tar_check "$T/o" --ok 5 --one-sample
    # every line of every manifest names a sample its shard holds (tarfile), and each input's
    # samples over all shards are one
    run "$PY" -c '
import collections, glob, json, os, sys, tarfile
out = sys.argv[1]
members = {}
per_input = collections.Counter()
for s in glob.glob(out + "/shard-*.tar"):
    with tarfile.open(s) as t:
        names = t.getnames()
        members[os.path.basename(s)] = set(names)
        for n in names:
            if n.endswith(".json"):
                per_input[json.load(t.extractfile(n))["input"]] += 1
assert len(per_input) == 5 and set(per_input.values()) == {1}, per_input
n = 0
for m in glob.glob(out + "/manifest*.jsonl"):
    for line in open(m):
        r = json.loads(line)
        assert r["key"] + ".npy" in members.get(r["shard"], ()), (m, r["shard"], r["key"])
        n += 1
print("ok", n)' "$T/o"
    echo "$output"
    [[ "$output" =~ ^ok ]]
    # and a rerun of either count finds everything done
    run mvembed --device cpu --model "$MODEL" --out "$T/o" --layout tar --shard 1/2 "$T/in"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed" ]]
}
