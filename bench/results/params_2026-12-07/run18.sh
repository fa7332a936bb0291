#!/usr/bin/env bash
# Device call 18: test_gpu_mp and collcomm_bench_mp of 6415e30 (automatic's rules for processes first in
# tables/nvlink.hpp, small calls pushed over several channels): `mp: every*` (its mixed queue runs
# algo::automatic among 2, 3 and 8 processes at n + 1, 1031 and 250007 elements), the pushed,
# disagreement and abort cases; collcomm_bench_mp -a automatic (its arms printed) among 8, 4 and 2
# processes from a graph and stream-launched, 8 B to 64 KiB; then every other multi-process case
# while time is left.
#   bash bench/results/params_2026-12-07/run18.sh OUT   (binaries: .deps/bins18.tar.xz, unpacked into .deps/bin)
set -u
OUT=${1:?usage: run18.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp tab_every 'mp: every*' 120
test_run test_gpu_mp tab_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 60
for g in 1 0; do
  for n in 8 4 2; do
    time_left 60 "automatic" || break 2
    { echo "== collcomm_bench_mp n=$n automatic graph=$g"
      timeout 40 "$B/collcomm_bench_mp" -n $n -k all_reduce -a automatic -b 8 -e 64K -f 4 -G $g -w 50 -i 200
      echo "rc=$?"; } >> "$OUT/automatic.txt" 2>&1
  done
done
echo "[$SECONDS s] automatic: $(grep -c 'rc=0' "$OUT/automatic.txt") runs rc=0" | summary
test_run test_gpu_mp tab_rest 'mp: a direct*,mp: split*,mp: 1000*,mp fault: abort*,mp fault: a rank killed*,mp: pcie staged*,mp: net*' $((LIMIT - SECONDS - 5))
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
