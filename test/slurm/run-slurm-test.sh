#!/usr/bin/env bash
# run-slurm-test.sh - `make test-slurm`: runs mvembed's sharding on a real one-node Slurm cluster.
# Installs Debian's slurm-wlm and munge when missing (needs root), starts a private munged,
# slurmctld and slurmd on 127.0.0.1 with every file under one temporary directory
# (test/slurm/slurm.conf.in), submits a 3-task job array of scripts/embed-array.sbatch over
# fixtures/media/{images,videos} with the CPU backend, and checks that the shards cover every
# input exactly once, that `mvembed manifest merge` lists every input once with status ok, that
# the outputs equal a single-process run byte for byte, that resubmitting the array (with the
# merge as a dependent job) after losing outputs redoes exactly those, and that one task can be
# rerun alone (MVEMBED_SHARDS). Prints TAP lines and "N passed, N failed"; exit status 1
# on any failure. Every daemon and job process it started is stopped on exit, whatever happened.
# It is not a Slurm configuration for real use (no accounting, no cgroups, root everywhere).
# Environment: MVEMBED (binary, default build-nc/mvembed), MVEMBED_SLURM_TIMEOUT (seconds to
# wait for one job, default 240), MVEMBED_SLURM_KEEP=1 keeps the temporary directory.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
MVEMBED=${MVEMBED:-$ROOT/build-nc/mvembed}
TIMEOUT=${MVEMBED_SLURM_TIMEOUT:-240}
PY=/usr/bin/python3
INPUTS=(fixtures/media/images fixtures/media/videos)
MODEL=fixtures/model-tiny
NTASKS=3

n=0 passed=0 failed=0
D="" PIDS=() JOBS=()
ok()    { n=$((n + 1)); passed=$((passed + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
note()  { sed 's/^/# /'; }
# check DESC CMD...: one TAP line for CMD's success; CMD's output becomes "# " comments
check() {
    local desc=$1 out rc
    shift
    out=$("$@" 2>&1); rc=$?
    [ -n "$out" ] && printf '%s\n' "$out" | note
    if [ $rc -eq 0 ]; then ok "$desc"; else notok "$desc"; fi
    return $rc
}
logs() { # the daemons' logs, as comments, to diagnose a failure
    local f
    for f in "$D"/log/*; do
        [ -s "$f" ] || continue
        echo "# --- $f (last 25 lines)"
        tail -n 25 "$f" | note
    done
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ] && exit 0
    exit 1
}
bail() { notok "$*"; logs; finish; }

cleanup() {
    local j p pid
    [ -n "$D" ] || return 0
    # Cancel our jobs while slurmctld still runs, then stop the daemons we started.
    for j in "${JOBS[@]}"; do scancel "$j" >/dev/null 2>&1; done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    # slurmstepd and job processes are not children of slurmd once started; they inherit our
    # private SLURM_CONF, which names them as ours.
    for pid in $(grep -lsaF "SLURM_CONF=$D/slurm.conf" /proc/[0-9]*/environ 2>/dev/null |
                 cut -d/ -f3); do
        [ "$pid" != $$ ] && kill -9 "$pid" 2>/dev/null
    done
    if [ "${MVEMBED_SLURM_KEEP:-0}" = 1 ]; then
        echo "# kept $D"
    else
        rm -rf "$D"
    fi
}
trap cleanup EXIT
trap 'notok "interrupted by a signal"; finish' INT TERM HUP

echo "# slurm test: mvembed=$MVEMBED"

# --- 1. packages -------------------------------------------------------------------------------
need_install() {
    local b
    for b in slurmctld slurmd sbatch squeue sinfo scancel munged munge unmunge; do
        command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$b" \
            >/dev/null 2>&1 || return 0
    done
    return 1
}
export PATH=$PATH:/usr/sbin:/sbin
if need_install; then
    if [ "$(id -u)" -ne 0 ]; then
        bail "slurm-wlm and munge are not installed and we are not root to install them"
    fi
    echo "# installing slurm-wlm munge"
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$( { apt-get update -qq &&
        apt-get install -y -qq --no-install-recommends slurm-wlm munge; } 2>&1)
fi
if need_install; then
    printf '%s\n' "${apt_log:-}" | tail -n 20 | note
    bail "slurm-wlm and munge installed"
fi
ok "slurm-wlm and munge installed (slurmctld $(dpkg-query -W -f '${Version}' slurmctld 2>/dev/null))"
[ "$(id -u)" -eq 0 ] || bail "running as root (slurmd must start jobs as root here)"
[ -x "$MVEMBED" ] || bail "mvembed binary at $MVEMBED (make NO_CUDA=1 BUILD=build-nc BIN=build-nc/mvembed)"

# --- 2. munge ----------------------------------------------------------------------------------
D=$(mktemp -d /tmp/mvembed-slurm.XXXXXX)
chmod 711 "$D"
mkdir -p "$D"/{munge,state,spool,run,log,jobs}
chmod 755 "$D/munge"  # munged: not writable by others, searchable by all (clients connect)
MSOCK=$D/munge/munge.socket
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$D/munge/munge.key"
munged --foreground --force --socket="$MSOCK" --key-file="$D/munge/munge.key" \
    --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" \
    --seed-file="$D/munge/munged.seed" >"$D/log/munged.out" 2>&1 &
PIDS+=($!)
munge_ok() { munge -n -S "$MSOCK" 2>/dev/null | unmunge -S "$MSOCK" >/dev/null 2>&1; }
for _ in $(seq 100); do munge_ok && break; sleep 0.1; done
munge_ok || bail "private munged answers on $MSOCK"
ok "private munged answers on $MSOCK"

# --- 3. slurmctld + slurmd ---------------------------------------------------------------------
HOST=$(hostname -s)
read -r CTLD_PORT SLURMD_PORT < <($PY -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
# The node line as slurmd sees this machine (CPUs, sockets, cores, threads), without memory.
NODE_LINE=$(slurmd -C 2>/dev/null | head -n 1 | sed -E 's/ RealMemory=[0-9]+//')
case $NODE_LINE in NodeName=*) ;; *) bail "slurmd -C describes this node (got: $NODE_LINE)" ;; esac
sed -e "s|@DIR@|$D|g" -e "s|@HOST@|$HOST|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" \
    -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" -e "s|@NODE_LINE@|$NODE_LINE|g" \
    test/slurm/slurm.conf.in >"$D/slurm.conf"
export SLURM_CONF=$D/slurm.conf
slurmctld -D -c >"$D/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D >"$D/log/slurmd.out" 2>&1 &
PIDS+=($!)
node_idle() { [ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ]; }
for _ in $(seq 120); do node_idle && break; sleep 0.5; done
node_idle || bail "one-node cluster up: node $HOST idle ($(sinfo -h -N -o '%N %T %E' 2>&1))"
ok "one-node cluster up: $NODE_LINE idle, slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT"

# wait_job JOBID: until no task of the array is pending or running; 1 on timeout
wait_job() {
    local t0=$SECONDS out
    while [ $((SECONDS - t0)) -lt "$TIMEOUT" ]; do
        out=$(squeue -h -r -j "$1" -o %i 2>/dev/null) && [ -z "$out" ] && return 0
        sleep 1
    done
    return 1
}
# task_states JOBID: "TASKID STATE" per array task, sorted
task_states() { squeue -h -r -j "$1" -t all -o '%K %T' 2>/dev/null | sort -n; }
# all_completed JOBID IDS...: every listed task ended COMPLETED (exit status 0)
all_completed() {
    local jid=$1 want got
    shift
    want=$(for i in "$@"; do echo "$i COMPLETED"; done)
    got=$(task_states "$jid")
    [ "$got" = "$want" ] || { echo "task states: $got"; return 1; }
}
# submit NAME SBATCH-ARGS...: submits, records the job id in $JID, one TAP line
submit() {
    local name=$1 out
    shift
    if out=$(sbatch --parsable "$@" 2>&1); then
        JID=${out%%;*}
        JOBS+=("$JID")
        ok "sbatch $name: job $JID"
    else
        printf '%s\n' "$out" | note
        bail "sbatch $name"
    fi
}

# --- 4. a trivial array, to tell the cluster's faults from mvembed's ---------------------------
submit "hello array (--array=0-2)" --array=0-2 --chdir="$D/jobs" \
    --output="$D/jobs/hello-%a.out" \
    --wrap 'echo "task $SLURM_ARRAY_TASK_ID min $SLURM_ARRAY_TASK_MIN count $SLURM_ARRAY_TASK_COUNT"'
wait_job "$JID" || bail "hello array finished within ${TIMEOUT}s ($(task_states "$JID"))"
check "hello array: 3 tasks COMPLETED" all_completed "$JID" 0 1 2
hello_ok() {
    local i
    for i in 0 1 2; do
        grep -qx "task $i min 0 count 3" "$D/jobs/hello-$i.out" ||
            { echo "hello-$i.out: $(cat "$D/jobs/hello-$i.out" 2>&1)"; return 1; }
    done
}
check "hello array: each task saw its SLURM_ARRAY_TASK_ID/MIN/COUNT" hello_ok

# --- 5. mvembed as a 3-task array --------------------------------------------------------------
# --array=1-3, not 0-2: mvembed must subtract SLURM_ARRAY_TASK_MIN (task 1 is shard 0).
OUT=$D/sharded
REF=$D/single
EMBED_ARGS=(--model "$MODEL" --out "$OUT" --device cpu "${INPUTS[@]}")
# submit_embed NUMBER [merge]: the array; with "merge", also the merge as a job that depends on
# it (afterany), as docs/scale-out.md shows
submit_embed() {
    local ajid mjid
    submit "mvembed array $1 (--array=1-$NTASKS)" --array=1-$NTASKS --chdir="$ROOT" \
        --output="$D/jobs/embed$1-%a.out" --export=ALL,MVEMBED="$MVEMBED" \
        scripts/embed-array.sbatch "${EMBED_ARGS[@]}"
    ajid=$JID
    if [ "${2:-}" = merge ]; then
        submit "merge job after array $1 (--dependency=afterany:$ajid)" \
            --dependency=afterany:"$ajid" --chdir="$ROOT" --output="$D/jobs/merge$1.out" \
            --wrap "'$MVEMBED' manifest merge '$OUT'"
        mjid=$JID
    fi
    wait_job "$ajid" || bail "mvembed array $1 finished within ${TIMEOUT}s ($(task_states "$ajid"))"
    check "mvembed array $1: $NTASKS tasks COMPLETED (exit status 0)" \
        all_completed "$ajid" $(seq 1 $NTASKS)
    if [ -n "${mjid:-}" ]; then
        wait_job "$mjid" || bail "merge job finished within ${TIMEOUT}s ($(task_states "$mjid"))"
        check "merge job ran after the array: COMPLETED, wrote $(wc -l <"$D/inputs.txt") lines" \
            merge_job_ok "$mjid" "$D/jobs/merge$1.out" "$ajid"
    fi
}
# merge_job_ok MERGEJOB LOG ARRAYJOB: the merge job completed, started no earlier than the last
# array task ended, and reported every input
merge_job_ok() {
    local st start lastend
    st=$(squeue -h -j "$1" -t all -o %T)
    start=$(squeue -h -j "$1" -t all -o %S)
    lastend=$(squeue -h -r -j "$3" -t all -o %e | sort | tail -n 1)
    cat "$2"
    echo "merge job $st, started $start; last array task ended $lastend"
    [ "$st" = COMPLETED ] && [[ ! "$start" < "$lastend" ]] &&
        grep -q ": $(wc -l <"$D/inputs.txt") lines" "$2"
}
submit_embed 1
shard_msgs() {
    local i k f rc=0
    for i in $(seq 1 $NTASKS); do
        k=$((i - 1)) f=$D/jobs/embed$1-$i.out
        grep -qF "mvembed: shard $k/$NTASKS from SLURM_ARRAY_TASK_ID" "$f" ||
            { echo "task $i: no 'shard $k/$NTASKS' line in:"; cat "$f"; rc=1; }
    done
    return $rc
}
check "each task announced shard (ID-MIN)/$NTASKS on stderr" shard_msgs 1
shard_files() {
    local want got
    want=$(for k in $(seq 0 $((NTASKS - 1))); do
        printf 'manifest-%05d-of-%05d.jsonl\n' "$k" "$NTASKS"; done)
    got=$(cd "$OUT" && ls manifest*.jsonl 2>/dev/null)
    [ "$got" = "$want" ] || { echo "want:"; echo "$want"; echo "got:"; echo "$got"; return 1; }
}
check "OUT holds exactly the $NTASKS shard manifests (no manifest.jsonl)" shard_files

# Every input file, as mvembed names it in the manifest (the path as found under its argument).
find "${INPUTS[@]}" -type f | sort >"$D/inputs.txt"
echo "# $(wc -l <"$D/inputs.txt") inputs"
shards_cover() {
    $PY - "$OUT" "$NTASKS" "$D/inputs.txt" <<'EOF'
import json, sys, collections
out, n, inputs = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read().split("\n")[:-1]
seen = collections.Counter()
bad = 0
for k in range(n):
    path = "%s/manifest-%05d-of-%05d.jsonl" % (out, k, n)
    rows = [json.loads(l) for l in open(path)]
    names = {r["input"] for r in rows}
    if not names:
        print("shard %d/%d is empty" % (k, n)); bad = 1
    for r in rows:
        if r.get("status") != "ok":
            print("%s: %s status %s" % (path, r["input"], r.get("status"))); bad = 1
    seen.update(names)          # an input in two shards counts twice
    print("shard %d/%d: %d inputs" % (k, n, len(names)))
for p in inputs:
    if seen[p] != 1:
        print("%s is in %d shards" % (p, seen[p])); bad = 1
for p in sorted(set(seen) - set(inputs)):
    print("%s: not an input" % p); bad = 1
sys.exit(bad)
EOF
}
check "the shard manifests partition the inputs: each input in exactly one shard, status ok" \
    shards_cover

# --- 6. merge ----------------------------------------------------------------------------------
# merge_check LABEL: `mvembed manifest merge OUT`, then every input once, status ok, output there
merge_check() {
    local out rc
    out=$("$MVEMBED" manifest merge "$OUT" 2>&1); rc=$?
    printf '%s\n' "$out" | note
    [ $rc -eq 0 ] || { notok "$1: mvembed manifest merge exits 0 (got $rc)"; return; }
    if printf '%s\n' "$out" | grep -qw "$(wc -l <"$D/inputs.txt")"; then
        ok "$1: mvembed manifest merge reports $(wc -l <"$D/inputs.txt") lines"
    else
        notok "$1: mvembed manifest merge reports $(wc -l <"$D/inputs.txt") lines"
    fi
    check "$1: merged manifest.jsonl lists every input exactly once, status ok, output present" \
        $PY - "$OUT" "$D/inputs.txt" <<'EOF'
import json, os, sys, collections
out, inputs = sys.argv[1], open(sys.argv[2]).read().split("\n")[:-1]
rows = [json.loads(l) for l in open(os.path.join(out, "manifest.jsonl"))]
count = collections.Counter(r["input"] for r in rows)
bad = 0
for p in inputs:
    if count[p] != 1:
        print("%s: %d lines" % (p, count[p])); bad = 1
for p in sorted(set(count) - set(inputs)):
    print("%s: not an input" % p); bad = 1
for r in rows:
    if r.get("status") != "ok":
        print("%s: status %s (%s)" % (r["input"], r.get("status"), r.get("error"))); bad = 1
    elif not os.path.isfile(os.path.join(out, r.get("output", ""))):
        print("%s: output %s missing" % (r["input"], r.get("output"))); bad = 1
print("%d lines, %d distinct inputs" % (len(rows), len(count)))
sys.exit(bad)
EOF
}
merge_check "after array 1"

# --- 7. byte-identical to one process ----------------------------------------------------------
# The same thread count as the tasks (1 CPU each): OpenBLAS's results depend on its thread count.
check "single-process reference run exits 0" \
    "$MVEMBED" -q --threads 1 --model "$MODEL" --out "$REF" --device cpu "${INPUTS[@]}"
same_outputs() {
    local a b f rc=0 k=0
    a=$(cd "$REF" && find . -name '*.npy.zst' | sort)
    b=$(cd "$OUT" && find . -name '*.npy.zst' | sort)
    [ "$a" = "$b" ] || { echo "output file lists differ:"; diff <(echo "$a") <(echo "$b"); return 1; }
    [ -n "$a" ] || { echo "no outputs"; return 1; }
    while read -r f; do
        cmp "$REF/$f" "$OUT/$f" || rc=1
        k=$((k + 1))
    done <<<"$a"
    echo "$k files compared"
    return $rc
}
check "sharded outputs equal the single-process outputs byte for byte (cmp)" same_outputs

# --- 8. resume -----------------------------------------------------------------------------------
# Lose two outputs (as a killed task would never have written them; the merged manifest still
# lists them as ok, which resume must not trust without the file), resubmit the same array:
# the tasks redo exactly those two and skip the rest.
LOST=(png_rgb_320x256.png.npy.zst h264_3frames.mp4.npy.zst)
(cd "$OUT" 2>/dev/null && find . -name '*.npy.zst' -exec stat -c '%n %y' {} + | sort) >"$D/mtimes.before"
for f in "${LOST[@]}"; do rm -f "$OUT/$f"; done
submit_embed 2 merge
check "array 2: tasks again announce shard (ID-MIN)/$NTASKS" shard_msgs 2
resume_counts() {
    $PY - "$NTASKS" "${#LOST[@]}" "$(wc -l <"$D/inputs.txt")" "$D"/jobs/embed2-*.out <<'EOF'
import re, sys
n, lost, total = map(int, sys.argv[1:4])
ok = skipped = failed = 0
for path in sys.argv[4:]:
    m = re.findall(r"mvembed: (\d+) ok, (\d+) failed, (\d+) skipped", open(path).read())
    if not m:
        print("%s: no summary line" % path); sys.exit(1)
    o, f, s = map(int, m[-1]); ok += o; failed += f; skipped += s
print("array 2: %d ok, %d failed, %d skipped" % (ok, failed, skipped))
sys.exit(0 if (ok, failed, skipped) == (lost, 0, total - lost) else 1)
EOF
}
check "array 2 redid the ${#LOST[@]} lost outputs and skipped the other inputs" resume_counts
untouched() {
    local rc=0
    (cd "$OUT" && find . -name '*.npy.zst' -exec stat -c '%n %y' {} + | sort) >"$D/mtimes.after"
    for f in "${LOST[@]}"; do
        [ -f "$OUT/$f" ] || { echo "$f not rewritten"; rc=1; }
        sed -i "\|^\./$f |d" "$D/mtimes.before" "$D/mtimes.after"
    done
    diff "$D/mtimes.before" "$D/mtimes.after" || rc=1
    return $rc
}
check "array 2 rewrote only the lost outputs (other files keep their mtime)" untouched
merge_check "after array 2"
check "after array 2: outputs still equal the single-process outputs byte for byte" same_outputs

# --- 9. rerun one task alone -------------------------------------------------------------------
# A subset array (--array=2) with MVEMBED_SHARDS=3: the script passes --shard 2/3, so the one task
# redoes shard 2's lost outputs (a bare --array=2 would make it a 1-task array).
SHARD2=$OUT/manifest-00002-of-00003.jsonl
mapfile -t LOST2 < <($PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n".join(sorted({r["output"] for r in rows})[:2]))' "$SHARD2" 2>/dev/null)
SHARD2_N=$($PY -c 'import json,sys; print(len({json.loads(l)["input"] for l in open(sys.argv[1])}))' \
    "$SHARD2" 2>/dev/null)
for f in "${LOST2[@]}"; do rm -f "$OUT/$f"; done
submit "rerun of task 2 alone (--array=2, MVEMBED_SHARDS=3)" --array=2 --chdir="$ROOT" \
    --output="$D/jobs/embed3-%a.out" --export=ALL,MVEMBED="$MVEMBED",MVEMBED_SHARDS=3 \
    scripts/embed-array.sbatch "${EMBED_ARGS[@]}"
wait_job "$JID" || bail "rerun of task 2 finished within ${TIMEOUT}s ($(task_states "$JID"))"
check "rerun of task 2: COMPLETED (exit status 0)" all_completed "$JID" 2
rerun_counts() {
    local want="mvembed: ${#LOST2[@]} ok, 0 failed, $((SHARD2_N - ${#LOST2[@]})) skipped"
    cat "$D/jobs/embed3-2.out"
    [ "${#LOST2[@]}" -gt 0 ] && grep -qF "$want" "$D/jobs/embed3-2.out" ||
        { echo "want: $want"; return 1; }
}
check "rerun of task 2 redid its ${#LOST2[@]} lost outputs and skipped the rest of shard 2" \
    rerun_counts
merge_check "after the rerun of task 2"
check "after the rerun of task 2: outputs equal the single-process outputs byte for byte" \
    same_outputs

finish
