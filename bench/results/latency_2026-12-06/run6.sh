#!/usr/bin/env bash
# bench_fine: the committed one_shot kernel with clock64 marks at every step (prologue, the
# channel's range, entry barrier, the peer-pointer load's two barriers, vector loop, tail loop,
# final barrier, kernel end): per-block means printed at exit, graph-replayed, 8 and 2 ranks.
#   bash bench/results/latency_2026-12-06/run6.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0
A="-k all_reduce -f 4 -n 50 -w 10 -R 5"
for r in 8 2; do
  for s in 8 8K; do
    echo "== fine r=$r $s C=1 G" >> "$OUT/prof.log"
    timeout 60 $B/bench_fine $A -a one_shot -r $r -b $s -e $s -C 1 -G -c 0 2>&1 | grep -E '^ +[0-9]|prof block (0|1|7) ' >> "$OUT/prof.log"
  done
done
