// tests/common/matrix.hpp — the lists of compositions the tests run. Headers never instantiate;
// the tests own these lists, pruned by the same predicates the library's static_asserts use.
#pragma once

#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/compose.hpp>

#include <cstdint>
#include <type_traits>

namespace collcomm_test {

template <class... Ts>
struct type_list {
  static constexpr int size = sizeof...(Ts);
};

// Calls f(std::type_identity<T>{}) for each T of the list.
template <class... Ts, class F>
constexpr void for_each_type(type_list<Ts...>, F&& f) {
  (f(std::type_identity<Ts>{}), ...);
}

using all_elements = type_list<float, double, __half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2, std::int8_t,
                               std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;

using all_kinds = type_list<collcomm::kind::all_reduce, collcomm::kind::reduce_scatter, collcomm::kind::all_gather,
                            collcomm::kind::broadcast, collcomm::kind::reduce, collcomm::kind::all_to_all,
                            collcomm::kind::gather, collcomm::kind::scatter, collcomm::kind::send_recv>;

// Every algorithm collcomm has. Add each new one here: the symbolic and host tests pick up every
// (kind, algorithm) pair for which algorithm_for holds.
using all_algorithms = type_list<collcomm::algo::ring, collcomm::algo::tree, collcomm::algo::recursive_doubling,
                                 collcomm::algo::one_shot, collcomm::algo::two_shot, collcomm::algo::direct,
                                 collcomm::algo::pairwise, collcomm::algo::linear, collcomm::algo::p2p>;

// The algorithms of ranks on several hosts: every one, and hierarchical compositions (which need
// a topology: without one they run as their intra-host part).
using host_spanning_algorithms =
    type_list<collcomm::algo::ring, collcomm::algo::tree, collcomm::algo::recursive_doubling, collcomm::algo::pairwise,
              collcomm::algo::linear, collcomm::algo::p2p,
              collcomm::algo::hierarchical<collcomm::algo::ring, collcomm::algo::ring>,
              collcomm::algo::hierarchical<collcomm::algo::tree, collcomm::algo::ring>>;

// Calls f(type_identity<K>{}, type_identity<A>{}) for every kind K and algorithm A (of Algos) with a schedule.
template <class Algos = all_algorithms, class F>
constexpr void for_each_schedule(F&& f) {
  for_each_type(all_kinds{}, [&]<class K>(std::type_identity<K> k) {
    for_each_type(Algos{}, [&]<class A>(std::type_identity<A> a) {
      if constexpr (collcomm::algorithm_for<A, K>) f(k, a);
    });
  });
}

}  // namespace collcomm_test
