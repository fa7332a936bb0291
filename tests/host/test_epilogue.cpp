// A user epilogue fused into the collective: applied once to each fully reduced element, before
// its store, on every rank and every reducing schedule (label host).
#include <collcomm/host.hpp>
#include <common/matrix.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace collcomm;

namespace {
struct scale_bias {
  double scale, bias;
  template <class A>
  A operator()(A x) const {
    return static_cast<A>(x * static_cast<A>(scale) + static_cast<A>(bias));
  }
};
}  // namespace

TEST_CASE("all_reduce and reduce_scatter with a scale-and-bias epilogue, every schedule") {
  const unsigned seed = std::random_device{}();
  INFO("seed=", seed);
  std::mt19937 g(seed);
  for (int n : {1, 3, 4, 7}) {
    host::options o;
    o.slot_bytes = 256;
    host::world w(n, o);
    const index_t count = 1000 + static_cast<index_t>(g() % 100);
    std::vector<std::vector<double>> x(n, std::vector<double>(n * count));
    for (auto& v : x)
      for (auto& e : v) e = std::uniform_real_distribution<double>(-1, 1)(g);
    const op::with_epilogue eop{op::avg{}, scale_bias{0.5, 3.0}};
    collcomm_test::for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
      if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::reduce_scatter>) {
        INFO(std::string(K::name), " ", std::string(A::name), " n=", n, " count=", count);
        std::vector<std::vector<double>> out(n, std::vector<double>(count, std::nan("")));
        host::run_ranks(w, [&](communicator<transport::host_shm>& comm) {
          const int r = comm.rank();
          if constexpr (std::is_same_v<K, kind::all_reduce>)
            all_reduce<A>(comm, x[r].data(), out[r].data(), count, eop);
          else
            reduce_scatter<A>(comm, x[r].data(), out[r].data(), count, eop);
        });
        long wrong = 0;
        std::string first;
        for (int r = 0; r < n; ++r)
          for (index_t i = 0; i < count; ++i) {
            const index_t src = std::is_same_v<K, kind::reduce_scatter> ? r * count + i : i;
            double sum = 0;
            for (int q = 0; q < n; ++q) sum += x[q][src];
            const double want = sum / n * 0.5 + 3.0;
            if (!(std::abs(out[r][i] - want) <= 1e-12 * n)) {
              if (wrong++ == 0)
                first = "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
                        std::to_string(out[r][i]) + " expected " + std::to_string(want);
            }
          }
        INFO(first);
        CHECK_EQ(wrong, 0);
      }
    });
  }
}
