#!/usr/bin/env bash
# Session 29: the bundle of call 5 (the tile-packed gate/up, LILAC_CUDA_MOE_PACK): lilac and gpu_test
# at HEAD, lilac-both (-DLN_TOPK2=1 -DFD_MINB_MMA=2) at HEAD; no fixtures (the pack tests are
# synthetic). From the repo root, after make -j2 CUARCH=... and tests/gpu/run.sh --help:
#   bash bench/results/2026-12-05-h200-s29/prepare5.sh   -> .cuda-wt/p.tar.xz
set -e
cd "$(dirname "$0")/../../.."
rm -f build/lilac-*
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh both -DLN_TOPK2=1 -DFD_MINB_MMA=2
W=.cuda-wt/stage5; rm -rf $W; mkdir -p $W/lib
cp build/lilac build/lilac-both build/tests/gpu/gpu_test $W/
strip --strip-debug $W/lilac* $W/gpu_test
for n in libcjson.so.1 libutf8proc.so.2 libmicrohttpd.so.12 libgnutls.so.30 libidn2.so.0 libunistring.so.2 \
         libp11-kit.so.0 libtasn1.so.6 libnettle.so.8 libhogweed.so.6 libgmp.so.10 libffi.so.8 libpcre2-8.so.0; do
    f=$(ldd build/lilac | awk -v n="$n" '$1 == n {print $3}'); [ -n "$f" ] && cp -L "$f" $W/lib/
done
git rev-parse HEAD > $W/HEAD.txt
XZ_OPT=-9 tar cJf .cuda-wt/p.tar.xz -C $W .
rm -rf $W build/lilac-*
ls -la .cuda-wt/p.tar.xz
