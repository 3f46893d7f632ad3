#!/usr/bin/env bash
# Runs every test program (C/cmocka in $BUILD/tests, Python in tests/py) and ends with one
# summary line: "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0; skipn=0; failed_names=()
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    out=$(CMOCKA_MESSAGE_OUTPUT=TAP timeout 1800 "$t" 2>&1); rc=$?
    echo "$out" | sed "s/^/[$name] /"
    p=$(echo "$out" | grep -cE '^ok ' || true)
    # cmocka's TAP marks a skip() as "not ok N # SKIP": a skip, not a failure
    s=$(echo "$out" | grep -cE '^(not )?ok .*# SKIP' || true)
    so=$(echo "$out" | grep -cE '^ok .*# SKIP' || true)
    f=$(echo "$out" | grep -E '^not ok ' | grep -cvE '# SKIP' || true)
    p=$((p - so))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "[$name] exited with status $rc"; fi
    pass=$((pass + p)); fail=$((fail + f)); skipn=$((skipn + s))
    [ "$f" -gt 0 ] && failed_names+=("$name")
done
if [ -d tests/py ] && ls tests/py/test_*.py >/dev/null 2>&1; then
    out=$(LILAC_BIN="$BUILD/lilac" LILAC_QUANT_TOOL="${LILAC_QUANT_TOOL:-$BUILD/tests/tools/quant_tool}" python3 -m pytest -q -rfE tests/py 2>&1); rc=$?
    echo "$out" | sed 's/^/[pytest] /'
    line=$(echo "$out" | tail -n 1)
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
    f=$(echo "$line" | grep -oE '[0-9]+ (failed|error|errors)' | grep -oE '[0-9]+' | paste -sd+ | bc 2>/dev/null || echo 0)
    s=$(echo "$line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
    [ -z "$f" ] && f=0
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    pass=$((pass + p)); fail=$((fail + f)); skipn=$((skipn + s))
    # name each failing Python test on the closing "failing:" line: CI shows only the output's tail,
    # and a bare "pytest" there once left a one-off failure impossible to identify
    if [ "$f" -gt 0 ]; then
        ids=$(echo "$out" | grep -E '^(FAILED|ERROR) ' | awk '{print $2}' | paste -sd' ')
        failed_names+=("pytest${ids:+($ids)}")
    fi
done_py=1
fi
# the libFuzzer targets (built with clang by `make fuzz`) at least still compile against the
# current headers: one once did not for three sessions (a changed signature)
for f in tests/fuzz/fuzz_*.c; do
    name=$(basename "$f" .c)
    if out=$(${CC:-cc} -std=c11 -D_GNU_SOURCE -fsyntax-only -Isrc -I/usr/include/cjson "$f" 2>&1); then
        echo "[fuzz] ok - $name compiles"; pass=$((pass + 1))
    else
        echo "$out" | sed "s/^/[fuzz] /"; echo "[fuzz] not ok - $name compiles"; fail=$((fail + 1)); failed_names+=("$name")
    fi
done
# the kernel lab (dev/kernels/*.cu, run on a GPU) at least still compiles against the backend's
# headers, where nvcc is present (CI has it; the lab's programs include the kernels under test)
if command -v nvcc >/dev/null 2>&1; then
    for f in dev/kernels/*.cu; do
        name=$(basename "$f" .cu)
        if out=$(make -s BUILD="$BUILD" "$BUILD/lab/$name" 2>&1); then
            echo "[lab] ok - $name compiles"; pass=$((pass + 1))
        else
            echo "$out" | tail -n 20 | sed "s/^/[lab] /"; echo "[lab] not ok - $name compiles"; fail=$((fail + 1)); failed_names+=("lab/$name")
        fi
    done
fi
# host tests of the CUDA kernels' pure helpers (tests/cuda_host/*.cu: nvcc compiles them as host code
# against the kernel headers and the CPU library; they run without a GPU)
if command -v nvcc >/dev/null 2>&1 && [ -f "$BUILD/liblilac.a" ]; then
    mkdir -p "$BUILD/tests/cuda_host"
    for f in tests/cuda_host/test_*.cu; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .cu)
        if ! out=$(nvcc -O2 -std=c++17 -Isrc -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
                       -o "$BUILD/tests/cuda_host/$name" "$f" "$BUILD/liblilac.a" -lm -lpthread 2>&1); then
            echo "$out" | tail -n 20 | sed "s/^/[$name] /"; echo "[$name] not ok - builds"; fail=$((fail + 1)); failed_names+=("$name")
            continue
        fi
        out=$(timeout 600 "$BUILD/tests/cuda_host/$name" 2>&1); rc=$?
        echo "$out" | sed "s/^/[$name] /"
        p=$(echo "$out" | grep -cE '^ok ' || true)
        f=$(echo "$out" | grep -cE '^not ok ' || true)
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "[$name] exited with status $rc"; fi
        pass=$((pass + p)); fail=$((fail + f))
        [ "$f" -gt 0 ] && failed_names+=("$name")
    done
fi
[ ${#failed_names[@]} -gt 0 ] && echo "failing: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skipn skipped"
[ "$fail" -eq 0 ]
