# fuzz.mk - libFuzzer harnesses (test/fuzz/fuzz_*.c), included by the Makefile.
#   make fuzz-build                 build build-fuzz/fuzz_* with clang, ASan + UBSan, no CUDA
#   make fuzz [FUZZ_SECONDS=60]     seed corpora from fixtures, replay test/fuzz/crashes/, then run
#                                   each harness FUZZ_SECONDS seconds (scripts/fuzz.sh)
#   make fuzz FUZZ_ONLY="image npy" only these harnesses
# The library sources are compiled again with clang into build-fuzz/ (the CPU tower and the batch
# driver are left out: they are not parsers), against the system libraries, single-threaded
# (no OpenMP), with the CUDA backend stub src/tower/cuda_stub.c and never CUDA.
FUZZ_SECONDS ?= 60
FUZZ_ONLY    ?=
FZ_CC      := clang
FZ_BUILD   := build-fuzz
FZ_NAMES   := safetensors config image video manifest npy tar
FZ_PKGS    := jansson libzstd libpng libjpeg libwebp libwebpdemux libgif libtiff-4 libarchive libxxhash zlib liblzma libavformat libavcodec libavutil libswscale
FZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FZ_CFLAGS  := -std=gnu11 -g -O1 -Wall -Wextra -Wno-unknown-pragmas -Iinclude -DMV_HAVE_FFMPEG=1 \
              -DFZ_ROOT='"$(CURDIR)"' $(shell pkg-config --cflags $(FZ_PKGS) 2>/dev/null) $(FZ_SAN)
FZ_LIBS    := $(shell pkg-config --libs $(FZ_PKGS) 2>/dev/null || echo -ljansson -lzstd -lpng -ljpeg \
              -lwebpdemux -lwebp -lgif -ltiff -larchive -lxxhash -lz -llzma -lavformat -lavcodec -lavutil -lswscale) -lm -lpthread
FZ_LIB_SRCS := $(filter-out src/run/run.c src/tower/tower_cpu.c src/tower/ops_cpu.c,$(LIB_SRCS))
FZ_LIB_OBJS := $(patsubst src/%.c,$(FZ_BUILD)/obj/%.o,$(FZ_LIB_SRCS))
FZ_BINS    := $(addprefix $(FZ_BUILD)/fuzz_,$(FZ_NAMES))

.PHONY: fuzz fuzz-build
fuzz-build: $(FZ_BINS)

fuzz: fuzz-build
	@scripts/fuzz.sh $(FUZZ_SECONDS) $(or $(FUZZ_ONLY),$(FZ_NAMES))

$(FZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(FZ_CC) $(FZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FZ_BUILD)/libmvembed-fuzz.a: $(FZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FZ_BUILD)/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz_util.h $(FZ_BUILD)/libmvembed-fuzz.a
	$(FZ_CC) $(FZ_CFLAGS) -fsanitize=fuzzer -Itest/fuzz -o $@ $< $(FZ_BUILD)/libmvembed-fuzz.a $(FZ_LIBS)

-include $(wildcard $(FZ_BUILD)/obj/*.d)
