#!/usr/bin/env bash
# Device call 1: the multi-process GPU tests at the pushed calls' final form (the per-channel epoch
# words, the residency check of the kernel that launches) and with the pushed kernel's parameters
# sized for one rank (test_gpu_mp_p1); where a pushed call's time goes (bench_mp_marks: clock marks
# in the pushed kernel, marks.patch); what a kernel's parameter block and static shared memory cost
# when 8 processes launch at once (mps_floor's params and smem); and collcomm_bench_mp of this
# commit against the commit before pushed calls (bench_mp_base), the pushed kernel's parameters
# sized for one rank (bench_mp_p1), and that with the pushed kernel's loads before its stores in one
# round trip (bench_mp_p2), in turn. (bench_mp_r1, every kernel's parameters for one rank, r1.patch,
# is carried but not run: the device time was short.)
#   COLLCOMM_COMMIT=<sha> bash bench/results/params_2026-12-07/run1.sh OUT
# Binaries (.deps/bin, carried as .deps/bins.tar.xz and unpacked first): test_gpu_mp,
# test_gpu_mp_noclean (the push areas' cleaning left out: its wrap case must fail), test_gpu_mp_p1,
# test_gpu_mp_p2, mps_floor, collcomm_bench_mp, bench_mp_base, bench_mp_r1, bench_mp_p1, bench_mp_p2,
# bench_mp_marks.
set -u
OUT=${1:?usage: run1.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
sum() { tee -a "$OUT/summary.txt"; }
counts() { grep -E '^\[doctest\] (test cases|assertions)' "$1" | tr '\n' ' '; }
start_mps && echo "MPS daemon started" | sum
for what in 'mp: pushed*' 'mp fault: processes that disagree*,mp fault: a pushed*' \
  'mp: every*,mp: a direct*,mp: split*,mp: 1000*'; do
  log=$OUT/test_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-40).log
  ( time timeout 240 $B/test_gpu_mp --only "$what" ) > "$log" 2>&1
  echo "'$what' rc=$? $(counts "$log")" | sum
done
( time timeout 120 $B/test_gpu_mp_noclean --only 'mp: pushed*' ) > "$OUT/test_noclean.log" 2>&1
echo "the wrap case with the cleaning left out (must fail): rc=$? $(counts "$OUT/test_noclean.log")" | sum
( time timeout 240 $B/test_gpu_mp_p1 --only 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*,mp: every*' ) > "$OUT/test_p1.log" 2>&1
echo "p1 (the pushed kernel's parameters for one rank): rc=$? $(counts "$OUT/test_p1.log")" | sum
( time timeout 240 $B/test_gpu_mp_p2 --only 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*,mp: every*' ) > "$OUT/test_p2.log" 2>&1
echo "p2 (p1, and its loads in one round trip): rc=$? $(counts "$OUT/test_p2.log")" | sum
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | sum
ab_round() {
  for v in bench_mp_base collcomm_bench_mp bench_mp_p1 bench_mp_p2; do
    for n in 8 2; do
      for g in 1 0; do
        echo "== $v round $1 n=$n one_shot -C 1 graph=$g"
        timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
        echo "rc=$?"
      done
    done
  done
}
ab_round 1 > "$OUT/latency.txt" 2>&1
for n in 8 4 2; do
  echo "== bench_mp_marks n=$n"
  timeout 40 $B/bench_mp_marks -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
  echo "rc=$?"
done > "$OUT/marks.txt" 2>&1
echo "marks: $(grep -c 'rc=0' "$OUT/marks.txt") of 3 runs rc=0" | sum
for launch in graph stream; do
  for n in 8 1; do
    for mode in empty meet; do
      for shape in "0 0" "256 0" "2432 0" "2432 4096"; do
        timeout 60 $B/mps_floor $n $mode 200 9 $launch $shape
        echo "rc=$?"
      done
    done
  done
done > "$OUT/mps_floor.txt" 2>&1
echo "mps_floor: $(grep -c 'rc=0' "$OUT/mps_floor.txt") of 32 runs rc=0" | sum
ab_round 2 >> "$OUT/latency.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency.txt") of 32 runs rc=0" | sum
grep -h "mps_floor n=" "$OUT/mps_floor.txt" | sed 's/ \[[1-9][0-9]*\] [^ ]* ([^)]*)//g' | sum
grep -h "^marks" "$OUT/marks.txt" | sum
