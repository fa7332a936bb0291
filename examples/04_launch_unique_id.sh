#!/usr/bin/env bash
# examples/04_launch_unique_id.sh — start N processes of collcomm_example_04_launch_unique_id from a
# shell loop: rank 0 writes the unique id to a file, the others wait for the file and take it.
# Waits for every rank and exits non-zero if any rank did.
#
#   examples/04_launch_unique_id.sh <program> <nprocs> [program arguments...]
set -uo pipefail
prog="$1"
n="$2"
shift 2
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
pids=()
for ((r = 0; r < n; r++)); do
  "$prog" --rank "$r" --nranks "$n" --id-file "$dir/id" "$@" 2>&1 | sed -u "s/^/[rank $r] /" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
