#!/usr/bin/env bash
# device-dataset.sh - the dataset-scale benchmark (bench/RESULTS.md, "End to end on datasets"), on
# the GPU machine after scripts/device-bundle.sh here, `.device` in the device tool's carry, in one
# call so that every number comes from the same machine state:
#   1. inputs: DS_SMALL (6000) JPEGs of ~512x384 (make_photos.py --size 512x384 --seed 1) and
#      DS_PHOTOS (800) of ~1600x1200 (--seed 0), and a random 27B-layout tower
#   2. the tower alone on those sizes (bench_tower.py bench --attention auto --iters 3: HF sdpa
#      bf16 beside ours; the f32 one-forward-at-a-time column is the reference rate; DS_TOWER_CLI=1:
#      also as the CLI drives it, "auto+cli": uint8 frames in, two forwards in flight)
#   3. mvembed -v end to end on each set, the files layout and --layout tar (DS_LAYOUTS), default
#      settings otherwise; output bytes and the -v timeline (GPU executing, CPU by stage)
#   4. HF's plain pipeline ANCHOR (a script given by path: hf_strong_e2e.py's interface, --files
#      LIST --limit N --batch B --out DIR) on the first DS_HF_SMALL (2000) small images (batch 64)
#      and DS_HF_PHOTOS (400) photos (batch 8); ANCHOR unset or missing: skipped, said so
#   5. the files layout with each --out-dtype of DS_DTYPES (default "f32 bf16"; the default auto is
#      step 3's): output bytes, rate and the writers' CPU of each choice
#   6. the tower as the CLI drives it (mvtower bench --input u8 --inflight 2) on the first 64 small
#      images' own grids (an mvembed --pool mean run's manifest, bench_tower.py grids): every
#      forward the same (--vary 1) and changing patch counts (--vary 16, as the CLI's packed
#      forwards; with --gemm-bucket 4096: the GEMMs' algorithms chosen for rounded row counts,
#      test/cuda/variants), the GEMM plans' answers over those counts (--gemm-list); then
#      mvembed -v on a set of exactly 512x384 (make_photos.py --exact, the same crops): what the
#      data set's mixed sizes cost end to end
#   7. timelines (CUPTI: .device/lib/libcuptitrace.so from test/cuda/cuptitrace.c, LD_PRELOAD;
#      scripts/timeline.py): mvembed -v on the first DS_TL (2000) small images and mvtower as the
#      CLI drives it (42 x 512x384, the CLI's forward, u8, two in flight), also with its frames
#      resized on the device from 5 % larger sources (--src-scale 1.05, as the CLI's decoded
#      images): the GPU's union busy time and in-situ kernel time per 1000 patches, the gaps,
#      streams and copies of each, the CLI's longest gaps with the host calls beside them (its
#      trace kept as ds-tl-cli.tr.xz); then the two mvtower runs untraced, alternating, twice
#   8. what a run costs besides its forwards: mvembed -v on one small image, twice (the second
#      with the model in the page cache): wall time and the -v lines of the start (model load,
#      each backend, its weights) and the end (backends closed); then the first DS_XA (2000) small
#      images as one run and as `xargs -n DS_XA_N` (250) runs into one OUT, the README's pattern:
#      wall time of each, the last xargs run's -v start lines (the manifest it reads back); then
#      a run of DS_XA_N images into an OUT whose manifest holds DS_MANIFEST (300000) lines (the
#      xargs OUT's, under other input names): the manifest's read time (-v)
# Logs: $OUT/dataset.log (summary) and $OUT/ds-*.log. DS_STEPS selects steps (default "1 2 3 4 5";
# 6, 7 and 8 when named), DS_SETS the input sets of steps 1-5 (default "small photos").
set -u
cd "$(dirname "$0")/.."
source scripts/device-env.sh
MV=${DS_MV:-$BIN/mvembed} # DS_MV: another build's CLI (the steps' inputs and models are shared)
W=/tmp/ds
mkdir -p $W
L=$OUT/dataset.log
: >"$L"
log() { echo "$*" | tee -a "$L"; }
steps=${DS_STEPS:-1 2 3 4 5}
want() { [[ " $steps " == *" $1 "* ]]; }
SETS=${DS_SETS:-small photos}
sets() { [[ " $SETS " == *" $1 "* ]]; }
TSIZES=$(for s in $SETS; do case $s in small) echo 64x512x384 ;; photos) echo 16x1600x1200 ;; esac; done | paste -sd,)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$L"
log "cpus: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

if want 1; then
    [ -f $W/m27/config.json ] || timeout 120 python3 scripts/hf_reference.py make-model --config 27b --seed 0 \
        --out $W/m27 2>&1 | tail -1 | tee -a "$L"
    # a set left by an earlier call on this machine is made again unless it has the count asked for
    sets small && { [ "$(find $W/small -name '*.jpg' 2>/dev/null | wc -l)" = "${DS_SMALL:-6000}" ] || {
        rm -rf $W/small; timeout 200 python3 scripts/make_photos.py --src fixtures/media/images --out $W/small \
            --size 512x384 --count "${DS_SMALL:-6000}" --seed 1 2>&1 | tail -1 | tee -a "$L"; }; }
    sets photos && { [ "$(find $W/photos -name '*.jpg' 2>/dev/null | wc -l)" = "${DS_PHOTOS:-800}" ] || {
        rm -rf $W/photos; timeout 200 python3 scripts/make_photos.py --src fixtures/media/images --out $W/photos \
            --count "${DS_PHOTOS:-800}" --seed 0 2>&1 | tail -1 | tee -a "$L"; }; }
    for s in $SETS; do
        find $W/$s -name '*.jpg' | sort >$W/$s.txt
        log "inputs $s: $(wc -l <$W/$s.txt) files, $(du -sh $W/$s | cut -f1)"
    done
fi

if want 2; then
    log "== tower alone (bench_tower.py bench --attention auto --iters 3)"
    timeout 300 python3 scripts/bench_tower.py bench --model $W/m27 --mvtower $BIN/mvtower --iters 3 \
        --attention auto --sizes "$TSIZES" ${DS_TOWER_CLI:+--cli} >$OUT/ds-tower.log 2>&1
    grep -vE '^\s*$' $OUT/ds-tower.log | tail -12 | tee -a "$L"
fi

# rate_line LABEL: mvtower bench's JSON line (stdin) as "LABEL: patches/s (img/s), TFLOP/s", logged
rate_line() {
    python3 -c "import json, sys; d = json.loads(sys.stdin.read()); print('%s: %.0f patches/s (%.1f img/s), %.1f TFLOP/s' % (sys.argv[1], d['tokens_per_s'], d['tokens_per_s'] * d['entries'] / d['tokens'], d['tflops']))" "$1" 2>&1 |
        tee -a "$L"
}

# mv_run SET NAME ARGS...: mvembed -v ARGS on the set into a fresh OUT, logged as ds-mv-SET-NAME.log:
# exit status, output bytes and files, the dtypes its manifest says, the -v summary
mv_run() {
    local s=$1 name=$2 O=$W/out-$1-$2
    shift 2
    rm -rf $O
    sync
    log "== mvembed $s $*"
    /usr/bin/time -v timeout 300 $MV -v --no-progress "$@" --model $W/m27 --out $O $W/$s >$OUT/ds-mv-$s-$name.log 2>&1
    log "exit $?; output $(du -sb $O | cut -f1) bytes in $(find $O -type f | wc -l) files"
    log "dtypes: $(grep -ho '"dtype": *"[a-z0-9]*"' $O/manifest*.jsonl | sort | uniq -c | tr -s ' \n' ' ')"
    grep -E "ok, .* failed|end to end|executing|timeline|decode|preprocess|write|Maximum resident|Elapsed" \
        $OUT/ds-mv-$s-$name.log | cut -c1-400 | tee -a "$L"
    rm -rf $O
}

if want 3; then
    for s in $SETS; do
        for lay in ${DS_LAYOUTS:-files tar}; do mv_run $s $lay --layout $lay; done
    done
fi

if want 5; then
    for s in $SETS; do
        for dt in ${DS_DTYPES:-f32 bf16}; do mv_run $s $dt --out-dtype $dt; done
    done
fi

if want 4; then
    if [ -n "${ANCHOR:-}" ] && [ -f "$ANCHOR" ]; then
        log "== HF anchor $(basename "$ANCHOR")"
        rm -rf $W/hf-small $W/hf-photos
        sets small && timeout 240 python3 "$ANCHOR" --model $W/m27 --files $W/small.txt \
            --limit "${DS_HF_SMALL:-2000}" --batch 64 --out $W/hf-small 2>&1 | grep -v -i warn | tail -2 |
            sed 's/^/small: /' | tee -a "$L"
        sets photos && timeout 240 python3 "$ANCHOR" --model $W/m27 --files $W/photos.txt \
            --limit "${DS_HF_PHOTOS:-400}" --batch 8 --out $W/hf-photos 2>&1 | grep -v -i warn | tail -2 |
            sed 's/^/photos: /' | tee -a "$L"
        rm -rf $W/hf-small $W/hf-photos
    else
        log "== HF anchor: skipped (ANCHOR=${ANCHOR:-unset} is not a file)"
    fi
fi

if want 6; then
    log "== the tower as the CLI drives it, on the small set's own sizes (mvtower bench --input u8 --inflight 2)"
    rm -rf $W/g
    head -64 $W/small.txt | timeout 120 $MV --no-progress --pool mean --model $W/m27 --out $W/g - >$OUT/ds-grids.log 2>&1
    timeout 60 python3 scripts/bench_tower.py grids --manifest $W/g/manifest.jsonl --count 64 --out $W/mixed 2>&1 |
        tee -a "$L"
    for v in "1" "16" "16 --gemm-bucket 4096" "1" "16" "16 --gemm-bucket 4096"; do
        timeout 90 $BIN/mvtower bench --model $W/m27 --pixels $W/mixed.npy --grid "$(cat $W/mixed.grid)" --iters 40 \
            --warmup 2 --attention auto --input u8 --inflight 2 --vary $v 2>/dev/null | tail -1 | rate_line "--vary $v"
    done
    timeout 60 $BIN/mvtower bench --model $W/m27 --pixels $W/mixed.npy --grid "$(cat $W/mixed.grid)" --iters 16 \
        --warmup 0 --attention auto --input u8 --vary 16 --gemm-list 2>&1 >/dev/null | grep "(used)" |
        sort -k6,6n -k8,8n -k4,4n >$OUT/ds-gemm-answers.log
    log "cuBLASLt's answers used by $(wc -l <$OUT/ds-gemm-answers.log) GEMM plans (16 row counts):" \
        "$(awk '{print $6 "->" $8 ": algo " $18 " tile " $20 " splitk " $22}' $OUT/ds-gemm-answers.log | sort | uniq -c | tr -s ' \n' ' ')"
    [ -d $W/exact ] || timeout 200 python3 scripts/make_photos.py --src fixtures/media/images --out $W/exact \
        --size 512x384 --count "${DS_SMALL:-6000}" --seed 1 --exact 2>&1 | tail -1 | tee -a "$L"
    mv_run exact files
    mv_run small files
fi

if want 7; then
    log "== timelines (CUPTI): mvembed on the first ${DS_TL:-2000} small images, mvtower as the CLI drives it"
    TR=/tmp/mv/lib/libcuptitrace.so
    if [ ! -f $TR ]; then
        log "skipped: no $TR (scripts/device-bundle.sh found no CUPTI)"
    else
        head -"${DS_TL:-2000}" $W/small.txt >$W/tl.txt
        rm -rf $W/tl
        timeout 120 env CUPTITRACE_OUT=$W/cli.tr LD_PRELOAD=$TR $MV -v --no-progress --model $W/m27 --out $W/tl - \
            <$W/tl.txt >$OUT/ds-tl-cli.log 2>&1
        log "exit $?; $(grep -hE 'end to end|GPU executing' $OUT/ds-tl-cli.log | cut -c1-200 | tr '\n' ' ')"
        P=$(python3 -c "import json, sys
print(sum(g[0] * g[1] * g[2] for g in (json.loads(l).get('grid_thw') for l in open(sys.argv[1])) if g))" \
            $W/tl/manifest.jsonl)
        python3 scripts/timeline.py $W/cli.tr --patches "$P" --gaps 12 --label "mvembed, $(wc -l <$W/tl.txt) small images" |
            tee -a "$L"
        xz -T4 -c $W/cli.tr >$OUT/ds-tl-cli.tr.xz
        G=$(python3 -c "print(';'.join(['1,24,32'] * 42))")
        python3 scripts/bench_tower.py pixels --grid "$G" --out $W/p42.npy >/dev/null
        # [TRACE=FILE] tow LABEL [ARGS]: mvtower as the CLI drives it on 42 x 512x384, 32 forwards a
        # thread; with TRACE, recorded there (the preload in mvtower alone, not in the pipe after it)
        tow() {
            local label=$1 pre=()
            shift
            [ -n "${TRACE:-}" ] && pre=(env CUPTITRACE_OUT="$TRACE" LD_PRELOAD=$TR)
            timeout 90 "${pre[@]}" $BIN/mvtower bench --model $W/m27 --pixels $W/p42.npy --grid "$G" --iters 30 \
                --warmup 2 --attention auto --input u8 --inflight 2 "$@" 2>/dev/null | tail -1 | rate_line "$label"
        }
        for sc in 0 1.05; do
            TRACE=$W/tow.tr tow "mvtower --src-scale $sc, traced" --src-scale $sc
            python3 scripts/timeline.py $W/tow.tr --patches $((2 * 32 * 42 * 768)) \
                --label "mvtower, 42 x 512x384, u8, two in flight, --src-scale $sc (64 forwards)" | tee -a "$L"
        done
        for i in 1 2; do
            for sc in 0 1.05; do tow "mvtower --src-scale $sc" --src-scale $sc; done
        done
        rm -rf $W/tl $W/*.tr
    fi
fi

if want 8; then
    log "== what a run costs besides its forwards"
    secs() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }
    # start_lines LOG: the -v lines of the start and the end, on one line
    start_lines() {
        grep -hE 'model .*fingerprint|backend [0-9]+ made|weights:|manifest.*lines|backends closed|wall ' "$1" |
            sed 's/^mvembed: //' | cut -c1-160 | tr '\n' ';'
    }
    head -1 $W/small.txt >$W/one.txt
    for i in 1 2; do
        rm -rf $W/o1
        timeout 120 /usr/bin/time -f "wall %e s, max RSS %M KB" $MV -v --no-progress --model $W/m27 --out $W/o1 - \
            <$W/one.txt >$OUT/ds-start-$i.log 2>&1
        log "one image, run $i: exit $?; $(start_lines $OUT/ds-start-$i.log)"
    done
    head -"${DS_XA:-2000}" $W/small.txt >$W/xa.txt
    rm -rf $W/xa1 $W/xa2 $W/o1
    t0=$(date +%s.%N)
    timeout 120 $MV -q --no-progress --model $W/m27 --out $W/xa1 - <$W/xa.txt
    rc=$?
    log "$(wc -l <$W/xa.txt) small images, one run: exit $rc, $(secs $t0 $(date +%s.%N)) s"
    t0=$(date +%s.%N)
    timeout 300 xargs -d '\n' -n "${DS_XA_N:-250}" $MV -q --no-progress --model $W/m27 --out $W/xa2 <$W/xa.txt
    rc=$?
    log "the same, xargs -n ${DS_XA_N:-250}: exit $rc, $(secs $t0 $(date +%s.%N)) s;" \
        "$(cat $W/xa2/manifest.jsonl | wc -l) manifest lines"
    head -"${DS_XA_N:-250}" $W/xa.txt | timeout 120 /usr/bin/time -f "wall %e s, max RSS %M KB" $MV -v --no-progress \
        --force --model $W/m27 --out $W/xa2 - >$OUT/ds-start-xa.log 2>&1
    log "one more xargs-sized run into that OUT (--force): exit $?; $(start_lines $OUT/ds-start-xa.log)"
    rm -rf $W/xa3
    mkdir -p $W/xa3
    python3 - "$W/xa2/manifest.jsonl" "$W/xa3/manifest.jsonl" "${DS_MANIFEST:-300000}" <<'PY'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[3])):
        d = dict(src[i % len(src)])
        d["input"] = "/elsewhere/%d/%s" % (i // len(src), d["input"])
        d["output"] = "elsewhere/%d/%s" % (i // len(src), d["output"])
        f.write(json.dumps(d) + "\n")
PY
    head -"${DS_XA_N:-250}" $W/xa.txt | timeout 120 /usr/bin/time -f "wall %e s, max RSS %M KB" $MV -v --no-progress \
        --model $W/m27 --out $W/xa3 - >$OUT/ds-start-manifest.log 2>&1
    log "a run into an OUT of ${DS_MANIFEST:-300000} manifest lines: exit $?; $(start_lines $OUT/ds-start-manifest.log)"
    rm -rf $W/xa1 $W/xa2 $W/xa3
fi
