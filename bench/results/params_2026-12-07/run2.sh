#!/usr/bin/env bash
# Device call 2: where the pushed kernel's prologue (1.5 µs among 2 processes as among 8, run1)
# goes, and whether touching the pages a call stores to ahead of its stores helps.
#   bench_mp_fmarks   the pushed kernel of 1d4c585 with marks_p2.patch's marks and five more in the
#                     prologue (fmarks.patch: entry → pushed_call → range and first line issued →
#                     windows → thread 0's loads back → __syncthreads → prologue end)
#   bench_mp_fmarks2  the same, -DCOLLCOMM_MARKS_AGAIN: thread 0 then loads the same words again, then
#                     the push area's first word, each marked (a repeat round trip against a first touch)
#   bench_mp_touch    each thread that loads a window loads a word of that window's push area too,
#                     result unused (touch.patch): the translation of the pages the stores (peers) and
#                     polls (its own) go to, during the prologue
#   bench_mp_touch2   that, and a word of the output (touch2.patch)
#   collcomm_bench_mp 1d4c585 (the base); test_gpu_mp_touch, test_gpu_mp_touch2: test_gpu_mp on each variant
# and the pushed kernels' machine code (cuobjdump). Sections in order of need, within LIMIT s.
#   bash bench/results/params_2026-12-07/run2.sh OUT
# Binaries: .deps/bins2.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run2.sh OUT}
LIMIT=${LIMIT:-330}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
ab() {  # ROUND
  for v in collcomm_bench_mp bench_mp_touch bench_mp_touch2; do one_shot_latency $v 8 1; one_shot_latency $v 2 1; one_shot_latency $v 8 0; done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $1: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
time_left 60 "A/B round 1" && ab 1
if time_left 40 "fmarks"; then
  for n in 8 2; do
    for v in bench_mp_fmarks bench_mp_fmarks2; do
      echo "== $v n=$n"
      timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
      echo "rc=$?"
    done
  done > "$OUT/fmarks.txt" 2>&1
  echo "[$SECONDS s] fmarks: $(grep -c 'rc=0' "$OUT/fmarks.txt") of 4 runs rc=0" | summary
  grep -h "^marks" "$OUT/fmarks.txt" | sed 's/ (1\.[0-9]* GHz), ns median\/mean://' | summary
fi
time_left 60 "A/B round 2" && ab 2
if time_left 20 "sass"; then
  cuobjdump --dump-sass $B/collcomm_bench_mp > "$OUT/sass_all.txt" 2>&1
  awk '/Function :/ { keep = /Lb1E/ } keep' "$OUT/sass_all.txt" > "$OUT/sass_pushed.txt"
  rm -f "$OUT/sass_all.txt"
  echo "[$SECONDS s] sass of pushed kernels: $(grep -c 'Function :' "$OUT/sass_pushed.txt") functions" | summary
  gzip -9 "$OUT/sass_pushed.txt"
fi
# The multi-process tests of pushed calls on the touching variants (touch.patch, touch2.patch).
for v in test_gpu_mp_touch test_gpu_mp_touch2; do
  time_left 25 "$v" || break
  ( time timeout 60 $B/$v --only 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' ) > "$OUT/$v.log" 2>&1
  echo "[$SECONDS s] $v rc=$? $(doctest_counts "$OUT/$v.log")" | summary
done
