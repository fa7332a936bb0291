#!/usr/bin/env bash
# As run8.sh, with mp_push2: each push store towards another peer from a warp of its own where
# the items (peers x (header + lines)) are no more than the warps, against mp_base; and the
# multi-process fault case of ranks that disagree about a call (test_gpu_mp, under MPS).
#   bash bench/results/latency_2026-12-06/run9.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/nvidia/bin
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
( time timeout 200 $B/test_gpu_mp --only 'mp fault: processes that disagree*' ) > "$OUT/test_disagree.log" 2>&1
echo "disagree rc=$?" >> "$OUT/test_disagree.log"
mp() {  # log binary args...
  local log=$1 bin=$2; shift 2
  echo "== $bin $*" >> "$OUT/$log"
  timeout 60 $B/$bin "$@" >> "$OUT/$log" 2>&1
  echo "rc=$?" >> "$OUT/$log"
}
for round in 1 2; do
  for n in 8 4 2; do
    for g in 1 0; do
      for v in mp_base mp_push2; do
        mp lat.log $v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
      done
    done
  done
  for v in mp_base mp_push2; do
    mp sweep.log $v -n 8 -k all_reduce -a one_shot -b 8 -e 4M -f 4 -G 1 -w 20 -i 100
  done
done
