// collcomm/protocol.hpp — the protocol axis as tags, and `with_protocol`, the algorithm wrapper
// that carries a protocol through the host API.
//
// A protocol says how the GPU executor moves FIFO messages (DESIGN.md, "The GPU data path"):
//   simple — bulk data in the slot, then a fence and the tail counter; ~100 % payload.
//   ll     — 16-byte lines of (4 B data, 4 B flag, 4 B data, 4 B flag), each half written and read
//            as one 8-byte access, the flag being the message number: no fence, no tail to wait
//            for, the lowest latency; 50 % payload (kernels/ll_fifo.cuh).
// It is a compile-time choice: the kernel's primitives class is picked by it (collective_kernel.cuh),
// and there is no run-time dispatch over protocols. Only the GPU executor reads it; the host and
// symbolic executors run the wrapped algorithm's schedules unchanged (the schedules are the same
// for every protocol; they slice by the primitives' slot_elems()).
//
// Two spellings reach the same kernel's code:
//   collcomm::all_reduce<collcomm::with_protocol<collcomm::algo::ring, collcomm::protocol::ll>>(comm, ...)
//   collcomm::gpu::launch<K, algo::ring, collcomm::kernels::tuning<512, collcomm::protocol::ll>>(world, ...)
// Why a wrapper and not a tuning argument on the host API: every collective function already takes
// the algorithm as its one explicit template argument, so wrapping it carries the protocol through
// all of them (and through communicator<Transport>::run, gpu::preload and the launch group's
// "same composition" check) without a new overload anywhere; the wrapped type is itself an
// algorithm, so check_composition, supports_in_place and the symbolic model take it as is.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/config.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace protocol {

struct simple { static constexpr const char* name = "simple"; };
struct ll { static constexpr const char* name = "ll"; };

}  // namespace protocol

template <class P>
concept protocol_tag = std::same_as<P, protocol::simple> || std::same_as<P, protocol::ll>;

namespace detail {
constexpr std::size_t cstr_len(const char* s) noexcept {
  std::size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}
// "<algorithm>/<protocol>" as a constant (the name benches and error messages print).
template <class Algo, class P>
struct protocol_name {
  static constexpr std::size_t a = cstr_len(Algo::name), p = cstr_len(P::name);
  struct text {
    char c[a + p + 2];
  };
  static constexpr text value = [] {
    text t{};
    for (std::size_t i = 0; i < a; ++i) t.c[i] = Algo::name[i];
    t.c[a] = '/';
    for (std::size_t i = 0; i < p; ++i) t.c[a + 1 + i] = P::name[i];
    t.c[a + p + 1] = '\0';
    return t;
  }();
};
}  // namespace detail

// Whether A is a with_protocol wrapper.
template <class A>
inline constexpr bool is_with_protocol = requires {
  typename A::wrapped_algorithm;
  typename A::protocol;
};

// Algorithm Algo run with protocol Protocol (GPU executor); elsewhere exactly Algo.
template <class Algo, class Protocol>
struct with_protocol {
  static_assert(protocol_tag<Protocol>, "collcomm protocol axis: use collcomm::protocol::simple or collcomm::protocol::ll.");
  static_assert(!is_with_protocol<Algo>, "collcomm protocol axis: with_protocol of a with_protocol; wrap the algorithm once.");
  using wrapped_algorithm = Algo;
  using protocol = Protocol;
  static constexpr const char* name = detail::protocol_name<Algo, Protocol>::value.c;
  static constexpr bool needs_direct = Algo::needs_direct;
  static constexpr bool in_place_safe = [] {
    if constexpr (requires { Algo::in_place_safe; }) return static_cast<bool>(Algo::in_place_safe);
    else return true;
  }();

  // Exactly the kinds Algo has a schedule for (algorithm_for<with_protocol<A, P>, K> == algorithm_for<A, K>).
  template <class K, class P>
    requires requires(P& p, const coll_args& a) { Algo::run(K{}, p, a); }
  COLLCOMM_HD static void run(K k, P& p, const coll_args& a) {
    Algo::run(k, p, a);
  }
};

// The algorithm a composition runs, and its protocol (Default where it names none).
template <class A>
using algorithm_of = typename std::conditional_t<is_with_protocol<A>, A, with_protocol<A, protocol::simple>>::wrapped_algorithm;
template <class A, class Default = protocol::simple>
using protocol_of = typename std::conditional_t<is_with_protocol<A>, A, with_protocol<A, Default>>::protocol;

COLLCOMM_NAMESPACE_END
