#!/usr/bin/env bash
# The peer-pointer table in shared memory (bench_new) against the committed kernel (bench_base),
# narrow builds of collcomm_bench (all_reduce one_shot/two_shot f32), ranks as threads, from a CUDA
# graph and stream-launched, taken in turn; bench_new_prof: bench_new with run2.sh's clock marks.
#   bash bench/results/latency_2026-12-06/run3.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/env.txt" 2>&1
A="-k all_reduce -f 4 -n 50 -w 10 -R 5"
for round in 1 2 3; do
  for r in 8 4 2; do
    for c in 1 2 4; do
      for v in base new; do
        echo "== $v r=$r C=$c one_shot G" >> "$OUT/ab.log"
        timeout 60 $B/bench_$v $A -a one_shot -r $r -b 8 -e 8K -C $c -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
      done
    done
  done
  for v in base new; do
    echo "== $v r=8 two_shot G" >> "$OUT/ab.log"
    timeout 60 $B/bench_$v $A -a two_shot -r 8 -b 8 -e 1M -f 16 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
    echo "== $v r=8 C=1 one_shot stream" >> "$OUT/ab.log"
    timeout 60 $B/bench_$v $A -a one_shot -r 8 -b 8 -e 8K -C 1 -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror' >> "$OUT/ab.log"
  done
done
for s in 8 8K; do
  echo "== new_prof $s C=1 G" >> "$OUT/prof.log"
  timeout 60 $B/bench_new_prof $A -a one_shot -r 8 -b $s -e $s -C 1 -G -c 0 2>&1 | grep -E '^ +[0-9]|prof block (0|7) ' >> "$OUT/prof.log"
done
