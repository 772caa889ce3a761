#!/usr/bin/env bats
# The layering of src/, checked on the objects of the build under test (scripts/check-layers.py):
# no call cycle between files (nm's symbols), the environment read only in main.c, no file over
# 600 lines, no function over 120; each rule with its list of known exceptions in the script.
# MVEMBED_OBJDIR (the Makefile sets it) is the build directory; without it, the one beside
# $MVEMBED (build-asan/ for build-asan/mvembed, build/ for ./mvembed).
load test_helper

objdir() {
    if [ -n "${MVEMBED_OBJDIR:-}" ]; then
        echo "$MVEMBED_OBJDIR"
    elif [ -d "$(dirname "$MVEMBED")/common" ]; then
        dirname "$MVEMBED"
    else
        echo "$(dirname "$MVEMBED")/build"
    fi
}

layers() { # CHECK
    run "$PY" "$ROOT/scripts/check-layers.py" --only "$1" "$(objdir)"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" =~ "ok 1 - layers: " ]]
}

@test "layers: no call cycle between src/ files (nm's symbols)" {
    layers cycles
}

@test "layers: only main.c reads the environment, but the known files" {
    layers getenv
}

@test "layers: no src/ file over 600 lines but the known ones" {
    layers lines
}

@test "layers: no src/ function over 120 lines but the known ones" {
    layers functions
}
