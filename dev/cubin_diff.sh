#!/usr/bin/env bash
# dev/cubin_diff.sh [REV] [NVCC FLAGS...] — is every kernel's machine code the same as at REV
# (default HEAD)? Compiles src/backend/cuda/{lean,cuda_backend}.cu of REV and of the working tree
# to sm_90a cubins (the working tree with the extra flags) and prints, per kernel, "same" or "DIFF"
# with the code sizes. Why: session 20 measured binaries whose hot kernels carried code that the
# default settings never run (switches left off) 5-7 tok/s slower than HEAD; an experiment kept in
# the tree must leave the default build's kernels byte for byte as they were (guard it with the
# preprocessor, then check here). Needs nvcc and python3; SRCS="lean.cu" checks one file (faster).
set -e
cd "$(dirname "$0")/.."
rev=HEAD
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then rev=$1; shift; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git archive "$rev" src | tar x -C "$T"
for f in ${SRCS:-lean.cu cuda_backend.cu}; do
    nvcc -O3 -std=c++17 -I"$T/src" -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -cubin \
         -o "$T/old_${f%.cu}.cubin" "$T/src/backend/cuda/$f" &
    nvcc -O3 -std=c++17 -Isrc -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -cubin "$@" \
         -o "$T/new_${f%.cu}.cubin" "src/backend/cuda/$f" &
    wait
    python3 - "$T/old_${f%.cu}.cubin" "$T/new_${f%.cu}.cubin" "$f" <<'PY'
import struct, sys
def texts(path):  # the .text.<kernel> sections of an ELF64 cubin
    d = open(path, 'rb').read()
    shoff = struct.unpack_from('<Q', d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    hdr = lambda i: struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize)
    names = hdr(shstrndx)[4]
    out = {}
    for i in range(shnum):
        h = hdr(i)
        name = d[names + h[0]:d.index(b'\0', names + h[0])].decode()
        if name.startswith('.text.'):
            out[name[6:]] = d[h[4]:h[4] + h[5]]
    return out
a, b = texts(sys.argv[1]), texts(sys.argv[2])
# a kernel renamed (e.g. a template parameter added with a default) whose code is byte-identical
# to one that disappeared counts as the same kernel
gone = {a[n]: n for n in set(a) - set(b)}
renamed = {n: gone.pop(b[n]) for n in sorted(set(b) - set(a)) if b[n] in gone}
diff = 0
for n in sorted(set(b) | set(gone.values())):
    old = a.get(renamed.get(n, n))
    same = old == b.get(n)
    diff += not same
    tag = ' (was %s)' % renamed[n] if n in renamed else ''
    print('%s %7d %7d  %s%s' % ('same' if same else 'DIFF', len(old or b''), len(b.get(n, b'')), n, tag))
print('%s: %d of %d kernels differ' % (sys.argv[3], diff, len(set(b) | set(gone.values()))))
PY
done
