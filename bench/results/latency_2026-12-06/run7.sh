#!/usr/bin/env bash
# bench_new: the kernel's prologue issues every independent load before its one barrier (the
# entry check, this rank's parameters into registers, peers' buffer pointers into shared memory
# by two other warps), against bench_base, in turn; bench_new_fine: bench_new with run6.sh's marks.
#   bash bench/results/latency_2026-12-06/run7.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0
A="-k all_reduce -f 4 -n 50 -w 10 -R 5"
for round in 1 2 3; do
  for r in 8 4 2; do
    for v in base new; do
      echo "== $v r=$r C=1 one_shot G" >> "$OUT/ab.log"
      timeout 60 $B/bench_$v $A -a one_shot -r $r -b 8 -e 8K -C 1 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
    done
  done
  for v in base new; do
    echo "== $v r=8 C=4 one_shot G" >> "$OUT/ab.log"
    timeout 60 $B/bench_$v $A -a one_shot -r 8 -b 8K -e 512K -C 4 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
    echo "== $v r=8 two_shot G" >> "$OUT/ab.log"
    timeout 60 $B/bench_$v $A -a two_shot -r 8 -b 8 -e 4M -f 16 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
  done
done
for r in 8 2; do
  for s in 8 8K; do
    echo "== new_fine r=$r $s C=1 G" >> "$OUT/prof.log"
    timeout 60 $B/bench_new_fine $A -a one_shot -r $r -b $s -e $s -C 1 -G -c 0 2>&1 | grep -E '^ +[0-9]|prof block (0|7) ' >> "$OUT/prof.log"
  done
done
