// symbolic_report — bytes each rank moves, per algorithm x kind, as a fraction of the buffer
// (the buffer being the larger of a rank's input and output: count, or N*count for
// reduce_scatter, all_gather, all_to_all, gather, scatter), for N = 2, 3, 4, 8, 16, 64 and a
// buffer of 1 Mi elements counted with sizeof 1. Counted from the traces of the symbolic
// executor with 2 channels, 128 Ki-element slots and 16-element alignment (a GPU-like tuning).
//
// Columns: max and mean FIFO bytes sent per rank, max and mean bytes read from peers (direct
// family), and the model of bytes_model.hpp where there is one.
//
// Then, for ranks on several hosts (H hosts x L ranks, contiguous or dealt round robin): the
// elements each rank sends to other hosts, flat ring against hierarchical<ring,ring>.
#include "bytes_model.hpp"
#include "sweep.hpp"

#include <collcomm/algo/hierarchical.hpp>
#include <common/matrix.hpp>

#include <cstdio>
#include <string>

using namespace collcomm_symbolic;

int main() {
  std::printf("%-20s %-15s %4s %9s %9s %9s %9s  %s\n", "algorithm", "kind", "N", "max_sent", "mean_sent", "max_peer",
              "mean_peer", "model");
  collcomm_test::for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    for (int n : {2, 3, 4, 8, 16, 64}) {
      config c;
      c.nranks = n;
      const index_t total = index_t{1} << 20;
      c.count = n_times_count_kind<K>() ? total / static_cast<index_t>(n) : total;
      c.channels = 2;
      c.slot_elems = index_t{1} << 17;
      c.align_elems = 16;
      c.root = 0;
      if constexpr (std::is_same_v<K, collcomm::kind::send_recv>) send_recv_pattern(c, 0);
      const report r = measure<K, A>(c);
      const double buf = static_cast<double>(n_times_count_kind<K>() ? c.count * static_cast<index_t>(n) : c.count);
      const bytes_expectation e = expected_bytes(A::name, K::name, c);
      if (!r.ok) {
        std::printf("%-20s %-15s %4d  error: %s\n", A::name, K::name, n, r.message.c_str());
        continue;
      }
      std::printf("%-20s %-15s %4d %9.4f %9.4f %9.4f %9.4f  %s\n", A::name, K::name, n,
                  static_cast<double>(r.max_sent()) / buf, r.mean_sent() / buf,
                  static_cast<double>(r.max_peer_read()) / buf, r.mean_peer_read() / buf,
                  e.known ? e.formula.c_str() : "(no model)");
    }
  });
  std::printf("\nelements sent across hosts per rank, as a fraction of the buffer (1 Mi elements)\n");
  std::printf("%-15s %-12s %-24s %10s %10s %10s %10s  %s\n", "kind", "hosts", "layout", "ring_max", "ring_mean",
              "hier_max", "hier_mean", "model (hierarchical)");
  using hier = collcomm::algo::hierarchical<collcomm::algo::ring, collcomm::algo::ring>;
  auto cross = [&]<class K>(std::type_identity<K>) {
    for (auto [H, L] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{8, 8}})
      for (int placement : {0, 1}) {
        config c;
        c.nranks = H * L;
        for (int r = 0; r < c.nranks; ++r)
          c.host_ids.push_back(static_cast<std::uint64_t>(placement == 0 ? r / L : r % H));
        const index_t total = index_t{1} << 20;
        c.count = n_times_count_kind<K>() ? total / static_cast<index_t>(c.nranks) : total;
        c.channels = 2;
        c.slot_elems = index_t{1} << 14;
        c.align_elems = 16;
        const report f = measure<K, collcomm::algo::ring>(c);
        const report h = measure<K, hier>(c);
        const double buf =
            static_cast<double>(n_times_count_kind<K>() ? c.count * static_cast<index_t>(c.nranks) : c.count);
        const bytes_expectation e = expected_cross_host_bytes(hier::name, K::name, c);
        const std::string hosts = std::to_string(H) + " x " + std::to_string(L);
        std::printf("%-15s %-12s %-24s %10.4f %10.4f %10.4f %10.4f  %s\n", K::name, hosts.c_str(),
                    placement == 0 ? "contiguous" : "round robin", static_cast<double>(f.max_cross_host()) / buf,
                    f.mean_cross_host() / buf, static_cast<double>(h.max_cross_host()) / buf, h.mean_cross_host() / buf,
                    e.formula.c_str());
      }
  };
  cross(std::type_identity<collcomm::kind::all_reduce>{});
  cross(std::type_identity<collcomm::kind::reduce_scatter>{});
  cross(std::type_identity<collcomm::kind::all_gather>{});
  cross(std::type_identity<collcomm::kind::broadcast>{});
  return 0;
}
