// collcomm/compose.hpp — where the axes meet: one concept per axis, the `valid_composition`
// predicate tests and the bench prune their lists with, and `check_composition`, whose
// static_asserts name the axis that is wrong and the fix.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/transport/tags.hpp>
#include <collcomm/types.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

namespace algo {
template <class Intra, class Inter>
struct hierarchical;  // algo/hierarchical.hpp
template <class Table>
struct automatic;  // algo/automatic.hpp
}  // namespace algo

// Whether A is algo::automatic<...>: an algorithm chosen per call from a table, whose arms are
// checked as they are chosen (algo/automatic.hpp).
template <class A>
inline constexpr bool is_automatic = false;
template <class Table>
inline constexpr bool is_automatic<algo::automatic<Table>> = true;

namespace detail {
// Stands for any executor's primitives when asking "does this algorithm have a schedule for this
// kind?". Declared only: never called.
struct archetype_primitives {
  index_t slot_elems() const;
  index_t align_elems() const;
  void send(peers, buf_ref, index_t);
  void recv(peers, buf_ref, index_t);
  void recv_reduce_send(peers, buf_ref, peers, index_t);
  void recv_reduce_copy(peers, buf_ref, buf_ref, index_t, bool);
  void recv_reduce_copy_send(peers, buf_ref, buf_ref, peers, index_t, bool);
  void recv_copy_send(peers, buf_ref, peers, index_t);
  void copy_send(buf_ref, buf_ref, peers, index_t, bool = false);
  void copy(buf_ref, buf_ref, index_t, bool = false);
  void barrier();
  void direct_reduce_copy(buf_ref, buf_ref, index_t, bool);
  void direct_copy(int, buf_ref, buf_ref, index_t);
};

// Whether A is a hierarchical<Intra, Inter>, and its parts.
template <class A>
struct hierarchical_parts {
  static constexpr bool is = false;
};
template <class Intra, class Inter>
struct hierarchical_parts<algo::hierarchical<Intra, Inter>> {
  static constexpr bool is = true;
  static constexpr bool fifo = !Intra::needs_direct && !Inter::needs_direct;
};
}  // namespace detail

// Whether an algorithm's schedules may run in place: an algorithm that cannot says
// `static constexpr bool in_place_safe = false;` (one_shot: every rank reads every peer's input
// while it writes its own output), and the API refuses in-place calls with it (algo::automatic passes it over for them).
template <class Algo>
inline constexpr bool supports_in_place = [] {
  if constexpr (requires { Algo::in_place_safe; })
    return static_cast<bool>(Algo::in_place_safe);
  else
    return true;
}();

// The algorithm axis: A has a schedule for kind K.
template <class A, class K>
concept algorithm_for = collective_kind<K> && requires(detail::archetype_primitives& p, const coll_args& a) {
  { A::name } -> std::convertible_to<const char*>;
  { A::needs_direct } -> std::convertible_to<bool>;
  A::run(K{}, p, a);
};

template <class K, class A, class Tr, class Op, class T>
inline constexpr bool valid_composition = element<T>&& collective_kind<K>&& algorithm_for<A, K>&& transport_tag<Tr> &&
                                          (!A::needs_direct || Tr::load_store) && reduction_op<Op, T> &&
                                          (!op_integer_only<Op> || is_integer_element<T>);

// Fails to compile, with a message naming the axis and the fix, when the composition cannot work.
// Checked in order, so the first message is about the first wrong axis.
template <class K, class A, class Tr, class Op, class T>
constexpr void check_composition() {
  static_assert(element<T>,
                "collcomm element axis: T is not an element type. Use one of f32 f64 f16 bf16 e4m3 e5m2 "
                "(float, double, __half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2) or i8 u8 i32 u32 i64 u64.");
  static_assert(collective_kind<K>, "collcomm kind axis: K is not a collective kind; use a tag from collcomm::kind.");
  static_assert(transport_tag<Tr>, "collcomm transport axis: not a transport tag; use one from collcomm::transport.");
  if constexpr (element<T> && collective_kind<K> && transport_tag<Tr>) {
    if constexpr (is_automatic<A>) {
      // Each arm is a valid composition by construction (algo/automatic.hpp): only the op axis.
    } else if constexpr (detail::hierarchical_parts<A>::is) {
      static_assert(
          detail::hierarchical_parts<A>::fifo,
          "collcomm algorithm axis: hierarchical<Intra, Inter> runs Intra and Inter on subgroups of ranks, "
          "with FIFO primitives only; Intra or Inter is a direct algorithm (one_shot, two_shot, direct), whose "
          "barrier and reductions span every rank of the communicator. Use ring or tree for both.");
      static_assert(!detail::hierarchical_parts<A>::fifo || algorithm_for<A, K>,
                    "collcomm algorithm axis: hierarchical<Intra, Inter> has no schedule for this kind with these "
                    "parts: all_reduce needs Intra reduce and broadcast and Inter all_reduce; reduce_scatter needs "
                    "Inter reduce_scatter; all_gather needs Inter all_gather and Intra broadcast; broadcast needs "
                    "both broadcasts (hierarchical<ring, ring> serves all four).");
    }
    static_assert(is_automatic<A> || algorithm_for<A, K>,
                  "collcomm algorithm axis: this algorithm has no schedule for this collective kind. "
                  "Pick one that has (ring serves all_reduce, reduce_scatter, all_gather, broadcast, reduce; "
                  "pairwise serves all_to_all; see the table in README.md).");
    if constexpr (algorithm_for<A, K>) {
      static_assert(!A::needs_direct || Tr::load_store,
                    "collcomm transport axis: this algorithm loads and stores peers' buffers (direct "
                    "primitives), and this transport carries messages only. Use ring or tree over it, or a "
                    "load/store transport (nvlink, pcie, host_shm).");
    }
    static_assert(reduction_op<Op, T>,
                  "collcomm op axis: the op cannot combine two values of this element's accumulation type: it "
                  "needs `A operator()(A, A) const` and must be trivially copyable.");
    static_assert(!op_integer_only<Op> || is_integer_element<T>,
                  "collcomm op axis: bit_and, bit_or and bit_xor need an integer element (i8 u8 i32 u32 i64 "
                  "u64). For floating-point data use sum, prod, min, max, avg or premul_sum.");
  }
}

COLLCOMM_NAMESPACE_END
