#!/usr/bin/env bats
# GIF, BMP and TIFF end to end against HF transformers' own references (fixtures/ref/formats, made
# on the GPU machine by `scripts/device-refs.sh formats` with HF's load_image — its Pillow, named
# in each meta.json — Qwen2VLImageProcessor and the tower): for every crafted file of
# fixtures/formats, the decoded picture, the pixel_values and the embedding. The two 16-bit grey
# TIFFs are the documented divergence (PIL clips them to white; 32-formats.bats checks the rule).
# Until the references exist every test here fails, saying which file lacks one.
load test_helper

FMT="$ROOT/fixtures/formats"

setup_file() {
    export RUN="$BATS_FILE_TMPDIR/all"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$RUN/out" --dump-stages "$RUN/dump" "$FMT" \
        >"$RUN.log" 2>&1 || true
}

# has_ref NAME: fails, saying how to make it, when fixtures/ref/formats/NAME is missing
has_ref() {
    [ -f "$REF/formats/$1/meta.json" ] && [ -f "$REF/formats/$1/pixel_values.sha256" ] && return 0
    echo "no HF reference for $1: run scripts/device-refs.sh formats on the GPU machine, then" \
        "tar xf formats_refs.tar -C fixtures"
    return 1
}

# divergent NAME: the 16-bit grey TIFFs (v >> 8 here, clipped by PIL)
divergent() { [[ $1 == tif_grey16_* ]]; }

@test "every crafted GIF, BMP and TIFF has an HF reference (fixtures/ref/formats)" {
    n=0
    for f in "$FMT"/*; do
        has_ref "$(basename "$f")"
        n=$((n + 1))
    done
    [ "$n" -ge 80 ]
    [ "$(ls "$REF/formats" | wc -l)" -eq "$n" ]
}

@test "decoded pictures are HF load_image's and pixel_values HF's, bit for bit, every crafted file" {
    n=0
    for f in "$FMT"/*; do
        name=$(basename "$f")
        has_ref "$name"
        divergent "$name" && continue
        d="$REF/formats/$name"
        run "$PY" -c '
import hashlib, json, sys
import numpy as np
from PIL import Image
meta = json.load(open(sys.argv[2]))
a = np.ascontiguousarray(np.asarray(Image.open(sys.argv[1]).convert("RGB"), dtype=np.uint8))
ok = hashlib.sha256(a.tobytes()).hexdigest() == meta["decoded_sha256"] and list(a.shape) == meta["decoded_shape"]
print("ok" if ok else "DIFFERENT", meta.get("pillow"))' "$RUN/dump/$name/decoded.png" "$d/meta.json"
        echo "$name decoded: $output"
        [[ $output == ok* ]]
        ours=$(npy_sha256 "$RUN/dump/$name/pixel_values.npy")
        echo "$name pixel_values ours=$ours hf=$(cat "$d/pixel_values.sha256")"
        [ "$ours" = "$(cat "$d/pixel_values.sha256")" ]
        n=$((n + 1))
    done
    [ "$n" -ge 80 ]
}

@test "16-bit grey TIFF: HF's picture is PIL's clipped one; ours is scaled (documented divergence)" {
    n=0
    for f in "$FMT"/tif_grey16_*; do
        name=$(basename "$f")
        has_ref "$name"
        run "$PY" -c '
import hashlib, json, sys
import numpy as np
from PIL import Image
meta = json.load(open(sys.argv[3]))
im = Image.open(sys.argv[1])
clipped = np.minimum(np.asarray(im).astype(np.uint16), 255).astype(np.uint8)
clipped = np.ascontiguousarray(np.stack([clipped] * 3, -1))
ours = np.asarray(Image.open(sys.argv[2]))
ok = hashlib.sha256(clipped.tobytes()).hexdigest() == meta["decoded_sha256"] and \
    (ours[..., 0] == np.asarray(im).astype(np.uint16) >> 8).all()
print("ok" if ok else "UNEXPECTED")' "$f" "$RUN/dump/$name/decoded.png" "$REF/formats/$name/meta.json"
        echo "$name: $output"
        [ "$output" = ok ]
        n=$((n + 1))
    done
    [ "$n" -eq 2 ]
}

@test "embeddings match HF within the f32 error budget for every crafted file" {
    n=0
    for f in "$FMT"/*; do
        name=$(basename "$f")
        has_ref "$name"
        divergent "$name" && continue
        match_hf "$RUN/out/$name.npy.zst" "$REF/formats/$name" "$name"
        n=$((n + 1))
    done
    [ "$n" -ge 80 ]
}
