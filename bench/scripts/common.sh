# bench/scripts/common.sh — sourced by the other scripts here (not run on its own): where the
# binaries are, the record of the machine and commit a run used, and one collcomm_bench line.
#
# Every script runs from the repository root on the GPU machine and writes its logs under the OUT
# directory it is given. The binaries come from BIN (default .deps/bin: built on a machine
# without a GPU by `scripts/build_gpu_here.sh` and carried to the device; a CMake build puts the
# bench programs in build-bench/bench: BIN=build-bench/bench).
BIN=${BIN:-.deps/bin}
export CUDA_MODULE_LOADING=EAGER
export PATH=$PATH:/usr/local/nvidia/bin  # nvidia-smi and nvidia-cuda-mps-control on the GPU machines

# start_mps: the MPS control daemon as a user-level process (it changes no GPU setting), its pipes
# under /tmp, stopped when the calling script exits.
start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  nvidia-cuda-mps-control -d
}

# record_env OUT: the GPUs, the commit and the tree's uncommitted changes, into OUT/env.txt. A copy
# of a working tree may carry an older .git than its files (the device machines' copies keep the
# repository they were first given): COLLCOMM_COMMIT, set by the caller, names the commit the
# files are.
record_env() {
  mkdir -p "$1"
  {
    nvidia-smi --format=csv \
      --query-gpu=name,driver_version,memory.total,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current
    [[ -n ${COLLCOMM_COMMIT:-} ]] && echo "files of commit $COLLCOMM_COMMIT (COLLCOMM_COMMIT)"
    git log -1 --format='commit %H %s'
    git status --short | head -20
  } > "$1/env.txt" 2>&1
}

# summary: stdin to stdout and appended to $OUT/summary.txt (a device call's summary).
# doctest_counts LOG: the doctest totals of a test log, on one line.
summary() { tee -a "$OUT/summary.txt"; }
doctest_counts() { grep -E '^\[doctest\] (test cases|assertions)' "$1" | tr '\n' ' '; }
# time_left MARGIN WHAT: true while the call has MARGIN seconds of LIMIT left; else says in the
# summary that WHAT was left out.
time_left() { (( SECONDS < LIMIT - ${1:-0} )) || { echo "[$SECONDS s] out of time before $2" | summary; return 1; }; }
# one_shot_latency BINARY N GRAPH: $B/BINARY (a collcomm_bench_mp) timing small one_shot all_reduce
# (1 channel, 8 B to 8 KiB by 4x) among N processes, from a graph (GRAPH 1) or stream-launched (0).
one_shot_latency() {
  echo "== $1 n=$2 one_shot -C 1 graph=$3"
  timeout 40 "$B/$1" -n "$2" -k all_reduce -a one_shot -C 1 -b 8 -e 8K -f 4 -G "$3" -w 50 -i 200
  echo "rc=$?"
}
# test_run BINARY LOG PATTERN LIMIT: $B/BINARY (a test_gpu_mp) --only PATTERN, for at most LIMIT
# seconds, into $OUT/LOG.log; its doctest totals into the summary.
test_run() {
  time_left 25 "$1 '$3'" || return 1
  ( time timeout "$4" "$B/$1" --only "$3" ) > "$OUT/$2.log" 2>&1
  echo "[$SECONDS s] $1 '$3' rc=$? $(doctest_counts "$OUT/$2.log")" | summary
}
# ab_one_shot ROUND BINARY...: one_shot_latency of each BINARY in turn, among 8, 2 and 4 processes
# from a graph and 8 stream-launched, appended to $OUT/latency.txt.
ab_one_shot() {
  local round=$1 v
  shift
  for v in "$@"; do
    one_shot_latency "$v" 8 1; one_shot_latency "$v" 2 1; one_shot_latency "$v" 4 1; one_shot_latency "$v" 8 0
  done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $round: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
# pushed_marks BINARY: a collcomm_bench_mp built with -DCOLLCOMM_MARKS (the pushed kernel's clock
# marks) among 8 and 2 processes, one_shot 8 B to 2 KiB from a graph, into $OUT/marks.txt; every
# rank's marks into the summary.
pushed_marks() {
  time_left 30 "marks" || return 1
  local n
  for n in 8 2; do
    echo "== $1 n=$n"
    timeout 40 "$B/$1" -n $n -k all_reduce -a one_shot -C 1 -b 8 -e 2K -f 16 -G 1 -w 50 -i 200
    echo "rc=$?"
  done > "$OUT/marks.txt" 2>&1
  echo "[$SECONDS s] marks: $(grep -c 'rc=0' "$OUT/marks.txt") of 2 runs rc=0" | summary
  grep -h "^marks" "$OUT/marks.txt" | sed 's/ (1\.[0-9]* GHz), ns median\/mean://' | summary
}

# find_nccl: exports COLLCOMM_NCCL_LIB for collcomm_bench --nccl (bench/nccl_peer.hpp) unless set:
# the GPU machines have libnccl.so.2 inside PyTorch's wheels. NVLink multicast stays off.
find_nccl() {
  if [[ -z ${COLLCOMM_NCCL_LIB:-} ]]; then
    local where='import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))'
    COLLCOMM_NCCL_LIB=$(python3 -c "$where" 2>/dev/null || true)
    [[ -f $COLLCOMM_NCCL_LIB ]] || COLLCOMM_NCCL_LIB=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
    export COLLCOMM_NCCL_LIB
  fi
  export NCCL_NVLS_ENABLE=0
}

# bench ARGS...: one collcomm_bench run under a time limit of T seconds (default 60), preceded by
# its command line and followed by its exit status and seconds, as the logs in bench/results show.
bench() {
  echo "\$ collcomm_bench $*"
  local t0=$SECONDS
  timeout "${T:-60}" "$BIN/collcomm_bench" "$@"
  echo "# exit $? ($((SECONDS - t0)) s)"
}

# ab LABEL ARGS...: a before/after pair, as bench/results/*/run.sh use it: collcomm_bench of
# OLD_BIN ("old") and NEW_BIN ("new") on the same flags, interleaved, ROUNDS times (default 2).
ab() {
  local label=$1
  shift
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in old new; do
      local b=${NEW_BIN:-.deps/bin/collcomm_bench}
      [[ $v == old ]] && b=${OLD_BIN:-.deps/bin/collcomm_bench_old}
      echo "\$ [$label $v round $round] collcomm_bench $*"
      timeout 100 "$b" "$@" | grep -vE "^#  +size"
      echo "# exit $?"
    done
  done
}
