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

# The files layout's resume noted a skipped input's path from / (for "named again") after freeing
# the item that held it: a read of freed memory on every input a resume skips. valgrind memcheck
# (the build 80-valgrind.bats uses) is the oracle; the run embeds nothing, so it is quick.
@test "files-layout resume skipping done inputs: no read of freed memory (valgrind)" {
    VG="${MVEMBED_VALGRIND:-$ROOT/build-vg/mvembed}"
    [ -x "$VG" ] || { echo "no $VG: make valgrind-bin"; false; }
    small_set "$T/in"
    "$VG" -q --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    OMP_NUM_THREADS=1 run valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite "$VG" --device cpu -j 1 --jobs 1 --model "$MODEL" --out "$T/o" "$T/in"
    echo "$output" | grep -E "ERROR SUMMARY|definitely lost|Invalid|mvembed:" || true
    [ "$status" -eq 0 ]
    [[ "$output" =~ "ERROR SUMMARY: 0 errors" ]]
    [[ "$output" =~ "0 ok, 0 failed, 5 skipped" ]]
    # every input still has its one ok line (json), its output loads (numpy + zstandard)
    "$PY" - "$T/o" <<'PYEOF'
import io, json, os, sys
import numpy as np, zstandard
o = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(o, "manifest.jsonl"), encoding="utf-8")]
ok = [r for r in rows if r["status"] == "ok"]
assert len(ok) == len(rows) == 5, rows
for r in ok:
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(os.path.join(o, r["output"]), "rb")).read()))
    assert list(a.shape) == r["shape"], (r["output"], a.shape)
PYEOF
}
