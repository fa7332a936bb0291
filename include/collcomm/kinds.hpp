// collcomm/kinds.hpp — the kind axis (which collective) and the arguments every schedule sees.
#pragma once

#include <collcomm/config.hpp>

#include <cstddef>
#include <cstdint>
#include <concepts>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

using index_t = std::size_t;  // element counts and offsets

namespace kind {
// `reduces`: the kind combines contributions with an op (else the op is op::none).
// `rooted`:  the kind takes a root rank.
// Buffer sizes in elements, with count as the user passes it and n ranks:
//   kind            input            output           in place when
//   all_reduce      count            count            in == out
//   reduce_scatter  n*count          count            out == in + rank*count
//   all_gather      count            n*count          in == out + rank*count
//   broadcast       count (root)     count            in == out
//   reduce          count            count (root)     in == out
//   all_to_all      n*count          n*count          never (overlap is an error)
//   gather          count            n*count (root)   in == out + root*count at the root
//   scatter         n*count (root)   count            out == in + root*count at the root
//   send_recv       count (to peer)  count (from peer) never
struct all_reduce {
  static constexpr const char* name = "all_reduce";
  static constexpr bool reduces = true;
  static constexpr bool rooted = false;
};
struct reduce_scatter {
  static constexpr const char* name = "reduce_scatter";
  static constexpr bool reduces = true;
  static constexpr bool rooted = false;
};
struct all_gather {
  static constexpr const char* name = "all_gather";
  static constexpr bool reduces = false;
  static constexpr bool rooted = false;
};
struct broadcast {
  static constexpr const char* name = "broadcast";
  static constexpr bool reduces = false;
  static constexpr bool rooted = true;
};
struct reduce {
  static constexpr const char* name = "reduce";
  static constexpr bool reduces = true;
  static constexpr bool rooted = true;
};
struct all_to_all {
  static constexpr const char* name = "all_to_all";
  static constexpr bool reduces = false;
  static constexpr bool rooted = false;
};
struct gather {
  static constexpr const char* name = "gather";
  static constexpr bool reduces = false;
  static constexpr bool rooted = true;
};
struct scatter {
  static constexpr const char* name = "scatter";
  static constexpr bool reduces = false;
  static constexpr bool rooted = true;
};
struct send_recv {
  static constexpr const char* name = "send_recv";
  static constexpr bool reduces = false;
  static constexpr bool rooted = false;
};
}  // namespace kind

template <class K>
concept collective_kind = requires {
  { K::name } -> std::convertible_to<const char*>;
  { K::reduces } -> std::convertible_to<bool>;
  { K::rooted } -> std::convertible_to<bool>;
};

inline constexpr int no_peer = -1;

struct topology;  // topology.hpp: which host each rank sits on

// What one rank's schedule is asked to do, on one channel. Trivially copyable: it travels to the
// GPU by value. `count` has the meaning of the kind's table above.
struct coll_args {
  int rank = 0;
  int nranks = 1;
  index_t count = 0;
  int root = 0;             // rooted kinds
  int send_peer = no_peer;  // send_recv: where this rank's input goes (no_peer: sends nothing)
  int recv_peer = no_peer;  // send_recv: where this rank's output comes from (no_peer: nothing)
  int channel = 0;          // this channel, 0 <= channel < nchannels
  int nchannels = 1;        // channels run independently, each on its own connections
  const topology* topo = nullptr;  // the ranks' hosts (algo::hierarchical reads it); null: one host
};

// Elements of each rank's input and output buffer for a kind (root-only buffers count at every
// rank here; the host API checks them only where they are significant).
template <class K>
constexpr index_t input_elems(const coll_args& a) noexcept {
  const index_t n = static_cast<index_t>(a.nranks);
  if constexpr (requires {
                  requires std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_to_all> ||
                      std::is_same_v<K, kind::scatter>;
                })
    return n * a.count;
  else
    return a.count;
}
template <class K>
constexpr index_t output_elems(const coll_args& a) noexcept {
  const index_t n = static_cast<index_t>(a.nranks);
  if constexpr (requires {
                  requires std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::all_to_all> ||
                      std::is_same_v<K, kind::gather>;
                })
    return n * a.count;
  else
    return a.count;
}

COLLCOMM_NAMESPACE_END
