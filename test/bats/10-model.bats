#!/usr/bin/env bats
# Model loading: the checkpoint layouts we accept and the errors we give (messages pinned).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy as np; np.save("'"$T"'/px.npy", np.random.RandomState(3).randn(24,1536).astype(np.float32))'
    cp -r "$MODEL" "$T/m"
    ST="$T/m/model.safetensors"
}

embed() { mvembed -q --device cpu --model "$1" --pixels "$T/px.npy" --grid 1,4,6 --out "$2"; }

@test "the fixture model loads and embeds given pixels" {
    run embed "$T/m" "$T/o"
    [ "$status" -eq 0 ]
    run npy_zst_info "$T/o/px.npy.zst"
    [ "$output" = "(6, 64) float32 True" ]
}

@test "sharded checkpoint with an index: same output; language-model shards are never read" {
    embed "$T/m" "$T/o1"
    mkdir "$T/s" && cp "$T/m"/*.json "$T/s/"
    "$PY" "$ROOT/test/bats/st_tool.py" reshard "$ST" "$T/s" 2
    run embed "$T/s" "$T/o2"
    [ "$status" -eq 0 ]
    cmp "$T/o1/px.npy.zst" "$T/o2/px.npy.zst"
}

@test "key prefixes visual. and none are detected; standalone config.json works" {
    embed "$T/m" "$T/o1"
    "$PY" "$ROOT/test/bats/st_tool.py" prefix "$ST" "$T/v.st" model.visual. visual.
    mv "$T/v.st" "$ST"
    run embed "$T/m" "$T/o2"
    [ "$status" -eq 0 ]
    cmp "$T/o1/px.npy.zst" "$T/o2/px.npy.zst"
    "$PY" "$ROOT/test/bats/st_tool.py" prefix "$ST" "$T/v.st" visual. ""
    mv "$T/v.st" "$ST"
    "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); json.dump(c["vision_config"], open(sys.argv[1],"w"))' "$T/m/config.json"
    run embed "$T/m" "$T/o3"
    [ "$status" -eq 0 ]
    cmp "$T/o1/px.npy.zst" "$T/o3/px.npy.zst"
}

@test "missing tensor: one-line error naming it" {
    "$PY" "$ROOT/test/bats/st_tool.py" drop "$ST" "$T/x" model.visual.blocks.1.attn.proj.bias && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $T/m: missing tensor 'model.visual.blocks.1.attn.proj.bias'" ]
}

@test "wrong shape: names tensor, file, both shapes" {
    "$PY" "$ROOT/test/bats/st_tool.py" shape "$ST" "$T/x" model.visual.blocks.0.attn.qkv.weight 128,384 && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.blocks.0.attn.qkv.weight' has shape [128,384], config.json implies [384,128]" ]
}

@test "config.json claiming a far larger tower than the weights: shape error, no weight memory taken first" {
    # the 27B layout with a merge of 8 over the tiny weights: 5.7 G floats (23 GB) if allocated
    # from the config; under an 8 GB address-space limit (room for the CUDA and OpenBLAS
    # libraries) that allocation fails, so only checking every shape first gives the shape error
    "$PY" - "$T/m/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["vision_config"].update(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16,
                          out_hidden_size=5120, num_position_embeddings=2304, spatial_merge_size=8)
json.dump(c, open(sys.argv[1], "w"))
PYEOF
    rm -f "$T/m/preprocessor_config.json" "$T/m/video_preprocessor_config.json" # their merge is 2
    if ldd "$MVEMBED" | grep -q libasan; then
        # AddressSanitizer reserves terabytes of address space, so no ulimit -v can hold it; its own
        # cap on a single allocation makes the same 23 GB request fail
        run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=8000:allocator_may_return_null=1" \
            timeout 60 "$MVEMBED" -q --device cpu --model "$T/m" --pixels "$T/px.npy" --grid 1,4,6 --out "$T/o"
    else
        run timeout 60 bash -c "ulimit -v 8000000; '$MVEMBED' -q --device cpu --model '$T/m' --pixels '$T/px.npy' --grid 1,4,6 --out '$T/o'"
    fi
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.patch_embed.proj.weight' has shape [128,3,2,16,16], config.json implies [1152,3,2,16,16]" ]
}

@test "truncated shard: refused before reading past the end" {
    truncate -s 1000000 "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [[ "$output" =~ ^"mvembed: $ST: tensor '".*"': data offsets ".*" outside the file's ".*" data bytes (truncated file?)"$ ]]
    truncate -s 5 "$ST"
    run embed "$T/m" "$T/o"
    [ "$output" = "mvembed: $ST: truncated safetensors file (5 bytes)" ]
}

@test "bad JSON in config.json: file and line" {
    printf '{"vision_config": {"depth": 2,,}}' > "$T/m/config.json"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [[ "$output" =~ ^"mvembed: $T/m/config.json: bad JSON at line 1: " ]]
    [ "${#lines[@]}" -eq 1 ]
}

@test "bad JSON whose excerpt holds a newline: still one line, control bytes shown as ?" {
    printf '{\n  "arc\\\n}' > "$T/m/config.json"   # an escape cut by a newline (found by fuzz_config)
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    echo "$output"
    [ "${#lines[@]}" -eq 1 ]
    # (stderr escapes a backslash as two: the excerpt's '"arc\' reads '"arc\\')
    [[ "$output" =~ ^"mvembed: $T/m/config.json: bad JSON at line ".*"invalid escape near '\"arc\\\\?'"$ ]]
}

@test "values from the files are escaped in messages: a hidden_act or dtype holding a newline" {
    # (hidden_act found by fuzz_config: test/fuzz/crashes/config-hidden-act-newline)
    "$PY" -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["vision_config"]["hidden_act"]="gelu\nx"; json.dump(c, open(p, "w"))' "$T/m/config.json"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 1 ]
    # the message says \n; stderr then shows that backslash doubled, as every backslash
    [ "$output" = "mvembed: $T/m/config.json: unsupported hidden_act \"gelu\\\\nx\"" ]
    cp "$MODEL/config.json" "$T/m/config.json"
    "$PY" "$ROOT/test/bats/st_tool.py" dtype "$ST" "$T/x" model.visual.merger.norm.bias $'Q\n4' && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.merger.norm.bias': unknown dtype 'Q\\\\n4'" ]
}

@test "unknown and unsupported dtypes" {
    "$PY" "$ROOT/test/bats/st_tool.py" dtype "$ST" "$T/x" model.visual.merger.norm.bias Q4 && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.merger.norm.bias': unknown dtype 'Q4'" ]
    cp "$MODEL/model.safetensors" "$ST"
    "$PY" "$ROOT/test/bats/st_tool.py" dtype "$ST" "$T/x" model.visual.merger.norm.bias I16 && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.merger.norm.bias': dtype I16 is not supported (BF16, F16, F32 are)" ]
}

@test "overlapping tensor data is refused" {
    "$PY" "$ROOT/test/bats/st_tool.py" overlap "$ST" "$T/x" model.visual.merger.norm.weight && mv "$T/x" "$ST"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [[ "$output" =~ ^"mvembed: $ST: tensors '".*"' and '".*"' overlap"$ ]]
}

@test "config depth disagreeing with the weights is refused" {
    "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vision_config"]["depth"]=1; json.dump(c, open(sys.argv[1],"w"))' "$T/m/config.json"
    run embed "$T/m" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $ST: tensor 'model.visual.blocks.1.norm1.weight' exists but config.json says depth 1" ]
}

@test "not a model directory" {
    run embed "$T/nothing" "$T/o"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $T/nothing/config.json: missing (is '$T/nothing' a model directory?)" ]
}

@test "a config.json that exists but cannot be read says so, not that it is missing" {
    D=$(mktemp -d /tmp/mvembed-bats.XXXXXX)
    chmod 755 "$D"
    cp -r "$MODEL" "$D/m" && chmod -R a+rX "$D/m"
    chmod 000 "$D/m/config.json"
    mkdir -m 777 "$D/o"
    if [ "$(id -u)" -eq 0 ]; then # root reads anything: run as nobody
        run timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$MVEMBED" -q --device cpu --model "$D/m" --out "$D/o" "$ROOT/fixtures/media/images/png_gray_128x72.png"
    else
        run "$MVEMBED" -q --device cpu --model "$D/m" --out "$D/o" "$ROOT/fixtures/media/images/png_gray_128x72.png"
    fi
    echo "$output"
    [ "$status" -eq 1 ]
    [ "$output" = "mvembed: $D/m/config.json: cannot read: Permission denied" ]
    rm -rf "$D"
}
