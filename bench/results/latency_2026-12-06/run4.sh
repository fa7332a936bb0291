#!/usr/bin/env bash
# bench_soa: run3's bench_new with every rank's buffer pointers packed in two arrays of the launch's
# parameters (inputs, outputs), beside base and new; bench_soa_prof: with run2.sh's clock marks.
#   bash bench/results/latency_2026-12-06/run4.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0
A="-k all_reduce -f 4 -n 50 -w 10 -R 5"
for round in 1 2 3; do
  for r in 8 4; do
    for v in base new soa; do
      echo "== $v r=$r C=1 one_shot G" >> "$OUT/ab.log"
      timeout 60 $B/bench_$v $A -a one_shot -r $r -b 8 -e 8K -C 1 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
    done
  done
done
for v in soa_prof new_prof; do
  for s in 8 8K; do
    echo "== $v $s C=1 G" >> "$OUT/prof.log"
    timeout 60 $B/bench_$v $A -a one_shot -r 8 -b $s -e $s -C 1 -G -c 0 2>&1 | grep -E '^ +[0-9]|prof block (0|7) ' >> "$OUT/prof.log"
  done
done
