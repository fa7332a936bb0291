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
test_run test_gpu_mp_lean3b lean3b_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
test_run test_gpu_mp_one one_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
for r in 1 2 3; do time_left 40 "A/B round $r" && ab_one_shot $r bench_mp_hoist3 bench_mp_lean3b bench_mp_one; done
pushed_marks bench_mp_lean3bmarks
test_run test_gpu_mp_lean3b lean3b_every 'mp: every*' 150
test_run test_gpu_mp_one one_every 'mp: every*' 150
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
