#!/usr/bin/env bats
# A hostile environment around the run: an address-space limit (ulimit -v), a file size limit
# (ulimit -f), an --out that is no directory (a dangling symbolic link, a symlink loop, a regular
# file, a path under one), and a standard output that cannot be written (/dev/full). mvembed either works or fails with status 1
# and a message naming the cause; it never crashes, hangs or exits 0 after failing. Every run is
# under `timeout -k`, so that a hang fails instead of blocking. Oracles: the exit status, the
# filesystem (os.lstat), Python's json and numpy (with zstandard) on what a run wrote.
load test_helper

IMG="$ROOT/fixtures/media/images"

setup() {
    T="$BATS_TEST_TMPDIR"
}

# outputs_ok OUT: every manifest line is JSON with status ok, each output loads with numpy and is
# finite, and OUT holds no temporary (dot) file besides the lock; prints the number of outputs
outputs_ok() {
    "$PY" - "$1" <<'PYEOF'
import io, json, os, sys
import numpy as np, zstandard
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), "rb")]
assert rows and all(r["status"] == "ok" for r in rows), rows
for r in rows:
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().decompress(open(os.path.join(out, r["output"]), "rb").read())))
    assert a.ndim == 2 and a.shape[0] > 0 and np.isfinite(a).all(), (r, a.shape)
stray = [f for f in os.listdir(out) if f.startswith(".") and f != ".mvembed.lock"]
assert not stray, stray
print(len(rows))
PYEOF
}

@test "under ulimit -v: the run works or exits 1 naming the cause; never a crash or a hang" {
    mkdir "$T/in"
    cp "$IMG"/jpeg_gray_200x149.jpg "$IMG"/png_rgb_320x256.png "$IMG"/webp_lossy_192x128.webp "$T/in/"
    local lim j st worked=0 asan=0
    # an ASan build's shadow memory needs terabytes of address space: there the limit is not set
    # (as run_limited in 77-hostile does) and every run must work
    if ldd "$MVEMBED" | grep -q libasan; then asan=1; fi
    # 300 MB: too little for the threads; 400 MB and up: enough once OpenBLAS starts no threads of
    # its own (each reserved 128 MiB, and retried forever when it could not: a hang). A build
    # linked with CUDA maps cuBLASLt and cuDNN's libraries at load: under ~1 GB the dynamic loader
    # refuses the program before it starts (status 127, "error while loading shared libraries"),
    # and near 1 GB glibc can abort when a thread ends (man page, BUGS): its ladder is higher
    local lims="300000 400000 450000 1000000" cuda=0
    if ldd "$MVEMBED" | grep -q libcublasLt; then cuda=1 lims="300000 600000 1500000 2000000"; fi
    for lim in $lims; do
        [ $asan = 0 ] || lim=unlimited
        for j in 1 2; do
            rm -rf "$T/o"
            st=0
            timeout -k 5 60 bash -c "ulimit -v $lim; exec \"\$0\" -q --device cpu -j $j --jobs 2 --writers 2 \
                --model \"\$1\" --out \"\$2\" \"\$3\"" "$MVEMBED" "$MODEL" "$T/o" "$T/in" 2>"$T/err" || st=$?
            echo "ulimit -v $lim, -j $j: status $st: $(cat "$T/err")"
            if [ "$st" -eq 0 ]; then
                [ "$(outputs_ok "$T/o")" -eq 3 ]
                worked=$((worked + 1))
            elif [ $cuda = 1 ] && [ "$st" -eq 127 ] && [ "$lim" -lt 1000000 ]; then
                grep -q "error while loading shared libraries: .*failed to map segment" "$T/err"
            else
                [ "$st" -eq 1 ]
                grep -qE '^mvembed: .*(out of memory|ulimit -v)' "$T/err"
            fi
        done
    done
    [ "$worked" -ge 4 ] # the two highest limits at least (450 MB and 1 GB without CUDA's libraries)
    [ $asan = 0 ] || [ "$worked" -eq 8 ]
}

@test "ulimit -v across the band where the run starts to fit: status 0 or 1 naming the cause, never a crash, exit 2 or libgomp's exit" {
    # The band: 96 MB either side of the smallest limit the run works at (found by bisection, as it
    # moves with the build: ~370 MB for a CPU build, over 1 GB for one that maps CUDA's libraries),
    # every 3 MB. Where the room ran out inside oneDNN (its GEMM kernels made on first use,
    # primitives made per row count) the process died of SIGSEGV; an OpenMP team that could not
    # start ended it through libgomp ("Thread creation failed", exit 1 with no cause of ours); small
    # inputs failed one by one with "out of memory" (exit 2, error lines blaming them). None is the
    # input's fault.
    mkdir "$T/in"
    cp "$IMG"/*.jpg "$T/in/"
    local n lim lims st worked=0 failed=0 asan=0 cuda=0 lo=100000 hi=4000000 mid
    n=$(ls "$T/in" | wc -l)
    limited() { # LIMIT: one run under ulimit -v LIMIT into $T/o; its status
        rm -rf "$T/o"
        timeout -k 5 60 bash -c "ulimit -v $1; exec \"\$0\" -q --device cpu --model \"\$1\" --out \"\$2\" \"\$3\"" \
            "$MVEMBED" "$MODEL" "$T/o" "$T/in" 2>"$T/err"
    }
    if ldd "$MVEMBED" | grep -q libcublasLt; then cuda=1; fi
    # an ASan build's shadow memory needs terabytes of address space: one run, unlimited, works
    if ldd "$MVEMBED" | grep -q libasan; then
        asan=1 lims=unlimited
    else
        limited $hi
        while [ $((hi - lo)) -gt 4000 ]; do
            mid=$(((lo + hi) / 2))
            if limited $mid; then hi=$mid; else lo=$mid; fi
        done
        echo "works from about ulimit -v $hi"
        lims=$(seq $((hi - 96000)) 3000 $((hi + 96000)))
    fi
    for lim in $lims; do
        st=0
        limited "$lim" || st=$?
        echo "ulimit -v $lim: status $st: $(head -c 300 "$T/err")"
        if [ "$st" -eq 0 ]; then
            [ "$(outputs_ok "$T/o")" -eq "$n" ]
            worked=$((worked + 1))
        elif [ $cuda = 1 ] && [ "$st" -eq 127 ]; then # the loader, before the program starts (83's first case)
            grep -q "error while loading shared libraries: .*failed to map segment" "$T/err"
            failed=$((failed + 1))
        else
            [ "$st" -eq 1 ]
            # (a fatal run whose record cannot be written either says that first, then the cause)
            grep -qE '^mvembed: .*(out of memory|out of address space|ulimit -v)' "$T/err"
            ! grep -q '^libgomp' "$T/err"
            # nothing blamed on an input: no error line
            [ ! -f "$T/o/manifest.jsonl" ] || ! grep -q '"status":"error"' "$T/o/manifest.jsonl"
            failed=$((failed + 1))
        fi
    done
    echo "worked $worked, failed $failed"
    if [ $asan = 1 ]; then [ "$worked" -eq 1 ]; else [ "$worked" -ge 10 ] && [ "$failed" -ge 10 ]; fi
}

@test "--out a dangling symbolic link, a symlink loop, a regular file, a path under one: status 1, the cause" {
    cp "$IMG/png_gray_128x72.png" "$T/a.png"
    ln -s "$T/nowhere" "$T/dang"
    ln -s loop2 "$T/loop1"
    ln -s loop1 "$T/loop2"
    echo text > "$T/file"
    ln -s file "$T/tofile"
    local out want st
    while IFS='|' read -r out want; do
        st=0
        timeout -k 5 60 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/$out" "$T/a.png" 2>"$T/err" || st=$?
        echo "--out $out: status $st: $(cat "$T/err")"
        [ "$st" -eq 1 ]
        grep -qF "$want" "$T/err"
    done <<EOF
dang|$T/dang: a dangling symbolic link (to $T/nowhere, which does not exist)
dang/sub|$T/dang: a dangling symbolic link (to $T/nowhere, which does not exist) (on the way to $T/dang/sub)
loop1|$T/loop1: a symbolic link (to loop2) in a loop of symbolic links
file|$T/file: a regular file, not a directory
file/sub|$T/file: a regular file, not a directory (on the way to $T/file/sub)
tofile/sub|$T/tofile: a symbolic link (to file) to a regular file, not a directory
EOF
    # nothing was made through the links, the file is untouched
    "$PY" - "$T" <<'PYEOF'
import os, stat, sys
t = sys.argv[1]
assert not os.path.lexists(os.path.join(t, "nowhere"))
assert stat.S_ISLNK(os.lstat(os.path.join(t, "dang")).st_mode)
assert open(os.path.join(t, "file")).read() == "text\n"
PYEOF
}

@test "standard output on a full device: --help, --version, manifest failed exit 1 and say so" {
    local st
    for args in --help --version; do
        st=0
        timeout -k 5 60 "$MVEMBED" $args >/dev/full 2>"$T/err" || st=$?
        echo "$args: status $st: $(cat "$T/err")"
        [ "$st" -eq 1 ]
        grep -qx "mvembed: cannot write to standard output: No space left on device" "$T/err"
    done
    # the same commands to a writable stdout: status 0, the text whole
    timeout -k 5 60 "$MVEMBED" --version > "$T/v"
    grep -q '^mvembed [0-9]' "$T/v"
    # manifest failed: the list is the product; one message, status 1
    cp "$IMG/png_gray_128x72.png" "$T/a.png"
    cp "$ROOT/fixtures/bad/empty.jpg" "$T/b.jpg"
    st=0
    timeout -k 5 120 "$MVEMBED" -q --device cpu --model "$MODEL" --out "$T/o" "$T/a.png" "$T/b.jpg" 2>/dev/null || st=$?
    [ "$st" -eq 2 ]
    st=0
    timeout -k 5 60 "$MVEMBED" manifest failed "$T/o" >/dev/full 2>"$T/err" || st=$?
    echo "manifest failed: status $st: $(cat "$T/err")"
    [ "$st" -eq 1 ]
    [ "$(grep -c 'No space left on device' "$T/err")" -eq 1 ]
    timeout -k 5 60 "$MVEMBED" manifest failed "$T/o" > "$T/list"
    [ "$(cat "$T/list")" = "$T/b.jpg" ]
}

@test "under ulimit -f: status 1 naming the output and the cause, no half-written file; a rerun completes" {
    mkdir "$T/in"
    cp "$IMG"/jpeg_gray_200x149.jpg "$IMG"/png_rgb_320x256.png "$IMG"/webp_lossy_192x128.webp "$T/in/"
    local layout st
    for layout in files tar; do
        rm -rf "$T/o"
        st=0
        # 16 KiB a file: the manifest and the run record fit, no output does (SIGXFSZ used to kill
        # the run mid-write, leaving its temp file)
        timeout -k 5 60 bash -c "ulimit -f 16; exec \"\$0\" -q --device cpu --layout $layout \
            --model \"\$1\" --out \"\$2\" \"\$3\"" "$MVEMBED" "$MODEL" "$T/o" "$T/in" 2>"$T/err" || st=$?
        echo "--layout $layout: status $st: $(cat "$T/err")"
        [ "$st" -eq 1 ]
        grep -q "File too large" "$T/err"
        "$PY" - "$T/o" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
names = os.listdir(out)
assert not [f for f in names if f.startswith(".tmp")], names
rows = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"), "rb")]
for r in rows: # a line ok only over a file that is there, whole in size
    if r["status"] == "ok":
        assert os.path.getsize(os.path.join(out, r["output"])) >= r["bytes"], r
PYEOF
        run timeout -k 5 60 "$MVEMBED" -q --device cpu --layout $layout --model "$MODEL" --out "$T/o" "$T/in"
        [ "$status" -eq 0 ]
        if [ $layout = files ]; then
            [ "$(outputs_ok "$T/o")" -eq 3 ]
        else
            "$PY" "$ROOT/test/bats/tar_check.py" "$T/o" --ok 3 --one-sample
        fi
    done
}
