#!/usr/bin/env bash
# Where a graph-replayed one_shot call's time goes among 8 ranks as threads: bench_prof is a narrow
# collcomm_bench (all_reduce one_shot/two_shot f32) whose kernel records clock64 at its entry, after
# its prologue, after the peer pointers are in shared memory, after the vector loop, after the
# copy and at its end, and %globaltimer at entry and end (the gap between one call's end and the
# next call's start); it prints per-block means at exit. bench_prof_uptr: the same, its peer
# pointers read by one thread, 8 loads in flight, instead of one thread per rank.
#   bash bench/results/latency_2026-12-06/run2.sh OUT
set -u
OUT=${1:?OUT}
B=.deps/bin
mkdir -p "$OUT"
export CUDA_MODULE_LOADING=EAGER NCCL_NVLS_ENABLE=0
A="-k all_reduce -a one_shot -r 8 -f 1024 -n 50 -w 10 -R 5 -c 0"
for round in 1 2; do
  for v in prof prof_uptr; do
    for s in 8 8K; do
      for c in 1 2 4; do
        echo "== $v $s C=$c G" >> "$OUT/prof.log"
        timeout 60 $B/bench_$v $A -b $s -e $s -C $c -G 2>&1 | grep -E '^ +[0-9]|prof block (0|1|7|8|15|31) ' >> "$OUT/prof.log"
      done
    done
  done
  for v in base uptr; do
    for c in 1 2 4; do
      echo "== $v C=$c G" >> "$OUT/prof.log"
      timeout 60 $B/bench_$v $A -b 8 -e 8K -C $c -G 2>&1 | grep -E '^ +[0-9]' >> "$OUT/prof.log"
    done
  done
done
