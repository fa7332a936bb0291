#!/usr/bin/env bash
# One device call: (1) the graph floor probe (bench/probes/graph_floor.cu: a kernel replayed from a
# graph by parameter size and grid, the least one-shot all_reduce, and collcomm's kernel's pieces
# one at a time), and launch_calls' launches made by each rank thread on its own stream beside the
# grouped launch (bench/probes/launch_calls.cu: launch_each, events_shaped; 8 and 4 ranks,
# cooperative or not); (2) the multi-process GPU tests of this commit (processes.sh tests, and the fault
# case of processes that disagree), for the staged-call counts every channel advances; (3) ll128
# receivers whose poll loads issue back to back (branch ll128-poll: bench_llpoll, test_gpu_ll128_poll)
# against this commit's (bench_llbase): ring all_reduce, 2 and 8 ranks, 16 MiB to 512 MiB, two rounds
# in turn, simple with 1 MiB slots beside; then bench_llpoll checked (-c 1) to 64 MiB; (4) launches
# that carry every rank with their buffers loaded into shared memory a warp per rank (branch
# launch-ptrs: bench_lptr) against this commit's (bench_osbase): one_shot on 1 channel, 8 B to
# 8 KiB, and two_shot to 1 MiB, among 8, 4 and 2 ranks as threads, from a CUDA graph, three rounds
# in turn (narrow builds: bench/results/latency_2026-12-06/ar_small.cu).
#   bash bench/results/floor_halves_ll128/run1.sh OUT
# Binaries (.deps/bin, carried): graph_floor and launch_calls (nvcc -O3 -arch=sm_90
# bench/probes/graph_floor.cu, launch_calls.cu),
# test_gpu_mp (scripts/build_gpu_here.sh test_gpu_mp), bench_llbase and bench_llpoll (collcomm_bench
# built for all_reduce, ring, f32: -DCOLLCOMM_BENCH_KINDS=kind::all_reduce
# -DCOLLCOMM_BENCH_ALGOS=algo::ring -DCOLLCOMM_BENCH_TYPES=float, of this commit and of ll128-poll),
# test_gpu_ll128_poll (test_gpu_ll128 of ll128-poll).
set -u
OUT=${1:?usage: run1.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 90 $B/graph_floor 200 9 > "$OUT/graph_floor.txt" 2>&1
echo "graph_floor rc=$? ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
for r in 8 4; do
  for coop in 1 0; do
    echo "== launch_calls $r ranks, PROBE_COOP=$coop"
    PROBE_COOP=$coop timeout 60 $B/launch_calls $r 4000 launch_each,events_shaped
    echo "rc=$?"
  done
done > "$OUT/launch_calls.txt" 2>&1
echo "launch_calls: $(grep -c 'rc=0' "$OUT/launch_calls.txt") of 4 runs rc=0" | tee -a "$OUT/summary.txt"
t0=$SECONDS
timeout 60 $B/test_gpu_ll128_poll -d > "$OUT/test_ll128_poll.txt" 2>&1
echo "test_gpu_ll128_poll rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_ll128_poll.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
t0=$SECONDS
for round in 1 2; do
  for r in 2 8; do
    echo "== all_reduce r$r simple round $round"
    timeout 60 $B/bench_llbase -k all_reduce -a ring -p simple -s 1M -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    for v in llbase llpoll; do
      echo "== all_reduce r$r $v round $round"
      timeout 60 $B/bench_$v -k all_reduce -a ring -p ll128 -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    done
  done
done > "$OUT/ll128.txt" 2>&1
for r in 2 8; do
  echo "== check llpoll r$r"
  timeout 100 $B/bench_llpoll -k all_reduce -a ring -p ll128 -r $r -b 8 -e 64M -f 8 -n 3 -w 1 -c 1 --check-max 64M -R 1 | grep -E "^ +[0-9]"
done >> "$OUT/ll128.txt" 2>&1
echo "ll128 A/B ($((SECONDS - t0)) s); #wrong counts of the check: $(grep -A9 check "$OUT/ll128.txt" | grep -E '^ +[0-9]' | awk '{print $10, $NF}' | sort | uniq -c | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
t0=$SECONDS
A="-k all_reduce -f 4 -n 50 -w 10 -R 5"
for round in 1 2 3; do
  for r in 8 4 2; do
    for v in osbase lptr; do
      echo "== $v r=$r C=1 one_shot G"
      timeout 60 $B/bench_$v $A -a one_shot -r $r -b 8 -e 8K -C 1 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror'
    done
  done
  for v in osbase lptr; do
    echo "== $v r=8 two_shot G"
    timeout 60 $B/bench_$v $A -a two_shot -r 8 -b 8 -e 1M -f 16 -G -c 1 2>&1 | grep -E '^ +[0-9]|wrong|rror'
  done
done > "$OUT/launch_ptrs.txt" 2>&1
echo "launch pointers A/B ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
t0=$SECONDS
bash bench/scripts/processes.sh "$OUT/tests" tests > /dev/null 2>&1
cat "$OUT/tests/summary.txt" >> "$OUT/summary.txt"
start_mps
( time timeout 120 $B/test_gpu_mp --only 'mp fault: processes that disagree*' ) > "$OUT/test_disagree.log" 2>&1
echo "disagree rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_disagree.log" | tr '\n' ' ') (tests $((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
