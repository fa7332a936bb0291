#!/usr/bin/env bash
# Device call 1 of 3: (1) ll128 receivers whose poll loads issue back to back (branch
# ll128-poll: bench_llpoll, test_gpu_ll128_poll) against this commit's (bench_llbase): ring
# all_reduce, 2 and 8 ranks, 16 MiB to 512 MiB, two rounds in turn, simple with 1 MiB slots beside;
# then bench_llpoll checked (-c 1) from 8 B to 64 MiB, and test_gpu_ll128{,_reducing,_moving,_rooted}
# of the branch; (2) the pcie_staged sweep of 2 and 4 ranks (bench/scripts/tune_pcie.sh, RANKS=2,4,
# into OUT/pcie_a) in the time left (RESUME=1 finishes it in a later call).
#   bash bench/results/floor_halves_ll128/run1.sh OUT
# Binaries (.deps/bin, carried): collcomm_bench_pcie (scripts/build_gpu_here.sh bench_pcie);
# bench_llbase and bench_llpoll (bench/collcomm_bench.cu with -DCOLLCOMM_BENCH_KINDS=kind::all_reduce
# -DCOLLCOMM_BENCH_ALGOS=algo::ring -DCOLLCOMM_BENCH_TYPES=float, of this commit and of ll128-poll);
# test_gpu_ll128*_poll (scripts/build_gpu_here.sh test_gpu_ll128* on ll128-poll).
set -u
OUT=${1:?usage: run1.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
for t in $B/test_gpu_ll128*_poll; do
  n=$(basename "$t")
  timeout 60 "$t" > "$OUT/$n.txt" 2>&1
  echo "$n rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/$n.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
t0=$SECONDS
for round in 1 2; do
  for r in 2 8; do
    echo "== all_reduce r$r simple round $round"
    timeout 40 $B/bench_llbase -k all_reduce -a ring -p simple -s 1M -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    for v in llbase llpoll; do
      echo "== all_reduce r$r $v round $round"
      timeout 40 $B/bench_$v -k all_reduce -a ring -p ll128 -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    done
  done
done > "$OUT/ll128.txt" 2>&1
for r in 2 8; do
  echo "== check llpoll r$r"
  timeout 60 $B/bench_llpoll -k all_reduce -a ring -p ll128 -r $r -b 8 -e 64M -f 8 -n 3 -w 1 -c 1 --check-max 64M -R 1 | grep -E "^ +[0-9]"
done >> "$OUT/ll128.txt" 2>&1
echo "ll128 A/B ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
t0=$SECONDS
RANKS=2,4 TIMEOUT=60 timeout $((560 - SECONDS)) bash bench/scripts/tune_pcie.sh "$OUT/pcie_a" > "$OUT/pcie_a.txt" 2>&1
echo "pcie sweep 2,4 rc=$? ($((SECONDS - t0)) s): $(tail -n 2 "$OUT/pcie_a.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
