#!/usr/bin/env bash
# Device call 2 of 3: (1) the pcie_staged sweep of 8 ranks (RANKS=8, into OUT/pcie_b); (2) the
# multi-process GPU tests of this commit (processes.sh tests: the nvlink cases without MPS, then
# under MPS every kind/algorithm, the mixed queue whose calls run on 1 channel and on all, the
# window, split, faults), and the fault case of processes that disagree.
#   bash bench/results/floor_halves_ll128/run2.sh OUT
# Binaries (.deps/bin, carried): collcomm_bench_pcie, test_gpu_mp (scripts/build_gpu_here.sh test_gpu_mp).
set -u
OUT=${1:?usage: run2.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
RANKS=8 TIMEOUT=60 timeout 250 bash bench/scripts/tune_pcie.sh "$OUT/pcie_b" > "$OUT/pcie_b.txt" 2>&1
echo "pcie sweep 8 rc=$? ($((SECONDS - t0)) s): $(tail -n 2 "$OUT/pcie_b.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
t0=$SECONDS
timeout 300 bash bench/scripts/processes.sh "$OUT/tests" tests > /dev/null 2>&1
cat "$OUT/tests/summary.txt" >> "$OUT/summary.txt"
echo "processes tests ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
