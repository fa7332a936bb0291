#!/usr/bin/env bash
# Device call 6: pushed calls within transport::pushes's bounds, in a kernel of their own (this
# commit; the staged kernel as before, byte for byte): the multi-process
# GPU tests, then all_reduce among 2, 4 and 8 processes, 8 B..8 KiB by factors of 2, one_shot on 1
# channel, from a graph, the commit before pushed calls (bench_mp_base) and this one
# (collcomm_bench_mp) in turn, two rounds.
#   COLLCOMM_COMMIT=<sha> bash bench/results/pushed_2026-12-06/run6.sh OUT
# Binaries (.deps/bin, carried as .deps/bins.tar.xz and unpacked first): test_gpu_mp,
# collcomm_bench_mp, bench_mp_base, and test_gpu_mp_noclean: this commit's test_gpu_mp with the
# push areas' cleaning left out (the epoch still recorded), whose wrap case must fail.
set -u
OUT=${1:?usage: run6.sh OUT}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
sum() { tee -a "$OUT/summary.txt"; }
counts() { grep -E '^\[doctest\] (test cases|assertions)' "$1" | tr '\n' ' '; }
start_mps && echo "MPS daemon started" | sum
for what in 'mp: pushed*' 'mp fault: processes that disagree*,mp fault: a pushed*' \
  'mp: every*,mp: a direct*,mp: split*,mp: 1000*'; do
  log=$OUT/test_$(echo "$what" | tr -c 'a-z\n' '_' | cut -c1-40).log
  ( time timeout 240 $B/test_gpu_mp --only "$what" ) > "$log" 2>&1
  echo "'$what' rc=$? $(counts "$log")" | sum
done
if [ -x $B/test_gpu_mp_noclean ]; then
  ( time timeout 120 $B/test_gpu_mp_noclean --only 'mp: pushed*' ) > "$OUT/test_noclean.log" 2>&1
  echo "the wrap case with the cleaning left out (must fail): rc=$? $(counts "$OUT/test_noclean.log")" | sum
fi
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | sum
for round in 1 2; do
  for v in bench_mp_base collcomm_bench_mp; do
    for n in 8 4 2; do
      for g in 1; do
        echo "== $v round $round n=$n one_shot -C 1 graph=$g"
        timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 2 -G $g -w 50 -i 200
        echo "rc=$?"
      done
    done
  done
done > "$OUT/latency.txt" 2>&1
echo "latency A/B: $(grep -c 'rc=0' "$OUT/latency.txt") of 12 runs rc=0" | sum
