#!/usr/bin/env bash
# One rank per GPU on every GPU of the machine, collcomm beside NCCL (collcomm_bench --nccl:
# NCCL's same collective on the same ranks, buffers and streams, right after ours; NVLink
# multicast off), logs under OUT. Run on nvidia-h200-x2/x4/x8; on one GPU it is a smoke test of
# this script and of --nccl (one rank: a copy).
#   bash bench/scripts/multi_gpu.sh OUT   -> OUT/env.txt, OUT/gpus_large_G.txt, OUT/gpus_small_G.txt
# large: the five kinds, f32 and bf16, 8 B to MAXB (default 4G), collcomm's ring and pairwise
#   beside NCCL, and the direct algorithms (all_to_all, reduce_scatter, all_gather) to 256 MiB.
# small: all_reduce 8 B to 1 MiB with one_shot, two_shot, tree and ring, one channel, from a
#   graph and stream-launched beside NCCL; tree/ll with 4 channels from a graph.
# GPUS (default: every GPU nvidia-smi lists) sets the ranks. BIN: where collcomm_bench is.
set -u
out=${1:?usage: multi_gpu.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
find_nccl
echo "nccl: ${COLLCOMM_NCCL_LIB:-none found}" >> "$out/env.txt"
G=${GPUS:-$(nvidia-smi -L | wc -l)}
MAXB=${MAXB:-4G}
for t in f32 bf16; do
  for k in all_reduce reduce_scatter all_gather broadcast; do
    T=300 bench -k $k -a ring -t $t -r $G -g 1 -b 8 -e $MAXB -f 4 -n 20 -w 3 -R 3 -c 1 -s 1M --nccl
  done
  T=300 bench -k all_to_all -a pairwise -t $t -r $G -g 1 -b 8 -e $MAXB -f 4 -n 20 -w 3 -R 3 -c 1 -s 1M --nccl
  T=300 bench -k all_to_all -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
  T=300 bench -k reduce_scatter -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
  T=300 bench -k all_gather -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
done > "$out/gpus_large_$G.txt" 2>&1
{
  for a in one_shot two_shot tree ring; do
    bench -k all_reduce -a $a -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 1
    bench -k all_reduce -a $a -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -C 1 --nccl
  done
  bench -k all_reduce -a tree -p ll -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 4
} > "$out/gpus_small_$G.txt" 2>&1
grep -h "^# exit" "$out"/gpus_*_$G.txt | sort | uniq -c
