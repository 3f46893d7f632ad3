# lilac — hand-written Makefile (llm.c / calm style).
#   make              build/lilac and build/liblilac.a (CUDA backend included when nvcc is found)
#   make test         build and run the whole CPU test suite (tests/run.sh)
#   make SAN=1 test   the same under AddressSanitizer + UBSan (objects in build-san/)
#   make fuzz         libFuzzer targets for every parser (clang), in build-fuzz/
#   make test-gpu     GPU tests (on a machine with an NVIDIA GPU)
#   make lab          the kernel lab, build/lab/* (dev/kernels; run them on a GPU)
#   make gdn-emu      CPU emulation of the CUDA GDN scans' rounding (build/dev/gdn_chunk_emu)
#   make CUDA=0       force a CPU-only build; CUARCH=... overrides the CUDA targets

CC      ?= cc
NVCC    ?= $(shell command -v nvcc 2>/dev/null)
CUDA    ?= $(if $(NVCC),1,0)
SAN     ?= 0
BUILD   := $(if $(filter 1,$(SAN)),build-san,build)

# -ffp-contract=off: no silent FMA contraction, so the SIMD quantizers (quant_x86.c) can reproduce
# the scalar reference's roundings exactly, whatever the compiler's default.
CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -ffp-contract=off -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
           -fno-strict-aliasing -pthread -MMD -MP -Iinclude -Isrc $(shell pkg-config --cflags libcjson libpcre2-8 2>/dev/null)
LDLIBS  := -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lcrypto -lm -lpthread
ifeq ($(SAN),1)
# -O1 changes gcc's value-range analysis and makes -Wformat-truncation report paths the -O2 build
# proves impossible; the sanitizers themselves catch real overflows in this build.
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -O1 -Wno-format-truncation
LDFLAGS += -fsanitize=address,undefined
endif

# CUDA: sm_90a (H100/H200) first, plus a PTX fallback that any newer GPU can JIT.
CUARCH  ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80
# NVFLAGS_EXTRA: e.g. -DLILAC_LN_TRACE (the lean decode kernels' in-graph trace, src/backend/cuda/k_lean.cuh)
NVFLAGS := -O3 -std=c++17 -Xcompiler -Wall,-Wno-unused-parameter -Isrc $(CUARCH) -lineinfo \
           --expt-relaxed-constexpr -MMD -MP $(NVFLAGS_EXTRA)

LIB_SRC := $(wildcard src/base/*.c src/format/*.c src/quant/*.c src/tokenizer/*.c src/model/*.c \
             src/backend/*.c src/backend/cpu/*.c src/runtime/*.c src/server/*.c src/privacy/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
CU_SRC  := $(wildcard src/backend/cuda/*.cu)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
CU_OBJ  :=
ifeq ($(CUDA),1)
CFLAGS  += -DLILAC_CUDA
CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
LDLIBS  += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++
endif

TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-gpu fuzz clean bench bench-cpu bench-quant bench-privacy setup run lab gdn-emu
all: $(BUILD)/lilac $(BUILD)/liblilac.a

$(BUILD)/liblilac.a: $(LIB_OBJ) $(CU_OBJ)
	@mkdir -p $(@D)
	ar rcs $@ $^

$(BUILD)/lilac: $(CLI_OBJ) $(BUILD)/liblilac.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/liblilac.a $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# the chat page is assembled into the binary (.incbin in webpage.c)
$(BUILD)/src/server/webpage.o: web/index.html

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/liblilac.a tests/testutil.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblilac.a -lcmocka $(LDLIBS)

# test tools (small programs the Python tests drive)
$(BUILD)/tests/tools/%: tests/tools/%.c $(BUILD)/liblilac.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblilac.a $(LDLIBS)

TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(wildcard tests/tools/*.c))

tests: $(TEST_BIN) $(TOOL_BIN) $(BUILD)/lilac

# benchmarks: bench/<name>.c -> $(BUILD)/bench/<name>
$(BUILD)/bench/%: bench/%.c $(BUILD)/liblilac.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblilac.a $(LDLIBS)

bench-cpu: $(BUILD)/bench/cpu_gemv
	$(BUILD)/bench/cpu_gemv

# quantizer throughput per core and level (the figure behind `lilac convert`'s speed)
bench-quant: $(BUILD)/bench/quant_speed
	$(BUILD)/bench/quant_speed --threads $$(nproc)

# privacy gate: the synthetic labelled set (deterministic) and the rule evaluation + scan-time bound
bench-privacy: $(BUILD)/bench/privacy_eval
	python3 bench/privacy_gen.py > $(BUILD)/privacy_eval.jsonl
	$(BUILD)/bench/privacy_eval $(BUILD)/privacy_eval.jsonl --md bench/results/privacy.md \
	    $$(for f in ../shared/DESIGN.md ../shared/reference/*.md; do [ -f $$f ] && printf -- '--clean %s ' $$f; done)
	python3 bench/privacy_gen.py --seed 7 > $(BUILD)/privacy_eval_seed7.jsonl
	$(BUILD)/bench/privacy_eval $(BUILD)/privacy_eval_seed7.jsonl --md $(BUILD)/privacy_seed7.md
	printf '\n---\n\n# Second seed (new values, same templates)\n\n' >> bench/results/privacy.md
	sed -n '/^## Rules alone/,/^\*\*FP0/p' $(BUILD)/privacy_seed7.md >> bench/results/privacy.md
	python3 bench/privacy_heldout.py > $(BUILD)/privacy_heldout.jsonl
	$(BUILD)/bench/privacy_eval $(BUILD)/privacy_heldout.jsonl --md $(BUILD)/privacy_heldout.md
	cat bench/privacy_heldout_head.md >> bench/results/privacy.md
	sed -n '/^## Rules alone/,/^\*\*FP0/p' $(BUILD)/privacy_heldout.md >> bench/results/privacy.md

# the main job: the server and chat page on the shipped demonstration model
run: all
	$(BUILD)/lilac serve -m models/lilac-demo --port $${PORT:-8080}

test: tests
	BUILD=$(BUILD) tests/run.sh

test-gpu: all
	BUILD=$(BUILD) tests/gpu/run.sh

# ---- kernel lab (dev/kernels/*.cu: one standalone program per kernel, run on a GPU)
LAB_SRC := $(wildcard dev/kernels/*.cu)
LAB_BIN := $(LAB_SRC:dev/kernels/%.cu=$(BUILD)/lab/%)
lab: $(LAB_BIN)
$(BUILD)/lab/%: dev/kernels/%.cu dev/kernels/*.cuh src/backend/cuda/*.cuh
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -Isrc $(CUARCH) -lineinfo --expt-relaxed-constexpr -o $@ $<

# CPU emulation of the CUDA GDN prefill scans' rounding vs fp64 (runs anywhere: build/dev/gdn_chunk_emu)
gdn-emu: $(BUILD)/dev/gdn_chunk_emu
$(BUILD)/dev/gdn_chunk_emu: dev/kernels/gdn_chunk_emu.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -lm

# ---- fuzzing (clang + libFuzzer); each target in tests/fuzz/fuzz_*.c
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_LIB_SRC := $(filter-out src/backend/%,$(LIB_SRC)) src/backend/backend.c $(wildcard src/backend/cpu/*.c)
fuzz:
	@mkdir -p build-fuzz
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  echo "clang $$n"; \
	  clang -std=c11 -D_GNU_SOURCE -g -O1 -Isrc -fsanitize=fuzzer,address,undefined -o build-fuzz/$$n $$f \
	    $(FUZZ_LIB_SRC) -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lcrypto -lm -lpthread || exit 1; done

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
