#!/usr/bin/env bats
# A careful dataset user's checks of limits and clamps the messages must name: a video whose frame
# size grows mid-stream past --max-decode-pixels (a concatenated MPEG-TS, as cameras and
# stream recorders write them), and lower/upper clamps that contradict each other once the
# model's defaults are counted in. Oracles: the ffmpeg CLI and ffprobe (the videos and their
# sizes), Python's json (manifest lines, run records).
load test_helper

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)

setup() {
    T="$BATS_TEST_TMPDIR"
}

# size FILE: the first video stream's WxH as ffprobe reads it (an MPEG-TS lists it twice)
size() {
    ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0:s=x "$1" | head -n 1
}

@test "a video growing past --max-decode-pixels mid-stream fails naming its new size and the limit" {
    mkdir -p "$T/in"
    "${FF[@]}" -f lavfi -i testsrc=size=128x96:rate=10 -t 1 -c:v libx264 -pix_fmt yuv420p "$T/a.ts"
    "${FF[@]}" -f lavfi -i testsrc=size=192x160:rate=10 -t 1 -c:v libx264 -pix_fmt yuv420p "$T/b.ts"
    cat "$T/a.ts" "$T/b.ts" > "$T/in/grows.ts"
    small=$(size "$T/a.ts")
    big=$(size "$T/b.ts")
    # ffprobe sees the file as a video of the first part's size
    [ "$(size "$T/in/grows.ts")" = "$small" ]
    # a limit between the two sizes: the first frames pass it, the later ones do not
    lim=$(( (${small%x*} * ${small#*x} + ${big%x*} * ${big#*x}) / 2 ))
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --max-decode-pixels "$lim" "$T/in"
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" - "$T/o" "$big" "$lim" <<'PY'
import glob, json, sys
out, big, lim = sys.argv[1:]
lines = [json.loads(l) for l in open(out + "/manifest.jsonl", encoding="utf-8")]
assert len(lines) == 1 and lines[0]["status"] == "error", lines
err = lines[0]["error"]
assert "grows.ts" in err and big in err and lim in err and "--max-decode-pixels" in err, err
rec = json.load(open(glob.glob(out + "/run-*.json")[0]))
assert list(rec["failures"]) == ["too_large"], rec["failures"]
print("ok", err)
PY
    echo "$output"
    [ "$status" -eq 0 ]
    # without the limit the same file is embedded
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o2" "$T/in"
    [ "$status" -eq 0 ]
}

@test "contradicting frame and pixel clamps are refused naming both options, their values and the defaults" {
    img="$ROOT/fixtures/media/images/png_gray_128x72.png"
    # the model's defaults, as its preprocessor configs give them (oracle: json)
    read -r minpx maxpx vminpx vmaxpx minf maxf < <("$PY" - "$MODEL" <<'PY'
import json, os, sys
d = sys.argv[1]
p = json.load(open(os.path.join(d, "preprocessor_config.json")))
v = json.load(open(os.path.join(d, "video_preprocessor_config.json")))
print(p["size"]["shortest_edge"], p["size"]["longest_edge"], v["size"]["shortest_edge"],
      v["size"]["longest_edge"], v.get("min_frames", 4), v.get("max_frames", 768))
PY
)
    check() { # ARGS... -- EXPECTED: exit 1, the message holds EXPECTED, nothing written
        local args=() a
        while [ "$1" != -- ]; do args+=("$1"); shift; done
        shift
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "${args[@]}" "$img"
        echo "$output"
        [ "$status" -eq 1 ]
        [[ "$output" == *"$1"* ]]
        [ ! -e "$T/o/manifest.jsonl" ]
    }
    check --max-frames $((minf - 1)) -- "--min-frames $minf (the model's default) must not exceed --max-frames $((minf - 1))"
    check --min-frames $((maxf + 1)) -- "--min-frames $((maxf + 1)) must not exceed --max-frames $maxf (the model's default)"
    check --min-frames 9 --max-frames 5 -- "--min-frames 9 must not exceed --max-frames 5"
    check --min-pixels $((maxpx + 1)) -- "--min-pixels $((maxpx + 1)) must not exceed --max-pixels $maxpx (the model's default)"
    check --video-max-pixels $((vminpx - 1)) -- "--video-min-pixels $vminpx (the model's default) must not exceed --video-max-pixels $((vminpx - 1))"
}

@test "the run record's failure causes come from the error, not from folder names in the input's path" {
    mkdir -p "$T/in/timed out" "$T/in/unsupported" "$T/in/empty file"
    "${FF[@]}" -f lavfi -i testsrc2=size=128x96:rate=25 -t 2 -c:v libx264 -pix_fmt yuv420p \
        -movflags +faststart "$T/v.mp4"
    # a faststart MP4 cut in its media data: the container lists more frames than it holds
    head -c $(( $(stat -c %s "$T/v.mp4") / 3 )) "$T/v.mp4" > "$T/in/timed out/cut.mp4"
    head -c $(( $(stat -c %s "$T/v.mp4") / 3 )) "$T/v.mp4" > "$T/in/unsupported/cut.mp4"
    head -c $(( $(stat -c %s "$T/v.mp4") / 3 )) "$T/v.mp4" > "$T/in/empty file/cut.mp4"
    # ffprobe counts fewer decodable frames than the container declares
    n=$(ffprobe -v quiet -count_frames -select_streams v:0 -show_entries stream=nb_frames,nb_read_frames \
        -of csv=p=0 "$T/in/unsupported/cut.mp4" 2>/dev/null)
    echo "declared,read: $n"
    [ "${n%%,*}" -gt "${n##*,}" ]
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output"
    [ "$status" -eq 2 ]
    run "$PY" - "$T/o" <<'PY'
import glob, json, sys
out = sys.argv[1]
lines = [json.loads(l) for l in open(out + "/manifest.jsonl", encoding="utf-8")]
assert len(lines) == 3 and all(l["status"] == "error" for l in lines), lines
assert all("truncated" in l["error"] for l in lines), lines
rec = json.load(open(glob.glob(out + "/run-*.json")[0]))
f = rec["failures"]
assert list(f) == ["decode"] and f["decode"]["count"] == 3, f
print("ok", f)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}
