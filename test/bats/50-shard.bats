#!/usr/bin/env bats
# Scale-out on one machine: --shard K/N, the Slurm array environment, per-shard manifests and
# `mvembed manifest merge`. (test/slurm/ runs the same against a real one-node Slurm cluster.)
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
    IN="$ROOT/fixtures/media"
    mvembed -q --device cpu --model "$MODEL" --out "$T/single" "$IN"
}

same_outputs() { # DIR_A DIR_B: every .npy.zst of A is in B with the same bytes
    (cd "$1" && find . -name '*.npy.zst' | sort) > "$T/la"
    (cd "$2" && find . -name '*.npy.zst' | sort) > "$T/lb"
    diff "$T/la" "$T/lb"
    while read -r f; do cmp "$1/$f" "$2/$f"; done < "$T/la"
}

@test "--shard K/N: the shards cover every input exactly once, outputs equal a single run" {
    for k in 0 1 2; do
        run mvembed -q --device cpu --model "$MODEL" --out "$T/sh" --shard "$k/3" "$IN"
        [ "$status" -eq 0 ]
        [ -f "$T/sh/manifest-0000$k-of-00003.jsonl" ]
        [ "$(wc -l < "$T/sh/manifest-0000$k-of-00003.jsonl")" -lt "$(wc -l < "$T/single/manifest.jsonl")" ]
    done
    [ ! -e "$T/sh/manifest.jsonl" ]
    same_outputs "$T/single" "$T/sh"
    run mvembed manifest merge "$T/sh"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "merged 3 manifest files" ]]
    run "$PY" -c '
import json, sys
a = sorted(json.loads(l)["input"] for l in open(sys.argv[1]))
b = sorted(json.loads(l)["input"] for l in open(sys.argv[2]))
assert a == b and len(set(a)) == len(a), (len(a), len(b))
assert all(json.loads(l)["status"] == "ok" for l in open(sys.argv[2]))
print("ok", len(a))' "$T/single/manifest.jsonl" "$T/sh/manifest.jsonl"
    [[ "$output" =~ ^ok ]]
}

@test "the Slurm array environment selects the shard and says so; resume is per shard" {
    SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=2 \
        run mvembed --device cpu --model "$MODEL" --out "$T/sl" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 1/2 from SLURM_ARRAY_TASK_ID" ]]
    [ -f "$T/sl/manifest-00001-of-00002.jsonl" ]
    SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=2 \
        run mvembed --device cpu --model "$MODEL" --out "$T/sl" "$IN"
    [[ "$output" =~ " 0 ok, 0 failed, " ]]
    SLURM_ARRAY_TASK_ID=9 SLURM_ARRAY_TASK_COUNT=2 run mvembed --device cpu --model "$MODEL" --out "$T/sl" "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "cannot derive a shard from SLURM_ARRAY_TASK_ID=9" ]]
    # --array=3,7 (a list): COUNT=2 but MAX-MIN says 5 slots; refused rather than mis-sharded
    SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=3 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=2 \
        run mvembed --device cpu --model "$MODEL" --out "$T/sl" "$IN"
    [ "$status" -eq 1 ]
    # --array=0-6:2: task 4 is shard 2 of 4
    SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_STEP=2 \
        SLURM_ARRAY_TASK_COUNT=4 run mvembed --device cpu --model "$MODEL" --out "$T/st" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 2/4 from SLURM_ARRAY_TASK_ID" ]]
}

@test "merge keeps the latest line of an input and needs shard manifests" {
    run mvembed manifest merge "$T/single"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "no manifest-*-of-*.jsonl files to merge" ]]
    mkdir -p "$T/m"
    printf '{"input":"a","status":"error","error":"x"}\n{"input":"b","status":"ok"}\n' > "$T/m/manifest-00000-of-00002.jsonl"
    printf '{"input":"a","status":"ok"}\n{"torn' > "$T/m/manifest-00001-of-00002.jsonl"
    run mvembed manifest merge "$T/m"
    [ "$status" -eq 0 ]
    [ "$(cat "$T/m/manifest.jsonl")" = '{"input":"a","status":"ok"}
{"input":"b","status":"ok"}' ]
}

@test "--shard K/100000, then manifest merge: shard manifests past 99999 are found" {
    cd "$IN"
    img=$(ls images/*.jpg | head -n 1)
    # its shard by the man page's rule (--shard): FNV-1a 64 of the output name, mod N
    k=$("$PY" -c '
import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) % 2**64
print(h % 100000)' "$img")
    run mvembed -q --device cpu --model "$MODEL" --out "$T/big" --shard "$k/100000" "$img"
    [ "$status" -eq 0 ]
    m=$(printf 'manifest-%05d-of-100000.jsonl' "$k")
    [ "$(wc -l < "$T/big/$m")" -eq 1 ]
    grep -q '"status":"ok"' "$T/big/$m"
    run mvembed manifest merge "$T/big"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "merged 1 manifest files" ]]
    cmp "$T/big/$m" "$T/big/manifest.jsonl"
}

@test "decode threads do not change the results: --jobs 1 equals the default" {
    mvembed -q --device cpu --model "$MODEL" --out "$T/j1" --jobs 1 "$IN"
    same_outputs "$T/single" "$T/j1"
}

@test "an AWS Batch array job takes its shard from AWS_BATCH_JOB_ARRAY_INDEX/SIZE and says so" {
    AWS_BATCH_JOB_ARRAY_INDEX=2 AWS_BATCH_JOB_ARRAY_SIZE=3 \
        run mvembed --device cpu --model "$MODEL" --out "$T/aws" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 2/3 from AWS_BATCH_JOB_ARRAY_INDEX=2" ]]
    [ -f "$T/aws/manifest-00002-of-00003.jsonl" ]
    [ ! -e "$T/aws/manifest.jsonl" ]
    # the same inputs as the explicit --shard 2/3, whose share the first test proves
    run mvembed -q --device cpu --model "$MODEL" --out "$T/ex" --shard 2/3 "$IN"
    [ "$status" -eq 0 ]
    same_outputs "$T/ex" "$T/aws"
    # an index without a size, or past it, is refused, naming the variables
    AWS_BATCH_JOB_ARRAY_INDEX=1 run mvembed --device cpu --model "$MODEL" --out "$T/aws2" "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "AWS_BATCH_JOB_ARRAY_INDEX=1, AWS_BATCH_JOB_ARRAY_SIZE=(unset)" ]]
    AWS_BATCH_JOB_ARRAY_INDEX=3 AWS_BATCH_JOB_ARRAY_SIZE=3 run mvembed --device cpu --model "$MODEL" --out "$T/aws2" "$IN"
    [ "$status" -eq 1 ]
    [ ! -e "$T/aws2/manifest.jsonl" ]
}

@test "a Kubernetes Indexed Job: --shard auto/N takes K from JOB_COMPLETION_INDEX; without N refused" {
    JOB_COMPLETION_INDEX=1 run mvembed --device cpu --model "$MODEL" --out "$T/k8" --shard auto/3 "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 1/3 from JOB_COMPLETION_INDEX=1" ]]
    run mvembed -q --device cpu --model "$MODEL" --out "$T/ex" --shard 1/3 "$IN"
    same_outputs "$T/ex" "$T/k8"
    [ -f "$T/k8/manifest-00001-of-00003.jsonl" ]
    # the pod knows its index, not the count: a run without auto/N would embed everything in
    # every pod, so it is refused and says what to give
    JOB_COMPLETION_INDEX=1 run mvembed --device cpu --model "$MODEL" --out "$T/k8b" "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "give --shard auto/N" ]]
    [ ! -e "$T/k8b/manifest.jsonl" ]
    JOB_COMPLETION_INDEX=3 run mvembed --device cpu --model "$MODEL" --out "$T/k8b" --shard auto/3 "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "JOB_COMPLETION_INDEX=3 is not below 3" ]]
    run mvembed --device cpu --model "$MODEL" --out "$T/k8b" --shard auto/3 "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "no array index in the environment" ]]
}

@test "shard precedence: --shard K/N and none, then Slurm, then Kubernetes, then AWS Batch" {
    # an explicit --shard wins over every scheduler
    SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2 JOB_COMPLETION_INDEX=0 AWS_BATCH_JOB_ARRAY_INDEX=0 \
        AWS_BATCH_JOB_ARRAY_SIZE=2 run mvembed --device cpu --model "$MODEL" --out "$T/p1" --shard none "$IN"
    [ "$status" -eq 0 ]
    [ -f "$T/p1/manifest.jsonl" ]
    [[ ! "$output" =~ "mvembed: shard" ]]
    # Slurm before Kubernetes and AWS
    SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 JOB_COMPLETION_INDEX=0 AWS_BATCH_JOB_ARRAY_INDEX=0 \
        AWS_BATCH_JOB_ARRAY_SIZE=2 run mvembed --device cpu --model "$MODEL" --out "$T/p2" "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 1/2 from SLURM_ARRAY_TASK_ID=1" ]]
    # Kubernetes before AWS under auto/N
    JOB_COMPLETION_INDEX=0 AWS_BATCH_JOB_ARRAY_INDEX=1 AWS_BATCH_JOB_ARRAY_SIZE=2 \
        run mvembed --device cpu --model "$MODEL" --out "$T/p3" --shard auto/2 "$IN"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "mvembed: shard 0/2 from JOB_COMPLETION_INDEX=0" ]]
    # auto/N with a Slurm array of another size is refused
    SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 run mvembed --device cpu --model "$MODEL" --out "$T/p4" \
        --shard auto/3 "$IN"
    [ "$status" -eq 1 ]
    [[ "$output" =~ "the Slurm array has 2 tasks" ]]
}
