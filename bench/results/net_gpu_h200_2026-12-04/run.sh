#!/usr/bin/env bash
# GPU buffers over transport::net<socket> on the H200: ranks as processes on the one GPU, their
# proxies talking over loopback TCP. test_gpu_mp prebuilt (BIN, default .deps/bin).
#   bash bench/results/net_gpu_h200_2026-12-04/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
BIN=${BIN:-.deps/bin}
export COLLCOMM_MP_EXE=1
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/env.txt" 2>&1; git log --oneline -1 >> "$OUT/env.txt" 2>&1
unset CUDA_MPS_PIPE_DIRECTORY
( time timeout 200 "$BIN/test_gpu_mp" --no-mps 'no mps: net*' ) > "$OUT/net_no_mps.log" 2>&1
echo "no-mps net rc=$?" | tee -a "$OUT/summary.txt"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a "$OUT/summary.txt"
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for pat in 'mp: net*' 'mp fault: net*' 'mp: pcie staged*'; do
  log=$(echo "$pat" | tr -c 'a-z0-9' '_').log
  ( time timeout ${LIMIT:-240} "$BIN/test_gpu_mp" --only "$pat" ) > "$OUT/$log" 2>&1
  echo "$pat rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/$log")" | tee -a "$OUT/summary.txt"
done
