#!/usr/bin/env bash
# install-deps.sh - installs the Debian packages mvembed builds and tests with (needs root or sudo).
# Does nothing when everything is already installed. groff-base and git: test/bats/05-repo.bats
# (the man page renders clean; the tracked files' checks).
set -eu
PKGS="build-essential pkg-config libopenblas-dev libdnnl-dev libjansson-dev libzstd-dev zstd libpng-dev libxxhash-dev xxhash python3-xxhash
libjpeg62-turbo-dev libwebp-dev libgif-dev libtiff-dev libarchive-dev zlib1g-dev liblzma-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
ffmpeg bats python3 python3-numpy python3-pandas python3-zstandard python3-pil valgrind clang libclang-rt-14-dev file
groff-base git universal-ctags procps"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
