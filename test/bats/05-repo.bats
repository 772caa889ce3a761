#!/usr/bin/env bats
# The repository itself: the man page renders without a warning, lists the options --help lists
# and, in ENVIRONMENT, the variables src/ reads; no tracked file holds a conflict marker, names a
# work session or is a Python bytecode cache. The tracked-file tests read the checkout with git:
# outside a git checkout they fail (they never skip). Oracles: groff, git ls-files / git grep.
load test_helper

MAN="$ROOT/man/mvembed.1"

# in_checkout: fails, saying why, when $ROOT is not a git checkout
in_checkout() {
    if ! command -v git >/dev/null; then
        echo "git is not installed (run scripts/install-deps.sh): the tracked files cannot be listed"
        return 1
    fi
    local top
    top=$(git -C "$ROOT" rev-parse --show-toplevel 2>/dev/null)
    if [ -z "$top" ] || [ "$top" != "$(cd "$ROOT" && pwd -P)" ]; then
        echo "$ROOT is not a git checkout (${top:+it lies inside $top; }git rev-parse" \
            "--show-toplevel): the tracked files cannot be listed (run from a clone)"
        return 1
    fi
}

# no_match GIT_GREP_ARGS...: git grep over the tracked text files finds nothing (status 1);
# prints the matches, or git's error, otherwise
no_match() {
    run git -C "$ROOT" grep -nI "$@"
    if [ "$status" -eq 1 ] && [ -z "$output" ]; then
        return 0
    fi
    if [ "$status" -eq 0 ]; then
        echo "found:"
    else
        echo "git grep failed (status $status):"
    fi
    echo "$output"
    return 1
}

@test "the man page renders without a warning (groff -man -ww -z prints nothing)" {
    command -v groff >/dev/null || { echo "groff is not installed (run scripts/install-deps.sh)"; false; }
    run groff -man -ww -z "$MAN"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "the man page's OPTIONS describe exactly the options --help lists" {
    # long options: every --name in --help's option list (after the usage lines, whose --all is
    # manifest compact's, in COMMANDS); in the man page, every \-\-name on an option heading
    # (.B/.BR lines of OPTIONS); short options: "-x," in --help, "\-x " on a heading
    mvembed --help | sed -n '/^Inputs and outputs:/,$p' > "$BATS_TEST_TMPDIR/help"
    grep -oE -- '--[a-z0-9]+(-[a-z0-9]+)*' "$BATS_TEST_TMPDIR/help" | sort -u > "$BATS_TEST_TMPDIR/help_long"
    grep -oE -- '^  -[a-zA-Z0-9],' "$BATS_TEST_TMPDIR/help" | tr -d ' ,' | sort -u > "$BATS_TEST_TMPDIR/help_short"
    sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$MAN" | grep -E '^\.BR? ' > "$BATS_TEST_TMPDIR/headings"
    grep -oE '\\-\\-[a-z0-9]+(\\-[a-z0-9]+)*' "$BATS_TEST_TMPDIR/headings" | sed 's/\\-/-/g' |
        sort -u > "$BATS_TEST_TMPDIR/man_long"
    grep -oE '^\.BR? \\-[a-zA-Z0-9] ' "$BATS_TEST_TMPDIR/headings" | sed -E 's/^\.BR? \\//; s/ $//' |
        sort -u > "$BATS_TEST_TMPDIR/man_short"
    [ "$(wc -l < "$BATS_TEST_TMPDIR/help_long")" -ge 40 ]
    [ "$(wc -l < "$BATS_TEST_TMPDIR/help_short")" -ge 8 ]
    echo "long options (< --help only, > man page only):"
    diff "$BATS_TEST_TMPDIR/help_long" "$BATS_TEST_TMPDIR/man_long"
    echo "short options:"
    diff "$BATS_TEST_TMPDIR/help_short" "$BATS_TEST_TMPDIR/man_short"
}

@test "the man page's ENVIRONMENT names every variable src/ reads, and none the program does not" {
    # read: every getenv("NAME") of src/ and cu/ (cu/'s measurement switches need no entry), and
    # OPENBLAS_CORETYPE, which OpenBLAS reads (a NO_DNNL build); named: the .B headings of
    # ENVIRONMENT, split at ", "
    { grep -rhoE 'getenv\("[A-Za-z0-9_]+"\)' "$ROOT/src" "$ROOT/cu" | sed -E 's/getenv\("(.*)"\)/\1/'
      echo OPENBLAS_CORETYPE; } | sort -u > "$BATS_TEST_TMPDIR/read"
    sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$MAN" | sed -n 's/^\.B //p' | sed 's/, /\n/g' |
        sort -u > "$BATS_TEST_TMPDIR/named"
    grep -rhoE 'getenv\("[A-Za-z0-9_]+"\)' "$ROOT/src" | sed -E 's/getenv\("(.*)"\)/\1/' |
        sort -u > "$BATS_TEST_TMPDIR/read_src"
    [ "$(wc -l < "$BATS_TEST_TMPDIR/read_src")" -ge 10 ]
    echo "read by src/ but not named: $(comm -23 "$BATS_TEST_TMPDIR/read_src" "$BATS_TEST_TMPDIR/named" | tr '\n' ' ')"
    echo "named but not read: $(comm -13 "$BATS_TEST_TMPDIR/read" "$BATS_TEST_TMPDIR/named" | tr '\n' ' ')"
    [ -z "$(comm -23 "$BATS_TEST_TMPDIR/read_src" "$BATS_TEST_TMPDIR/named")" ]
    [ -z "$(comm -13 "$BATS_TEST_TMPDIR/read" "$BATS_TEST_TMPDIR/named")" ]
}

@test "no tracked text file holds a conflict marker line" {
    in_checkout
    # '<<<<<<< ' and '>>>>>>> ' at a line's start; a bare '=======' line alone is not a marker
    # (a markdown setext heading, a text rule), and a file with markers has the other two anyway
    no_match -E '^(<<<<<<<|>>>>>>>) '
}

@test "no tracked file names a work session, in its text or in its path" {
    in_checkout
    re='(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|[0-9]+(st|nd|rd|th)) sessions?\b|session[0-9]+'
    no_match -iE "$re" -- . ':!test/bats/05-repo.bats'
    run bash -c 'git -C "$1" ls-files | grep -iE "$2"' _ "$ROOT" "$re"
    echo "tracked paths: $output"
    [ "$status" -eq 1 ]
}

@test "no Python bytecode cache is tracked (__pycache__, *.pyc)" {
    in_checkout
    run bash -c 'git -C "$1" ls-files | grep -E "(^|/)__pycache__/|\.py[co]$"' _ "$ROOT"
    echo "tracked: $output"
    [ "$status" -eq 1 ]
}

@test "the code cites its HF reference inside the repository, at sections that exist" {
    in_checkout
    # the reference lives in docs/; nothing points at a file outside the repository
    no_match -F 'QWEN35_VISION' -- . ':!test/bats/05-repo.bats'
    # every "docs/hf-reference.md §N[.M]" cited names a heading of that file
    run bash -c 'git -C "$1" grep -hoE "hf-reference\.md §[0-9]+(\.[0-9]+)?" | sed "s/.*§//" | sort -u' _ "$ROOT"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | wc -l)" -ge 5 ]
    for sec in $output; do
        echo "section $sec"
        grep -qE "^#+ ${sec//./\\.}\.? " "$ROOT/docs/hf-reference.md"
    done
}

@test "the README's Layout names every file of src/" {
    in_checkout
    layout=$(sed -n '/^## Layout$/,$p' "$ROOT/README.md")
    [ -n "$layout" ]
    missing=""
    for f in $(cd "$ROOT" && ls src/*/*.c); do
        grep -qF "\`$f\`" <<< "$layout" || missing="$missing $f"
    done
    echo "not in the README's Layout:$missing"
    [ -z "$missing" ]
}
