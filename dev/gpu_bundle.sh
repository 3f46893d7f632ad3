#!/usr/bin/env bash
# dev/gpu_bundle.sh — assembles what one device call needs into .cuda-wt/b.tar.xz (git-ignored):
# build/lilac, the GPU test binary, the kernel lab, the shared libraries the GPU machine lacks
# (it has CUDA, libpcre2 and libcurl, not cJSON/utf8proc/libmicrohttpd and their dependencies),
# the ../shared fixtures the GPU tests read, and dev/gpu_session.sh. Build first, here:
#   make -j2 CUARCH="-gencode arch=compute_90a,code=sm_90a" && tests/gpu/run.sh --help >/dev/null; make lab
# then on the device (carry .cuda-wt):
#   tar xJf .cuda-wt/b.tar.xz -C /tmp/b && /tmp/b/gpu_session.sh test bench-quick
set -e
cd "$(dirname "$0")/.."
B=${BUILD:-build}
S=${LILAC_SHARED:-../shared}
W=.cuda-wt/stage
rm -rf "$W" && mkdir -p "$W/lab" "$W/lib" "$W/shared/fixtures"
# MIN=1: only the lilac binaries and the libraries (an A/B bench call: the 64 MiB carry limit counts
# the tracked tree too, ~30 MB of results, so gpu_test + fixtures + three binaries no longer fit)
if [ -n "${MIN:-}" ]; then cp "$B/lilac" "$W/"; else cp "$B/lilac" "$B/tests/gpu/gpu_test" dev/gpu_session.sh "$W/"; fi
# variants linked by dev/lean_variant.sh (build/lilac-NAME) come along
for v in "$B"/lilac-*; do [ -f "$v" ] && cp "$v" "$W/"; done
strip --strip-debug "$W"/lilac*; [ -z "${MIN:-}" ] && strip --strip-debug "$W/gpu_test"  # the carry limit is 64 MiB
# NOLAB=1: without the lab (smaller); LAB="gdn_chunk attn": only those lab programs (MIN=1 LAB=...: both)
if [ -n "${LAB:-}" ]; then for k in $LAB; do cp "$B/lab/$k" "$W/lab/"; done  # with MIN=1 too
elif [ -n "${MIN:-}" ]; then :
elif [ -d "$B/lab" ] && [ -z "${NOLAB:-}" ]; then cp "$B"/lab/* "$W/lab/"; fi
# the libraries the GPU machine lacks (and theirs); everything else lilac links is there
for n in libcjson.so.1 libutf8proc.so.2 libmicrohttpd.so.12 libgnutls.so.30 libidn2.so.0 libunistring.so.2 \
         libp11-kit.so.0 libtasn1.so.6 libnettle.so.8 libhogweed.so.6 libgmp.so.10 libffi.so.8 libpcre2-8.so.0; do
    f=$(ldd "$B/lilac" | awk -v n="$n" '$1 == n {print $3}')
    [ -n "$f" ] && cp -L "$f" "$W/lib/"
done
# NOFIX=1: without the fixtures (tests of synthetic models only, e.g. gpu_test --cout)
[ -z "${MIN:-}" ] && [ -z "${NOFIX:-}" ] && cp -r "$S/fixtures/tiny" "$S/fixtures/small" "$W/shared/fixtures/"
XZ_OPT=${XZ_OPT:--9} tar cJf .cuda-wt/b.tar.xz -C "$W" .  # -9: the bundle must leave room under the 64 MiB carry limit
rm -rf "$W"
ls -la .cuda-wt/b.tar.xz
