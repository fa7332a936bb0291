#!/usr/bin/env bash
# Small all_reduce latency among 8 ranks: where a graph-replayed call's time goes, and what
# programmatic dependent launch (PDL) changes. Narrow builds of collcomm_bench (all_reduce,
# one_shot and two_shot, f32) from variant include trees:
#   base         the library as committed
#   pdl          the kernel triggers its dependents at its start and waits for its predecessor
#                (griddepcontrol) before its first global access; COLLCOMM_PDL=1 launches with
#                programmatic stream serialization (0: as base)
#   pdl_empty    pdl without the schedule's body (the floor: launch, prologue, end)
#   pdl_noabort  pdl without the entry-abort load
# and collcomm_bench_mp (mp_base, mp_pdl) for 8 processes under MPS.
# Each bench_X here and in run2-7.sh is built, without a GPU, from ar_small.cu with the variant's
# include tree first (runN.sh and clock_marks.patch say what each variant changes):
#   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr -IVARIANT -Iinclude -Itests \
#     -I/usr/local/cuda/include/cccl -I.deps -Ibench bench/results/latency_2026-12-06/ar_small.cu -o .deps/bin/bench_X
# and each mp_X (run8-11.sh) likewise from bench/collcomm_bench_mp.cu (push.patch: the pushing one).
#   bash bench/results/latency_2026-12-06/run.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/nvidia/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/env.txt" 2>&1
git log -1 --format='commit %H' >> "$OUT/env.txt"
A="-k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 5 -c 1 -C 1"
run() {  # name env... -- args
  local name=$1; shift
  echo "== $name $*" >> "$OUT/thread.log"
  timeout 60 env "$@" >> "$OUT/thread.log" 2>&1; echo "rc=$?" >> "$OUT/thread.log"
}
for round in 1 2; do
  for coop in 1 0; do
    run "base coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop $B/bench_base $A -G
    run "pdl0 coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop COLLCOMM_PDL=0 $B/bench_pdl $A -G
    run "pdl1 coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop COLLCOMM_PDL=1 $B/bench_pdl $A -G
    run "empty0 coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop COLLCOMM_PDL=0 $B/bench_pdl_empty $A -G -c 0
    run "empty1 coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop COLLCOMM_PDL=1 $B/bench_pdl_empty $A -G -c 0
    run "noabort1 coop=$coop G" COLLCOMM_GPU_COOPERATIVE=$coop COLLCOMM_PDL=1 $B/bench_pdl_noabort $A -G
  done
  run "base stream" $B/bench_base $A
  run "pdl1 stream" COLLCOMM_PDL=1 $B/bench_pdl $A
  run "pdl1 4 ranks G" COLLCOMM_PDL=1 $B/bench_pdl ${A/-r 8/-r 4} -G
  run "base 4 ranks G" $B/bench_base ${A/-r 8/-r 4} -G
  run "pdl1 two_shot G" COLLCOMM_PDL=1 $B/bench_pdl ${A/one_shot/two_shot} -G
  run "base two_shot G" $B/bench_base ${A/one_shot/two_shot} -G
done
# Processes under MPS (8 processes, one_shot 1 channel, graph and stream).
if [ -x $B/mp_base ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  M="-n 8 -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 1024 -w 50 -i 200"
  for round in 1 2; do
    for g in 1 0; do
      echo "== mp_base G=$g" >> "$OUT/mp.log"; timeout 60 $B/mp_base $M -G $g >> "$OUT/mp.log" 2>&1; echo "rc=$?" >> "$OUT/mp.log"
      echo "== mp_pdl PDL=1 G=$g" >> "$OUT/mp.log"; timeout 60 env COLLCOMM_PDL=1 $B/mp_pdl $M -G $g >> "$OUT/mp.log" 2>&1; echo "rc=$?" >> "$OUT/mp.log"
    done
  done
fi
