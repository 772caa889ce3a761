#!/usr/bin/env bats
# HF's per-frame video pixel cap (Qwen3VLVideoProcessor cap_pixels_per_frame / max_video_tokens)
# against HF transformers 5.17 itself (scripts/device-refs.sh videocap):
#   fixtures/ref/videos_cap_{on,off}       the fixture model's own budget, cap True / False
#   fixtures/ref/videos_cap_bind_{on,off}  the same with max_video_tokens small enough to bind
# Each NAME/meta.json says the rule HF ran (video_rule); we run mvembed with the same settings,
# from the command line and from video_preprocessor_config.json, and compare sampled frames, the
# exact pixel_values, the grid and the embedding (45-video-hf.bats's checks, per rule).
load test_helper

# each_ref SET: calls check NAME FILE REFDIR for every reference in fixtures/ref/SET; fails when
# the set is missing or lacks one of the fixture videos of fixtures/ref/videos
each_ref() {
    local set=$REF/$1 d n f count=0
    [ -d "$set" ] || { echo "missing $set: make it with scripts/device-refs.sh videocap"; return 1; }
    for d in "$REF"/videos/*/; do
        n=$(basename "$d")
        [ -d "$set/$n" ] || { echo "$set lacks $n"; return 1; }
        f=$(ls "$ROOT"/fixtures/media/videos/"$n".* | head -1)
        check "$n" "$(basename "$f")" "$set/$n" || return 1
        count=$((count + 1))
    done
    [ "$count" -ge 12 ]
}

# rule_flags SET: the mvembed options for the rule HF ran in SET (from its first meta.json)
rule_flags() {
    local m
    m=$(ls "$REF/$1"/*/meta.json | head -1) || return 1
    "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["video_rule"]
t = r["max_video_tokens"]
print("--video-frame-cap", "on" if r["cap_pixels_per_frame"] else "off", *(["--max-video-tokens", t] if t else []))' "$m"
}

# embed SET DIR [options]: all fixture videos with SET's rule into DIR/out, stages in DIR/dump
embed() {
    local set=$1 dir=$2 flags
    shift 2
    flags=$(rule_flags "$set") || return 1
    # shellcheck disable=SC2086
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$dir/out" --dump-stages "$dir/dump" $flags "$@" \
        "$ROOT/fixtures/media/videos" >"$dir.log" 2>&1 || true
}

# same_as_hf SET DIR: frame indices, resized size, grid, pixel_values and embedding equal HF's
same_as_hf() {
    local run=$2
    check() {
        run "$PY" -c '
import json, sys
import numpy as np
ref = json.load(open(sys.argv[1] + "/meta.json"))
line = [json.loads(l) for l in open(sys.argv[2]) if json.loads(l)["input"].endswith("/" + sys.argv[3])][0]
assert line["status"] == "ok", line
assert line["frame_indices"] == ref["frame_indices"], (line["frame_indices"], ref["frame_indices"])
assert line["resized"] == ref["resized"], (line["resized"], ref["resized"])
assert line["grid_thw"] == np.load(sys.argv[1] + "/grid_thw.npy")[0].tolist(), line["grid_thw"]
print("ok")' "$3" "$run/out/manifest.jsonl" "$2"
        echo "$1: $output"
        [ "$output" = ok ] || return 1
        [ "$(npy_sha256 "$run/dump/$2/pixel_values.npy")" = "$(cat "$3/pixel_values.sha256")" ] ||
            { echo "$1: pixel_values differ from HF's"; return 1; }
        match_hf "$run/dump/$2/output.npy" "$3" "$1"
    }
    each_ref "$1"
}

setup_file() {
    export R="$BATS_FILE_TMPDIR"
    for set in videos_cap_on videos_cap_off videos_cap_bind_on videos_cap_bind_off; do
        [ -d "$REF/$set" ] && embed "$set" "$R/$set"
    done
    return 0
}

@test "cap on, the fixture budget: pixel_values bit-exact, embeddings within HF's f32 budget" {
    same_as_hf videos_cap_on "$R/videos_cap_on"
}

@test "cap off, the fixture budget: pixel_values bit-exact, embeddings within HF's f32 budget" {
    same_as_hf videos_cap_off "$R/videos_cap_off"
}

@test "a binding cap (small max_video_tokens), on: ours equals HF's" {
    same_as_hf videos_cap_bind_on "$R/videos_cap_bind_on"
}

@test "a binding cap, off: max_video_tokens changes nothing, ours equals HF's" {
    same_as_hf videos_cap_bind_off "$R/videos_cap_bind_off"
}

@test "under the binding config every fixture video's grid differs between the rules (HF's and ours)" {
    check() {
        run "$PY" -c '
import json, sys
import numpy as np
on, off, name = sys.argv[1], sys.argv[2], sys.argv[3]
g_on = np.load(on + "/grid_thw.npy")[0].tolist()
g_off = np.load(off + "/grid_thw.npy")[0].tolist()
assert g_on != g_off, ("HF", g_on, g_off)
ours = {}
for rule, man in (("on", sys.argv[4]), ("off", sys.argv[5])):
    ours[rule] = [json.loads(l)["grid_thw"] for l in open(man) if json.loads(l)["input"].endswith("/" + name)][0]
assert ours["on"] == g_on and ours["off"] == g_off, (ours, g_on, g_off)
assert g_on[1] * g_on[2] < g_off[1] * g_off[2], (g_on, g_off)
print("ok", g_off, "->", g_on)' "$3" "$REF/videos_cap_bind_off/$1" "$2" "$R/videos_cap_bind_on/out/manifest.jsonl" \
            "$R/videos_cap_bind_off/out/manifest.jsonl"
        echo "$1: $output"
        [ "${output%% *}" = ok ]
    }
    each_ref videos_cap_bind_on
}

@test "under the fixture budget both rules give HF's uncapped grid (the cap does not bind there)" {
    check() {
        run "$PY" -c '
import sys
import numpy as np
a, b, c = (np.load(d + "/grid_thw.npy").tolist() for d in sys.argv[1:4])
assert a == b == c, (a, b, c)
print("ok")' "$3" "$REF/videos_cap_off/$1" "$REF/videos/$1"
        echo "$1: $output"
        [ "$output" = ok ]
    }
    each_ref videos_cap_on
}

@test "cap_pixels_per_frame and max_video_tokens from video_preprocessor_config.json; options override them" {
    M="$BATS_TEST_TMPDIR/model"
    mkdir -p "$M"
    cp "$MODEL"/*.json "$M/"
    ln -s "$MODEL/model.safetensors" "$M/model.safetensors"
    tokens=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["video_rule"]["max_video_tokens"])' \
        "$(ls "$REF"/videos_cap_bind_on/*/meta.json | head -1)")
    "$PY" -c '
import json, sys
p = sys.argv[1] + "/video_preprocessor_config.json"
c = json.load(open(p))
c["cap_pixels_per_frame"] = True
c["max_video_tokens"] = int(sys.argv[2])
json.dump(c, open(p, "w"), indent=1)' "$M" "$tokens"
    V=h264_192x128_24fps.mp4
    cd "$ROOT/fixtures/media/videos" # a relative file argument: its stage dumps are under DIR/$V
    run "$MVEMBED" -v --device cpu --model "$M" --out "$BATS_TEST_TMPDIR/c" --dump-stages "$BATS_TEST_TMPDIR/cd" \
        "$V"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "per-frame cap on (video_preprocessor_config.json)"
    [ "$(npy_sha256 "$BATS_TEST_TMPDIR/cd/$V/pixel_values.npy")" = \
      "$(cat "$REF/videos_cap_bind_on/h264_192x128_24fps/pixel_values.sha256")" ]
    run "$MVEMBED" -v --device cpu --model "$M" --out "$BATS_TEST_TMPDIR/o" --dump-stages "$BATS_TEST_TMPDIR/od" \
        --video-frame-cap off "$V"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "per-frame cap off (--video-frame-cap)"
    [ "$(npy_sha256 "$BATS_TEST_TMPDIR/od/$V/pixel_values.npy")" = \
      "$(cat "$REF/videos_cap_bind_off/h264_192x128_24fps/pixel_values.sha256")" ]
    # the config's max_video_tokens yields to the option: 768 does not bind on this clip
    run "$MVEMBED" -q --device cpu --model "$M" --out "$BATS_TEST_TMPDIR/t" --dump-stages "$BATS_TEST_TMPDIR/td" \
        --max-video-tokens 768 "$V"
    [ "$status" -eq 0 ]
    [ "$(npy_sha256 "$BATS_TEST_TMPDIR/td/$V/pixel_values.npy")" = \
      "$(cat "$REF/videos_cap_on/h264_192x128_24fps/pixel_values.sha256")" ]
}

@test "-v names the rule; without config or option it is off, as transformers 5.17" {
    V="$ROOT/fixtures/media/videos/h264_3frames.mp4"
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/a" "$V"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "per-frame cap off (default, as transformers 5.17)"
    [ "$(echo "$output" | grep -c "video budget:")" -eq 1 ]
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/b" --video-frame-cap on "$V"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "per-frame cap on (--video-frame-cap)"
}

@test "the manifest's model fingerprint covers the rule and, with the cap on, max_video_tokens" {
    V="$ROOT/fixtures/media/videos/h264_3frames.mp4"
    fp() {
        rm -rf "$BATS_TEST_TMPDIR/f"
        "$MVEMBED" -q --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/f" "$@" "$V" >/dev/null 2>&1
        "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["model"])' \
            "$BATS_TEST_TMPDIR/f/manifest.jsonl"
    }
    off=$(fp --video-frame-cap off)
    on=$(fp --video-frame-cap on)
    on4=$(fp --video-frame-cap on --max-video-tokens 4)
    plain=$(fp)
    echo "off $off on $on on4 $on4 default $plain"
    [ -n "$off" ] && [ "$off" != "$on" ] && [ "$on" != "$on4" ] && [ "$off" = "$plain" ]
}

@test "bad cap settings: usage errors for the options, a model error naming the config file" {
    V="$ROOT/fixtures/media/videos/h264_3frames.mp4"
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/x" --video-frame-cap maybe "$V"
    [ "$status" -eq 1 ]
    [[ $output == *"--video-frame-cap must be on or off"* ]]
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$BATS_TEST_TMPDIR/x" --max-video-tokens 0 "$V"
    [ "$status" -eq 1 ]
    [[ $output == *"--max-video-tokens"* ]]
    M="$BATS_TEST_TMPDIR/model"
    mkdir -p "$M"
    cp "$MODEL"/*.json "$M/"
    ln -s "$MODEL/model.safetensors" "$M/model.safetensors"
    for bad in '"cap_pixels_per_frame": "yes"' '"max_video_tokens": 0' '"max_video_tokens": 2.5'; do
        "$PY" -c '
import json, sys
p = sys.argv[1] + "/video_preprocessor_config.json"
c = json.load(open(sys.argv[2] + "/video_preprocessor_config.json"))
c.update(json.loads("{" + sys.argv[3] + "}"))
json.dump(c, open(p, "w"))' "$M" "$MODEL" "$bad"
        run "$MVEMBED" --device cpu --model "$M" --out "$BATS_TEST_TMPDIR/x" "$V"
        echo "$bad: $status $output"
        [ "$status" -eq 1 ]
        [[ $output == *"video_preprocessor_config.json"* ]]
    done
}
