#!/usr/bin/env bash
# A short subset of run_h200.sh for a nearly spent device budget.
set -u
bin=$1
out=$2
run() { echo "\$ collcomm_bench $*"; timeout 45 "$bin" "$@" || echo "# exit $?"; }
{
  run -k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 4 -n 50 -w 10 -R 7 -c 1
  run -k all_reduce -a two_shot -r 8 -b 8 -e 8K -f 4 -n 50 -w 10 -R 7 -c 1 -G
  run -k all_reduce -a ring -r 8 -b 8 -e 8K -f 4 -n 50 -w 10 -R 7 -c 1 -G
  for k in all_reduce reduce_scatter all_gather broadcast; do
    run -k $k -a ring -r 8 -b 4M -e 1G -f 16 -n 8 -w 2 -R 3 -c 1
  done
  run -k all_reduce -a ring -r 2 -b 4M -e 1G -f 16 -n 8 -w 2 -R 3 -c 1
} 2>&1 | tee "$out/bench_quick.txt"
