#!/usr/bin/env bash
# GPU buffers over net<socket> (each rank's proxy over loopback TCP) beside the staged pcie path
# (the same FIFOs in pinned host memory, moved by the GPU itself through shared memory), ranks as
# processes on one H200 under MPS: collcomm_bench_mp -T net / -T pcie, all_reduce ring, 2 and 4
# processes, 8 B .. 256 MiB; each run prints the pinned copy bandwidth it measured (the ceiling of
# the PCIe columns). collcomm_bench_mp prebuilt in BIN.
#   bash bench/results/net_gpu_h200_2026-12-04/bench.sh OUT
set -u
OUT=${1:?usage: bench.sh OUT}
BIN=${BIN:-.deps/bin}
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/env.txt" 2>&1; nproc >> "$OUT/env.txt"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for n in 2 4; do
  for t in net pcie; do
    S=1M
    [[ $t == pcie ]] && S=256K  # its connections live in /dev/shm: n x n x channels x slots x S
    echo "\$ collcomm_bench_mp -T $t -n $n -k all_reduce -a ring -b 8 -e 256M -f 4 -S $S -C 4" >> "$OUT/bench_n$n.log"
    timeout 150 "$BIN/collcomm_bench_mp" -T $t -n $n -k all_reduce -a ring -b 8 -e 256M -f 4 -S $S -C 4 >> "$OUT/bench_n$n.log" 2>&1
    echo "# exit $?" >> "$OUT/bench_n$n.log"
  done
done
cat "$OUT"/bench_n*.log | grep -vE "^\s*$" | head -120
