#!/usr/bin/env bash
# One device session's runs on the H200 (nvidia-h200), binaries prebuilt in BIN (.deps/bin):
#   bash bench/results/h200_2026-12-05/run.sh OUT tests          GPU tests: test_gpu_ll128*,
#        test_gpu_api, test_gpu_net_ibverbs (ranks as threads; TESTS: which, TEST_TIMEOUT: seconds each), test_gpu_mp without
#        and under MPS (MP=0: not)
#   bash bench/results/h200_2026-12-05/run.sh OUT sweep SECONDS  bench/tune.py's GPU sweep, one
#        (kind, rank count) at a time while SECONDS remain (KINDS, RANKS, ONLY_ARMS: which), each into its own
#        folder tune_KIND_rN (merged afterwards: tune.py --merge)
#   bash bench/results/h200_2026-12-05/run.sh OUT verify SECONDS automatic beside the sweep's
#        winners (SWEEP: the merged sweep folder, carried), one (kind, rank count) at a time
# Everything lands in a work folder packed into OUT/runs.tgz (the device returns 8 files at most);
# OUT/summary.txt has each step's exit status and time.
set -u
OUT=${1:?usage: run.sh OUT tests|sweep|verify [SECONDS]}
WHAT=${2:?}
BUDGET=${3:-540}
. bench/scripts/common.sh
chmod +x "$BIN"/* 2>/dev/null
W=/tmp/work/$WHAT
mkdir -p "$W"
record_env "$W"
S="$OUT/summary.txt"
step() { echo "$*" | tee -a "$S"; }
doctest_counts() { grep -E '^\[doctest\] test cases' "$1" | tr -s ' ' | tr '\n' ' '; }
pack() { tar czf "$OUT/runs.tgz" -C /tmp/work .; }
trap pack EXIT
case $WHAT in
tests)
  for t in ${TESTS:-test_gpu_ll128 test_gpu_api test_gpu_net_ibverbs test_gpu_ll128_reducing test_gpu_ll128_moving \
             test_gpu_ll128_rooted}; do
    [[ -x $BIN/$t ]] || { step "$t: not in $BIN"; continue; }
    t0=$SECONDS
    timeout "${TEST_TIMEOUT:-150}" "$BIN/$t" > "$W/$t.log" 2>&1
    step "$t rc=$? ($((SECONDS - t0)) s) $(doctest_counts "$W/$t.log")"
  done
  [[ ${MP:-1} == 1 ]] || exit 0
  export COLLCOMM_MP_EXE=1
  unset CUDA_MPS_PIPE_DIRECTORY
  t0=$SECONDS
  timeout 150 "$BIN/test_gpu_mp" --no-mps 'no mps: 2*,no mps: net*' > "$W/mp_no_mps.log" 2>&1
  step "mp no-mps rc=$? ($((SECONDS - t0)) s) $(doctest_counts "$W/mp_no_mps.log")"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d && step "MPS daemon started"
  trap 'echo quit | nvidia-cuda-mps-control; pack' EXIT
  for pat in 'mp: every*,mp: a direct*,mp: split*' 'mp fault: a*,mp fault: processes*' 'mp: net*' \
             'mp fault: net*' 'mp fault: net*'; do
    (( SECONDS < BUDGET - 60 )) || { step "skipped (time): $pat"; continue; }
    log=$W/mp_$(echo "$pat" | tr -c 'a-z0-9' '_' | cut -c1-40)_$SECONDS.log
    t0=$SECONDS
    timeout $((BUDGET - SECONDS)) "$BIN/test_gpu_mp" --only "$pat" > "$log" 2>&1
    step "mp '$pat' rc=$? ($((SECONDS - t0)) s) $(doctest_counts "$log")"
  done
  grep -hE "^net_kill.* rank [0-9]: rank|ERROR" "$W"/mp_*.log | head -20 >> "$S"
  ;;
sweep|verify)
  for kind in ${KINDS:-all_reduce reduce_scatter all_gather broadcast reduce}; do
    for r in ${RANKS:-2 4 8}; do
      (( SECONDS < BUDGET - 20 )) || { step "skipped (time): $kind $r"; continue; }
      d=$W/tune_${kind}_r$r
      args=(gpu --bench "$BIN/collcomm_bench" --ranks "$r" --kinds "$kind" --max-bytes "${MAX:-1G}"
            --reps 3 --timeout 120 --out "$d" --header "$d/nvlink.hpp")
      [[ -n ${ONLY_ARMS:-} ]] && args+=(--only-arms "$ONLY_ARMS")
      if [[ $WHAT == verify ]]; then
        mkdir -p "$d" && cp "${SWEEP:?}/sweep.json" "$d/" && args+=(--verify --rounds 2)
      fi
      t0=$SECONDS
      timeout $((BUDGET - SECONDS)) python3 bench/tune.py "${args[@]}" > "$d.log" 2>&1
      step "$WHAT $kind r$r rc=$? ($((SECONDS - t0)) s) $(tail -1 "$d.log")"
    done
  done
  ;;
esac
