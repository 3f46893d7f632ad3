#!/usr/bin/env bash
# dev/ab_bench.sh — the same-call A/B of decode variants, run ON THE DEVICE from a call script after
# the bundle is unpacked (cd into it first; binaries from dev/lean_variant.sh, bundled with MIN=1):
#   V="ref:lilac evf:lilac-evf pf0:lilac:LILAC_CUDA_PFNEXT=0,LILAC_CUDA_LN_PRE=2" ROUNDS=3 DET=1 dev/ab_bench.sh
# Each variant is NAME:BINARY[:ENV=VAL,ENV=VAL]. DET=1 first prints every variant's --deterministic
# digest (a change that should keep the bits must keep it). Then ROUNDS rounds of the quick bench,
# variants interleaved, one line per run: the 4096/1024 decode point and the 256 point. Raw output
# goes to $OUT/all.tgz. TO: seconds per run before it is killed (default 120; a quick bench takes ~12).
set -u
: "${V:?V=\"name:binary[:ENV=VAL,...] ...\"}"
ROUNDS=${ROUNDS:-3}
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
T=$(mktemp -d)
run_one() { # spec out-file [extra args]
    local spec=$1 out=$2; shift 2
    local n=${spec%%:*} r=${spec#*:}; local b=${r%%:*} e=${r#*:}
    [ "$e" = "$r" ] && e=
    env ${e//,/ } timeout "${TO:-120}" "./$b" $Q "$@" > "$out" 2>&1
}
if [ "${DET:-1}" = 1 ]; then
    for v in $V; do
        run_one "$v" "$T/det_${v%%:*}.txt" --deterministic
        echo "det ${v%%:*}: $(grep -o 'digest [0-9a-f]*' "$T/det_${v%%:*}.txt" | head -1)"
    done
fi
for r in $(seq 0 $((ROUNDS - 1))); do
    for v in $V; do
        n=${v%%:*}; f="$T/r${r}_$n.txt"
        run_one "$v" "$f"
        echo "r$r $n : $(grep '4096/1024' "$f" | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' "$f" | grep -oE 'decode +[0-9.]+' | head -1)"
    done
done
(cd "$T" && tar czf "${OUT:-.}/all.tgz" *.txt)
rm -rf "$T"
