#!/usr/bin/env bash
# The figure set of bench/RESULTS.md on one GPU: ranks as threads, all on GPU 0.
# Usage: bench/run_h200.sh path/to/collcomm_bench OUTDIR
set -u
bin=$1
out=$2
mkdir -p "$out"
run() { echo "\$ collcomm_bench $*"; timeout 120 "$bin" "$@" || echo "# exit $?"; }
{
  for a in one_shot two_shot ring tree recursive_doubling; do
    run -k all_reduce -a $a -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G
    run -k all_reduce -a $a -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1
  done
} 2>&1 | tee "$out/bench_small.txt"
{
  for r in 8 4 2; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      run -k $k -a ring -r $r -b 8 -e 1G -f 4 -n 20 -w 3 -R 5 -c 1
    done
  done
} 2>&1 | tee "$out/bench_ring.txt"
{
  for a in two_shot tree; do run -k all_reduce -a $a -r 8 -b 1M -e 1G -f 8 -n 10 -w 2 -R 3 -c 1; done
  run -k all_reduce -a ring -t bf16 -r 8 -b 1M -e 1G -f 8 -n 10 -w 2 -R 3 -c 1
} 2>&1 | tee "$out/bench_more.txt"
