// collcomm/algo/one_shot.hpp — one-shot all_reduce over load/store transports: every rank reads
// every peer's whole input and reduces it into its own output. One step, no FIFO: the lowest
// latency for small messages (vLLM, TensorRT-LLM and MSCCL++ use it up to ~256 KB on 8 GPUs),
// at the cost of (n-1) * count elements read per rank.
//
// entry barrier (every input is ready); direct_reduce_copy of this channel's share from all ranks, in
// rank order, into this rank's output, finalized; exit barrier (no rank leaves while a peer reads).
// Both are free on the GPU when one launch carries every rank (algo/primitives.hpp, entry_barrier);
// on the host a call of at most 4 KiB of input on one channel goes through the ranks' mailboxes
// instead (host/world.hpp, "small direct calls": the entry is a post and a wait, the exit none).
// Every rank reduces in the same order, so all ranks end with bitwise identical results.
//
// NOT in-place safe: in place, a rank overwrites its input while its peers may still be reading
// it, and no ordering of one-shot's reads and writes can avoid that without a scratch buffer
// (every rank must both read element x of every input and write element x of its own). Use
// two_shot for in-place calls. `in_place_safe = false` says so: the host API refuses in-place
// calls and the symbolic sweep checks one_shot out of place only.
#pragma once

#include <collcomm/algo/primitives.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct one_shot {
  static constexpr const char* name = "one_shot";
  static constexpr bool needs_direct = true;
  static constexpr bool in_place_safe = false;  // the host API refuses in-place calls (collectives.hpp)
  // Channel c reads from each peer only the peer's input range of channel c (kernels may stage it
  // per channel: collective_kernel.cuh, stages_channel_range).
  template <class K>
  static constexpr bool peers_read_channel_range = true;
  // Each rank reduces every peer's channel range once, and nothing else orders the call: across
  // processes a small call may go as lines each rank pushes to its peers, with no barrier
  // (kernels/collective_kernel.cuh, pushes_small_calls).
  template <class K>
  static constexpr bool pushable = std::is_same_v<K, kind::all_reduce>;

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;  // the same on every rank: no barrier is skipped on one side only
    entry_barrier(p);
    p.direct_reduce_copy(in(mine.begin), out(mine.begin), mine.size, true);
    exit_barrier(p);
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
