#!/usr/bin/env bats
# The address-space probes (src/common/room.c: an mmap of MV_ROOM_PROBE, 16 MiB, PROT_NONE and
# MAP_NORESERVE, unmapped at once) stand on hot paths: every oneDNN primitive-cache miss, every
# CPU forward until its team is noted. They can only fail under a finite RLIMIT_AS, so without
# one (ulimit -v unlimited) a run makes none; under any finite limit, even one far above what the
# run could use, it still probes as before. Oracles: strace's record of the mmap calls, Python's
# json on the manifest.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
    mkdir "$T/in"
    cp "$IMG"/jpeg_gray_200x149.jpg "$IMG"/png_rgb_320x256.png "$IMG"/webp_lossy_192x128.webp "$T/in/"
}

# traced LIMIT NAME: a CPU run over $T/in into $T/NAME under ulimit -v LIMIT (KiB, or
# "unlimited"), its mmap calls recorded by strace in $T/NAME.strace; PROBES: how many of them
# are the room probe's
traced() {
    run timeout 300 bash -c 'ulimit -v "$1" && shift && exec strace -f -qq -e trace=mmap -o "$@"' _ "$1" \
        "$T/$2.strace" "$MVEMBED" -q --device cpu --model "$MODEL" "$T/in" --out "$T/$2"
    echo "ulimit -v $1: $output"
    [ "$status" -eq 0 ]
    "$PY" -c 'import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; assert len(r) == 3 and all(x["status"] == "ok" for x in r), r' \
        "$T/$2/manifest.jsonl"
    PROBES=$(grep -c 'mmap(NULL, 16777216, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE' "$T/$2.strace" || true)
}

@test "room probes: none without an address-space limit, some under any finite one" {
    command -v strace # the oracle (scripts/install-deps.sh installs it)
    # a finite limit of 1 PiB: never reached (an ASan build's shadow memory fits too), yet a limit
    traced $((1 << 40)) limited
    local limited=$PROBES
    echo "probes under a finite limit: $limited"
    [ "$limited" -gt 0 ] # the count sees the probes where they are made
    traced unlimited free
    echo "probes without a limit: $PROBES"
    [ "$PROBES" -eq 0 ]
}
