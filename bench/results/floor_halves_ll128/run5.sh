#!/usr/bin/env bash
# Device call 5: direct barriers that check the call before arriving, with the barrier line's words
# loaded before the block's __syncthreads (branch barrier-check-first, its second commit:
# test_gpu_mp_bar, bench_mp_bar2): under MPS, the disagreement fault case and every kind and
# algorithm across processes; then small all_reduce among 8 processes (one_shot and two_shot on 1
# channel, stream-launched and from a graph) with this commit's bench (collcomm_bench_mp), the
# branch's first commit (bench_mp_bar) and its second (bench_mp_bar2), in turn, three rounds.
#   bash bench/results/floor_halves_ll128/run5.sh OUT
# Binaries (.deps/bin, carried): test_gpu_mp_bar, collcomm_bench_mp, bench_mp_bar, bench_mp_bar2
# (scripts/build_gpu_here.sh test_gpu_mp bench_mp at each commit).
set -u
OUT=${1:?usage: run5.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
start_mps
for what in 'mp fault: processes that disagree*' 'mp: every*,mp: a direct*'; do
  log=$OUT/bar2_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-30).log
  ( time timeout 180 $B/test_gpu_mp_bar --only "$what" ) > "$log" 2>&1
  echo "barrier-check-first '$what' rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
for round in 1 2 3; do
  for v in collcomm_bench_mp bench_mp_bar bench_mp_bar2; do
    for a in one_shot two_shot; do
      for g in 0 1; do
        echo "== $v round $round $a -C 1 graph=$g"
        timeout 40 $B/$v -n 8 -k all_reduce -a $a -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
        echo "rc=$?"
      done
    done
  done
done > "$OUT/latency_bar.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency_bar.txt") of 36 runs rc=0" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
