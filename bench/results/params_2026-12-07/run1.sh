#!/usr/bin/env bash
# Device call 1: the multi-process GPU tests at the pushed calls' final form (the per-channel epoch
# words, the residency check of the kernel that launches) and with the pushed kernel changed
# (test_gpu_mp_p2: p2.patch); where a pushed call's time goes (bench_mp_marks: clock marks in the
# pushed kernel, marks.patch; bench_mp_p2marks: the same in p2's, marks_p2.patch); what a kernel's
# parameter block, static shared memory and block size cost when 8 processes launch at once
# (mps_floor's params, smem and threads); and collcomm_bench_mp of this commit
# against the commit before pushed calls (bench_mp_base), the pushed kernel's parameters sized for
# one rank (bench_mp_p1, p1.patch), and that with the pushed kernel's loads before its stores in one
# round trip (bench_mp_p2, p2.patch on top of p1.patch; branch pushed-prologue), in turn. Sections
# in order of need; each starts only while the call has time left (LIMIT seconds, default 520).
# (r1.patch, every kernel's parameters sized for one rank, is a variant this call does not run.)
#   COLLCOMM_COMMIT=<sha> bash bench/results/params_2026-12-07/run1.sh OUT
# Binaries (.deps/bin, carried as .deps/bins.tar.xz and unpacked first): test_gpu_mp,
# test_gpu_mp_noclean (the push areas' cleaning left out: its wrap case must fail), test_gpu_mp_p2,
# mps_floor, collcomm_bench_mp, bench_mp_base, bench_mp_p1, bench_mp_p2, bench_mp_marks,
# bench_mp_p2marks.
set -u
OUT=${1:?usage: run1.sh OUT}
LIMIT=${LIMIT:-520}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run() {  # BINARY LOG PATTERN LIMIT
  ( time timeout "$4" $B/$1 --only "$3" ) > "$OUT/$2.log" 2>&1
  echo "[$SECONDS s] $1 '$3' rc=$? $(doctest_counts "$OUT/$2.log")" | summary
}
test_run test_gpu_mp test_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 200
test_run test_gpu_mp_noclean test_noclean 'mp: pushed*' 100
echo "(the wrap case with the cleaning left out must fail)" | summary
test_run test_gpu_mp_p2 test_p2 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*,mp: every*' 200
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
if time_left 60 "A/B round 1"; then
  for v in bench_mp_base collcomm_bench_mp bench_mp_p1 bench_mp_p2; do one_shot_latency $v 8 1; done >> "$OUT/latency.txt" 2>&1
  for v in bench_mp_base collcomm_bench_mp bench_mp_p2; do one_shot_latency $v 8 0; one_shot_latency $v 2 1; done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round 1: $(grep -c 'rc=0' "$OUT/latency.txt") of 10 runs rc=0" | summary
fi
if time_left 30 "marks"; then
  for n in 8 2; do
    for v in bench_mp_marks bench_mp_p2marks; do
      echo "== $v n=$n"
      timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
      echo "rc=$?"
    done
  done > "$OUT/marks.txt" 2>&1
  echo "[$SECONDS s] marks: $(grep -c 'rc=0' "$OUT/marks.txt") of 4 runs rc=0" | summary
  grep -h "^marks" "$OUT/marks.txt" | summary
fi
for launch in graph stream; do
  for mode in empty meet; do
    for shape in "0 0" "2432 0" "256 0" "2432 4096"; do
      time_left 15 "mps_floor 8 $mode $launch $shape" || break 3
      timeout 30 $B/mps_floor 8 $mode 200 9 $launch $shape
      echo "rc=$?"
    done
  done
done > "$OUT/mps_floor.txt" 2>&1
for shape in "0 0" "2432 0"; do
  time_left 15 "mps_floor 1 $shape" || break
  timeout 30 $B/mps_floor 1 empty 200 9 graph $shape
  echo "rc=$?"
done >> "$OUT/mps_floor.txt" 2>&1
for mode in empty meet; do
  for threads in 32 128; do
    time_left 15 "mps_floor 8 $mode threads=$threads" || break 2
    timeout 30 $B/mps_floor 8 $mode 200 9 graph 0 0 $threads
    echo "rc=$?"
  done
done >> "$OUT/mps_floor.txt" 2>&1
echo "[$SECONDS s] mps_floor: $(grep -c 'rc=0' "$OUT/mps_floor.txt") runs rc=0" | summary
grep -h "mps_floor n=" "$OUT/mps_floor.txt" | sed 's/ \[[1-9][0-9]*\] [^ ]* ([^)]*)//g' | summary
if time_left 60 "A/B round 2"; then
  for v in bench_mp_base collcomm_bench_mp bench_mp_p1 bench_mp_p2; do one_shot_latency $v 8 1; done >> "$OUT/latency.txt" 2>&1
  for v in bench_mp_base collcomm_bench_mp bench_mp_p2; do one_shot_latency $v 8 0; one_shot_latency $v 2 1; done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B: $(grep -c 'rc=0' "$OUT/latency.txt") of 20 runs rc=0" | summary
fi
