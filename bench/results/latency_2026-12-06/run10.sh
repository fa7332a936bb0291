#!/usr/bin/env bash
# Where pushed inputs lose among 8 and 4 processes: mp_push2 (run9.sh) against two variants that
# time one side alone: mp_nopoll pushes but reads no peer (no header check, peers' lines taken as
# zero: #wrong counts every element), mp_nopush neither pushes nor reads (the kernel's own work:
# its input loaded and stored); and mp_base. One_shot, 1 channel, from a CUDA graph, in turn.
#   bash bench/results/latency_2026-12-06/run10.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/nvidia/bin
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for round in 1 2; do
  for n in 8 4; do
    for v in mp_base mp_push2 mp_nopoll mp_nopush; do
      echo "== $v -n $n" >> "$OUT/lat.log"
      timeout 60 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G 1 -w 50 -i 200 >> "$OUT/lat.log" 2>&1
      echo "rc=$?" >> "$OUT/lat.log"
    done
  done
done
