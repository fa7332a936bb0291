#!/bin/bash
# On the H200 machine: the multi-process GPU tests and the multi-process bench figures
# (transport::nvlink over CUDA IPC, 2/4/8 processes on the one GPU). Uses binaries prebuilt by
# scripts/build_gpu_here.sh test_gpu_mp bench_mp (carry .deps/bin/test_gpu_mp and
# .deps/bin/collcomm_bench_mp). Writes logs under OUT.
#   bench/run_device_mp.sh OUT [tests|bench|all] [max_bytes]
# The no-MPS check runs first (before the daemon starts); the rest under MPS, which this script
# starts as a user-level daemon and stops at the end (it changes no GPU setting).
OUT=${1:?usage: run_device_mp.sh OUT [tests|bench|all] [max_bytes]}
WHAT=${2:-all}
MAX=${3:-1G}
BIN=.deps/bin
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt" 2>&1
git log -1 --format='%H %s' >> "$OUT/device.txt" 2>/dev/null
export PATH=$PATH:/usr/local/nvidia/bin
export CUDA_MODULE_LOADING=EAGER
if [ "$WHAT" != bench ]; then
  unset CUDA_MPS_PIPE_DIRECTORY
  echo "== no MPS: test_gpu_mp --no-mps" | tee -a "$OUT/summary.txt"
  ( time timeout 90 $BIN/test_gpu_mp --no-mps ) > "$OUT/test_no_mps.log" 2>&1
  echo "rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_no_mps.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a "$OUT/summary.txt"
trap 'echo quit | nvidia-cuda-mps-control' EXIT  # (the run tool returns at most 8 files: no MPS logs)
if [ "$WHAT" != bench ]; then
  for mode in "" --fault; do
    echo "== MPS: test_gpu_mp $mode" | tee -a "$OUT/summary.txt"
    ( time timeout 150 $BIN/test_gpu_mp $mode ) > "$OUT/test_mp${mode}.log" 2>&1
    echo "rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_mp${mode}.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  done
  ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | tee -a "$OUT/summary.txt"
fi
if [ "$WHAT" != tests ]; then
  for n in 2 4 8; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      timeout 300 $BIN/collcomm_bench_mp -n $n -k $k -a ring -b 8 -e $MAX -f 4 >> "$OUT/bench_n${n}.log" 2>&1
      echo "bench n=$n $k ring rc=$?" | tee -a "$OUT/summary.txt"
    done
    timeout 120 $BIN/collcomm_bench_mp -n $n -k all_reduce -a one_shot -b 8 -e 4M -f 4 >> "$OUT/bench_n${n}.log" 2>&1
    echo "bench n=$n all_reduce one_shot rc=$?" | tee -a "$OUT/summary.txt"
    # Small messages with one channel: across processes each block costs start-up time (see RESULTS).
    for a in ring one_shot; do
      timeout 60 $BIN/collcomm_bench_mp -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C 1 >> "$OUT/bench_n${n}.log" 2>&1
      echo "bench n=$n all_reduce $a 1 channel rc=$?" | tee -a "$OUT/summary.txt"
    done
  done
fi
