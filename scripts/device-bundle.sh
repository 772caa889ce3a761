#!/usr/bin/env bash
# device-bundle.sh - builds, on this (Debian, nvcc 13.0) machine, everything the GPU machine runs and
# puts it in .device/ (git-ignored), to be named in the device tool's `carry`:
# (all xz-compressed; scripts/device-run.sh unpacks them)
#   .device/bin/test_cuda_ops   kernel-vs-CPU-twin tests + whole-tower CUDA-vs-CPU tests (TAP)
#   .device/bin/mvtower         tower driver: `run` (stage dumps for parity) and `bench` (timing)
#   .device/bin/test_fa3        the Hopper attention kernel's layout probes and twin tests (TAP)
#   .device/bin/test_resize     the CUDA uint8 bicubic resize against its CPU twin (TAP)
#   .device/bin/attnbench       the attention kernels alone (TFLOP/s, agreement)
#   .device/bin/pinprobe        what a page-locked host buffer costs (test/cuda/pinprobe.cu)
#                               (the test/cuda programs carry the variants build: kernel versions
#                               and options chosen on their command lines, test/cuda/variants/)
#   .device/bin/mvembed         the CLI (static FFmpeg when built)
#   .device/bin/cpubench        the CPU tower benchmark tool (scripts/bench-cpu.sh)
#   .device/bin/writebench      the writer stage alone (NPY + zstd + fsync) on given data
#   .device/lib/libcuptitrace.so  the timeline recorder (test/cuda/cuptitrace.c, LD_PRELOAD) and
#                               the libcupti it needs, where this CUDA has CUPTI
#   .device/lib/*.xz            shared libraries the GPU machine's Ubuntu 24.04 image may lack
#                               (libdnnl.so.2 and its libOpenCL.so.1 among them: the CPU tower's
#                               GEMMs, unless NO_DNNL=1 is set here)
# All of it is built by the Makefile in build-dev/ (make BUILD=build-dev: its own build dir), with
# the static FFmpeg in third_party/ffmpeg (scripts/build-ffmpeg-static.sh) or, when that is
# missing, NO_VIDEO=1 (the GPU machine has no FFmpeg libraries); CUDA's own libraries (cudart,
# cublasLt) are not carried: the device image has them. BUNDLE_CLEAN=0 keeps build-dev/ from the
# last run; BUNDLE_JOBS (2) is make's -j.
# Usage: scripts/device-bundle.sh   (then scripts/device-run.sh runs on the device)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-dev
OUTD=.device
FF=$(pwd)/third_party/ffmpeg
if [ -f "$FF/lib/pkgconfig/libavformat.pc" ]; then
    VIDEO="FFMPEG_PREFIX=$FF"
else
    VIDEO="NO_VIDEO=1"
fi
[ "${BUNDLE_CLEAN:-1}" = 1 ] && rm -rf $BUILD
# everything through the Makefile (its toolkit probe, flags and link line): the CUDA programs of
# test/cuda (make cuda-tests), the CLI, the CPU tower benchmark (scripts/bench-cpu.sh with
# CPUBENCH=/tmp/mv/bin/cpubench there) and the writer-stage benchmark (writebench)
make -s -j"${BUNDLE_JOBS:-2}" BUILD=$BUILD $VIDEO cuda-tests $BUILD/mvembed $BUILD/cpubench $BUILD/writebench
[ -x $BUILD/cuda/mvtower ] || { echo "device-bundle: make built no CUDA programs (no usable nvcc? make info)" >&2; exit 1; }
mkdir -p $OUTD/bin $OUTD/lib
rm -f $OUTD/bin/* $OUTD/lib/*
for t in test_cuda_ops test_fa3 test_resize attnbench mvtower pinprobe; do
    echo "device-bundle: $BUILD/cuda/$t -> $OUTD/bin/$t"
    cp $BUILD/cuda/$t $OUTD/bin/
done
cp $BUILD/mvembed $BUILD/cpubench $BUILD/writebench $OUTD/bin/
# the timeline recorder (an LD_PRELOAD library: scripts/device-dataset.sh step 7), where CUDA has
# CUPTI here; its libcupti comes with it by the loop below
if make -s BUILD=$BUILD cuptitrace; then
    cp $BUILD/cuda/libcuptitrace.so $OUTD/lib/
else
    echo "device-bundle: no CUPTI in this CUDA: no timelines (device-dataset.sh step 7)" >&2
fi
# Libraries: copy every resolved dependency except glibc, the C++ runtime and CUDA's own.
for b in $(ls $OUTD/bin/* $OUTD/lib/libcuptitrace.so 2>/dev/null | grep -v "\.xz$"); do
    ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
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
