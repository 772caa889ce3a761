#!/usr/bin/env bats
# A hostile environment under the manifest tools: a manifest whose reads fail part way (EIO, a bad
# sector, through the LD_PRELOAD shim fs_shim's FS_SHIM_READ_EIO) while `manifest compact`,
# `manifest merge`, `manifest failed` or the tar layout's compaction read it. A read error is
# not the end of the file: each must stop with status 1 naming the manifest and the cause, leave
# OUT as it was (never a manifest cut to the lines read before the error, never a live sample
# removed), and a rerun without the fault must do the whole job.
# Oracles: Python's json, tarfile and numpy (test/bats/tar_check.py), cmp.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IMG="$ROOT/fixtures/media/images"
    N=$(ls "$IMG" | wc -l)
}

# inputs_of MANIFEST: the number of distinct inputs among the lines of MANIFEST (json)
inputs_of() {
    "$PY" -c 'import json,sys; print(len({json.loads(l)["input"] for l in open(sys.argv[1])}))' "$1"
}

# faulty CMD...: runs mvembed CMD... with the manifest reads failing after their first line
faulty() {
    run env FS_SHIM_READ_EIO="${FAULT:-manifest}" FS_SHIM_LOG="$T/shim.log" LD_PRELOAD="$preload" \
        "$MVEMBED" "$@"
    echo "$output"
    grep -q 'getline: later reads EIO' "$T/shim.log" # the fault was met
}

@test "manifest compact: a manifest whose reads fail part way is left whole (exit 1, the cause); a rerun compacts all" {
    preload=$(fs_shim "$T")
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$IMG" 2>/dev/null
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --force "$IMG" 2>/dev/null
    [ "$(stat -c %s "$T/o/manifest.jsonl")" -gt 8192 ] # more than the first buffer a stream reads
    cp "$T/o/manifest.jsonl" "$T/before"
    faulty manifest compact "$T/o"
    [ "$status" -eq 1 ]
    [[ $output == *manifest.jsonl* ]]
    [[ $output == *"Input/output error"* ]]
    cmp "$T/before" "$T/o/manifest.jsonl"
    run "$MVEMBED" manifest compact "$T/o"
    [ "$status" -eq 0 ]
    [ "$(wc -l < "$T/o/manifest.jsonl")" -eq "$N" ]
    [ "$(inputs_of "$T/o/manifest.jsonl")" -eq "$N" ]
}

@test "manifest merge and manifest failed: a shard manifest unreadable part way stops them (exit 1), nothing merged" {
    preload=$(fs_shim "$T")
    mkdir "$T/in"
    for i in 1 2 3; do for f in "$IMG"/*; do cp "$f" "$T/in/$i-$(basename "$f")"; done; done
    cp "$ROOT/fixtures/bad/empty.jpg" "$T/in/zz-empty.jpg"
    for k in 0 1; do "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --shard $k/2 "$T/in" 2>/dev/null || true; done
    [ "$(stat -c %s "$T/o/manifest-00000-of-00002.jsonl")" -gt 8192 ]
    FAULT=manifest-0000 faulty manifest merge "$T/o"
    [ "$status" -eq 1 ]
    [[ $output == *manifest-0000* ]]
    [[ $output == *"Input/output error"* ]]
    [ ! -e "$T/o/manifest.jsonl" ]
    # the failed input's line is read last: a list cut at the error would be empty, and exit 0
    FAULT=manifest-0000 faulty manifest failed "$T/o"
    [ "$status" -eq 1 ]
    [[ $output == *"Input/output error"* ]]
    run "$MVEMBED" manifest merge "$T/o"
    [ "$status" -eq 0 ]
    [ "$(inputs_of "$T/o/manifest.jsonl")" -eq $((3 * N + 1)) ]
    run "$MVEMBED" manifest failed "$T/o"
    [ "$status" -eq 0 ]
    [ "$output" = "$T/in/zz-empty.jpg" ]
}

@test "tar layout compact: a manifest unreadable part way (first or second reading) removes no live sample (exit 1); a rerun compacts" {
    preload=$(fs_shim "$T")
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/t0" --layout tar "$IMG" 2>/dev/null
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/t0" --layout tar --force "$IMG"/png_* 2>/dev/null
    [ "$(stat -c %s "$T/t0/manifest.jsonl")" -gt 8192 ]
    # 0: the manifest's own compaction reads it; 1: then the shards' compaction, which tells the
    # live samples from the dead by it
    for skip in 0 1; do
        rm -rf "$T/t" "$T/shim.log"
        cp -a "$T/t0" "$T/t"
        FS_SHIM_READ_EIO_SKIP=$skip faulty manifest compact "$T/t"
        [ "$status" -eq 1 ]
        [[ $output == *"manifest.jsonl: cannot read the manifest: Input/output error"* ]]
        [ "$skip" -eq 1 ] || cmp "$T/t0/manifest.jsonl" "$T/t/manifest.jsonl"
        run "$PY" "$ROOT/test/bats/tar_check.py" "$T/t" --ok "$N"
        echo "$output"
        [ "$status" -eq 0 ]
        run "$MVEMBED" manifest compact "$T/t"
        [ "$status" -eq 0 ]
        run "$PY" "$ROOT/test/bats/tar_check.py" "$T/t" --ok "$N" --one-sample
        echo "$output"
        [ "$status" -eq 0 ]
    done
}
