#!/usr/bin/env bash
# One device call: direct barriers that check the call before arriving (branch barrier-check-first:
# test_gpu_mp_bar, scripts/build_gpu_here.sh test_gpu_mp there): under MPS, the disagreement fault
# case (a failed first call must leave the output as it was: one_shot with another count, ring
# with another op), then every kind and algorithm across processes, the mixed queue and the
# window case (processes.sh's nvlink cases) with the barrier changed.
#   bash bench/results/barrier_first/run1.sh OUT          (carry .deps/bin/test_gpu_mp_bar)
set -u
OUT=${1:?usage: run1.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
start_mps
for what in 'mp fault: processes that disagree*' 'mp: every*,mp: a direct*'; do
  log=$OUT/$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-30).log
  ( time timeout 240 $B/test_gpu_mp_bar --only "$what" ) > "$log" 2>&1
  echo "'$what' rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
