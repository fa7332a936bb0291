#!/usr/bin/env bash
# Device call 3 of 3: (1) algo::automatic over pcie_staged with the measured table, against the best
# named arm (VERIFY=1 bench/scripts/tune_pcie.sh, into OUT/pcie_v); (2) direct barriers that check
# the call before arriving (branch barrier-check-first: test_gpu_mp_bar): under MPS, the
# disagreement fault case (a failed first call must leave its output untouched), then every kind
# and algorithm across processes and the direct cases; (3) the probes: a kernel replayed from a
# graph and the least one-shot all_reduce (graph_floor); launches made by each rank thread beside
# the grouped launch (launch_calls: launch_each, events_shaped; 8 and 4 ranks, cooperative or not).
#   bash bench/results/floor_halves_ll128/run3.sh OUT
# Binaries (.deps/bin, carried): collcomm_bench_pcie built with the table, test_gpu_mp_bar,
# graph_floor and launch_calls (nvcc -O3 -arch=sm_90 bench/probes/*.cu).
set -u
OUT=${1:?usage: run3.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
VERIFY=1 TIMEOUT=60 timeout 200 bash bench/scripts/tune_pcie.sh "$OUT/pcie_v" > "$OUT/pcie_v.txt" 2>&1
echo "pcie verify rc=$? ($((SECONDS - t0)) s): $(tail -n 2 "$OUT/pcie_v.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
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
for what in 'mp fault: processes that disagree*' 'mp: every*,mp: a direct*'; do
  log=$OUT/bar_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-30).log
  ( time timeout 180 $B/test_gpu_mp_bar --only "$what" ) > "$log" 2>&1
  echo "barrier-check-first '$what' rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
cat "$OUT/summary.txt"
