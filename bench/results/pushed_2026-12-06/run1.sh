#!/usr/bin/env bash
# Device call 1: pushed calls (one_shot all_reduce of at most transport::push_max_bytes per rank
# across processes, no barrier). Under MPS: the multi-process GPU tests (every kind and algorithm,
# the mixed queue, graphs, split, the new pushed cases and the faults, the disagreements among
# them); then all_reduce among 4 and 8 processes, 8 B..8 KiB, one_shot on 1 channel and on the
# default channels, stream-launched and from a graph, with the commit before (bench_mp_base) and
# this one (collcomm_bench_mp), in turn, three rounds; test_gpu_pcie where it was carried.
#   COLLCOMM_COMMIT=<sha> bash bench/results/pushed_2026-12-06/run1.sh OUT
# Binaries (.deps/bin, carried): test_gpu_mp, collcomm_bench_mp, bench_mp_base, test_gpu_pcie
# (scripts/build_gpu_here.sh test_gpu_mp bench_mp test_gpu_pcie; bench_mp_base the same at the
# commit before).
set -u
OUT=${1:?usage: run1.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
sum() { tee -a "$OUT/summary.txt"; }
counts() { grep -E '^\[doctest\] (test cases|assertions)' "$1" | tr '\n' ' '; }
( time timeout 150 $B/test_gpu_mp --no-mps 'no mps: 2*' ) > "$OUT/test_no_mps.log" 2>&1
echo "no mps rc=$? $(counts "$OUT/test_no_mps.log")" | sum
start_mps && echo "MPS daemon started" | sum
for what in 'mp: pushed*' 'mp fault: processes that disagree*,mp fault: a pushed*' \
  'mp: every*,mp: a direct*,mp: split*,mp: 1000*' 'mp fault: abort,mp fault: a rank killed mid-collective'; do
  log=$OUT/test_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-40).log
  ( time timeout 240 $B/test_gpu_mp --only "$what" ) > "$log" 2>&1
  echo "'$what' rc=$? $(counts "$log")" | sum
done
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | sum
for round in 1 2 3; do
  for v in bench_mp_base collcomm_bench_mp; do
    for n in 8 4; do
      for c in "-C 1" ""; do
        for g in 0 1; do
          echo "== $v round $round n=$n one_shot $c graph=$g"
          timeout 40 $B/$v -n $n -k all_reduce -a one_shot $c -b 8 -e 8K -f 4 -G $g -w 50 -i 200
          echo "rc=$?"
        done
      done
    done
  done
done > "$OUT/latency.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency.txt") of 48 runs rc=0" | sum
if [ -x $B/test_gpu_pcie ]; then
  ( time timeout 200 $B/test_gpu_pcie ) > "$OUT/test_gpu_pcie.log" 2>&1
  echo "test_gpu_pcie rc=$? $(counts "$OUT/test_gpu_pcie.log")" | sum
fi
cat "$OUT/summary.txt"
