#!/usr/bin/env bash
# Device call 3: (1) algo::automatic over pcie_staged with the measured table, against the best
# named arm of the sweep (results/pcie_tune_h100_2026-12-06/merged; VERIFY=1
# bench/scripts/tune_pcie.sh, into OUT/pcie_v, returned as pcie_v.tgz); (2) direct barriers that
# check the call before arriving (branch barrier-check-first: test_gpu_mp_bar): under MPS, the
# disagreement fault case (a failed first call must leave its output untouched), then every kind
# and algorithm across processes and the direct cases; (3) test_gpu_ll128 of branch ll128-poll.
#   bash bench/results/floor_halves_ll128/run3.sh OUT
# Binaries (.deps/bin, carried): collcomm_bench_pcie built with the table, test_gpu_mp_bar
# (scripts/build_gpu_here.sh test_gpu_mp on barrier-check-first), test_gpu_ll128_poll.
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
start_mps
for what in 'mp fault: processes that disagree*' 'mp: every*,mp: a direct*'; do
  log=$OUT/bar_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-30).log
  ( time timeout 180 $B/test_gpu_mp_bar --only "$what" ) > "$log" 2>&1
  echo "barrier-check-first '$what' rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
t0=$SECONDS
timeout 60 $B/test_gpu_ll128_poll > "$OUT/test_gpu_ll128_poll.txt" 2>&1
echo "test_gpu_ll128_poll rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_gpu_ll128_poll.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
(cd "$OUT" && tar czf pcie_v.tgz pcie_v && rm -rf pcie_v)
