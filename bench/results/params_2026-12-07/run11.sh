#!/usr/bin/env bash
# Device call 11: threads of one process, grouped-lean (aa57cef) against main (ff9a0a9) at the sizes
# automatic sends to one_shot on the world's channels (8 KiB-512 KiB; the register path takes a
# call while each channel's range fits one vector per thread: 128 KiB among 8 ranks on their 16
# channels, 512 KiB among 2 on 64), and the register path at 2-8 KiB on 1, 2 and 4 channels.
# Binaries of run10 (bench_thr_base, bench_thr_grp: collcomm_bench narrowed to one_shot all_reduce f32).
#   bash bench/results/params_2026-12-07/run11.sh OUT
set -u
OUT=${1:?usage: run11.sh OUT}
LIMIT=${LIMIT:-150}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
A="-k all_reduce -a one_shot -n 50 -w 10 -R 5 -c 1"
for r in 1 2; do
  time_left 30 "round $r" || break
  for v in bench_thr_base bench_thr_grp; do
    for args in "-r 8 -G -C 0 -b 8K -e 512K -f 4" "-r 4 -G -C 0 -b 8K -e 512K -f 4" "-r 2 -G -C 0 -b 8K -e 512K -f 4" \
                "-r 8 -G -C 2 -b 2K -e 8K -f 2" "-r 8 -G -C 4 -b 2K -e 8K -f 2"; do
      echo "== $v $args"; timeout 60 "$B/$v" $A $args; echo "rc=$?"
    done
  done >> "$OUT/threads.txt" 2>&1
  echo "[$SECONDS s] round $r: $(grep -c 'rc=0' "$OUT/threads.txt") runs rc=0 so far" | summary
done
