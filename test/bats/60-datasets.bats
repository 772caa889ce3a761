#!/usr/bin/env bats
# Embeddings at dataset scale: --model as a hub id found in a Hugging Face cache (laid out as
# huggingface_hub lays it out: blobs/, refs/, snapshots/<commit>/ of symlinks), `mvembed manifest
# compact`, `make install`, the README's reader run as written, --shard none under Slurm, and the
# Slurm job script in scripts/.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMGS=("$ROOT/fixtures/media/images/jpeg_baseline_420_320x240.jpg"
          "$ROOT/fixtures/media/images/png_rgb_320x256.png")
}

CA=1111111111111111111111111111111111111111 # commit of model-tiny as released
CB=2222222222222222222222222222222222222222 # a later commit: a smaller image pixel budget

# make_cache HUB_DIR: models--Org--Tiny with snapshots CA (fixtures/model-tiny) and CB (the same
# weights, preprocessor longest_edge 16384), refs/main -> CA, refs/v2 -> CB; files are symlinks
# into blobs/ named by their sha256, as huggingface_hub stores them. Also $T/snapB: CB as a plain
# directory, the oracle for CB.
make_cache() {
    local repo=$1/models--Org--Tiny f sha
    mkdir -p "$repo/blobs" "$repo/refs" "$repo/snapshots/$CA" "$repo/snapshots/$CB" "$T/snapB"
    cp "$MODEL"/* "$T/snapB/"
    "$PY" -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["size"]["longest_edge"]=16384; json.dump(c,open(p,"w"))' \
        "$T/snapB/preprocessor_config.json"
    for f in "$MODEL"/*; do
        sha=$(sha256sum "$f" | cut -c1-64)
        cp "$f" "$repo/blobs/$sha"
        ln -s "../../blobs/$sha" "$repo/snapshots/$CA/$(basename "$f")"
    done
    for f in "$T/snapB"/*; do
        sha=$(sha256sum "$f" | cut -c1-64)
        cp "$f" "$repo/blobs/$sha"
        ln -s "../../blobs/$sha" "$repo/snapshots/$CB/$(basename "$f")"
    done
    printf '%s' "$CA" > "$repo/refs/main"
    printf '%s' "$CB" > "$repo/refs/v2"
}

# embed OUT MODEL [env...]: embeds the two images on the CPU with env set; status in $status
embed() {
    local out=$1 model=$2
    shift 2
    run env "$@" "$MVEMBED" -q --device cpu --model "$model" --out "$out" "${IMGS[@]}"
}

@test "hub id: Org/Name is the cache's refs/main snapshot; outputs byte-identical to the plain directory" {
    make_cache "$T/hc"
    embed "$T/ref" "$MODEL"
    [ "$status" -eq 0 ]
    embed "$T/hub" Org/Tiny HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 0 ]
    same_bytes "$T/ref" "$T/hub"
    # MVEMBED_MODEL takes a hub id too
    run env HF_HUB_CACHE="$T/hc" MVEMBED_MODEL=Org/Tiny "$MVEMBED" -q --device cpu --out "$T/env" "${IMGS[@]}"
    [ "$status" -eq 0 ]
    same_bytes "$T/ref" "$T/env"
}

@test "hub id: @revision goes through refs/, @COMMIT names the snapshot; each equals that snapshot as a directory" {
    make_cache "$T/hc"
    embed "$T/refB" "$T/snapB"
    embed "$T/refA" "$MODEL"
    ! cmp -s "$T/refA/jpeg_baseline_420_320x240.jpg.npy.zst" "$T/refB/jpeg_baseline_420_320x240.jpg.npy.zst"
    embed "$T/v2" Org/Tiny@v2 HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 0 ]
    same_bytes "$T/refB" "$T/v2"
    rm "$T/hc/models--Org--Tiny/refs/v2"
    embed "$T/cb" "Org/Tiny@$CB" HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 0 ]
    same_bytes "$T/refB" "$T/cb"
    embed "$T/ca" "Org/Tiny@$CA" HF_HUB_CACHE="$T/hc"
    same_bytes "$T/refA" "$T/ca"
}

@test "hub id: an existing local directory of that name wins over the cache" {
    make_cache "$T/hc"
    embed "$T/refB" "$T/snapB"
    mkdir -p "$T/cwd/Org"
    cp -r "$T/snapB" "$T/cwd/Org/Tiny"
    cd "$T/cwd"
    embed "$T/local" Org/Tiny HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 0 ]
    same_bytes "$T/refB" "$T/local"
}

@test "hub id: HF_HUB_CACHE over HF_HOME/hub over ~/.cache/huggingface/hub" {
    make_cache "$T/hc"
    mkdir -p "$T/hh" "$T/home/.cache/huggingface"
    cp -r "$T/hc" "$T/hh/hub"
    cp -r "$T/hc" "$T/home/.cache/huggingface/hub"
    printf '%s' "$CB" > "$T/hc/models--Org--Tiny/refs/main"   # HF_HUB_CACHE: main is CB
    printf '%s' "$CA" > "$T/hh/hub/models--Org--Tiny/refs/main" # HF_HOME: main is CA
    printf '%s' "$CB" > "$T/home/.cache/huggingface/hub/models--Org--Tiny/refs/main"
    embed "$T/refA" "$MODEL"
    embed "$T/refB" "$T/snapB"
    embed "$T/both" Org/Tiny HF_HUB_CACHE="$T/hc" HF_HOME="$T/hh" HOME="$T/home"
    same_bytes "$T/refB" "$T/both"
    embed "$T/home_only" Org/Tiny -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE HF_HOME="$T/hh" HOME="$T/home"
    same_bytes "$T/refA" "$T/home_only"
    embed "$T/dflt" Org/Tiny -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME HOME="$T/home"
    same_bytes "$T/refB" "$T/dflt"
}

@test "hub id not found: exit 1, the message lists the local path, the cache and its variable, the ref and snapshot" {
    make_cache "$T/hc"
    cd "$T"
    embed "$T/o" Org/Nope HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == "mvembed: model 'Org/Nope' not found: looked for the local directory 'Org/Nope' (no such file or directory) and in the Hugging Face cache $T/hc (from \$HF_HUB_CACHE) at $T/hc/models--Org--Nope/refs/main (No such file or directory);"* ]]
    embed "$T/o" Org/Tiny@v9 -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE HF_HOME="$T/hh"
    [ "$status" -eq 1 ]
    [[ "$output" == *"Hugging Face cache $T/hh/hub (from \$HF_HOME/hub) at $T/hh/hub/models--Org--Tiny/refs/v9 (No such file or directory)"* ]]
    rm -r "$T/hc/models--Org--Tiny/snapshots/$CA"
    embed "$T/o" Org/Tiny HF_HUB_CACHE="$T/hc"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/hc/models--Org--Tiny/refs/main (-> $CA), $T/hc/models--Org--Tiny/snapshots/$CA (No such file or directory)"* ]]
    [ ! -e "$T/o/manifest.jsonl" ]
}

@test "manifest compact: after --force reruns, one line per input, equal as JSON to each input's last line" {
    IN="$ROOT/fixtures/media/images"
    run mvembed -q --device cpu --model "$MODEL" --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    for i in 1 2; do
        run mvembed -q --device cpu --force --model "$MODEL" --out "$T/o" "$IN"
        [ "$status" -eq 0 ]
    done
    printf '{"input": "torn' >> "$T/o/manifest.jsonl"  # a line cut short by a crash
    cp "$T/o/manifest.jsonl" "$T/before.jsonl"
    run mvembed manifest compact "$T/o"
    [ "$status" -eq 0 ]
    n=$(ls "$IN" | wc -l)
    [[ "$output" == "mvembed: compacted $T/o/manifest.jsonl: $((3 * n + 1)) lines -> $n ("*", 1 unparsable lines dropped" ]]
    run "$PY" -c '
import json, sys
last, order = {}, []
for l in open(sys.argv[1]):
    try:
        r = json.loads(l)
    except ValueError:
        continue
    if r["input"] not in last:
        order.append(r["input"])
    last[r["input"]] = r
after = [json.loads(l) for l in open(sys.argv[2])]
assert [r["input"] for r in after] == order, "one line per input, first-seen order"
assert all(r == last[r["input"]] for r in after), "each is the last line of its input"
assert len(set(json.dumps(r, sort_keys=True) for r in last.values())) == len(last)
print("ok", len(after))' "$T/before.jsonl" "$T/o/manifest.jsonl"
    echo "$output"
    [ "$output" = "ok $n" ]
    [ -z "$(find "$T/o" -name '.tmp-*')" ]
    # resume reads the compacted manifest: nothing to redo
    run mvembed --device cpu --model "$MODEL" --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed, $n skipped" ]]
}

@test "manifest compact --all: shard manifests compacted in place; without --all they are named" {
    IN="$ROOT/fixtures/media/images"
    for i in 1 2; do
        run mvembed -q --device cpu --force --shard 1/2 --model "$MODEL" --out "$T/o" "$IN"
        [ "$status" -eq 0 ]
    done
    run mvembed manifest compact "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $T/o: no manifest.jsonl to compact (shard manifests: give --all, or join them with mvembed manifest merge)" ]
    f="$T/o/manifest-00001-of-00002.jsonl"
    before=$(wc -l < "$f")
    run mvembed manifest compact --all "$T/o"
    [ "$status" -eq 0 ]
    [ "$(wc -l < "$f")" -eq $((before / 2)) ]
    run "$PY" -c '
import json, sys
ins = [json.loads(l)["input"] for l in open(sys.argv[1])]
assert len(ins) == len(set(ins)) > 0
print("ok")' "$f"
    [ "$output" = ok ]
    [ ! -e "$T/o/manifest.jsonl" ]
}

@test "make install / uninstall with DESTDIR and PREFIX" {
    case "$MVEMBED" in /*) ;; *) MVEMBED=$PWD/$MVEMBED ;; esac
    # the binary under test is installed as it is (-o: make must not rebuild it)
    run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" install DESTDIR="$T/d" PREFIX=/opt/mv \
        BIN="$MVEMBED" -o "$MVEMBED"
    echo "$output"
    [ "$status" -eq 0 ]
    cmp "$MVEMBED" "$T/d/opt/mv/bin/mvembed"
    cmp "$ROOT/man/mvembed.1" "$T/d/opt/mv/share/man/man1/mvembed.1"
    cmp "$ROOT/scripts/embed-array.sbatch" "$T/d/opt/mv/share/mvembed/embed-array.sbatch"
    [ -x "$T/d/opt/mv/bin/mvembed" ] && [ -x "$T/d/opt/mv/share/mvembed/embed-array.sbatch" ]
    run "$T/d/opt/mv/bin/mvembed" --version
    [[ "$output" =~ ^"mvembed " ]]
    run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" uninstall DESTDIR="$T/d" PREFIX=/opt/mv
    [ "$status" -eq 0 ]
    [ -z "$(find "$T/d" -type f)" ]
}

@test "README: the files reader runs as written and reads what zstd -d + numpy.load read" {
    # one input whose name is not UTF-8: the reader takes its output's bytes from output_b64
    mkdir -p "$T/odd"
    cp "${IMGS[0]}" "$T/odd/caf"$'\xe9'".jpg"
    mvembed -q --device cpu --model "$MODEL" --out "$T/emb" "$ROOT/fixtures/media/images" \
        "$ROOT/fixtures/media/videos/h264_3frames.mp4" "$T/odd"
    grep -q output_b64 "$T/emb/manifest.jsonl"
    mvembed -q --device cpu --out-dtype f16 --model "$MODEL" --out "$T/emb16" "${IMGS[@]}"
    # the python block after the marker comment, as written
    sed -n '/^<!-- test\/bats\/60-datasets.bats runs this block/,/^```$/p' "$ROOT/README.md" | sed '1,2d;$d' > "$T/reader.py"
    grep -q 'ZstdDecompressor' "$T/reader.py"
    cd "$T"
    run "$PY" reader.py
    echo "$output"
    [ "$status" -eq 0 ]
    n=$("$PY" -c 'import json,sys; print(sum(json.loads(l)["status"]=="ok" for l in open(sys.argv[1])))' emb/manifest.jsonl)
    [ "$n" -gt 20 ]
    [ "${#lines[@]}" -eq "$n" ]
    for o in emb emb16; do
        run "$PY" -c '
import contextlib, io, json, os, subprocess, sys
import numpy as np
ns = {}
with contextlib.redirect_stdout(io.StringIO()):
    exec(open("reader.py").read(), ns)
out = sys.argv[1]
n = 0
for l in open(out + "/manifest.jsonl"):
    r = json.loads(l)
    import base64
    p = out + "/" + (os.fsdecode(base64.b64decode(r["output_b64"])) if "output_b64" in r else r["output"])
    ref = np.load(io.BytesIO(subprocess.run(["zstd", "-q", "-d", "-c", p], check=True, capture_output=True).stdout))
    for f in ("load", "load_streaming"):
        a = ns[f](p)
        assert a.dtype == ref.dtype and a.shape == ref.shape == tuple(r["shape"]), (f, p)
        assert np.array_equal(a, ref), (f, p)
    assert ref.dtype == {"f32": np.float32, "f16": np.float16}[r["dtype"]]
    n += 1
print("ok", n)' "$o"
        echo "$output"
        [[ "$output" =~ ^"ok " ]]
    done
}

@test "--shard none under a Slurm array: every input, into manifest.jsonl, no shard announced" {
    IN="$ROOT/fixtures/media/images"
    mvembed -q --device cpu --model "$MODEL" --out "$T/single" "$IN"
    SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 run mvembed --device cpu --shard none --model "$MODEL" --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    [[ ! "$output" =~ "shard" ]]
    [ -z "$(find "$T/o" -name 'manifest-*')" ]
    run "$PY" -c '
import json, sys
a = sorted(json.loads(l)["input"] for l in open(sys.argv[1]))
b = sorted(json.loads(l)["input"] for l in open(sys.argv[2]))
assert a == b and len(set(b)) == len(b), (len(a), len(b))
print("ok", len(b))' "$T/single/manifest.jsonl" "$T/o/manifest.jsonl"
    [ "$output" = "ok $(ls "$IN" | wc -l)" ]
    run mvembed --shard nonsense --model "$MODEL" --out "$T/x" "$IN"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "mvembed: --shard must be K/N with 0 <= K < N, auto/N, or none: nonsense" ]]
}

@test "scripts/embed-array.sbatch (the job script users copy) runs one array task's shard" {
    IN="$ROOT/fixtures/media/images"
    SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2 MVEMBED="$MVEMBED" \
        run bash "$ROOT/scripts/embed-array.sbatch" --device cpu --model "$MODEL" --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 0/2 from SLURM_ARRAY_TASK_ID" ]]
    [ -s "$T/o/manifest-00000-of-00002.jsonl" ]
    SLURM_ARRAY_TASK_ID=1 MVEMBED_SHARDS=2 MVEMBED="$MVEMBED" \
        run bash "$ROOT/scripts/embed-array.sbatch" -q --device cpu --model "$MODEL" --out "$T/o" "$IN"
    [ "$status" -eq 0 ]
    run mvembed manifest merge "$T/o"
    [ "$status" -eq 0 ]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq "$(ls "$IN" | wc -l)" ]
}
