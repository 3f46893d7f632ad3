#!/usr/bin/env bash
# GPU tests (`make test-gpu`): builds tests/gpu/gpu_test against the CUDA build of liblilac.a and
# runs it. Needs nvcc (to build) and an NVIDIA GPU (to run). Prints TAP-like lines and a summary.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
mkdir -p "$BUILD/tests/gpu"
extra=""
nm "$BUILD/liblilac.a" 2>/dev/null | grep -q " T cpu_backend_new" && extra="$extra -DHAVE_CPU_BACKEND"
nm "$BUILD/liblilac.a" 2>/dev/null | grep -q " T qwen_model_load" && extra="$extra -DHAVE_LOADER"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -Isrc -Itests -DLILAC_CUDA $extra \
   -o "$BUILD/tests/gpu/gpu_test" tests/gpu/gpu_test.c "$BUILD/liblilac.a" \
   -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/targets/x86_64-linux/lib" -lcudart_static -ldl -lrt -lstdc++ \
   -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lm -lpthread || exit 1
"$BUILD/tests/gpu/gpu_test" "$@"
