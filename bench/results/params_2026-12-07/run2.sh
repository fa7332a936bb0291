#!/usr/bin/env bash
# Device call 2: where the pushed kernel's prologue (1.5 µs among 2 processes as among 8, run1)
# goes. bench_mp_fmarks: the merged pushed kernel (1d4c585) with marks_p2.patch and five more marks
# inside the prologue (fmarks.patch: entry → pushed_call → range and first line issued → windows →
# thread 0's loads back → __syncthreads → prologue end); bench_mp_fmarks2 (-DCOLLCOMM_MARKS_AGAIN):
# the same, and thread 0 then loads the same words again and the push area's first word, each
# marked (a repeat round trip against the first); the pushed kernel's machine code
# (cuobjdump), to read what the prologue executes.
#   bash bench/results/params_2026-12-07/run2.sh OUT
# Binaries (.deps/bin, carried as .deps/bins2.tar.xz and unpacked first): bench_mp_fmarks, bench_mp_fmarks2,
# collcomm_bench_mp (1d4c585).
set -u
OUT=${1:?usage: run2.sh OUT}
LIMIT=${LIMIT:-400}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
for round in 1 2; do
  for n in 8 2; do
    for v in bench_mp_fmarks bench_mp_fmarks2; do
      echo "== $v n=$n round $round"
      timeout 40 $B/$v -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
      echo "rc=$?"
    done
  done
done > "$OUT/fmarks.txt" 2>&1
echo "[$SECONDS s] fmarks: $(grep -c 'rc=0' "$OUT/fmarks.txt") of 8 runs rc=0" | summary
grep -h "^marks" "$OUT/fmarks.txt" | sed 's/.*(\(.*\)), ns median\/mean:/\1/' | summary
# The pushed kernels' machine code (collective_kernel<..., true>: "Lb1E" in the name).
cuobjdump --dump-sass $B/collcomm_bench_mp > "$OUT/sass_all.txt" 2>&1
awk '/Function :/ { keep = /Lb1E/ } keep' "$OUT/sass_all.txt" > "$OUT/sass_pushed.txt"
rm -f "$OUT/sass_all.txt"
echo "[$SECONDS s] sass of pushed kernels: $(grep -c 'Function :' "$OUT/sass_pushed.txt") functions, $(wc -l < "$OUT/sass_pushed.txt") lines" | summary
gzip -9 "$OUT/sass_pushed.txt"
