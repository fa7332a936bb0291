#!/usr/bin/env bash
# Device call 3 of 3: (1) algo::automatic over pcie_staged with the measured table, against the best
# named arm of the sweep (results/pcie_tune_h100_2026-12-06/merged; VERIFY=1
# bench/scripts/tune_pcie.sh, into OUT/pcie_v, returned as pcie_v.tgz); (2) direct barriers that check
# the call before arriving (branch barrier-check-first: test_gpu_mp_bar): under MPS, the
# disagreement fault case (a failed first call must leave its output untouched), then every kind
# and algorithm across processes and the direct cases, and small all_reduce among 8 processes
# (as processes.sh latency: one_shot and two_shot on 1 channel, stream-launched and from a graph) with
# the branch's bench and this commit's in turn, twice; (3) test_gpu_ll128 of branch ll128-poll; (4) the probes: a kernel replayed from a
# graph and the least one-shot all_reduce (graph_floor); launches made by each rank thread beside
# the grouped launch (launch_calls: launch_each, events_shaped; 8 and 4 ranks, cooperative or not).
#   bash bench/results/floor_halves_ll128/run3.sh OUT
# Binaries (.deps/bin, carried): collcomm_bench_pcie built with the table, test_gpu_mp_bar and
# bench_mp_bar (scripts/build_gpu_here.sh test_gpu_mp bench_mp on barrier-check-first),
# collcomm_bench_mp, test_gpu_ll128_poll, graph_floor and launch_calls (nvcc -O3 -arch=sm_90
# bench/probes/*.cu).
set -u
OUT=${1:?usage: run3.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
mkdir -p "$OUT/pcie_v" && cp bench/results/pcie_tune_h100_2026-12-06/merged/sweep.json "$OUT/pcie_v/"
VERIFY=1 TIMEOUT=60 timeout 240 bash bench/scripts/tune_pcie.sh "$OUT/pcie_v" > "$OUT/pcie_v.txt" 2>&1
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
timeout 60 $B/test_gpu_ll128_poll > "$OUT/test_gpu_ll128_poll.txt" 2>&1
echo "test_gpu_ll128_poll rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_gpu_ll128_poll.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
(cd "$OUT" && tar czf pcie_v.tgz pcie_v && rm -rf pcie_v)
