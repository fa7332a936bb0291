#!/usr/bin/env bash
# The GPU cross product (every kind, algorithm, op and type for 1 to 16 ranks on one GPU) on the
# GPU machine: configures with COLLCOMM_GPU_FULL_MATRIX=ON, builds the matrix executables whose
# names match REGEX (16 cores, within build-seconds, default 420), runs them through ctest (label
# gpu_matrix), logs under OUT. doctest comes from .deps/prefix (a copy of Debian's doctest-dev
# made relocatable; carry it).
#   bash bench/scripts/matrix.sh OUT REGEX [build-seconds]
#   -> OUT/matrix_configure.txt, OUT/matrix_build.txt, OUT/matrix_ctest.txt
set -u
out=${1:?usage: matrix.sh OUT REGEX [build-seconds]}
regex=${2:?usage: matrix.sh OUT REGEX [build-seconds]}
budget=${3:-420}
. "$(dirname "$0")/common.sh"
record_env "$out"
t0=$SECONDS
cmake -S . -B build-matrix -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLCOMM_BUILD_TESTS=ON -DCOLLCOMM_BUILD_EXAMPLES=OFF \
  -DCOLLCOMM_GPU_FULL_MATRIX=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/prefix" \
  > "$out/matrix_configure.txt" 2>&1 || { tail -30 "$out/matrix_configure.txt"; exit 1; }
targets=$(ninja -C build-matrix -t targets all 2>/dev/null | grep -oE '^gpu_matrix_[a-z0-9_]+' | grep -E "$regex" |
  sort -u)
echo "# $(echo $targets | wc -w) targets: $targets" > "$out/matrix_build.txt"
timeout "$budget" ninja -C build-matrix -j 16 -k 0 $targets >> "$out/matrix_build.txt" 2>&1
echo "# build exit $? after $((SECONDS - t0)) s" >> "$out/matrix_build.txt"
grep -E "error|FAILED" "$out/matrix_build.txt" | head -20
tail -2 "$out/matrix_build.txt"
built=$(for t in $targets; do [[ -x build-matrix/tests/gpu/matrix/$t ]] && echo $t; done)
echo "# built: $(echo $built | wc -w)"
( cd build-matrix && ctest -L gpu_matrix -R "$(echo $built | tr ' ' '|')" --output-on-failure --timeout 600 ) \
  > "$out/matrix_ctest.txt" 2>&1
echo "# ctest exit $? at $((SECONDS - t0)) s" >> "$out/matrix_ctest.txt"
tail -25 "$out/matrix_ctest.txt"
