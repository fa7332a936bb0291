#!/usr/bin/env bash
# The in-process GPU tests (ranks as threads of one process) on the GPU machine, logs under OUT.
#   bash bench/scripts/gpu_tests.sh OUT [prebuilt|build]
# prebuilt (default): runs every in-process GPU test found in BIN (default .deps/bin), each
#   BIN/test_gpu_* but test_gpu_mp (processes.sh's: it needs MPS), and the GPU demo (example_02,
#   8 ranks), built beforehand on a machine without a GPU: scripts/build_gpu_here.sh gpu_tests
#   example; carry .deps/bin. -> OUT/tests.txt, OUT/demo.txt
# build: configures and builds every GPU test (not the full matrix: matrix.sh), the bench programs
#   and the GPU demo on the GPU machine (16 cores, ~8 minutes; doctest from .deps/prefix, carry it)
#   into build-gpu, then runs `ctest -L gpu -LE "gpu_matrix|mp"` (the multi-process tests are
#   processes.sh's: they need MPS) and the demo. -> OUT/gpu_build.txt, OUT/gpu_ctest.txt. The
#   figures after a kernel change follow with the bench just built:
#   BIN=build-gpu/bench bash bench/scripts/small_messages.sh OUT; ... bandwidth.sh OUT slots
set -u
out=${1:?usage: gpu_tests.sh OUT [prebuilt|build]}
what=${2:-prebuilt}
. "$(dirname "$0")/common.sh"
record_env "$out"
if [[ $what == prebuilt ]]; then
  for path in "$BIN"/test_gpu_*; do
    t=${path##*/}
    [[ -x $path && $t != test_gpu_mp ]] || continue
    t0=$SECONDS
    timeout 300 "$BIN/$t" -d 2>&1 | tail -60
    echo "# $t exit ${PIPESTATUS[0]} ($((SECONDS - t0)) s)"
  done > "$out/tests.txt" 2>&1
  [[ -x $BIN/example_02 ]] && { timeout 60 "$BIN/example_02" --ranks 8; echo "# exit $?"; } > "$out/demo.txt" 2>&1
  grep -E "test cases|exit" "$out/tests.txt"
elif [[ $what == build ]]; then
  t0=$SECONDS
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLCOMM_BUILD_TESTS=ON -DCOLLCOMM_BUILD_EXAMPLES=ON \
    -DCOLLCOMM_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/prefix" \
    > "$out/gpu_configure.txt" 2>&1 || tail -20 "$out/gpu_configure.txt"
  targets=$(ninja -C build-gpu -t targets all 2>/dev/null |
    grep -oE '^(gpu_[a-z0-9_]+|collcomm_bench[a-z_]*|collcomm_example_02[a-z_]*)' | grep -v '^gpu_matrix' | sort -u)
  echo "# targets: $targets" > "$out/gpu_build.txt"
  ninja -C build-gpu -j 16 -k 0 $targets >> "$out/gpu_build.txt" 2>&1
  echo "# build exit $? after $((SECONDS - t0)) s" >> "$out/gpu_build.txt"
  grep -E "error|FAILED" "$out/gpu_build.txt" | head -20
  tail -1 "$out/gpu_build.txt"
  ( cd build-gpu && ctest -L gpu -LE "gpu_matrix|mp" --output-on-failure --timeout 300 ) > "$out/gpu_ctest.txt" 2>&1
  echo "# ctest exit $? at $((SECONDS - t0)) s" >> "$out/gpu_ctest.txt"
  grep -E "tests passed|Test +#|SKIPPED|exit" "$out/gpu_ctest.txt"
  demo=build-gpu/examples/collcomm_example_02_all_reduce_gpu
  [[ -x $demo ]] && { timeout 60 $demo --ranks 8; echo "# exit $?"; } > "$out/demo.txt" 2>&1
else
  echo "gpu_tests.sh: '$what' is not prebuilt or build" >&2
  exit 2
fi
