#!/usr/bin/env bash
# build-ffmpeg-static.sh - builds a small static FFmpeg (Debian 12's 5.1 source, same version and
# patches as the system libraries the tests compare against) into third_party/ffmpeg for the GPU
# bundle, where no FFmpeg is installed. Only what mvembed needs: demuxers mov/mp4, matroska/webm,
# avi, mpegts, ivf, flv, raw h264/hevc/m4v; decoders h264, hevc, vp8, vp9, mpeg4, mpeg1/2video and
# AV1 through a static libdav1d (FFmpeg 5.1's native av1 decoder is hardware-only); their parsers;
# swscale; the file protocol. x86 asm (nasm) stays on so that libswscale takes the same SIMD paths
# as Debian's build (its output must equal the system ffmpeg's bit for bit).
#   scripts/build-ffmpeg-static.sh [PREFIX]        (default third_party/ffmpeg)
#   then: make FFMPEG_PREFIX=third_party/ffmpeg
# Needs root for apt (deb-src entry, build tools). Not a general FFmpeg build: no encoders,
# filters, devices, network.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=$(realpath -m "${1:-third_party/ffmpeg}")
work=$root/third_party/ffmpeg-build
jobs=$(nproc)
mkdir -p "$work" "$prefix"

# --- sources ----------------------------------------------------------------------------------
# apt-get source needs deb-src entries. Without any, they are derived from the machine's own deb
# entries for its distribution's suites (VERSION_CODENAME, -updates, -security, ...): the same
# mirrors, suites, components and keys, so this script names no package host itself.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
deb_src_lines() { # one-line style (sources.list, *.list): "deb [opts] URI SUITE COMP..." -> deb-src
    awk -v c="$codename" '
        $1 != "deb" { next }
        { i = 2; if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } }
        $(i + 1) == c || index($(i + 1), c "-") == 1 || index($(i + 1), c "/") == 1 { sub(/^[ \t]*deb/, "deb-src"); print }' "$@"
}
deb_src_stanzas() { # deb822 style (*.sources): enabled "Types: deb" stanzas -> "Types: deb-src"
    awk -v c="$codename" 'BEGIN { RS = ""; FS = "\n" }
        {
            types = 0; suites = ""; out = ""
            for (i = 1; i <= NF; i++) {
                line = $i
                if (line ~ /^#/) continue
                if (tolower(line) ~ /^enabled:[ \t]*no/) { types = -1; break }
                if (tolower(line) ~ /^types:/) {
                    n = split(substr(line, 7), t, /[ \t]+/)
                    for (k = 1; k <= n; k++) if (t[k] == "deb") types = 1
                    line = "Types: deb-src"
                } else if (tolower(line) ~ /^suites:/) {
                    n = split(substr(line, 8), t, /[ \t]+/)
                    for (k = 1; k <= n; k++)
                        if (t[k] == c || index(t[k], c "-") == 1 || index(t[k], c "/") == 1) suites = suites " " t[k]
                    line = "Suites:" suites
                }
                out = out line "\n"
            }
            if (types == 1 && suites != "") print out
        }' "$@"
}
if ! grep -rqsE '^(deb-src[ \t]|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ -n "$codename" ] || { echo "build-ffmpeg-static: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }
    shopt -s nullglob
    lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
    stanzas=(/etc/apt/sources.list.d/*.sources)
    shopt -u nullglob
    src_list=$(for f in "${lists[@]}"; do if [ -f "$f" ]; then deb_src_lines "$f"; fi; done)
    src_stanzas=$(for f in "${stanzas[@]}"; do deb_src_stanzas "$f"; done)
    if [ -z "$src_list$src_stanzas" ]; then
        echo "build-ffmpeg-static: no deb entry for $codename in the apt sources to derive deb-src from" >&2
        exit 1
    fi
    [ -z "$src_list" ] || printf '%s\n' "$src_list" >/etc/apt/sources.list.d/mvembed-deb-src.list
    [ -z "$src_stanzas" ] || printf '%s\n' "$src_stanzas" >/etc/apt/sources.list.d/mvembed-deb-src.sources
    apt-get update -qq
fi
need=()
for t in nasm meson ninja-build pkg-config dpkg-dev; do
    dpkg -s "$t" >/dev/null 2>&1 || need+=("$t")
done
if [ ${#need[@]} -gt 0 ]; then apt-get install -y -qq "${need[@]}"; fi

cd "$work"
if [ ! -d ffmpeg-src ]; then
    apt-get source -qq --download-only ffmpeg
    dpkg-source -x ffmpeg_*.dsc ffmpeg-src >/dev/null
fi
if [ ! -d dav1d-src ]; then
    apt-get source -qq --download-only dav1d
    dpkg-source -x dav1d_*.dsc dav1d-src >/dev/null
fi

# --- dav1d (static) ---------------------------------------------------------------------------
if [ ! -f "$prefix/lib/libdav1d.a" ]; then
    rm -rf dav1d-build
    meson setup dav1d-build dav1d-src --prefix="$prefix" --libdir=lib --buildtype=release \
        --default-library=static -Denable_tools=false -Denable_tests=false -Db_pie=true >/dev/null
    ninja -C dav1d-build -j "$jobs" install >/dev/null
fi

# --- FFmpeg -----------------------------------------------------------------------------------
cd ffmpeg-src
make distclean >/dev/null 2>&1 || true
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" ./configure \
    --prefix="$prefix" --libdir="$prefix/lib" --incdir="$prefix/include" \
    --pkg-config-flags=--static \
    --enable-static --disable-shared --enable-pic --disable-programs --disable-doc --disable-debug \
    --disable-everything --disable-autodetect --disable-network \
    --disable-avdevice --disable-avfilter --disable-swresample --disable-postproc \
    --enable-avformat --enable-avcodec --enable-swscale --enable-pthreads \
    --enable-protocol=file \
    --enable-demuxer=mov,matroska,avi,mpegts,ivf,flv,h264,hevc,m4v \
    --enable-decoder=h264,hevc,vp8,vp9,mpeg4,mpeg1video,mpeg2video,libdav1d \
    --enable-parser=h264,hevc,vp8,vp9,mpeg4video,mpegvideo,av1 \
    --enable-bsf=vp9_superframe_split,h264_mp4toannexb,hevc_mp4toannexb \
    --enable-libdav1d \
    --extra-version=mvembed-static >"$work/configure.log"
make -j "$jobs" >"$work/make.log" 2>&1
make install >/dev/null
cd "$root"
# Relocatable .pc files: the tree can be carried to another path (the GPU machine).
sed -i "s|$prefix|\${pcfiledir}/../..|g" "$prefix"/lib/pkgconfig/*.pc
echo "build-ffmpeg-static: installed into $prefix"
du -ch "$prefix"/lib/*.a | sed 's/^/build-ffmpeg-static: /'
echo "build-ffmpeg-static: link flags: $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --static --libs \
    libavformat libavcodec libavutil libswscale)"
