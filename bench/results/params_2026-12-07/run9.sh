#!/usr/bin/env bash
# Device call 9: branch pushed-lean-stores at 030c595 (run8's lean3b) and branch pushed-lean-one at
# b9bbaae (on it: a call of at most a pair a thread stores and awaits its pair straight) against
# pushed-compact, three rounds (run8's second round had outliers in every binary); their
# multi-process tests; where lean3b's time
# goes (bench_mp_lean3bmarks: lean3bmarks.patch, clock marks of thread 0 — print_marks's spans:
# "enter" 1-8 the range, "line" 8-9 the loads issued, "windows" 9-10 their shared-memory stores (the
# loads' round trip), "bar" 11-12, "adv" 12-2 the checks, "again" 12-13 to the headers checked (its
# stores and the peers' headers), "area" 13-14 its pairs polled; "stores" 2-3, "lines" 3-4).
#   bench_mp_hoist3 (pushed-compact), bench_mp_lean3b, bench_mp_lean3bmarks and test_gpu_mp_lean3b (030c595),
#   bench_mp_one and test_gpu_mp_one (b9bbaae)
#   bash bench/results/params_2026-12-07/run9.sh OUT
# Binaries: .deps/bins9.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run9.sh OUT}
LIMIT=${LIMIT:-330}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run() {  # BINARY LOG PATTERN LIMIT
  time_left 25 "$1 '$3'" || return 1
  ( time timeout "$4" $B/$1 --only "$3" ) > "$OUT/$2.log" 2>&1
  echo "[$SECONDS s] $1 '$3' rc=$? $(doctest_counts "$OUT/$2.log")" | summary
}
test_run test_gpu_mp_lean3b lean3b_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
test_run test_gpu_mp_one one_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
ab() {  # ROUND
  for v in bench_mp_hoist3 bench_mp_lean3b bench_mp_one; do
    one_shot_latency $v 8 1; one_shot_latency $v 2 1; one_shot_latency $v 4 1; one_shot_latency $v 8 0
  done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $1: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
for r in 1 2 3; do time_left 40 "A/B round $r" && ab $r; done
if time_left 30 "marks"; then
  for n in 8 2; do
    echo "== bench_mp_lean3bmarks n=$n"
    timeout 40 $B/bench_mp_lean3bmarks -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
    echo "rc=$?"
  done > "$OUT/marks.txt" 2>&1
  echo "[$SECONDS s] marks: $(grep -c 'rc=0' "$OUT/marks.txt") of 2 runs rc=0" | summary
  grep -h "^marks rank 1 " "$OUT/marks.txt" | sed 's/ (1\.[0-9]* GHz), ns median\/mean://' | summary
fi
test_run test_gpu_mp_lean3b lean3b_every 'mp: every*' 150
test_run test_gpu_mp_one one_every 'mp: every*' 150
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
