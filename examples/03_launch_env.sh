#!/usr/bin/env bash
# examples/03_launch_env.sh — start N processes of a collcomm program the way torchrun would, from
# a plain shell loop: each gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK (and
# LOCAL_WORLD_SIZE). Waits for every rank and exits non-zero if any rank did.
#
#   examples/03_launch_env.sh <program> <nprocs> [program arguments...]
#   e.g. examples/03_launch_env.sh build/examples/collcomm_example_03_launch_env 4 --count 100000
#
# MASTER_PORT: taken from the environment if set, else a random port in 20000..39999; when rank 0
# cannot bind that one (in use), the script tries another, up to 3 times.
set -uo pipefail
prog="$1"
n="$2"
shift 2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for attempt in 1 2 3; do
  port="${MASTER_PORT:-$((20000 + RANDOM % 20000))}"
  : >"$log"
  pids=()
  for ((r = 0; r < n; r++)); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RANK="$r" WORLD_SIZE="$n" LOCAL_RANK="$r" LOCAL_WORLD_SIZE="$n" \
      "$prog" "$@" 2>&1 | sed -u "s/^/[rank $r] /" >>"$log" &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$log"
  [[ $rc == 0 ]] && exit 0
  # Retry only a port that was taken, never a wrong result.
  grep -q "bind 127.0.0.1:$port" "$log" && [[ -z "${MASTER_PORT:-}" ]] || break
  echo "03_launch_env.sh: port $port is taken; trying another" >&2
done
exit 1
