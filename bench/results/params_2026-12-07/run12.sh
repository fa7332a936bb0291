#!/usr/bin/env bash
# Device call 12: the in-process GPU tests that run one_shot all_reduce among ranks of one GPU
# (the register path of kernels/grouped_call.cuh) or its abort check, built by CI's clean clone of
# branch combined at 8d8b8ce (build-ci/tests/gpu, stripped): test_gpu_sched_reducing,
# test_gpu_pcie, test_gpu_pcie_reducing, test_gpu_fault.
#   bash bench/results/params_2026-12-07/run12.sh OUT      (binaries: .deps/bins12.tar.xz in .deps/bin)
set -u
OUT=${1:?usage: run12.sh OUT}
LIMIT=${LIMIT:-400}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
for t in test_gpu_sched_reducing test_gpu_fault test_gpu_pcie_reducing test_gpu_pcie; do
  time_left 20 "$t" || continue
  ( time timeout $((LIMIT - SECONDS - 10)) "$B/$t" ) > "$OUT/$t.log" 2>&1
  echo "[$SECONDS s] $t rc=$? $(doctest_counts "$OUT/$t.log")" | summary
done
