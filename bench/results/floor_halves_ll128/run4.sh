#!/usr/bin/env bash
# Device call 4: (1) the probes (below); (2) small all_reduce among 8 processes (as processes.sh latency: one_shot and
# two_shot on 1 channel, stream-launched and from a graph) with direct barriers that check the call
# before arriving (branch barrier-check-first: bench_mp_bar) and without (collcomm_bench_mp of this
# commit), in turn, twice. The probes: a kernel replayed from a graph and the least one-shot
# all_reduce (graph_floor); launches made by each rank thread beside the grouped launch
# (launch_calls: launch_each, events_shaped; 8 and 4 ranks, cooperative or not). Then test_gpu_pcie
# (automatic over pcie_staged's table among its cases).
#   bash bench/results/floor_halves_ll128/run4.sh OUT
# Binaries (.deps/bin, carried): bench_mp_bar and collcomm_bench_mp (scripts/build_gpu_here.sh
# bench_mp, on the branch and here), graph_floor and launch_calls (nvcc -O3 -arch=sm_90
# bench/probes/*.cu), test_gpu_pcie.
set -u
OUT=${1:?usage: run4.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 60 $B/graph_floor 200 9 > "$OUT/graph_floor.txt" 2>&1
echo "graph_floor rc=$? ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
for r in 8 4; do
  for coop in 1 0; do
    echo "== launch_calls $r ranks, PROBE_COOP=$coop"
    PROBE_COOP=$coop timeout 30 $B/launch_calls $r 4000 launch_each,events_shaped
    echo "rc=$?"
  done
done > "$OUT/launch_calls.txt" 2>&1
echo "launch_calls: $(grep -c 'rc=0' "$OUT/launch_calls.txt") of 4 runs rc=0" | tee -a "$OUT/summary.txt"
start_mps
for round in 1 2; do
  for v in collcomm_bench_mp bench_mp_bar; do
    for a in one_shot two_shot; do
      for g in 0 1; do
        echo "== $v round $round $a -C 1 graph=$g"
        timeout 40 $B/$v -n 8 -k all_reduce -a $a -C 1 -b 8 -e 8K -f 4 -G $g -w 50 -i 200
        echo "rc=$?"
      done
    done
  done
done > "$OUT/latency_bar.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency_bar.txt") of 16 runs rc=0" | tee -a "$OUT/summary.txt"
t0=$SECONDS
timeout 150 $B/test_gpu_pcie > "$OUT/test_gpu_pcie.txt" 2>&1
echo "test_gpu_pcie rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_gpu_pcie.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
