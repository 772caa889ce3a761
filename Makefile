# mvembed - GNU Make build.
#   make            build ./mvembed (+ CUDA backend when nvcc is found)
#   make NO_CUDA=1  CPU-only build
#   make NO_CUDNN=1 CUDA build without the cuDNN attention path
#   make NO_DNNL=1  CPU tower GEMMs on OpenBLAS instead of oneDNN (libdnnl-dev)
#   make cuda-tests the GPU programs of test/cuda (part of make all when nvcc is found):
#                   BUILD/cuda/{test_cuda_ops,test_fa3,attnbench,mvtower}
#   make test       unit tests + bats end-to-end tests; ends with "N passed, N failed"
#   make demo       install deps, build, embed fixtures/media into out/
#   make install    PREFIX=/usr/local DESTDIR= : bin/mvembed, share/man/man1/mvembed.1 and
#                   share/mvembed/embed-array.sbatch (the Slurm job script) and
#                   share/mvembed/run-record.md (the run record's fields); make uninstall
SHELL := /bin/bash
CC      ?= cc
BUILD   := build
BIN     ?= $(if $(filter build,$(BUILD)),mvembed,$(BUILD)/mvembed)
# NO_VIDEO=1 builds without FFmpeg (videos then get a manifest error); FFMPEG_PREFIX=DIR links a
# static FFmpeg installed under DIR (scripts/build-ffmpeg-static.sh makes one for the GPU bundle).
PKGS    := jansson libzstd libpng libjpeg libwebp libwebpdemux libgif libtiff-4 libarchive libxxhash zlib liblzma
ifeq ($(NO_VIDEO),)
FFPKGS  := libavformat libavcodec libavutil libswscale
ifneq ($(FFMPEG_PREFIX),)
FFCFLAGS := $(shell PKG_CONFIG_PATH=$(FFMPEG_PREFIX)/lib/pkgconfig pkg-config --cflags $(FFPKGS))
FFLIBS   := $(shell PKG_CONFIG_PATH=$(FFMPEG_PREFIX)/lib/pkgconfig pkg-config --static --libs $(FFPKGS))
else
FFCFLAGS := $(shell pkg-config --cflags $(FFPKGS) 2>/dev/null)
FFLIBS   := $(shell pkg-config --libs $(FFPKGS) 2>/dev/null || echo -lavformat -lavcodec -lavutil -lswscale)
endif
CFLAGS_VIDEO := -DMV_HAVE_FFMPEG=1 $(FFCFLAGS)
VIDEO    := ffmpeg
else
VIDEO    := none
endif
CFLAGS  ?= -O2 -g
override CFLAGS += -std=gnu11 -Wall -Wextra -fopenmp -Iinclude -MMD -MP $(SAN)
LDLIBS  += -fopenmp -lm -lpthread $(SAN)

# --- dependency probing ---------------------------------------------------------------------
PKGCFG_OK := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)
ifeq ($(PKGCFG_OK),yes)
override CFLAGS += $(shell pkg-config --cflags $(PKGS))
LDLIBS  += $(shell pkg-config --libs $(PKGS))
else
LDLIBS  += -ljansson -lzstd -lpng -ljpeg -lwebpdemux -lwebp -lgif -ltiff -larchive -lxxhash -lz -llzma
endif
override CFLAGS += $(CFLAGS_VIDEO)
LDLIBS  := $(FFLIBS) $(LDLIBS)
# OpenBLAS: Debian ships cblas.h under /usr/include/<triplet>/openblas-pthread or similar
OPENBLAS_INC := $(shell pkg-config --cflags openblas 2>/dev/null)
OPENBLAS_LIB := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
override CFLAGS += $(OPENBLAS_INC)
LDLIBS  += $(OPENBLAS_LIB)
# oneDNN for the CPU tower's GEMMs (src/tower/gemm_cpu.c) when its headers are there; NO_DNNL=1 keeps
# them on OpenBLAS. DNNL_PREFIX=DIR: a oneDNN installed under DIR instead of /usr.
ifeq ($(NO_DNNL),)
DNNL_PREFIX ?= /usr
DNNL_H := $(wildcard $(DNNL_PREFIX)/include/oneapi/dnnl/dnnl.h)
endif
ifneq ($(DNNL_H),)
override CFLAGS += -DMV_HAVE_DNNL=1 $(if $(filter /usr,$(DNNL_PREFIX)),,-I$(DNNL_PREFIX)/include)
LDLIBS  += $(if $(filter /usr,$(DNNL_PREFIX)),,-L$(DNNL_PREFIX)/lib) -ldnnl
CPU_GEMM := onednn
else
CPU_GEMM := openblas
endif

NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifneq ($(NO_CUDA),)
NVCC :=
endif
# The toolkit root comes from nvcc itself (its dry run prints TOP=), so a wrapper script such as
# /usr/local/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc finds the right include/ and lib64/.
ifneq ($(NVCC),)
ifeq ($(origin CUDA_HOME),undefined)
CUDA_HOME := $(shell cd /tmp && $(NVCC) --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | \
               sed -n 's/^\#\$$ TOP=//p' | head -n1 | xargs -r realpath 2>/dev/null)
endif
ifeq ($(CUDA_HOME),)
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
endif
ifeq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
CUDA_MISSING := $(CUDA_HOME)/include/cuda_runtime_api.h not found
else ifeq ($(wildcard $(CUDA_HOME)/lib64/libcublasLt.so*),)
CUDA_MISSING := $(CUDA_HOME)/lib64/libcublasLt.so not found
endif
ifneq ($(CUDA_MISSING),)
$(warning mvembed: nvcc $(NVCC) found but $(CUDA_MISSING); building CPU-only)
NVCC :=
endif
endif
ifneq ($(NVCC),)
NVCCFLAGS   ?= -O3 -g -lineinfo
NVCCFLAGS   += -std=c++17 -Iinclude -Icu -MMD -MP --expt-relaxed-constexpr -Xcompiler -Wall,-Wextra,-fPIC
NVCCARCH    := -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=sm_80
# cu/attention_fa3.cu is wgmma code: sm_90a machine code only (no PTX, no other targets)
$(BUILD)/cu/attention_fa3.o: NVCCARCH := -gencode=arch=compute_90a,code=sm_90a
# cuDNN fused attention (cu/attention_cudnn.cu): headers at build time, libcudnn.so.9 dlopen'ed
# at run time; make NO_CUDNN=1 leaves it out (the file then only says "not built").
ifeq ($(NO_CUDNN),)
CUDNN_H     := $(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h \
                 /usr/include/$(shell $(CC) -dumpmachine 2>/dev/null)/cudnn.h))
endif
ifneq ($(CUDNN_H),)
NVCCFLAGS   += -DMV_HAVE_CUDNN=1 -I$(dir $(CUDNN_H))
BACKEND_CUDNN := +cudnn
endif
CU_SRCS     := $(wildcard cu/*.cu)
CU_OBJS     := $(patsubst cu/%.cu,$(BUILD)/cu/%.o,$(CU_SRCS))
override CFLAGS += -DMV_HAVE_CUDA=1 -I$(CUDA_HOME)/include
LDLIBS      += -L$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++ -ldl -Wl,-rpath,$(CUDA_HOME)/lib64
BACKENDS    := cpu cuda$(BACKEND_CUDNN)
# test/cuda: the GPU machine's programs (twin tests, attention benchmark, tower driver), sm_90
# code (the GPU machine's; test_fa3's layout probes are wgmma code: sm_90a)
CUDA_TESTS  := $(patsubst test/cuda/%.cu,$(BUILD)/cuda/%,$(wildcard test/cuda/*.cu))
CUDA_TEST_ARCH := -gencode=arch=compute_90,code=sm_90
$(BUILD)/cuda/test_fa3.o: CUDA_TEST_ARCH := -gencode=arch=compute_90a,code=sm_90a
# ... linked against the variants build (test/cuda/variants/variants.cuh): the cu/ files with
# MV_VARIANTS seams compiled again with -DMV_VARIANTS, and the selection code; these objects come
# before the archive, so that they stand in for its production ones
VAR_OBJS    := $(patsubst %,$(BUILD)/variants/cu/%.o,attention attention_fa3 gemm tower_cuda) \
               $(BUILD)/variants/variants.o
$(BUILD)/variants/cu/attention_fa3.o: CUDA_TEST_ARCH := -gencode=arch=compute_90a,code=sm_90a
# the GPU machine's timeline recorder (test/cuda/cuptitrace.c, an LD_PRELOAD library), where CUDA
# has CUPTI: make cuptitrace (scripts/device-bundle.sh); not part of all
CUPTI_H     := $(firstword $(wildcard $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/extras/CUPTI/include/cupti.h))
else
CU_OBJS     :=
CUDA_TESTS  :=
BACKENDS    := cpu
endif

# src/ is one folder per layer (README, Layout); the library is every layer but cli/
LIB_SRCS  := $(wildcard src/*/*.c)
LIB_SRCS  := $(filter-out src/cli/%,$(LIB_SRCS))
LIB_OBJS  := $(patsubst src/%.c,$(BUILD)/%.o,$(LIB_SRCS)) $(CU_OBJS)
CLI_OBJS  := $(patsubst src/%.c,$(BUILD)/%.o,$(wildcard src/cli/*.c))
UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(patsubst test/unit/%.c,$(BUILD)/%,$(UNIT_SRCS))
TOOL_SRCS := $(filter-out test/tools/gemmprobe.c,$(wildcard test/tools/*.c))
TOOL_BINS := $(patsubst test/tools/%.c,$(BUILD)/%,$(TOOL_SRCS))

.PHONY: bench-cpu gemmprobe cuptitrace all cuda-tests test valgrind-bin test-asan test-tsan test-run test-slurm unit demo clean install uninstall deps info
all: info $(BIN) $(TOOL_BINS) $(CUDA_TESTS)

cuda-tests: $(CUDA_TESTS)
cuptitrace: $(BUILD)/cuda/libcuptitrace.so
$(BUILD)/cuda/libcuptitrace.so: test/cuda/cuptitrace.c
	@test -n "$(CUPTI_H)" || { echo "make cuptitrace: no cupti.h under $(CUDA_HOME) (or no nvcc)" >&2; exit 1; }
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -shared -fPIC -I$(dir $(CUPTI_H)) -o $@ $< -L$(CUDA_HOME)/lib64 \
		-L$(CUDA_HOME)/extras/CUPTI/lib64 -lcupti -lpthread
.SECONDARY: $(CUDA_TESTS:=.o) $(VAR_OBJS)

info:
	@echo "mvembed: backends: $(BACKENDS) (cpu GEMMs: $(CPU_GEMM))$(if $(NVCC), (nvcc: $(NVCC)), (no usable nvcc, or NO_CUDA set)); video: $(VIDEO)"

$(BIN): $(CLI_OBJS) $(BUILD)/libmvembed.a
	$(CC) -o $@ $^ $(LDLIBS)

$(BUILD)/libmvembed.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: src/%.c | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/cu/%.o: cu/%.cu | $(BUILD)
	@mkdir -p $(BUILD)/cu
	$(NVCC) $(NVCCFLAGS) $(NVCCARCH) -c -o $@ $<

$(BUILD)/cuda/%.o: test/cuda/%.cu | $(BUILD)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DMV_VARIANTS -Itest/cuda -Itest/unit $(CUDA_TEST_ARCH) -c -o $@ $<

$(BUILD)/variants/cu/%.o: cu/%.cu | $(BUILD)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DMV_VARIANTS -Itest/cuda $(CUDA_TEST_ARCH) -c -o $@ $<

$(BUILD)/variants/%.o: test/cuda/variants/%.cu | $(BUILD)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DMV_VARIANTS -Itest/cuda $(CUDA_TEST_ARCH) -c -o $@ $<

$(BUILD)/cuda/%: $(BUILD)/cuda/%.o $(VAR_OBJS) $(BUILD)/libmvembed.a
	$(CC) -o $@ $^ $(LDLIBS)

$(BUILD)/test_%: test/unit/test_%.c $(BUILD)/libmvembed.a test/unit/unit.h
	$(CC) $(CFLAGS) -Itest/unit -o $@ $< $(BUILD)/libmvembed.a $(LDLIBS)

$(BUILD)/%: test/tools/%.c $(BUILD)/libmvembed.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmvembed.a $(LDLIBS)

# cpubench also times attention's AMX path: attention_cpu.c's variants build (-DMV_VARIANTS),
# linked before the archive so that it stands in for the production object
$(BUILD)/variants/tower/%.o: src/tower/%.c | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DMV_VARIANTS -c -o $@ $<

$(BUILD)/cpubench: test/tools/cpubench.c $(BUILD)/variants/tower/attention_cpu.o $(BUILD)/libmvembed.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD):
	@mkdir -p $(BUILD)

unit: $(UNIT_BINS)

# Every runner prints "ok"/"not ok" lines (TAP); scripts/run-tests.sh sums them and prints the
# closing "N passed, N failed" line. MVEMBED_OBJDIR: the objects test/bats/06-layers.bats checks
# (scripts/check-layers.py).
# make test installs missing Debian packages first (scripts/install-deps.sh), then builds in a
# fresh make so that the pkg-config probes above see them.
test: deps
	@$(MAKE) --no-print-directory all unit
	@$(MAKE) --no-print-directory valgrind-bin
	@MVEMBED=$(abspath $(BIN)) NPYCMP=$(abspath $(BUILD)/npycmp) MVEMBED_VALGRIND=$(abspath build-vg/mvembed) \
	    MVEMBED_OBJDIR=$(abspath $(BUILD)) scripts/run-tests.sh $(UNIT_BINS)

# The binary test/bats/80-valgrind.bats runs under memcheck: without FFmpeg, because Debian's
# libavcodec loads libjxl -> libhwy, whose load-time initialiser executes RDTSCP, which valgrind
# 3.19 refuses (SIGILL) on CPUs whose cpuid does not list it (seen on an AMD EPYC VM): memcheck
# could not run any build with video there. Video decoding is under ASan/UBSan (test-asan) instead.
valgrind-bin:
	@$(MAKE) --no-print-directory BUILD=build-vg BIN=build-vg/mvembed NO_CUDA=1 NO_VIDEO=1 build-vg/mvembed

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (CPU path).
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
test-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/mvembed NO_CUDA=1 \
	    SAN="$(ASAN_FLAGS)" CFLAGS="-O1 -g" MVEMBED_BATS_EXCLUDE=80-valgrind.bats test-run

# ThreadSanitizer over the pipeline's threads (decode pool, packing tower thread, writers)
test-tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan BIN=build-tsan/mvembed NO_CUDA=1 \
	    SAN="-fsanitize=thread" CFLAGS="-O1 -g" build-tsan/mvembed
	@scripts/tsan-check.sh build-tsan/mvembed

test-run: all unit
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    MVEMBED=$(abspath $(BIN)) NPYCMP=$(abspath $(BUILD)/npycmp) MVEMBED_OBJDIR=$(abspath $(BUILD)) \
	    scripts/run-tests.sh $(UNIT_BINS)

demo: deps
	@$(MAKE) --no-print-directory all
	./mvembed --model fixtures/model-tiny --out emb fixtures/media
	@echo "demo: embeddings in emb/, manifest in emb/manifest.jsonl (the README's readers read emb/)"

deps:
	@scripts/install-deps.sh

clean:
	rm -rf build build-* mvembed

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/mvembed
install: $(BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/mvembed
	install -m 644 man/mvembed.1 $(DESTDIR)$(MANDIR)/man1/mvembed.1
	install -m 755 scripts/embed-array.sbatch $(DESTDIR)$(DATADIR)/embed-array.sbatch
	install -m 644 docs/run-record.md $(DESTDIR)$(DATADIR)/run-record.md

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/mvembed $(DESTDIR)$(MANDIR)/man1/mvembed.1 \
	    $(DESTDIR)$(DATADIR)/embed-array.sbatch $(DESTDIR)$(DATADIR)/run-record.md
	rmdir $(DESTDIR)$(DATADIR) 2>/dev/null || true

# A real one-node Slurm cluster (root; installs slurm-wlm + munge): a 3-task array against one
# process, byte for byte (test/slurm/run-slurm-test.sh).
test-slurm: deps
	@$(MAKE) --no-print-directory NO_CUDA=1 BUILD=build-nc BIN=build-nc/mvembed build-nc/mvembed
	@MVEMBED=$(abspath build-nc/mvembed) bash test/slurm/run-slurm-test.sh

# CPU tower benchmark: tower alone vs its GEMMs alone (and HF when torch is there); a benchmark,
# not a test. THREADS, SIZES, DEPTH, ITERS: see scripts/bench-cpu.sh.
bench-cpu: all
	@scripts/bench-cpu.sh

# GEMM library probe (test/tools/gemmprobe.c): one binary per library on the tower block's four
# Linear shapes; build/gemmprobe-blis only when BLIS is installed. Run: build/gemmprobe-dnnl M H I T ITERS
gemmprobe: $(BUILD)/gemmprobe-openblas $(if $(DNNL_H),$(BUILD)/gemmprobe-dnnl) \
	$(if $(wildcard /usr/include/blis/cblas.h),$(BUILD)/gemmprobe-blis)
$(BUILD)/gemmprobe-openblas: test/tools/gemmprobe.c | $(BUILD)
	$(CC) -O2 -g -fopenmp -DPROBE_OPENBLAS -o $@ $< $(OPENBLAS_LIB) -lm
$(BUILD)/gemmprobe-dnnl: test/tools/gemmprobe.c | $(BUILD)
	$(CC) -O2 -g -fopenmp -DPROBE_DNNL -o $@ $< -ldnnl -lm
$(BUILD)/gemmprobe-blis: test/tools/gemmprobe.c | $(BUILD)
	$(CC) -O2 -g -fopenmp -DPROBE_BLIS -o $@ $< -lblis -lm

# fuzzing targets (make fuzz) live beside their harnesses
-include test/fuzz/fuzz.mk
-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(BUILD)/*/*/*.d)
