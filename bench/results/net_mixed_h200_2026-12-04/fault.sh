#!/usr/bin/env bash
# The killed-rank cases of net<socket> with GPU buffers, three rounds (all through the proxy, and
# over two pretend hosts: the killed rank 3 a GPU-memory peer of rank 2 and a network peer of
# ranks 0, 1), then the pretend-host matrix once more; under MPS. test_gpu_mp prebuilt in BIN.
#   bash bench/results/net_mixed_h200_2026-12-04/fault.sh OUT
set -u
OUT=${1:?usage: fault.sh OUT}
BIN=${BIN:-.deps/bin}
mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for i in 1 2 3; do
  timeout 100 "$BIN/test_gpu_mp" --only 'mp fault: net*' > "$OUT/fault_$i.log" 2>&1
  echo "round $i rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/fault_$i.log")" | tee -a "$OUT/summary.txt"
done
[[ ${MATRIX:-1} == 1 ]] && timeout 150 "$BIN/test_gpu_mp" --only 'mp: net<socket> GPU buffers? pretend*' > "$OUT/mixed.log" 2>&1
echo "mixed rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/mixed.log")" | tee -a "$OUT/summary.txt"
grep -hE "^net_kill.* rank [0-9]: rank|ERROR" "$OUT"/fault_*.log | head -40
