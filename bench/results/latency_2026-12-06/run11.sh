#!/usr/bin/env bash
# mp_push2 (run9.sh) with a __threadfence() after its pushes (mp_pfence) and without the header check
# (mp_pnohdr: peers' headers neither awaited nor compared), against mp_base and mp_push2, in turn.
#   bash bench/results/latency_2026-12-06/run11.sh OUT
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
    for v in mp_base mp_push2 mp_pfence mp_pnohdr; do
      echo "== $v -n $n" >> "$OUT/lat.log"
      timeout 60 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G 1 -w 50 -i 200 >> "$OUT/lat.log" 2>&1
      echo "rc=$?" >> "$OUT/lat.log"
    done
  done
done
