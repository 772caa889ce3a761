#!/usr/bin/env bash
# device-bundle.sh - builds, on this (Debian, nvcc 13.0) machine, everything the GPU machine runs and
# puts it in .device/ (git-ignored), to be named in the device tool's `carry`:
# (all xz-compressed; scripts/device-run.sh unpacks them)
#   .device/bin/test_cuda_ops   kernel-vs-CPU-twin tests + whole-tower CUDA-vs-CPU tests (TAP)
#   .device/bin/mvtower         tower driver: `run` (stage dumps for parity) and `bench` (timing)
#   .device/bin/mvembed         the CLI, when src/cli/main.c exists (static FFmpeg when built)
#   .device/bin/cpubench        the CPU tower benchmark tool (scripts/bench-cpu.sh)
#   .device/bin/writebench      the writer stage alone (NPY + zstd + fsync) on given data
#   .device/lib/*.xz            shared libraries the GPU machine's Ubuntu 24.04 image may lack
#                               (libdnnl.so.2 and its libOpenCL.so.1 among them: the CPU tower's
#                               GEMMs, unless NO_DNNL=1 is set here)
# The archive is built with `make BUILD=build-dev` (separate build dir) and the static FFmpeg in
# third_party/ffmpeg (scripts/build-ffmpeg-static.sh), or with NO_VIDEO=1 when that is missing;
# CUDA's own libraries (cudart, cublasLt) are not carried: the device image has them.
# Usage: scripts/device-bundle.sh   (then scripts/device-run.sh runs on the device)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-dev
OUTD=.device
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# The toolkit root as nvcc itself reports it (works through wrapper scripts like /usr/local/bin/nvcc).
CUDA_HOME=${CUDA_HOME:-$(cd /tmp && "$NVCC" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 |
                         sed -n 's/^#\$ TOP=//p' | head -n1 | xargs -r realpath)}
# Video: link the small static FFmpeg of scripts/build-ffmpeg-static.sh when it is there (the GPU
# machine has no FFmpeg libraries); otherwise build without video.
FF=$(pwd)/third_party/ffmpeg
if [ -f "$FF/lib/pkgconfig/libavformat.pc" ]; then
    VIDEO="FFMPEG_PREFIX=$FF"
    FFLIBS=$(PKG_CONFIG_PATH=$FF/lib/pkgconfig pkg-config --static --libs libavformat libavcodec libavutil libswscale | sed "s/-pthread/-lpthread/g")
else
    VIDEO="NO_VIDEO=1"
    FFLIBS=""
fi
[ "${BUNDLE_CLEAN:-1}" = 1 ] && rm -rf $BUILD
make -s BUILD=$BUILD $VIDEO $BUILD/libmvembed.a
mkdir -p $OUTD/bin $OUTD/lib
# oneDNN: the Makefile links it when its header is there and NO_DNNL is unset (same test here)
DNNL=""
[ -z "${NO_DNNL:-}" ] && [ -f /usr/include/oneapi/dnnl/dnnl.h ] && DNNL="-ldnnl"
LIBS="$(pkg-config --libs jansson libzstd libpng libjpeg libwebp libgif libtiff-4 libarchive openblas 2>/dev/null ||
        echo -ljansson -lzstd -lpng16 -ljpeg -lwebp -lgif -ltiff -larchive -lopenblas) $DNNL $FFLIBS -lgomp -lm -lpthread"
NVFLAGS="-std=c++17 -O3 -Iinclude -Icu -Itest/unit
         -Xcompiler -Wall,-Wextra"
for src in test/cuda/*.cu; do
    # test_fa3 holds wgmma layout probes: sm_90a code, like cu/attention_fa3.cu
    ARCH="-gencode=arch=compute_90,code=sm_90"
    [ "$(basename "$src")" = test_fa3.cu ] && ARCH="-gencode=arch=compute_90a,code=sm_90a"
    name=$(basename "$src" .cu)
    echo "device-bundle: $src -> $OUTD/bin/$name"
    $NVCC $NVFLAGS $ARCH -o $OUTD/bin/$name "$src" $BUILD/libmvembed.a -L$CUDA_HOME/lib64 -lcublasLt \
        -lcudart $LIBS
done
# FA3_VARIANTS="name:-DFLAG=V ...": attnbench, test_fa3 and mvtower again as NAME-suffixed binaries
# (attnbench-NAME, ...) with cu/attention_fa3.cu compiled with those flags (its build-time
# measurement options: FA3V2_ST, FA3_RESCALE_MIN), for A/B runs in one device call
for v in ${FA3_VARIANTS:-}; do
    vn=${v%%:*}
    vf=${v#*:}
    $NVCC $NVFLAGS -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr ${vf//,/ } -c \
        cu/attention_fa3.cu -o $BUILD/fa3-$vn.o
    for t in attnbench test_fa3 mvtower; do
        ARCH="-gencode=arch=compute_90,code=sm_90"
        [ $t = test_fa3 ] && ARCH="-gencode=arch=compute_90a,code=sm_90a"
        [ $BUILD/tc-$t.o -nt test/cuda/$t.cu ] || $NVCC $NVFLAGS $ARCH -c test/cuda/$t.cu -o $BUILD/tc-$t.o
        echo "device-bundle: test/cuda/$t.cu + fa3 ($vf) -> $OUTD/bin/$t-$vn"
        $NVCC $ARCH -o $OUTD/bin/$t-$vn $BUILD/tc-$t.o $BUILD/fa3-$vn.o $BUILD/libmvembed.a \
            -L$CUDA_HOME/lib64 -lcublasLt -lcudart $LIBS
    done
done
if [ -f src/cli/main.c ]; then
    make -s BUILD=$BUILD $VIDEO $BUILD/cli/main.o
    g++ -o $OUTD/bin/mvembed $BUILD/cli/main.o $BUILD/libmvembed.a -fopenmp -L$CUDA_HOME/lib64 \
        -lcublasLt -lcudart $LIBS
fi
# the CPU tower benchmark tool (scripts/bench-cpu.sh with CPUBENCH=/tmp/mv/bin/cpubench there)
# and the writer-stage benchmark (writebench: zstd levels on real outputs)
make -s BUILD=$BUILD $VIDEO $BUILD/cpubench $BUILD/writebench
cp $BUILD/cpubench $BUILD/writebench $OUTD/bin/
# Libraries: copy every resolved dependency except glibc, the C++ runtime and CUDA's own.
rm -f $OUTD/lib/* $OUTD/bin/*.xz
for b in $(ls $OUTD/bin/* | grep -v "\.xz$"); do
    ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        libcudart.so*|libcublas*|libcuda.so*) ;;
        *) cp -L "$lib" $OUTD/lib/ ;;
    esac
done
# The device tool carries 64 MiB at most: strip the programs, xz the libraries
# (scripts/device-run.sh unpacks them under /tmp/mv there).
strip $OUTD/bin/*
xz -f -T0 -6 $OUTD/lib/*.so* $OUTD/bin/*
du -sh $OUTD
ls $OUTD/bin $OUTD/lib
