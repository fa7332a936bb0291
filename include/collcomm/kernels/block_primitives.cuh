// collcomm/kernels/block_primitives.cuh — the GPU executor's primitives object: what a schedule
// (algo/) calls on the GPU, one channel per thread block.
//
// block_primitives<Handle, T, Op, Protocol> is composed from parts, each with one job:
//   channel_state<Handle, T, Op>  the block's view of the call, the transport and its counts (channel.cuh)
//   Protocol's FIFO family        simple_fifo, ll_fifo or ll128_fifo (simple_fifo.cuh, ...): send, recv and
//                                 the recv_*/copy_send steps through the connections' slots
//   direct_family                 barrier, direct_reduce_copy, direct_copy (direct_primitives.cuh); present
//                                 only where Handle::load_store
//   reduce_copy                   the vectorized elementwise data path both families use (reduce_copy.cuh)
// Every primitive call is block-collective: every thread of the block calls it.
#pragma once

#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/direct_primitives.cuh>
#include <collcomm/kernels/ll128_fifo.cuh>
#include <collcomm/kernels/ll_fifo.cuh>
#include <collcomm/kernels/simple_fifo.cuh>
#include <collcomm/tuning.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

template <class Protocol, class State>
struct fifo_family_of {
  using type = simple_fifo<State>;
};
template <class State>
struct fifo_family_of<protocol::ll, State> {
  using type = ll_fifo<State>;
};
template <class State>
struct fifo_family_of<protocol::ll128, State> {
  using type = ll128_fifo<State>;
};

template <class Handle, class T, class Op, class Protocol>
class block_primitives {
  using state = channel_state<Handle, T, Op>;
  using fifo = typename fifo_family_of<Protocol, state>::type;
  using direct = direct_family<state>;  // instantiated only by the direct members below

 public:
  static constexpr bool load_store = Handle::load_store;

  // send_step/recv_step/head_seen: this block's (peer) counts in shared memory; peer_ptrs: (rank)
  // scratch in shared memory; aborted: the block's abort flag in shared memory.
  __device__ block_primitives(const Handle& h, const T* in, T* out, const Op& op, int rank, int channel,
                              std::uint64_t* send_step, std::uint64_t* recv_step, std::uint64_t* head_seen,
                              const void** peer_ptrs, int* aborted)
      : c_{h, in, out, op, rank, channel, send_step, recv_step, head_seen, peer_ptrs, aborted} {}

  // The fingerprint this rank's FIFO messages carry and expect (rank_params::call).
  __device__ void set_call(std::uint32_t call) { c_.call = call; }

  COLLCOMM_HD static index_t align_elems() { return fifo::align_elems(); }  // static: no block needed
  COLLCOMM_HD index_t slot_elems() const { return fifo::slot_elems(c_); }

  // FIFO family (algo/primitives.hpp), through the protocol's slots.
  __device__ void send(peers to, buf_ref src, index_t n) { fifo::step(c_, peers{}, &src, nullptr, to, n, false); }
  __device__ void recv(peers from, buf_ref dst, index_t n) { fifo::step(c_, from, nullptr, &dst, peers{}, n, false); }
  __device__ void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) {
    fifo::step(c_, from, &src, nullptr, to, n, false);
  }
  __device__ void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    fifo::step(c_, from, &src, &dst, peers{}, n, fin);
  }
  __device__ void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    fifo::step(c_, from, &src, &dst, to, n, fin);
  }
  __device__ void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) {
    fifo::step(c_, from, nullptr, &dst, to, n, false);
  }
  __device__ void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    fifo::step(c_, peers{}, &src, &dst, to, n, fin);
  }
  // No connection: the same body with no peers, whatever the protocol.
  __device__ void copy(buf_ref src, buf_ref dst, index_t n, bool fin = false) {
    simple_fifo<state>::step(c_, peers{}, &src, &dst, peers{}, n, fin);
  }

  // Direct family (load/store transports only).
  __device__ void publish_buffers() requires load_store { direct::publish_buffers(c_); }
  // The launch carries every rank of the world (all on this GPU): peers' buffers are in the
  // launch's parameters (`ranks`, indexed by rank: a GPU's ranks launch in ascending order).
  __device__ void use_launch_buffers(const rank_params<T, Op>* ranks) requires load_store { c_.launch = ranks; }
  __device__ void stage_input(char* window, std::size_t offset, range r) requires load_store {
    direct::stage_input(c_, window, offset, r);
  }
  // The staged first pushed call of an epoch (direct_primitives.cuh, "pushed calls").
  __device__ void clean_push_area(char* window) requires load_store { direct::clean_push_area(c_, window); }
  __device__ void barrier() requires load_store { direct::barrier(c_); }
  __device__ void entry_barrier() requires load_store { direct::entry_barrier(c_); }
  __device__ void exit_barrier() requires load_store { direct::exit_barrier(c_); }
  __device__ void direct_reduce_copy(buf_ref src, buf_ref dst, index_t n, bool fin) requires load_store {
    direct::direct_reduce_copy(c_, src, dst, n, fin);
  }
  __device__ void direct_copy(int from, buf_ref src, buf_ref dst, index_t n) requires load_store {
    direct::direct_copy(c_, from, src, dst, n);
  }

 private:
  state c_;
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
