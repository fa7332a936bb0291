#!/usr/bin/env bash
# net<socket> GPU-buffer test cases under MPS (matrix and hierarchical over pretend hosts),
# test_gpu_mp prebuilt in BIN.
set -u
OUT=${1:?usage: hier.sh OUT}
BIN=${BIN:-.deps/bin}
mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
( time timeout 400 "$BIN/test_gpu_mp" --only 'mp: net*' ) > "$OUT/net.log" 2>&1
echo "rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/net.log")" | tee "$OUT/summary.txt"
grep -E "hier.*cases|FAIL|hosts seen" "$OUT/net.log" | head -20
