#!/usr/bin/env bash
# Device call 19: test_gpu_mp and collcomm_bench_mp with programmatic launches (options::
# programmatic_launch; COLLCOMM_GPU_PROGRAMMATIC_LAUNCH=1 turns them on, 0 off). First
# the A/B: collcomm_bench_mp -a automatic (8 B to 1 MiB) among 8, 4 and 2 processes from a graph,
# programmatic launches on and off in turn, 3 rounds, then one stream-launched round; the floor of 8
# processes (bench/probes/mps_floor: empty and meeting kernels, with them and without); then the
# tests with them on (`mp: every*`, the pushed, disagreement and abort cases); then automatic's
# sweep for processes (bench/tune.py mp, 3 rounds, into OUT/mp_sweep); then every other
# multi-process case while time is left.
# It includes run18.sh's cases (the table's rules for processes under test_gpu_mp's mixed queue).
#   scripts/build_gpu_here.sh test_gpu_mp bench_mp mps_floor   (here; carry .deps/bin, or a tar of it)
#   bash bench/results/params_2026-12-07/run19.sh OUT   (LIMIT: seconds, default 560; AB_ROUNDS: the A/B's, default 3; ROUNDS: the sweep's)
set -u
OUT=${1:?usage: run19.sh OUT}
LIMIT=${LIMIT:-560}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0 COLLCOMM_GPU_PROGRAMMATIC_LAUNCH=1  # the tests and the sweep with them on
start_mps && echo "MPS daemon started" | summary
automatic() {  # N GRAPH PDL
  echo "== collcomm_bench_mp n=$1 automatic graph=$2 pdl=$3"
  COLLCOMM_GPU_PROGRAMMATIC_LAUNCH=$3 timeout 60 "$B/collcomm_bench_mp" -n "$1" -k all_reduce -a automatic \
    -b 8 -e 1M -f 4 -G "$2" -w 50 -i 200
  echo "rc=$?"
}
for round in $(seq "${AB_ROUNDS:-3}"); do
  time_left 200 "A/B round $round" || break
  for n in 8 4 2; do automatic $n 1 1; automatic $n 1 0; done >> "$OUT/ab.txt" 2>&1
  echo "[$SECONDS s] A/B round $round: $(grep -c 'rc=0' "$OUT/ab.txt") runs rc=0 so far" | summary
done
time_left 180 "A/B stream-launched" && for n in 8 4 2; do automatic $n 0 1; automatic $n 0 0; done >> "$OUT/ab.txt" 2>&1
echo "[$SECONDS s] A/B stream-launched: $(grep -c 'rc=0' "$OUT/ab.txt") runs rc=0 so far" | summary
if time_left 150 "mps_floor" && [[ -x $B/mps_floor ]]; then  # the floor, with programmatic launches and without
  for launch in graph stream; do
    for mode in empty meet; do
      for pdl in 0 1; do
        echo "== mps_floor 8 $mode $launch pdl=$pdl"
        timeout 60 "$B/mps_floor" 8 $mode 200 9 $launch 0 0 512 8 1 0 $pdl
        echo "rc=$?"
      done
    done
  done > "$OUT/mps_floor.txt" 2>&1
  echo "[$SECONDS s] mps_floor: $(grep -c 'rc=0' "$OUT/mps_floor.txt") of 8 runs rc=0" | summary
fi
test_run test_gpu_mp tab_pushed 'mp: calls that depend*,mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 60
test_run test_gpu_mp tab_every 'mp: every*' 150
if time_left 90 "the sweep"; then
  python3 bench/tune.py mp --bench "$B/collcomm_bench_mp" --ranks 2,4,8 --graph --max-bytes 8K --rounds "${ROUNDS:-3}" \
    --out "$OUT/mp_sweep" > "$OUT/mp_sweep.log" 2>&1
  echo "[$SECONDS s] sweep exit $? $(tail -1 "$OUT/mp_sweep.log")" | summary
fi
test_run test_gpu_mp tab_rest 'mp: a direct*,mp: split*,mp: 1000*,mp fault: abort*,mp fault: a rank killed*,mp: pcie staged*,mp: net*' $((LIMIT - SECONDS - 5))
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
