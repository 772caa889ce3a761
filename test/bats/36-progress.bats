#!/usr/bin/env bats
# Progress and thread defaults as a user sees them: on a terminal one line redrawn in place that
# per-file lines never glue onto; in logs (Slurm, -v into a file) plain lines without terminal
# escapes; default threads from the CPU affinity mask.
load test_helper

setup() {
    T=$BATS_TEST_TMPDIR
    IMG="$ROOT/fixtures/media/images"
}

@test "in a log with SLURM_JOB_ID set: plain progress lines, no carriage returns or escapes" {
    SLURM_JOB_ID=42 "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$IMG" 2>"$T/log"
    cat "$T/log"
    n=$(ls "$IMG" | wc -l)
    grep -qE "^mvembed: $n/$n done, 0 failed, 0 skipped \| decode .* \| elapsed [0-9]+m[0-9]{2}s$" "$T/log"
    ! grep -q $'\r' "$T/log"
    ! grep -q $'\e' "$T/log"
}

@test "--progress-every: a line every S seconds while the run goes on, plain text" {
    # paths come through a FIFO the test holds open: the run lasts until the test has seen
    # periodic lines (no race with how fast the tower is)
    mkfifo "$T/paths"
    "$MVEMBED" --device cpu --progress-every 0.05 --model "$MODEL" --out "$T/o" - <"$T/paths" 2>"$T/log" &
    pid=$!
    exec 7>"$T/paths"
    echo "$IMG/png_gray_128x72.png" >&7
    for _ in $(seq 1 600); do
        [ "$(grep -cE '^mvembed: [0-9]+ done' "$T/log")" -ge 3 ] && break
        sleep 0.05
    done
    echo "$IMG/jpeg_gray_200x149.jpg" >&7
    exec 7>&-
    wait "$pid"
    cat "$T/log"
    [ "$(grep -cE '^mvembed: [0-9]+ done' "$T/log")" -ge 3 ]
    grep -qE '^mvembed: 2 done, 0 failed, 0 skipped \| .* \| elapsed [0-9]+m[0-9]{2}s$' "$T/log"
    ! grep -q $'\r' "$T/log"
    ! grep -q $'\e' "$T/log"
}

@test "without -v, Slurm or a terminal: no progress lines in the log" {
    "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$IMG" 2>"$T/log"
    ! grep -q " done, " "$T/log"
    grep -qE "^mvembed: [0-9]+ ok, 0 failed, 0 skipped in " "$T/log"
}

@test "on a terminal with -v: per-file lines never glued onto the progress line, which fits the width" {
    # script(1) gives mvembed a pseudo-terminal 60 columns wide
    script -qfec "stty cols 60; '$MVEMBED' -v --device cpu --jobs 1 --model '$MODEL' --out '$T/o' '$IMG'" \
        /dev/null >"$T/tty" 2>&1
    "$PY" - "$T/tty" <<'PY'
import re, sys
raw = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace').replace('\r\n', '\n')
arrows = 0
for line in raw.split('\n'):
    # what stays on the screen of this line: the text after the last "\r\x1b[K"
    parts = re.split(r'\r\x1b\[K', line)
    for p in parts:
        if ' done, ' in p and 'skipped | decode' in p:
            assert len(p) <= 59, ('progress line wider than the terminal', p)
            assert ' -> ' not in p, ('a per-file line glued onto the progress line', p)
    if ' -> ' in line:
        arrows += 1
        assert parts[-1].startswith('mvembed: '), ('per-file line not at the line start', line)
assert arrows == 21, arrows
print('ok', arrows)
PY
}

@test "default decode threads follow the CPU affinity mask (taskset)" {
    run taskset -c 0 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" "$IMG/png_gray_128x72.png"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: pipeline: 1 decode threads, 1 tower thread, 2 writers (1 CPUs in this process's affinity mask)" ]]
    want=$(nproc)
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o2" "$IMG/png_gray_128x72.png"
    [[ "$output" =~ "mvembed: pipeline: $want decode threads" ]]
}

@test "-v prints where the time went: a per-stage timeline" {
    run "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" "$IMG"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: timeline (seconds summed over threads" ]]
    for s in decode preprocess stage-in "output-slab wait" forward stage-out "write (convert+compress+fsync)" manifest; do
        [[ "$output" =~ " $s "[0-9]+\.[0-9]{2}s ]] || { echo "missing stage $s"; false; }
    done
    # stage-in's parts and the writers' CPU time, each a number of seconds
    [[ "$output" =~ "stage-in "[0-9.]+"s ("[0-9]+"%; on CPU "[0-9]+\.[0-9]{2}"s, buffers "[0-9]+\.[0-9]{2}"s, copy "[0-9]+\.[0-9]{2}"s)" ]]
    [[ "$output" =~ "writers on CPU "[0-9]+\.[0-9]{2}"s" ]]
}

@test "--writers sets the writer threads; outputs and lines do not depend on it" {
    for w in 1 5; do
        run "$MVEMBED" -v --device cpu --jobs 3 --writers $w --model "$MODEL" --out "$T/w$w" "$IMG"
        [ "$status" -eq 0 ]
        [[ "$output" =~ "mvembed: pipeline: 3 decode threads, 1 tower thread, $w writers" ]]
    done
    "$PY" - "$T/w1" "$T/w5" <<'PY'
import io, json, os, subprocess, sys
import numpy as np
a, b = sys.argv[1:]
def lines(d):
    out = {}
    for l in open(os.path.join(d, 'manifest.jsonl')):
        r = json.loads(l)
        out[r['input']] = r
    return out
la, lb = lines(a), lines(b)
assert la.keys() == lb.keys() and len(la) > 5, (len(la), len(lb))
for k, r in la.items():
    assert r['status'] == lb[k]['status'] == 'ok', k
    assert r['output'] == lb[k]['output'], k
    x, y = (np.load(io.BytesIO(subprocess.run(['zstd', '-q', '-d', '-c', os.path.join(d, r['output'])],
                                              check=True, capture_output=True).stdout)) for d in (a, b))
    assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), k
print('ok', len(la))
PY
}
