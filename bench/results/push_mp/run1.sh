#!/usr/bin/env bash
# One device call: one_shot across processes with inputs pushed into the peers' windows as LL lines
# (branch pushed-inputs: test_gpu_mp_push, mp_push4) — its multi-process GPU tests (processes.sh
# tests, and the fault case of processes that disagree, counts on both sides of the 8 KiB push
# limit included; a pushed call after a staged one whose input looks like pushed lines), then mp_base (this commit's collcomm_bench_mp, inputs staged) against mp_push4,
# in turn, two rounds: one_shot on 1 channel among 8, 4 and 2 processes, 8 B to 8 KiB, from a CUDA
# graph and stream-launched; and a sweep to 1 MiB on 1 and the world's channels (8 and 2 processes).
#   bash bench/results/push_mp/run1.sh OUT
# Binaries (.deps/bin, carried): test_gpu_mp_push (scripts/build_gpu_here.sh test_gpu_mp on
# pushed-inputs), mp_push4 (bench_mp on pushed-inputs), mp_base (bench_mp on this commit).
set -u
OUT=${1:?usage: run1.sh OUT}
B=$PWD/.deps/bin
mkdir -p "$OUT" /tmp/pushbin
ln -sf "$B/test_gpu_mp_push" /tmp/pushbin/test_gpu_mp
BIN=/tmp/pushbin bash bench/scripts/processes.sh "$OUT/tests" tests > /dev/null 2>&1
cat "$OUT/tests/summary.txt" > "$OUT/summary.txt"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
start_mps
( time timeout 200 $B/test_gpu_mp_push --only 'mp fault: processes that disagree*' ) > "$OUT/test_disagree.log" 2>&1
echo "disagree rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_disagree.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
( time timeout 120 $B/test_gpu_mp_push --only 'mp: a pushed*' ) > "$OUT/test_stale.log" 2>&1
echo "stale lines rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_stale.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
mp() {  # log binary args...
  local log=$1 bin=$2
  shift 2
  echo "== $bin $*" >> "$OUT/$log"
  timeout 60 $B/$bin "$@" >> "$OUT/$log" 2>&1
  echo "rc=$?" >> "$OUT/$log"
}
t0=$SECONDS
for round in 1 2; do
  for n in 8 4 2; do
    for g in 1 0; do
      for v in mp_base mp_push4; do
        mp lat.log $v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
      done
    done
  done
done
for n in 8 2; do
  for c in "-C 1" ""; do
    for v in mp_base mp_push4; do
      mp sweep.log $v -n $n -k all_reduce -a one_shot $c -b 8 -e 1M -f 4 -G 1 -w 20 -i 100
    done
  done
done
echo "bench ($((SECONDS - t0)) s): $(grep -c 'rc=0' "$OUT/lat.log") of $(grep -c 'rc=' "$OUT/lat.log") latency runs and $(grep -c 'rc=0' "$OUT/sweep.log") of $(grep -c 'rc=' "$OUT/sweep.log") sweeps rc=0" | tee -a "$OUT/summary.txt"
