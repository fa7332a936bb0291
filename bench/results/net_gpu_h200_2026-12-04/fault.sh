#!/usr/bin/env bash
# The net<socket> GPU-buffer fault case alone (under MPS), test_gpu_mp prebuilt in BIN.
set -u
OUT=${1:?usage: fault.sh OUT}
BIN=${BIN:-.deps/bin}
mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for i in 1 2 3; do
  timeout 120 "$BIN/test_gpu_mp" --only 'mp fault: net*' > "$OUT/fault_$i.log" 2>&1
  echo "round $i rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/fault_$i.log")" | tee -a "$OUT/summary.txt"
done
