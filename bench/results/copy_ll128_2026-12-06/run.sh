#!/usr/bin/env bash
# A/B of narrow benches (bench/collcomm_bench.cu with COLLCOMM_BENCH_KINDS/ALGOS/TYPES, built from
# two include trees) and a 2-rank all_reduce sweep with 32-channel arms:
#   1. the schedule tests of the copy loop (test_gpu_sched_moving, _rooted, _reducing);
#   2. local copies with 2 vectors in flight (new) against 4 (base): direct all_gather and
#      broadcast, 2 and 8 ranks, 16 MiB to 1 GiB, two rounds in turn;
#   3. ring all_reduce over ll128 with 4 (llbase: as committed; ll4: the prefetch as a loop), 6 and 8
#      lines in flight per lane group, against simple, 64 and 256 MiB, two rounds; ll6/ll8 checked
#      (-c 1) to 4 MiB;
#   4. bench/tune.py: one_shot and two_shot all_reduce at 2 ranks, the world's channels and 32.
#   bash bench/results/copy_ll128_2026-12-06/run.sh OUT     (binaries in .deps/bin)
set -u
OUT=${1:?usage: run.sh OUT}
B=.deps/bin
L=$OUT/logs
mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/summary.txt"
for t in test_gpu_sched_moving test_gpu_sched_rooted test_gpu_sched_reducing; do
  timeout 300 $B/$t > "$L/$t.txt" 2>&1
  echo "$t rc=$? $(tail -n 2 "$L/$t.txt" | tr '\n' ' ')" >> "$OUT/summary.txt"
done
for round in 1 2; do
  for v in base new; do
    for r in 2 8; do
      for k in all_gather broadcast; do
        echo "== copy $k r$r $v round $round"
        timeout 120 $B/bench_$v -k $k -a direct -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
      done
    done
  done
done > "$OUT/copy.txt" 2>&1
for v in ll6 ll8; do
  echo "== check $v"
  timeout 120 $B/bench_$v -k all_reduce -a ring -p ll128 -r 8 -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -R 1 | grep -E "^ +[0-9]"
done > "$OUT/ll128.txt" 2>&1
for round in 1 2; do
  for r in 2 8; do
    echo "== simple r$r round $round"
    timeout 60 $B/bench_llbase -k all_reduce -a ring -p simple -s 1M -r $r -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    for v in llbase ll4 ll6 ll8; do
      echo "== ll128 $v r$r round $round"
      timeout 60 $B/bench_$v -k all_reduce -a ring -p ll128 -r $r -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    done
  done
done >> "$OUT/ll128.txt" 2>&1
python3 bench/tune.py gpu --bench $B/collcomm_bench --ranks 2 --kinds all_reduce \
  --only-arms '^(one|two)_shot/simple/c(0|32)/' --rounds 3 --timeout 200 --out "$OUT/tune_ar_r2" > "$L/tune.txt" 2>&1
echo "tune rc=$?" >> "$OUT/summary.txt"
tar -czf "$OUT/tune_ar_r2.tgz" -C "$OUT" tune_ar_r2 && rm -rf "$OUT/tune_ar_r2"
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
cat "$OUT/summary.txt"
