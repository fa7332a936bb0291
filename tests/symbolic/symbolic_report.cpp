// symbolic_report — bytes each rank moves, per algorithm x kind, as a fraction of the buffer
// (the buffer being the larger of a rank's input and output: count, or N*count for
// reduce_scatter, all_gather, all_to_all, gather, scatter), for N = 2, 3, 4, 8, 16, 64 and a
// buffer of 1 Mi elements counted with sizeof 1. Counted from the traces of the symbolic
// executor with 2 channels, 128 Ki-element slots and 16-element alignment (a GPU-like tuning).
//
// Columns: max and mean FIFO bytes sent per rank, max and mean bytes read from peers (direct
// family), and the model of bytes_model.hpp where there is one.
#include "bytes_model.hpp"
#include "sweep.hpp"

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
  return 0;
}
