// collcomm/algo/automatic.hpp — algo::automatic, the default algorithm of the reducing and
// gathering kinds: at each call it picks one arm — an algorithm with its tuning (protocol,
// channels, slot bytes, threads) — from a table of rules, by the call's kind, its bytes and the
// world's shape. Every arm is a static instantiation; the choice is an if-chain over them, made
// on the host before the launch, the same on every rank (the inputs are the same everywhere).
//
//   collcomm::all_reduce(comm, send, recv, count, op::sum{}, stream);          // automatic<>
//   collcomm::all_reduce<collcomm::algo::automatic<my_table>>(comm, ...);      // a user's table
//
// A table is a type list of rules, tried in order; the first rule whose kind is the call's, whose
// condition holds and whose arm can run this call wins:
//
//   using my_table = collcomm::rule_table<
//       //        kind               condition                                  algorithm       tuning
//       collcomm::rule<kind::all_reduce, collcomm::when{.max_bytes = 64 << 10},  algo::one_shot, tuning<protocol::ll>>,
//       collcomm::rule<kind::all_reduce, collcomm::when{.min_ranks = 3},         algo::ring,     tuning<protocol::simple, 16>>>;
//
// The condition (`when`) bounds the call's bytes (count x sizeof(T), count as the user passes it:
// recvcount for reduce_scatter, sendcount for all_gather), the ranks, the ranks per GPU and the
// GPUs (0 for the host executor), the hosts, and whether the ranks are threads or processes. An arm "can run the
// call" when its composition is valid for the call's transport, op and element (compile time), it
// may run in place if the call is in place, and, for a direct algorithm in a world of processes,
// the call fits the staging window (options::window_bytes). An arm's channels and slot bytes are
// upper bounds: the call runs with at most the world's (automatic never refuses what a named
// tuning would). When no rule applies, the kind's classic algorithm runs with the world's options:
// ring (reducing and gathering kinds), pairwise (all_to_all), linear (gather, scatter), p2p.
//
// algo::automatic<> takes the transport's table (collcomm/tables.hpp, written by bench/tune.py
// from measurements). The call's fingerprint names the arm's algorithm, so ranks that chose
// differently (one in place, another not, around a non-in-place arm) are told so rather than
// mixing two schedules. `chosen_arm<...>(facts, count, in_place)` says which arm a call takes; the
// bench prints it.
#pragma once

#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

// What a world tells algo::automatic about itself (each communicator's facts()).
struct world_facts {
  int ranks = 1;
  int ranks_per_gpu = 0;  // ranks on this rank's GPU; 0: the host executor (host buffers)
  int gpus = 0;           // GPUs the ranks are on (0: host buffers)
  int hosts = 1;
  bool processes = false;  // ranks are processes (direct algorithms stage through windows)
  int channels = 1;        // the world's options::channels (resolved)
  std::size_t slot_bytes = 0;
  // Worlds of processes: each rank's staging window; window_sums: the call's input and output
  // share it (host), else each has its own window_bytes (GPU).
  std::size_t window_bytes = 0;
  bool window_sums = false;
};

// Which worlds a rule is for.
enum class world_kind { any, threads, processes };

// A rule's condition. Every bound is inclusive; the defaults admit everything. Structural, so a
// rule takes it as a template argument: when{.max_bytes = 8192, .min_ranks = 4}.
struct when {
  std::uint64_t max_bytes = UINT64_MAX;
  int min_ranks = 1;
  int max_ranks = INT_MAX;
  int min_ranks_per_gpu = 0;
  int max_ranks_per_gpu = INT_MAX;
  int min_gpus = 0;
  int max_gpus = INT_MAX;
  int min_hosts = 1;
  int max_hosts = INT_MAX;
  world_kind world = world_kind::any;

  constexpr bool holds(const world_facts& f, std::uint64_t bytes) const noexcept {
    return bytes <= max_bytes && f.ranks >= min_ranks && f.ranks <= max_ranks && f.ranks_per_gpu >= min_ranks_per_gpu &&
           f.ranks_per_gpu <= max_ranks_per_gpu && f.gpus >= min_gpus && f.gpus <= max_gpus && f.hosts >= min_hosts && f.hosts <= max_hosts &&
           (world == world_kind::any || (world == world_kind::processes) == f.processes);
  }
};

// One row of a table: for kind K, when W holds, run Algo with Tuning.
template <class K, when W, class Algo, class Tuning = tuning<>>
struct rule {
  static_assert(collective_kind<K>, "collcomm rule: K is a collective kind (collcomm::kind::...)");
  static_assert(tuning_like<Tuning>, "collcomm rule: the fourth argument is a tuning<...>");
  using kind = K;
  using algo = Algo;
  using tuning_type = Tuning;
  static constexpr when condition = W;
};

template <class... Rules>
struct rule_table {};

template <class Tr>
struct default_table_for;  // collcomm/tables.hpp

namespace algo {
// The default algorithm: picks an arm from Table per call (above). void: the transport's table.
// (is_automatic<A>: compose.hpp.)
template <class Table = void>
struct automatic {
  static constexpr const char* name = "automatic";
  using table = Table;
};
}  // namespace algo

namespace detail {

// A tuning whose channels and slot bytes are upper bounds (capped_channels, capped_slot_bytes in
// tuning.hpp): how automatic runs an arm.
template <class Tu>
struct capped : Tu {
  static constexpr bool capped_to_world = true;
};

template <class K>
struct classic_algorithm {
  using type = algo::ring;
};
template <>
struct classic_algorithm<kind::all_to_all> {
  using type = algo::pairwise;
};
template <>
struct classic_algorithm<kind::gather> {
  using type = algo::linear;
};
template <>
struct classic_algorithm<kind::scatter> {
  using type = algo::linear;
};
template <>
struct classic_algorithm<kind::send_recv> {
  using type = algo::p2p;
};

template <class Table, class Tr>
struct table_of {
  using type = Table;
};
template <class Tr>
struct table_of<void, Tr> {
  using type = typename default_table_for<Tr>::type;
};

// Whether a direct call whose input and output take in_bytes and out_bytes (at the rank where
// both are largest, out of place: the same answer on every rank) fits a world's staging window.
constexpr bool fits_window(const world_facts& f, std::uint64_t in_bytes, std::uint64_t out_bytes) {
  if (!f.processes) return true;
  if (!f.window_sums) return in_bytes <= f.window_bytes && out_bytes <= f.window_bytes;
  return (in_bytes + 63) / 64 * 64 + out_bytes <= f.window_bytes;
}

// The facts of one call: its bytes (count x sizeof(T)), and the bytes of its input and output at
// the rank where they are largest (the root of a rooted kind), from the kind's buffer table
// (kinds.hpp), so that every rank computes the same.
struct call_bytes {
  std::uint64_t bytes = 0;
  std::uint64_t in = 0, out = 0;
  bool in_place = false;
};
template <class K, class T>
constexpr call_bytes call_bytes_of(std::uint64_t count, int nranks, bool in_place) {
  const std::uint64_t b = count * sizeof(T), n = static_cast<std::uint64_t>(nranks);
  constexpr bool in_many = std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_to_all> ||
                           std::is_same_v<K, kind::scatter>;
  constexpr bool out_many = std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::all_to_all> ||
                            std::is_same_v<K, kind::gather>;
  return call_bytes{b, in_many ? n * b : b, out_many ? n * b : b, in_place};
}

template <class K, class Tr, class Op, class T, class R>
constexpr bool rule_applies(const world_facts& f, const call_bytes& c) {
  using A = typename R::algo;
  if constexpr (!std::is_same_v<typename R::kind, K> || !valid_composition<K, A, Tr, Op, T>) {
    return false;
  } else {
    if (!R::condition.holds(f, c.bytes)) return false;
    if (c.in_place && !supports_in_place<A>) return false;
    if constexpr (A::needs_direct) return fits_window(f, c.in, c.out);
    return true;
  }
}

// Calls go(type_identity<Algo>{}, type_identity<capped<Tuning>>{}) for the first rule of Table
// that applies, else for the kind's classic algorithm with the world's options.
template <class K, class Table, class Tr, class Op, class T, class Go>
decltype(auto) select_arm(const world_facts& f, const call_bytes& c, Go&& go);

template <class K, class Tr, class Op, class T, class Go>
decltype(auto) select_from(const world_facts&, const call_bytes&, Go&& go, rule_table<>) {
  return go(std::type_identity<typename classic_algorithm<K>::type>{}, std::type_identity<capped<tuning<>>>{});
}
template <class K, class Tr, class Op, class T, class Go, class R, class... Rest>
decltype(auto) select_from(const world_facts& f, const call_bytes& c, Go&& go, rule_table<R, Rest...>) {
  if constexpr (std::is_same_v<typename R::kind, K> && valid_composition<K, typename R::algo, Tr, Op, T>) {
    if (rule_applies<K, Tr, Op, T, R>(f, c))
      return go(std::type_identity<typename R::algo>{}, std::type_identity<capped<typename R::tuning_type>>{});
  }
  return select_from<K, Tr, Op, T>(f, c, static_cast<Go&&>(go), rule_table<Rest...>{});
}

template <class K, class Table, class Tr, class Op, class T, class Go>
decltype(auto) select_arm(const world_facts& f, const call_bytes& c, Go&& go) {
  return select_from<K, Tr, Op, T>(f, c, static_cast<Go&&>(go), typename table_of<Table, Tr>::type{});
}

// Calls go(type_identity<Algo>{}, type_identity<capped<Tuning>>{}) for every arm Table has for
// kind K over Tr with Op and T, and for the classic algorithm: gpu::preload loads them all.
template <class K, class Table, class Tr, class Op, class T, class Go>
void for_each_arm(Go&& go) {
  [&]<class... R>(rule_table<R...>) {
    (
        [&] {
          if constexpr (std::is_same_v<typename R::kind, K> && valid_composition<K, typename R::algo, Tr, Op, T>)
            go(std::type_identity<typename R::algo>{}, std::type_identity<capped<typename R::tuning_type>>{});
        }(),
        ...);
  }(typename table_of<Table, Tr>::type{});
  go(std::type_identity<typename classic_algorithm<K>::type>{}, std::type_identity<capped<tuning<>>>{});
}

// An arm's tuning as text: its protocol, and the channels, slot bytes and threads it names, the
// first two as the call runs them on a world with facts f (at most the world's).
template <class Tu>
std::string tuning_text(const world_facts& f) {
  std::string s = Tu::protocol::name;
  if (Tu::channels) s += ", channels " + std::to_string(tuned_channels<Tu>(f.channels));
  if (Tu::slot_bytes) s += ", slot_bytes " + std::to_string(tuned_slot_bytes<Tu>(f.slot_bytes));
  if (Tu::threads != 512) s += ", threads " + std::to_string(Tu::threads);
  return s;
}

}  // namespace detail

// The arm algo::automatic<Table> takes for a call of kind K over Tr with op Op and element T of
// `count` elements (count as the user passes it) on a world with facts f, as
// "one_shot (ll, channels 1)": what the bench prints. Channels and slot bytes where the arm names
// them, as the call runs them (at most the world's).
template <class K, class Table, class Tr, class Op, class T>
std::string chosen_arm(const world_facts& f, std::uint64_t count, bool in_place = false) {
  return detail::select_arm<K, Table, Tr, Op, T>(
      f, detail::call_bytes_of<K, T>(count, f.ranks, in_place),
      [&f]<class A, class Tu>(std::type_identity<A>, std::type_identity<Tu>) {
        return std::string(A::name) + " (" + detail::tuning_text<Tu>(f) + ")";
      });
}

COLLCOMM_NAMESPACE_END
