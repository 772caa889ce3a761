#!/usr/bin/env bats
# Review fixes. --pool mean replaces OUT/pooled/ whole only after listing it holds nothing but its
# own two files; a directory it cannot list (EACCES for a user, simulated by test/preload's
# fs_shim since the tests may run as root) is refused, never replaced blind: an earlier build's
# output inside it stays where it was. Oracles: cmp (the file kept), numpy + zstandard (it
# loads).
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

@test "--pool mean over an OUT whose pooled/ cannot be listed: exit 1 naming it, what it held kept" {
    small_set "$T/in"
    "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" --pool mean "$T/in"
    # as an earlier build left it: an input's output inside pooled/
    cp "$T/o/png_rgb_320x256.png.npy.zst" "$T/o/pooled/a.png.npy.zst"
    cp "$T/o/png_rgb_320x256.png.npy.zst" "$T/keep"
    pre=$(fs_shim "$T")
    run env LD_PRELOAD="$pre" FS_SHIM_OPENDIR="/o/pooled" FS_SHIM_LOG="$T/shim.log" \
        "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean --force "$T/in"
    echo "exit $status: $output"
    cat "$T/shim.log"
    grep -q "opendir: EACCES .*/o/pooled" "$T/shim.log"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/o/pooled: cannot read it to check it holds only --pool mean's files"*"not replaced"* ]]
    cmp "$T/keep" "$T/o/pooled/a.png.npy.zst"
    # the earlier output is still a loadable array there, and no temporary directory holds a copy
    "$PY" - "$T/o" <<'EOF'
import io, os, sys
import numpy as np, zstandard
o = sys.argv[1]
a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(o + "/pooled/a.png.npy.zst", "rb")).read()))
assert a.ndim == 2 and a.size > 0, a.shape
assert not [n for n in os.listdir(o) if n.startswith(".tmp")], os.listdir(o)
EOF
}
