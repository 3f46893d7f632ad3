#!/usr/bin/env bash
# dev/lean_variant.sh NAME [NVCC FLAGS...] — an A/B binary without a full rebuild: recompiles only
# src/backend/cuda/lean.cu (the lean and fused decode kernels) with extra flags, swaps it into a copy
# of build/liblilac.a and links build/lilac-NAME. Example (the in-graph trace build):
#   dev/lean_variant.sh trace -DLILAC_LN_TRACE
# SRCS="lean.cu cuda_backend.cu" recompiles those files of src/backend/cuda instead (the attention
# kernels' trace stamps live in cuda_backend.cu's translation unit).
# Build first (make -j2 CUARCH="-gencode arch=compute_90a,code=sm_90a").
set -e
cd "$(dirname "$0")/.."
B=${BUILD:-build}
name=$1; shift
T=$(mktemp -d)
cp "$B/liblilac.a" "$T/liblilac.a"
for f in ${SRCS:-lean.cu}; do
    o="$T/${f%.cu}.o"
    nvcc -O3 -std=c++17 -Xcompiler -Wall,-Wno-unused-parameter -Isrc -gencode arch=compute_90a,code=sm_90a \
         --expt-relaxed-constexpr "$@" -c -o "$o" "src/backend/cuda/$f"
    ar r "$T/liblilac.a" "$o"
done
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
cc -o "$B/lilac-$name" $(ls "$B"/src/cli/*.o) "$T/liblilac.a" -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lcrypto -lm -lpthread \
   -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/targets/x86_64-linux/lib" -lcudart_static -ldl -lrt -lstdc++
rm -rf "$T"
ls -la "$B/lilac-$name"
