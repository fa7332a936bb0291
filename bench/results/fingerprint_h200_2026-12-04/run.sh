#!/usr/bin/env bash
# The call fingerprint in every FIFO message and at every direct barrier: the GPU tests built and
# run on the device, the multi-process tests (faults included), then this tree's bench against
# dde0154's (carried: .deps/bin/collcomm_bench_old, collcomm_bench_mp_old), interleaved, twice.
#   bash bench/results/fingerprint_h200_2026-12-04/run.sh OUT build   (every GPU test and bench, ~8 min)
#   bash bench/results/fingerprint_h200_2026-12-04/run.sh OUT tests   (ctest -L gpu -LE "gpu_matrix|mp")
#   bash bench/results/fingerprint_h200_2026-12-04/run.sh OUT bench   (then, on the same warm machine)
#   bash bench/results/fingerprint_h200_2026-12-04/run.sh OUT recheck (after merging the bootstrap,
#     segment and host fingerprint work: the GPU tests whose host code changed, and the processes')
set -u
OUT=$1
. bench/scripts/common.sh
record_env "$OUT"
chmod +x .deps/bin/* 2>/dev/null
if [[ ${2:-} == build ]]; then
  t0=$SECONDS
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLCOMM_BUILD_TESTS=ON -DCOLLCOMM_BUILD_EXAMPLES=ON \
    -DCOLLCOMM_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/prefix" \
    > "$OUT/gpu_configure.txt" 2>&1 || tail -20 "$OUT/gpu_configure.txt"
  targets=$(ninja -C build-gpu -t targets all 2>/dev/null |
    grep -oE '^(gpu_[a-z0-9_]+|collcomm_bench[a-z_]*|collcomm_example_02[a-z_]*)' | grep -v '^gpu_matrix' | sort -u)
  ninja -C build-gpu -j 16 -k 0 $targets > "$OUT/gpu_build.txt" 2>&1
  echo "# build exit $? after $((SECONDS - t0)) s" | tee -a "$OUT/gpu_build.txt"
  grep -E "error|FAILED" "$OUT/gpu_build.txt" | head -20
  mkdir -p build-gpu/bin
  cp build-gpu/tests/gpu/mp/gpu_test_gpu_mp build-gpu/bin/test_gpu_mp
  cp build-gpu/bench/collcomm_bench build-gpu/bench/collcomm_bench_mp build-gpu/bin/
  exit 0
fi
if [[ ${2:-} == recheck ]]; then
  t0=$SECONDS
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLCOMM_BUILD_TESTS=ON -DCOLLCOMM_BUILD_EXAMPLES=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/prefix" > "$OUT/gpu_configure.txt" 2>&1
  ninja -C build-gpu -j 16 gpu_test_gpu_api gpu_test_gpu_fault gpu_test_gpu_p2p_order gpu_test_gpu_sched_rooted \
    gpu_test_gpu_ll_rooted gpu_test_gpu_pcie_rooted gpu_test_gpu_mp collcomm_example_02_all_reduce_gpu > "$OUT/gpu_build.txt" 2>&1
  echo "# build exit $? after $((SECONDS - t0)) s" | tee -a "$OUT/gpu_build.txt"
  grep -E "error|FAILED" "$OUT/gpu_build.txt" | head -20
  ( cd build-gpu && ctest -R "gpu_test_gpu_(api|fault|p2p_order|sched_rooted|ll_rooted|pcie_rooted)|example.02" \
    --output-on-failure --timeout 300 ) > "$OUT/gpu_ctest.txt" 2>&1
  echo "# ctest exit $?" >> "$OUT/gpu_ctest.txt"
  grep -E "tests passed|Test +#|exit" "$OUT/gpu_ctest.txt"
  mkdir -p build-gpu/bin
  cp build-gpu/tests/gpu/mp/gpu_test_gpu_mp build-gpu/bin/test_gpu_mp
  BIN=build-gpu/bin bash bench/scripts/processes.sh "$OUT/mp" tests
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  nvidia-cuda-mps-control -d
  (time timeout 120 build-gpu/bin/test_gpu_mp --only 'mp fault: processes*') > "$OUT/mp/test_mp_disagree.log" 2>&1
  echo "disagree rc=$?" | tee -a "$OUT/mp/summary.txt"
  echo quit | nvidia-cuda-mps-control
  ls /dev/shm
  exit 0
fi
if [[ ${2:-} == tests ]]; then
  ( cd build-gpu && ctest -L gpu -LE "gpu_matrix|mp" --output-on-failure --timeout 300 ) > "$OUT/gpu_ctest.txt" 2>&1
  echo "# ctest exit $?" >> "$OUT/gpu_ctest.txt"
  grep -E "tests passed|Test +#|SKIPPED|exit" "$OUT/gpu_ctest.txt"
  demo=build-gpu/examples/collcomm_example_02_all_reduce_gpu
  [[ -x $demo ]] && { timeout 60 $demo --ranks 8; echo "# exit $?"; } > "$OUT/demo.txt" 2>&1
  exit 0
fi
export NEW_BIN=build-gpu/bin/collcomm_bench OLD_BIN=.deps/bin/collcomm_bench_old
{
  ab ring_ll8 -k all_reduce -a ring -p ll -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab tree_ll8 -k all_reduce -a tree -p ll -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab ring8 -k all_reduce -a ring -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab os8 -k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab ring8big -k all_reduce -a ring -r 8 -b 16M -e 256M -f 4 -n 10 -w 3 -R 3 -c 1 -C 16 -s 1M
  ab ag8big -k all_gather -a ring -r 8 -b 16M -e 256M -f 4 -n 10 -w 3 -R 3 -c 1 -C 16 -s 1M
} > "$OUT/ab_threads.txt" 2>&1
grep -c "^# exit 0" "$OUT/ab_threads.txt"
# Processes (MPS, processes.sh's tests, then the disagreement faults, then old/new mp bench).
BIN=build-gpu/bin bash bench/scripts/processes.sh "$OUT/mp" tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
(time timeout 120 build-gpu/bin/test_gpu_mp --only 'mp fault: processes*') > "$OUT/mp/test_mp_disagree.log" 2>&1
echo "disagree rc=$?" >> "$OUT/mp/summary.txt"
{
  for round in 1 2; do
    for v in old new; do
      b=build-gpu/bin/collcomm_bench_mp
      [[ $v == old ]] && b=.deps/bin/collcomm_bench_mp_old
      for n in 2 8; do
        for a in one_shot ring; do
          echo "\$ [mp n=$n $a $v round $round] collcomm_bench_mp -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C 1 -G 1 -w 20 -i 100"
          timeout 60 "$b" -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C 1 -G 1 -w 20 -i 100 2>&1 | grep -vE "^#  +size"
          echo "# exit $?"
        done
      done
    done
  done
} > "$OUT/ab_processes.txt" 2>&1
grep -c "^# exit 0" "$OUT/ab_processes.txt"
