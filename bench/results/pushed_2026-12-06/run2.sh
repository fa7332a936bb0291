#!/usr/bin/env bash
# Device call 2: the floor of processes on one GPU (bench/probes/mps_floor: N processes replaying
# graphs of, or stream-launching, empty kernels or kernels that meet at one counter, at once, under
# MPS), then pushed calls held in registers (this commit): the multi-process GPU tests, and
# all_reduce among 2, 4 and 8 processes, 8 B..8 KiB, one_shot on 1 channel, stream-launched and
# from a graph, the commit before pushed calls (bench_mp_base) and this one, in turn, three rounds.
#   COLLCOMM_COMMIT=<sha> bash bench/results/pushed_2026-12-06/run2.sh OUT
# Binaries (.deps/bin, carried): mps_floor, test_gpu_mp, collcomm_bench_mp, bench_mp_base.
set -u
OUT=${1:?usage: run2.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
sum() { tee -a "$OUT/summary.txt"; }
counts() { grep -E '^\[doctest\] (test cases|assertions)' "$1" | tr '\n' ' '; }
start_mps && echo "MPS daemon started" | sum
for launch in graph stream; do
  for mode in empty meet; do
    for n in 1 2 4 8; do
      timeout 60 $B/mps_floor $n $mode 200 9 $launch
      echo "rc=$?"
    done
  done
done > "$OUT/mps_floor.txt" 2>&1
echo "mps_floor: $(grep -c 'rc=0' "$OUT/mps_floor.txt") of 16 runs rc=0" | sum
for what in 'mp: pushed*' 'mp fault: processes that disagree*,mp fault: a pushed*' \
  'mp: every*,mp: a direct*,mp: split*,mp: 1000*'; do
  log=$OUT/test_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-40).log
  ( time timeout 240 $B/test_gpu_mp --only "$what" ) > "$log" 2>&1
  echo "'$what' rc=$? $(counts "$log")" | sum
done
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | sum
for round in 1 2 3; do
  for v in bench_mp_base collcomm_bench_mp; do
    for n in 8 4 2; do
      for g in 0 1; do
        echo "== $v round $round n=$n one_shot -C 1 graph=$g"
        timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
        echo "rc=$?"
      done
    done
  done
done > "$OUT/latency.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency.txt") of 36 runs rc=0" | sum
cat "$OUT/mps_floor.txt"
