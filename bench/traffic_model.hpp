// bench/traffic_model.hpp — how many bytes of device memory a schedule's kernels must read and
// write, counted by running the schedule over a primitives object that only counts (the same
// idea as the symbolic executor's byte model, for memory instead of messages).
//
// Per element of a call: every received message is read once from its slot, the local source
// is read once, the destination written once, and each outgoing slot written once; a direct
// reduce reads every rank's source once. The total over all ranks and channels, divided by the
// time of the collective, is the memory bandwidth the collective achieved — comparable with the
// device's copy bandwidth measured as (read + write bytes) / time. With the ll protocol a slot
// holds half payload, half flags, so slot accesses count twice their payload; with ll128, 128/120.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/gpu.hpp>
#include <collcomm/kinds.hpp>

#include <cstdint>

namespace collcomm_bench {
using namespace collcomm;

struct traffic_counter {
  index_t slot;
  index_t align;
  int nranks;
  double slot_weight = 1;  // bytes moved in a slot per byte of payload: 1 (simple), 2 (ll: 8 of 16 bytes are
                           // flags), 128/120 (ll128)
  double elems = 0;        // element reads + writes, slot accesses weighted by slot_weight

  COLLCOMM_HD index_t slot_elems() const { return slot; }
  COLLCOMM_HD index_t align_elems() const { return align; }
  // slot: slot reads + writes per element; buffer: user-buffer reads + writes per element.
  COLLCOMM_HD void add(int slot_rw, int buffer_rw, index_t n) {
    elems += (slot_rw * slot_weight + buffer_rw) * static_cast<double>(n);
  }
  COLLCOMM_HD void send(peers to, buf_ref, index_t n) { add(to.size, 1, n); }
  COLLCOMM_HD void recv(peers from, buf_ref, index_t n) { add(from.size, 1, n); }
  COLLCOMM_HD void recv_reduce_send(peers from, buf_ref, peers to, index_t n) { add(from.size + to.size, 1, n); }
  COLLCOMM_HD void recv_reduce_copy(peers from, buf_ref, buf_ref, index_t n, bool) { add(from.size, 2, n); }
  COLLCOMM_HD void recv_reduce_copy_send(peers from, buf_ref, buf_ref, peers to, index_t n, bool) {
    add(from.size + to.size, 2, n);
  }
  COLLCOMM_HD void recv_copy_send(peers from, buf_ref, peers to, index_t n) { add(from.size + to.size, 1, n); }
  COLLCOMM_HD void copy_send(buf_ref, buf_ref, peers to, index_t n, bool = false) { add(to.size, 2, n); }
  COLLCOMM_HD void copy(buf_ref, buf_ref, index_t n, bool = false) { add(0, 2, n); }
  COLLCOMM_HD void barrier() {}
  COLLCOMM_HD void direct_reduce_copy(buf_ref, buf_ref, index_t n, bool) { add(0, nranks + 1, n); }
  COLLCOMM_HD void direct_copy(int, buf_ref, buf_ref, index_t n) { add(0, 2, n); }
};

// Bytes of device memory all ranks' kernels read and write for one call.
template <class K, class Algo>
double traffic_bytes(coll_args base, int nchannels, index_t slot_elems, index_t align, std::size_t elem_size,
                     double slot_weight = 1) {
  double total = 0;
  for (int r = 0; r < base.nranks; ++r)
    for (int c = 0; c < nchannels; ++c) {
      coll_args a = base;
      a.rank = r;
      a.channel = c;
      a.nchannels = nchannels;
      if constexpr (std::is_same_v<K, kind::send_recv>) {
        a.send_peer = mod(r + 1, a.nranks);
        a.recv_peer = mod(r - 1, a.nranks);
      }
      traffic_counter t{slot_elems, align, a.nranks, slot_weight};
      Algo::run(K{}, t, a);
      total += t.elems;
    }
  return total * static_cast<double>(elem_size);
}

// The device-memory bytes a call must move: its algorithm's (traffic_bytes) with its tuning's
// protocol, channels and slots in a world of options o, or for algo::automatic those of the arm the call takes.
template <class K, class Algo, class Tuning, class T, class Op>
double modeled_traffic(const world_facts& f, const coll_args& base, const gpu::options& o, bool in_place) {
  if constexpr (is_automatic<Algo>) {
    return collcomm::detail::select_arm<K, typename Algo::table, transport::nvlink, Op, T>(
        f, collcomm::detail::call_bytes_of<K, T>(base.count, base.nranks, in_place),
        [&]<class A, class Tu>(std::type_identity<A>, std::type_identity<Tu>) {
          return modeled_traffic<K, A, Tu, T, Op>(f, base, o, in_place);
        });
  } else {
    constexpr bool ll = std::is_same_v<typename Tuning::protocol, protocol::ll>;
    constexpr bool ll128 = std::is_same_v<typename Tuning::protocol, protocol::ll128>;
    const std::size_t slot_bytes = tuned_slot_bytes<Tuning>(o.slot_bytes);
    const index_t align = ll128 ? static_cast<index_t>(120 / sizeof(T)) : sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
    // The payload of a slot: all of it (simple); half of its 16-byte lines less the header line
    // (ll); 120 of each 128-byte line less the header line (ll128).
    const index_t slot = ll      ? static_cast<index_t>((slot_bytes / 16 - 1) * 8 / sizeof(T)) / align * align
                         : ll128 ? static_cast<index_t>((slot_bytes / 128 - 1) * 120 / sizeof(T))
                                 : static_cast<index_t>(slot_bytes / sizeof(T)) / align * align;
    return traffic_bytes<K, Algo>(base, tuned_channels<Tuning>(o.channels), slot, align, sizeof(T),
                                         ll      ? 2.0
                                         : ll128 ? 128.0 / 120.0
                                                 : 1.0);
  }
}

}  // namespace collcomm_bench
