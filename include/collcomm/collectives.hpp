// collcomm/collectives.hpp — the host API: one function per collective kind (blocking on the host
// executor, stream-ordered and asynchronous on the GPU executor).
//
// Each function is a template over the algorithm (first template argument; by default
// algo::automatic<>, which picks an algorithm and tuning per call: algo/automatic.hpp), the
// tuning (second: protocol, channels, slot bytes, threads; tuning<> by default, tuning.hpp), the
// transport (from the communicator), the element type (from the pointers) and the op (from the
// argument). It checks the composition at compile time (check_composition: a static_assert that
// names the wrong axis and the fix), checks its arguments on this rank, then runs the schedule on
// this rank through communicator<Tr>::run. Every rank of the communicator calls the same
// collectives in the same order with the same count, root, op and element type.
//
// Buffers (elements; n = comm.size(); see the table in kinds.hpp):
//   all_reduce      send count          recv count           in place: send == recv
//   reduce_scatter  send n*recvcount    recv recvcount       in place: recv == send + rank*recvcount
//   all_gather      send sendcount      recv n*sendcount     in place: send == recv + rank*sendcount
//   broadcast       send count (root)   recv count           in place: send == recv (root)
//   reduce          send count          recv count (root)    in place: send == recv (root)
//   all_to_all      send n*count        recv n*count         never in place
//   gather          send count          recv n*count (root)  in place: send == recv + root*count (root)
//   scatter         send n*count (root) recv count           in place: recv == send + root*count (root)
//   send_recv       send count          recv count           never in place; either peer may be no_peer
// Arguments, in every function: buffers, count, then op, then root or peers (as NCCL), then the
// GPU executor's stream.
// A buffer marked (root) is ignored, and may be null, on the other ranks; so is send_recv's send
// when send_peer == no_peer, and its recv when recv_peer == no_peer. An algorithm that cannot run
// in place (supports_in_place<Algo> is false: one_shot) refuses in-place calls.
//
// Bad input throws collcomm::error(errc::invalid_argument) whose message names the argument and
// the rank, before any data moves (the output is untouched): a null or misaligned buffer that is
// significant and non-empty; count * sizeof(T) (or n * count * sizeof(T)) past PTRDIFF_MAX; root
// or a peer out of range; send and recv overlapping other than in the in-place position. Only the
// rank that passed it throws, and for that rank the call did not happen: its peers wait for it,
// and fail with errc::timeout when their waits run out (host executor) unless it makes the call
// again with good arguments.
//
// The GPU executor's communicators (gpu/communicator.hpp) take one more, last argument: the
// cudaStream_t the call is ordered on, or any type that converts to one (a framework's stream
// wrapper); forgetting it is a static_assert that says so:
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::sum{}, stream);
//
// Example (host executor):
//   collcomm::host::world w(4);
//   collcomm::host::run_ranks(w, [&](collcomm::communicator<collcomm::transport::host_shm>& comm) {
//     collcomm::all_reduce(comm, send[comm.rank()], recv[comm.rank()], count);              // automatic, sum
//     collcomm::all_reduce<collcomm::algo::tree>(comm, buf, buf, count, collcomm::op::max{}); // in place
//   });
// Example (GPU executor, the low-latency protocol on 8 channels):
//   collcomm::all_reduce<collcomm::algo::ring, collcomm::tuning<collcomm::protocol::ll, 8>>(comm, send, recv, count,
//                                                                                          collcomm::op::sum{}, stream);
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/communicator.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/group.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/tables.hpp>
#include <collcomm/tuning.hpp>
#include <collcomm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

COLLCOMM_NAMESPACE_BEGIN

namespace detail {

inline std::string address_text(const void* p) {
  static constexpr char digits[] = "0123456789abcdef";
  auto v = reinterpret_cast<std::uintptr_t>(p);
  std::string s;
  do {
    s.insert(s.begin(), digits[v % 16]);
    v /= 16;
  } while (v != 0);
  return "0x" + s;
}

// The argument checks of one call on one rank. Each check throws errc::invalid_argument with a
// message naming the argument and the rank ("collcomm: all_gather on rank 2: argument 'recv' ...").
template <class T>
class arg_checker {
 public:
  arg_checker(const char* what, int rank, int nranks) : what_(what), rank_(rank), nranks_(nranks) {}

  [[noreturn]] void bad(const std::string& msg) const { fail(errc::invalid_argument, what_, rank_, msg); }

  // blocks * count elements, checked so that the bytes fit a ptrdiff_t (pointer arithmetic on the
  // buffer is defined).
  index_t elems(const char* count_name, index_t count, int blocks = 1) const {
    const index_t b = static_cast<index_t>(blocks);
    const index_t max_elems = static_cast<index_t>(PTRDIFF_MAX) / sizeof(T);
    if (count > max_elems / b)
      bad("argument '" + std::string(count_name) + "' = " + std::to_string(count) +
          " is too large: " + (blocks > 1 ? std::to_string(blocks) + " ranks * " : std::string()) + count_name +
          " * sizeof(" + element_name<T> + ") exceeds PTRDIFF_MAX bytes");
    return b * count;
  }

  // 0 <= value < nranks.
  void rank_arg(const char* name, int value) const {
    if (value < 0 || value >= nranks_)
      bad("argument '" + std::string(name) + "' = " + std::to_string(value) + " is out of range [0, " +
          std::to_string(nranks_) + ")");
  }

  // A peer: no_peer where allowed, else in range; self only where allowed.
  void peer_arg(const char* name, int value, bool allow_none, bool allow_self) const {
    if (value == no_peer && allow_none) return;
    if (value < 0 || value >= nranks_)
      bad("argument '" + std::string(name) + "' = " + std::to_string(value) + " is out of range [0, " +
          std::to_string(nranks_) + ")" + (allow_none ? " and is not collcomm::no_peer (-1)" : ""));
    if (value == rank_ && !allow_self)
      bad("argument '" + std::string(name) + "' = " + std::to_string(value) +
          " is this rank: a blocking send or receive with oneself cannot complete; use send_recv, or a "
          "collcomm::group");
  }

  // A buffer of `elems` significant elements: when elems > 0 it must be non-null and aligned.
  void buffer(const char* name, const void* p, index_t elems, const char* count_name, index_t count) const {
    if (elems == 0) return;
    if (p == nullptr)
      bad("argument '" + std::string(name) + "' is null while " + count_name + " = " + std::to_string(count) + " > 0");
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
      bad("argument '" + std::string(name) + "' = " + address_text(p) + " is not aligned to alignof(" +
          element_name<T> + ") = " + std::to_string(alignof(T)) + " bytes");
  }

  // send [s, s + s_elems) and recv [r, r + r_elems) must not overlap, except when in_place_allowed
  // and r == s + delta (elements; the in-place position), described by `rule`. Returns whether
  // the call is in place.
  bool overlap(const T* s, index_t s_elems, const T* r, index_t r_elems, bool in_place_allowed, std::ptrdiff_t delta,
               const char* rule) const {
    if (s_elems == 0 || r_elems == 0 || s == nullptr || r == nullptr) return false;
    const auto sa = reinterpret_cast<std::uintptr_t>(s), ra = reinterpret_cast<std::uintptr_t>(r);
    const std::uintptr_t se = sa + s_elems * sizeof(T), re = ra + r_elems * sizeof(T);
    if (!(sa < re && ra < se)) return false;
    if (in_place_allowed && ra == sa + static_cast<std::uintptr_t>(delta) * sizeof(T)) return true;
    const std::string ranges = "'send' = [" + address_text(s) + ", +" + std::to_string(s_elems) +
                               " elements) and 'recv' = [" + address_text(r) + ", +" + std::to_string(r_elems) +
                               " elements)";
    if (in_place_allowed) bad("arguments " + ranges + " overlap, but not in the in-place position (" + rule + ")");
    bad("arguments " + ranges + " overlap; " + what_ + " cannot run in place");
  }

  // An in-place call with an algorithm that cannot run in place (supports_in_place, compose.hpp).
  template <class Algo>
  void in_place_algorithm(bool in_place) const {
    if (in_place && !supports_in_place<Algo>)
      bad(std::string("arguments 'send' and 'recv' are in place, and algorithm ") + Algo::name +
          " cannot run in place (a rank would overwrite its input while its peers still read it); use another "
          "algorithm or separate buffers");
  }

 private:
  const char* what_;
  int rank_;
  int nranks_;
};

// The element offset of block b of `count` elements (checked against overflow before it is used).
constexpr std::ptrdiff_t block(int b, index_t count) noexcept {
  return static_cast<std::ptrdiff_t>(static_cast<index_t>(b) * count);
}

// Whether communicator<Tr>'s calls are ordered on a stream (the GPU executor's: stream_type is
// cudaStream_t) or run to completion on the calling thread (the host executor's).
template <class Tr>
inline constexpr bool takes_stream = requires {
  typename communicator<Tr>::stream_type;
};
// Whether communicator<Tr> also runs calls without a stream, on host buffers (transport::net).
template <class Tr>
inline constexpr bool takes_host_buffers = [] {
  if constexpr (requires { communicator<Tr>::host_buffers; })
    return communicator<Tr>::host_buffers;
  else
    return false;
}();

// `stream`: nothing for the host executor; for the GPU executor exactly one argument, a
// cudaStream_t or anything that converts to one (a framework's stream wrapper), taken by
// reference so that a wrapper need not be copyable.
// `in_place`: whether this rank's call is in place (algo::automatic does not pick an arm that
// cannot run in place for it).
template <class K, class Algo, class Tuning, class Tr, class T, class Op, class... Stream>
void run_checked(communicator<Tr>& comm, const coll_args& a, bool in_place, const T* in, index_t in_elems, T* out,
                 index_t out_elems, const Op& op, Stream&&... stream) {
  static_assert(tuning_like<Tuning>,
                "collcomm: a collective's second template argument is its tuning, e.g. "
                "all_reduce<algo::ring, tuning<protocol::ll>>(...); see collcomm/tuning.hpp");
  if constexpr (is_automatic<Algo>) {
    static_assert(std::is_same_v<Tuning, default_tuning>,
                  "collcomm: algo::automatic picks each call's tuning with its algorithm (collcomm/tables.hpp); "
                  "to give a tuning, name the algorithm too, e.g. all_reduce<algo::ring, tuning<protocol::ll>>");
    const auto run_arm = [&]<class A, class Tu>(std::type_identity<A>, std::type_identity<Tu>) {
      run_checked<K, A, Tu>(comm, a, in_place, in, in_elems, out, out_elems, op, std::forward<Stream>(stream)...);
    };
    if constexpr (requires { comm.preloading(); }) {
      if (comm.preloading()) return for_each_arm<K, typename Algo::table, Tr, Op, T>(run_arm);  // gpu::preload
    }
    select_arm<K, typename Algo::table, Tr, Op, T>(comm.facts(), call_bytes_of<K, T>(a.count, comm.size(), in_place),
                                                   run_arm);
  } else {
    // Where a buffer is not significant its pointer is not passed on: a schedule cannot touch it.
    in = in_elems ? in : nullptr;
    out = out_elems ? out : nullptr;
    if constexpr (takes_stream<Tr> && !(takes_host_buffers<Tr> && sizeof...(Stream) == 0)) {
      using stream_t = typename communicator<Tr>::stream_type;
      static_assert(sizeof...(Stream) == 1,
                    "collcomm: a GPU collective takes the stream it is ordered on as its last argument, e.g. "
                    "all_reduce(comm, send, recv, count, op::sum{}, stream)");
      if constexpr (sizeof...(Stream) == 1) {
        static_assert((std::is_convertible_v<Stream&&, stream_t> && ...),
                      "collcomm: the last argument of a GPU collective must be a cudaStream_t, or convert to one");
        if constexpr ((std::is_convertible_v<Stream&&, stream_t> && ...))
          comm.template run<K, Algo, Tuning>(a, in, in_elems, out, out_elems, op,
                                             static_cast<stream_t>(std::forward<Stream>(stream))...);
      }
    } else {
      static_assert(sizeof...(Stream) == 0,
                    "collcomm: the host executor's collectives run on the calling thread and take no stream argument");
      if constexpr (sizeof...(Stream) == 0) comm.template run<K, Algo, Tuning>(a, in, in_elems, out, out_elems, op);
    }
  }
}

}  // namespace detail

// recv[i] = op over ranks of send[i], for i < count.
template <class Algo = algo::automatic<>, class Tuning = tuning<>, class Tr, class T, class Op = op::sum, class... Stream>
void all_reduce(communicator<Tr>& comm, const T* send, T* recv, index_t count, Op op = {}, Stream&&... stream) {
  check_composition<kind::all_reduce, Algo, Tr, Op, T>();
  const detail::arg_checker<T> c(kind::all_reduce::name, comm.rank(), comm.size());
  const index_t e = c.elems("count", count);
  c.buffer("send", send, e, "count", count);
  c.buffer("recv", recv, e, "count", count);
  const bool in_place = c.overlap(send, e, recv, e, true, 0, "send == recv");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = count;
  detail::run_checked<kind::all_reduce, Algo, Tuning>(comm, a, in_place, send, e, recv, e, op, std::forward<Stream>(stream)...);
}

// recv[i] = op over ranks of send[rank * recvcount + i], for i < recvcount.
template <class Algo = algo::automatic<>, class Tuning = tuning<>, class Tr, class T, class Op = op::sum, class... Stream>
void reduce_scatter(communicator<Tr>& comm, const T* send, T* recv, index_t recvcount, Op op = {}, Stream&&... stream) {
  check_composition<kind::reduce_scatter, Algo, Tr, Op, T>();
  const int r = comm.rank(), n = comm.size();
  const detail::arg_checker<T> c(kind::reduce_scatter::name, r, n);
  const index_t in_e = c.elems("recvcount", recvcount, n), out_e = c.elems("recvcount", recvcount);
  c.buffer("send", send, in_e, "recvcount", recvcount);
  c.buffer("recv", recv, out_e, "recvcount", recvcount);
  const bool in_place =
      c.overlap(send, in_e, recv, out_e, true, detail::block(r, recvcount), "recv == send + rank * recvcount");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = recvcount;
  detail::run_checked<kind::reduce_scatter, Algo, Tuning>(comm, a, in_place, send, in_e, recv, out_e, op,
                                                          std::forward<Stream>(stream)...);
}

// recv[q * sendcount + i] = rank q's send[i].
template <class Algo = algo::automatic<>, class Tuning = tuning<>, class Tr, class T, class... Stream>
void all_gather(communicator<Tr>& comm, const T* send, T* recv, index_t sendcount, Stream&&... stream) {
  check_composition<kind::all_gather, Algo, Tr, op::none, T>();
  const int r = comm.rank(), n = comm.size();
  const detail::arg_checker<T> c(kind::all_gather::name, r, n);
  const index_t in_e = c.elems("sendcount", sendcount), out_e = c.elems("sendcount", sendcount, n);
  c.buffer("send", send, in_e, "sendcount", sendcount);
  c.buffer("recv", recv, out_e, "sendcount", sendcount);
  const bool in_place =
      c.overlap(send, in_e, recv, out_e, true, -detail::block(r, sendcount), "send == recv + rank * sendcount");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = sendcount;
  detail::run_checked<kind::all_gather, Algo, Tuning>(comm, a, in_place, send, in_e, recv, out_e, op::none{},
                                                      std::forward<Stream>(stream)...);
}

// recv[i] = root's send[i]. send is significant at the root only.
template <class Algo = algo::automatic<>, class Tuning = tuning<>, class Tr, class T, class... Stream>
void broadcast(communicator<Tr>& comm, const T* send, T* recv, index_t count, int root, Stream&&... stream) {
  check_composition<kind::broadcast, Algo, Tr, op::none, T>();
  const int r = comm.rank();
  const detail::arg_checker<T> c(kind::broadcast::name, r, comm.size());
  const index_t e = c.elems("count", count);
  c.rank_arg("root", root);
  const index_t in_e = r == root ? e : 0;
  c.buffer("send", send, in_e, "count", count);
  c.buffer("recv", recv, e, "count", count);
  const bool in_place = c.overlap(send, in_e, recv, e, true, 0, "send == recv");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = count;
  a.root = root;
  detail::run_checked<kind::broadcast, Algo, Tuning>(comm, a, in_place, send, in_e, recv, e, op::none{},
                                                     std::forward<Stream>(stream)...);
}

// At the root: recv[i] = op over ranks of send[i]. recv is significant at the root only.
template <class Algo = algo::automatic<>, class Tuning = tuning<>, class Tr, class T, class Op, class... Stream>
void reduce(communicator<Tr>& comm, const T* send, T* recv, index_t count, Op op, int root, Stream&&... stream) {
  check_composition<kind::reduce, Algo, Tr, Op, T>();
  const int r = comm.rank();
  const detail::arg_checker<T> c(kind::reduce::name, r, comm.size());
  const index_t e = c.elems("count", count);
  c.rank_arg("root", root);
  const index_t out_e = r == root ? e : 0;
  c.buffer("send", send, e, "count", count);
  c.buffer("recv", recv, out_e, "count", count);
  const bool in_place = c.overlap(send, e, recv, out_e, true, 0, "send == recv");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = count;
  a.root = root;
  detail::run_checked<kind::reduce, Algo, Tuning>(comm, a, in_place, send, e, recv, out_e, op, std::forward<Stream>(stream)...);
}

// recv[q * count + i] = rank q's send[rank * count + i]: block q of send goes to rank q.
template <class Algo = algo::pairwise, class Tuning = tuning<>, class Tr, class T, class... Stream>
void all_to_all(communicator<Tr>& comm, const T* send, T* recv, index_t count, Stream&&... stream) {
  check_composition<kind::all_to_all, Algo, Tr, op::none, T>();
  const detail::arg_checker<T> c(kind::all_to_all::name, comm.rank(), comm.size());
  const index_t e = c.elems("count", count, comm.size());
  c.buffer("send", send, e, "count", count);
  c.buffer("recv", recv, e, "count", count);
  c.overlap(send, e, recv, e, false, 0, "");
  coll_args a;
  a.count = count;
  detail::run_checked<kind::all_to_all, Algo, Tuning>(comm, a, false, send, e, recv, e, op::none{},
                                                      std::forward<Stream>(stream)...);
}

// At the root: recv[q * count + i] = rank q's send[i]. recv is significant at the root only.
template <class Algo = algo::linear, class Tuning = tuning<>, class Tr, class T, class... Stream>
void gather(communicator<Tr>& comm, const T* send, T* recv, index_t count, int root, Stream&&... stream) {
  check_composition<kind::gather, Algo, Tr, op::none, T>();
  const int r = comm.rank();
  const detail::arg_checker<T> c(kind::gather::name, r, comm.size());
  const index_t in_e = c.elems("count", count), all_e = c.elems("count", count, comm.size());
  c.rank_arg("root", root);
  const index_t out_e = r == root ? all_e : 0;
  c.buffer("send", send, in_e, "count", count);
  c.buffer("recv", recv, out_e, "count", count);
  const bool in_place =
      c.overlap(send, in_e, recv, out_e, true, -detail::block(root, count), "send == recv + root * count");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = count;
  a.root = root;
  detail::run_checked<kind::gather, Algo, Tuning>(comm, a, in_place, send, in_e, recv, out_e, op::none{},
                                                  std::forward<Stream>(stream)...);
}

// recv[i] = root's send[rank * count + i]. send is significant at the root only.
template <class Algo = algo::linear, class Tuning = tuning<>, class Tr, class T, class... Stream>
void scatter(communicator<Tr>& comm, const T* send, T* recv, index_t count, int root, Stream&&... stream) {
  check_composition<kind::scatter, Algo, Tr, op::none, T>();
  const int r = comm.rank();
  const detail::arg_checker<T> c(kind::scatter::name, r, comm.size());
  const index_t out_e = c.elems("count", count), all_e = c.elems("count", count, comm.size());
  c.rank_arg("root", root);
  const index_t in_e = r == root ? all_e : 0;
  c.buffer("send", send, in_e, "count", count);
  c.buffer("recv", recv, out_e, "count", count);
  const bool in_place =
      c.overlap(send, in_e, recv, out_e, true, detail::block(root, count), "recv == send + root * count");
  c.template in_place_algorithm<Algo>(in_place);
  coll_args a;
  a.count = count;
  a.root = root;
  detail::run_checked<kind::scatter, Algo, Tuning>(comm, a, in_place, send, in_e, recv, out_e, op::none{},
                                                   std::forward<Stream>(stream)...);
}

// Sends send[0, count) to send_peer and receives recv[0, count) from recv_peer, at once (no
// deadlock when two ranks exchange). Either peer may be no_peer: that side (and its buffer) is
// ignored. A rank may send to itself when it also receives from itself (a copy).
template <class Algo = algo::p2p, class Tuning = tuning<>, class Tr, class T, class... Stream>
void send_recv(communicator<Tr>& comm, const T* send, T* recv, index_t count, int send_peer, int recv_peer,
               Stream&&... stream) {
  check_composition<kind::send_recv, Algo, Tr, op::none, T>();
  const detail::arg_checker<T> c(kind::send_recv::name, comm.rank(), comm.size());
  const index_t e = c.elems("count", count);
  c.peer_arg("send_peer", send_peer, true, true);
  c.peer_arg("recv_peer", recv_peer, true, true);
  // A message to oneself can only be received by oneself, in this same call.
  if ((send_peer == comm.rank()) != (recv_peer == comm.rank()))
    c.bad("arguments 'send_peer' = " + std::to_string(send_peer) + " and 'recv_peer' = " + std::to_string(recv_peer) +
          ": a rank that sends to itself must also receive from itself, in the same call");
  const index_t in_e = send_peer == no_peer ? 0 : e, out_e = recv_peer == no_peer ? 0 : e;
  c.buffer("send", send, in_e, "count", count);
  c.buffer("recv", recv, out_e, "count", count);
  c.overlap(send, in_e, recv, out_e, false, 0, "");
  coll_args a;
  a.count = count;
  a.send_peer = send_peer;
  a.recv_peer = recv_peer;
  detail::run_checked<kind::send_recv, Algo, Tuning>(comm, a, false, send, in_e, recv, out_e, op::none{},
                                                     std::forward<Stream>(stream)...);
}

namespace detail {

// Runs a group's send and recv (either may be null) as one send_recv call (group.hpp).
template <class Algo, class Tuning, class Tr, class T>
void run_deferred(const deferred_p2p* s, const deferred_p2p* r) {
  const deferred_p2p& any = s ? *s : *r;
  auto& comm = *static_cast<communicator<Tr>*>(any.comm);
  const T* in = s ? static_cast<const T*>(s->buf) : nullptr;
  T* out = r ? static_cast<T*>(r->buf) : nullptr;
  const int send_peer = s ? s->peer : no_peer, recv_peer = r ? r->peer : no_peer;
  if constexpr (takes_stream<Tr>) {
    const auto on_stream = [&] {
      send_recv<Algo, Tuning>(comm, in, out, any.count, send_peer, recv_peer,
                              static_cast<typename communicator<Tr>::stream_type>(any.stream));
    };
    if constexpr (takes_host_buffers<Tr>) {
      if (!any.on_stream) return send_recv<Algo, Tuning>(comm, in, out, any.count, send_peer, recv_peer);
    }
    on_stream();
  } else {
    send_recv<Algo, Tuning>(comm, in, out, any.count, send_peer, recv_peer);
  }
}

// Records a send or recv in this thread's group. The stream is converted now, as a call outside a
// group would (run_checked's checks).
template <class Algo, class Tuning, class Tr, class T, class... Stream>
void defer_p2p(communicator<Tr>& comm, bool is_send, const T* buf, index_t count, int peer, Stream&&... stream) {
  deferred_p2p d;
  d.comm = &comm;
  d.key = &composition_tag<Algo, Tuning, Tr, T>;
  d.buf = const_cast<T*>(buf);
  d.count = count;
  d.peer = peer;
  d.rank = comm.rank();
  d.size = comm.size();
  d.is_send = is_send;
  d.run = &run_deferred<Algo, Tuning, Tr, T>;
  if constexpr (takes_stream<Tr> && !(takes_host_buffers<Tr> && sizeof...(Stream) == 0)) {
    using stream_t = typename communicator<Tr>::stream_type;
    static_assert(sizeof...(Stream) == 1,
                  "collcomm: a GPU send or recv takes the stream it is ordered on as its last argument, e.g. "
                  "send(comm, buf, count, peer, stream)");
    static_assert((std::is_convertible_v<Stream&&, stream_t> && ...),
                  "collcomm: the last argument of a GPU send or recv must be a cudaStream_t, or convert to one");
    if constexpr (sizeof...(Stream) == 1 && (std::is_convertible_v<Stream&&, stream_t> && ...))
      ((d.stream = static_cast<void*>(static_cast<stream_t>(std::forward<Stream>(stream)))), ...);
    d.on_stream = true;
  } else {
    static_assert(sizeof...(Stream) == 0,
                  "collcomm: the host executor's collectives run on the calling thread and take no stream argument");
  }
  this_thread_group().calls.push_back(d);
}

}  // namespace detail

// Blocking send of buf[0, count) to `peer` (not this rank); matched by recv on the peer.
template <class Algo = algo::p2p, class Tuning = tuning<>, class Tr, class T, class... Stream>
void send(communicator<Tr>& comm, const T* buf, index_t count, int peer, Stream&&... stream) {
  check_composition<kind::send_recv, Algo, Tr, op::none, T>();
  const detail::arg_checker<T> c("send", comm.rank(), comm.size());
  const index_t e = c.elems("count", count);
  c.peer_arg("peer", peer, false, detail::in_group());
  c.buffer("buf", buf, e, "count", count);
  if (detail::in_group())
    return detail::defer_p2p<Algo, Tuning>(comm, true, buf, count, peer, std::forward<Stream>(stream)...);
  coll_args a;
  a.count = count;
  a.send_peer = peer;
  detail::run_checked<kind::send_recv, Algo, Tuning>(comm, a, false, buf, e, static_cast<T*>(nullptr), 0, op::none{},
                                                     std::forward<Stream>(stream)...);
}

// Blocking receive of buf[0, count) from `peer` (not this rank); matched by send on the peer.
template <class Algo = algo::p2p, class Tuning = tuning<>, class Tr, class T, class... Stream>
void recv(communicator<Tr>& comm, T* buf, index_t count, int peer, Stream&&... stream) {
  check_composition<kind::send_recv, Algo, Tr, op::none, T>();
  const detail::arg_checker<T> c("recv", comm.rank(), comm.size());
  const index_t e = c.elems("count", count);
  c.peer_arg("peer", peer, false, detail::in_group());
  c.buffer("buf", buf, e, "count", count);
  if (detail::in_group())
    return detail::defer_p2p<Algo, Tuning>(comm, false, buf, count, peer, std::forward<Stream>(stream)...);
  coll_args a;
  a.count = count;
  a.recv_peer = peer;
  detail::run_checked<kind::send_recv, Algo, Tuning>(comm, a, false, static_cast<const T*>(nullptr), 0, buf, e, op::none{},
                                                     std::forward<Stream>(stream)...);
}

COLLCOMM_NAMESPACE_END
