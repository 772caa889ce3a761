# test_helper.bash - shared setup for mvembed's bats suites.
# MVEMBED (env) overrides the binary under test; NPYCMP the comparison tool.
ROOT="$(cd "$(dirname "${BATS_TEST_FILENAME}")/../.." && pwd)"
MVEMBED="${MVEMBED:-$ROOT/mvembed}"
NPYCMP="${NPYCMP:-$ROOT/build/npycmp}"
PY=/usr/bin/python3
MODEL="$ROOT/fixtures/model-tiny"
REF="$ROOT/fixtures/ref"

mvembed() { "$MVEMBED" "$@"; }

# budget STAGE_DIR STAGE: the FlashAttention rule: 2x HF's own f32 error against f64, read from
# the reference's errors.json, with a floor of 1e-7 for stages HF computes (almost) exactly.
budget() {
    "$PY" -c 'import json,sys; e=json.load(open(sys.argv[1]))["f32"][sys.argv[2]]; print(max(2*e, 1e-7))' \
        "$1/errors.json" "$2"
}

# npy_sha256 FILE: sha256 of the raw little-endian data of an .npy file (header excluded)
npy_sha256() {
    "$PY" -c 'import numpy as np,hashlib,sys; a=np.load(sys.argv[1]); print(hashlib.sha256(np.ascontiguousarray(a,dtype="<f4").tobytes()).hexdigest())' "$1"
}

# load_zst FILE.npy.zst: prints shape and dtype as numpy sees them after `zstd -d`
npy_zst_info() {
    zstd -q -d -c "$1" > "$BATS_TEST_TMPDIR/x.npy" && \
    "$PY" -c 'import numpy as np,sys; a=np.load(sys.argv[1]); print(a.shape, a.dtype, bool(np.isfinite(a).all()))' "$BATS_TEST_TMPDIR/x.npy"
}

# same_bytes DIR_A DIR_B: both hold the same .npy.zst files (at least one), byte for byte
same_bytes() {
    (cd "$1" && find . -name '*.npy.zst' | sort) > "$BATS_TEST_TMPDIR/same_bytes_a"
    (cd "$2" && find . -name '*.npy.zst' | sort) > "$BATS_TEST_TMPDIR/same_bytes_b"
    diff "$BATS_TEST_TMPDIR/same_bytes_a" "$BATS_TEST_TMPDIR/same_bytes_b"
    [ -s "$BATS_TEST_TMPDIR/same_bytes_a" ]
    while read -r f; do cmp "$1/$f" "$2/$f"; done < "$BATS_TEST_TMPDIR/same_bytes_a"
}

# forwards TEXT: the number of forwards a `mvembed -v` run reports ("... N forwards, M patches each")
forwards() {
    echo "$1" | sed -n 's/.* \([0-9][0-9]*\) forwards, .*/\1/p'
}

# match_hf OURS REF_DIR LABEL: our output (.npy, or .npy.zst) is within 2x HF-f32's error of HF's
# f64 output in REF_DIR; prints npycmp's line
match_hf() {
    local ours=$1 b
    if [[ $ours == *.zst ]]; then
        zstd -q -d -c "$ours" > "$BATS_TEST_TMPDIR/match_hf.npy"
        ours=$BATS_TEST_TMPDIR/match_hf.npy
    fi
    b=$(budget "$2" output)
    run "$NPYCMP" --max-rel "$b" "$ours" "$2/output.f64.npy"
    echo "$3: $output (budget $b)"
    [ "$status" -eq 0 ]
}

# small_set DIR: five images of fixtures/media/images in DIR, plus an empty file (DIR/empty.jpg,
# an input that fails) when a second argument is given
small_set() {
    local img="$ROOT/fixtures/media/images"
    mkdir -p "$1"
    cp "$img"/jpeg_gray_200x149.jpg "$img"/png_rgb_320x256.png "$img"/webp_lossy_192x128.webp \
        "$img"/png_gray_128x72.png "$img"/jpeg_exif6_168x104.jpg "$1/"
    [ -z "${2:-}" ] || cp "$ROOT/fixtures/bad/empty.jpg" "$1/$2"
}

# jpg_png_set DIR: every JPEG and PNG fixture image copied into DIR (made); N their count
jpg_png_set() {
    mkdir -p "$1"
    cp "$ROOT"/fixtures/media/images/*.jpg "$ROOT"/fixtures/media/images/*.png "$1/"
    N=$(ls "$1" | wc -l)
}

# fs_shim DIR: builds test/preload/fs_shim.c into DIR/fs_shim.so and prints what LD_PRELOAD must
# hold to load it into $MVEMBED (an ASan build's runtime first, as ASan requires). What it takes
# away is set in the environment (FS_SHIM_NOLOCK=1, FS_SHIM_RENAME2=noreplace|all, FS_SHIM_LOG:
# see fs_shim.c).
fs_shim() {
    cc -shared -fPIC -O1 -o "$1/fs_shim.so" "$ROOT/test/preload/fs_shim.c" -ldl
    local asan
    asan=$(ldd "$MVEMBED" 2>/dev/null | awk '/libasan/ {print $3}')
    echo "${asan:+$asan }$1/fs_shim.so"
}

# readme_recipe TITLE: the first ```python block after the README paragraph starting **TITLE**
readme_recipe() {
    awk -v t="**$1**" 'index($0, t) == 1 { f = 1 } f && /^```python$/ { p = 1; next } p && /^```$/ { exit } p' \
        "$ROOT/README.md"
}

# inputs DIR PREFIX COPIES: DIR holds COPIES copies of every fixture image, named PREFIX-i-<name>
inputs() {
    mkdir -p "$1"
    for i in $(seq "$3"); do
        for f in "$ROOT"/fixtures/media/images/*; do cp "$f" "$1/$2-$i-$(basename "$f")"; done
    done
}

# hold_lock FILE: starts a process (its pid in $holder) that holds an exclusive fcntl lock on FILE
# (created when missing), as a writer in another PID namespace or on another machine would, until
# it is killed; returns once the lock is held, fails when it cannot be taken
hold_lock() {
    local ready
    ready=$(mktemp -u "$BATS_TEST_TMPDIR/hold_lock.XXXXXX")
    "$PY" -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(sys.argv[2], "w").close()
time.sleep(1000)' "$1" "$ready" &
    holder=$!
    for _ in $(seq 500); do [ -e "$ready" ] && break; sleep 0.02; done
    [ -e "$ready" ]
}

# tar_run OUT [ARGS...]: a tar-layout run over $IMG into OUT (status and output as run sets them,
# the output echoed for the test's log)
tar_run() {
    local out=$1
    shift
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$out" --layout tar "$@" "$IMG"
    echo "$output"
}

# tar_check OUT [ARGS...]: test/bats/tar_check.py's verdict on OUT (its options: see there)
tar_check() {
    run "$PY" "$ROOT/test/bats/tar_check.py" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" =~ ^ok ]]
}

# pooled_check OUT N [ARGS...]: test/bats/pooled_check.py's verdict on OUT's pooled directories
# (its options: see there)
pooled_check() {
    run "$PY" "$ROOT/test/bats/pooled_check.py" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" =~ ^ok ]]
}

# wait_lines FILE N: waits (up to 60 s) until FILE has at least N lines
wait_lines() {
    for _ in $(seq 3000); do
        [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
        sleep 0.02
    done
    echo "timed out waiting for $2 lines in $1"
    return 1
}
