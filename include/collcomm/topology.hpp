// collcomm/topology.hpp — which host each rank sits on: `topology`, the trivially copyable view
// that schedules read (coll_args::topo, algo/hierarchical.hpp), and `topology_table`, the host
// object that owns its arrays.
//
// Hosts are numbered by their lowest rank (host 0 holds rank 0, host 1 the lowest rank not on host
// 0, ...); the ranks of a host need not be contiguous in rank order. Within a host, ranks have a
// local index 0..local_size-1 in rank order.
//
//   auto t = topology_table::from_host_ids({7, 7, 3, 3, 3});  // ranks 0,1 on host 0; 2,3,4 on host 1
//   const topology& v = t.view();  // v.host(3) == 1, v.local(3) == 1, v.rank_at(1, 2) == 4
//
// The view points into the table's arrays: it is valid while the table lives (copies and moves of
// the table carry their own view). The host executor reads it where it was made; a GPU schedule
// would need the arrays in memory the device can read (the GPU executor passes no topology: one
// host).
//
// Policy core: includes config and error only, no executor.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN

// A view of one rank layout. Arrays (shapes in brackets):
//   host_of[nranks]       host of each rank
//   local_index[nranks]   index of each rank among its host's ranks, in rank order
//   host_first[nhosts+1]  where each host's ranks start in host_ranks
//   host_ranks[nranks]    ranks grouped by host, ascending within a host
struct topology {
  int nranks = 1;
  int nhosts = 1;
  int max_local = 1;  // the largest local_size(h)
  const int* host_of = nullptr;
  const int* local_index = nullptr;
  const int* host_first = nullptr;
  const int* host_ranks = nullptr;

  COLLCOMM_HD constexpr int host(int r) const noexcept { return host_of[r]; }
  COLLCOMM_HD constexpr int local(int r) const noexcept { return local_index[r]; }
  COLLCOMM_HD constexpr int local_size(int h) const noexcept { return host_first[h + 1] - host_first[h]; }
  COLLCOMM_HD constexpr int rank_at(int h, int i) const noexcept { return host_ranks[host_first[h] + i]; }
  COLLCOMM_HD constexpr int max_local_size() const noexcept { return max_local; }
};

// Owns the arrays of a topology. Host code only.
class topology_table {
 public:
  // Ranks whose ids are equal share a host (ids are any numbers: a hash of the host name, ...).
  // Throws errc::invalid_argument when the vector is empty.
  static topology_table from_host_ids(const std::vector<std::uint64_t>& host_id_per_rank) {
    if (host_id_per_rank.empty())
      detail::fail(errc::invalid_argument, "topology_table::from_host_ids", no_rank,
                   "argument 'host_id_per_rank' is empty; it needs one host id per rank");
    topology_table t;
    const int n = static_cast<int>(host_id_per_rank.size());
    std::vector<std::uint64_t> ids;  // ids[h]: host h's id, hosts in order of their lowest rank
    t.host_of_.assign(static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      const auto it = std::find(ids.begin(), ids.end(), host_id_per_rank[static_cast<size_t>(r)]);
      t.host_of_[static_cast<size_t>(r)] = static_cast<int>(it - ids.begin());
      if (it == ids.end()) ids.push_back(host_id_per_rank[static_cast<size_t>(r)]);
    }
    const int nh = static_cast<int>(ids.size());
    t.host_first_.assign(static_cast<size_t>(nh) + 1, 0);
    for (int r = 0; r < n; ++r) ++t.host_first_[static_cast<size_t>(t.host_of_[static_cast<size_t>(r)]) + 1];
    for (int h = 0; h < nh; ++h) t.host_first_[static_cast<size_t>(h) + 1] += t.host_first_[static_cast<size_t>(h)];
    t.host_ranks_.assign(static_cast<size_t>(n), 0);
    t.local_index_.assign(static_cast<size_t>(n), 0);
    std::vector<int> filled(static_cast<size_t>(nh), 0);
    for (int r = 0; r < n; ++r) {
      const auto h = static_cast<size_t>(t.host_of_[static_cast<size_t>(r)]);
      t.local_index_[static_cast<size_t>(r)] = filled[h];
      t.host_ranks_[static_cast<size_t>(t.host_first_[h] + filled[h]++)] = r;
    }
    t.bind();
    return t;
  }

  // Every rank on one host. Throws errc::invalid_argument when nranks < 1.
  static topology_table flat(int nranks) {
    if (nranks < 1)
      detail::fail(errc::invalid_argument, "topology_table::flat", no_rank,
                   "argument 'nranks' = " + std::to_string(nranks) + " is less than 1");
    return from_host_ids(std::vector<std::uint64_t>(static_cast<size_t>(nranks), 0));
  }

  topology_table(const topology_table& o)
      : host_of_(o.host_of_), local_index_(o.local_index_), host_first_(o.host_first_), host_ranks_(o.host_ranks_) {
    bind();
  }
  topology_table& operator=(const topology_table& o) {
    if (this != &o) {
      host_of_ = o.host_of_;
      local_index_ = o.local_index_;
      host_first_ = o.host_first_;
      host_ranks_ = o.host_ranks_;
      bind();
    }
    return *this;
  }
  // A moved vector keeps its storage, so the moved view stays valid; the source is left empty.
  topology_table(topology_table&& o) noexcept
      : host_of_(std::move(o.host_of_)),
        local_index_(std::move(o.local_index_)),
        host_first_(std::move(o.host_first_)),
        host_ranks_(std::move(o.host_ranks_)) {
    bind();
    o.view_ = topology{0, 0, 0, nullptr, nullptr, nullptr, nullptr};
  }
  topology_table& operator=(topology_table&& o) noexcept {
    host_of_ = std::move(o.host_of_);
    local_index_ = std::move(o.local_index_);
    host_first_ = std::move(o.host_first_);
    host_ranks_ = std::move(o.host_ranks_);
    bind();
    o.view_ = topology{0, 0, 0, nullptr, nullptr, nullptr, nullptr};
    return *this;
  }

  // The view of this table (its address is stable while the table lives and is not assigned to).
  const topology& view() const noexcept { return view_; }
  int nranks() const noexcept { return view_.nranks; }
  int nhosts() const noexcept { return view_.nhosts; }

  // Throws errc::invalid_argument, as `where` on `rank`, naming `what`, when this table is not for
  // `nranks` ranks.
  void check_size(int nranks, const char* where, int rank, const char* what) const {
    if (view_.nranks != nranks)
      detail::fail(errc::invalid_argument, where, rank,
                   std::string("argument '") + what + "' describes " + std::to_string(view_.nranks) +
                       " ranks, but the communicator has " + std::to_string(nranks));
  }

 private:
  topology_table() = default;

  void bind() noexcept {
    view_.nranks = static_cast<int>(host_of_.size());
    view_.nhosts = host_first_.empty() ? 0 : static_cast<int>(host_first_.size()) - 1;
    view_.max_local = 0;
    for (int h = 0; h < view_.nhosts; ++h)
      view_.max_local =
          std::max(view_.max_local, host_first_[static_cast<size_t>(h) + 1] - host_first_[static_cast<size_t>(h)]);
    view_.host_of = host_of_.data();
    view_.local_index = local_index_.data();
    view_.host_first = host_first_.data();
    view_.host_ranks = host_ranks_.data();
  }

  std::vector<int> host_of_, local_index_, host_first_, host_ranks_;
  topology view_;
};

COLLCOMM_NAMESPACE_END
