#!/usr/bin/env bats
# The address-space probes (src/common/room.c: an mmap of MV_ROOM_PROBE, 16 MiB, PROT_NONE and
# MAP_NORESERVE, unmapped at once) stand on hot paths: every oneDNN primitive-cache miss, every
# CPU forward until its team is noted. They can only fail under a finite RLIMIT_AS, so without
# one (ulimit -v unlimited) a run makes none; under any finite limit, even one far above what the
# run could use, it still probes as before. The mmap calls are counted by test/preload/fs_shim.c
# (FS_SHIM_MMAP_LOG); Python's json reads the manifest.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir "$T/in"
    cp "$IMG"/jpeg_gray_200x149.jpg "$IMG"/png_rgb_320x256.png "$IMG"/webp_lossy_192x128.webp "$T/in/"
    SHIM=$(fs_shim "$T")
}

# counted LIMIT NAME: a CPU run over $T/in into $T/NAME under ulimit -v LIMIT (KiB, or
# "unlimited"), its unreserved PROT_NONE mappings logged in $T/NAME.mmap; PROBES: how many of
# them are the room probe's (16 MiB)
counted() {
    run timeout 300 env LD_PRELOAD="$SHIM" FS_SHIM_MMAP_LOG="$T/$2.mmap" bash -c 'ulimit -v "$1" && shift && exec "$@"' \
        _ "$1" "$MVEMBED" -q --device cpu --model "$MODEL" "$T/in" --out "$T/$2"
    echo "ulimit -v $1: $output"
    [ "$status" -eq 0 ]
    "$PY" -c 'import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; assert len(r) == 3 and all(x["status"] == "ok" for x in r), r' \
        "$T/$2/manifest.jsonl"
    PROBES=$(cat "$T/$2.mmap" 2>/dev/null | grep -cx "noreserve 16777216" || true)
}

@test "room probes: none without an address-space limit, some under any finite one" {
    # a finite limit of 1 PiB: never reached (an ASan build's shadow memory fits too), yet a limit
    counted $((1 << 40)) limited
    local limited=$PROBES
    echo "probes under a finite limit: $limited"
    [ "$limited" -gt 0 ] # the count sees the probes where they are made
    counted unlimited free
    echo "probes without a limit: $PROBES"
    [ "$PROBES" -eq 0 ]
}
