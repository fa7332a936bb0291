#!/usr/bin/env bash
# Processes on one GPU (CUDA IPC, under MPS): the multi-process GPU tests with pushed inputs
# (test_gpu_mp: bench/scripts/processes.sh tests), then one_shot all_reduce latency and size sweep,
# mp_base (collcomm_bench_mp of the parent commit: staged inputs, entry barrier) against mp_push
# (inputs pushed as LL lines into peers' windows), in turn, 2 rounds.
#   bash bench/results/latency_2026-12-06/run8.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
bash bench/scripts/processes.sh "$OUT/tests" tests
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/nvidia/bin
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
mp() {  # log binary args...
  local log=$1 bin=$2; shift 2
  echo "== $bin $*" >> "$OUT/$log"
  timeout 60 $B/$bin "$@" >> "$OUT/$log" 2>&1
  echo "rc=$?" >> "$OUT/$log"
}
for round in 1 2; do
  for n in 8 4 2; do
    for g in 1 0; do
      for v in mp_base mp_push; do
        mp lat.log $v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
      done
    done
  done
  for v in mp_base mp_push; do
    mp sweep.log $v -n 8 -k all_reduce -a one_shot -b 8 -e 4M -f 4 -G 1 -w 20 -i 100
  done
done
