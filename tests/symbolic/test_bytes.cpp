// Bytes each rank moves, per (kind, algorithm), against the known optimum (bytes_model.hpp), for
// N = 1..64 and several counts, channels and alignments. Counted from the traces (measure): the
// sweep proves the same traces correct.
#include "bytes_model.hpp"
#include "sweep.hpp"

#include <common/matrix.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {

using namespace collcomm_symbolic;

template <class K>
void bytes_kind() {
  collcomm_test::for_each_type(collcomm_test::all_algorithms{}, [&]<class A>(std::type_identity<A>) {
    if constexpr (collcomm::algorithm_for<A, K>) {
      int checked = 0, failures = 0;
      bool known = true;
      for (int n = 1; n <= 64 && known; ++n)
        for (index_t count : {index_t{1}, static_cast<index_t>(n + 1), index_t{97}, index_t{4099}})
          for (int ch : {1, 3})
            for (index_t align : {index_t{1}, index_t{4}}) {
              config c;
              c.nranks = n;
              c.count = count;
              c.channels = ch;
              c.slot_elems = 64;
              c.align_elems = align;
              c.root = n / 2;
              if constexpr (std::is_same_v<K, collcomm::kind::send_recv>) send_recv_pattern(c, 1);
              const bytes_expectation e = expected_bytes(A::name, K::name, c);
              if (!e.known) {
                known = false;
                break;
              }
              const report r = measure<K, A>(c);
              ++checked;
              const std::string why = r.ok ? check_bytes(e, r) : r.message;
              if (!why.empty()) {
                ++failures;
                const std::string msg = std::string(A::name) + " " + K::name + " N=" + std::to_string(n) +
                                        " count=" + std::to_string(count) + " channels=" + std::to_string(ch) +
                                        " align=" + std::to_string(align) + ": " + why;
                if (failures <= 3) FAIL_CHECK(msg);
              }
            }
      const std::string summary =
          known ? std::string(A::name) + " " + K::name + ": " + std::to_string(checked) + " byte counts checked, " +
                      std::to_string(failures) + " off"
                : std::string("TODO: no byte model for ") + A::name + " " + K::name + " in bytes_model.hpp";
      MESSAGE(summary);
      CHECK(failures == 0);
    }
  });
}

}  // namespace

TEST_CASE_TEMPLATE("symbolic bytes", K, collcomm::kind::all_reduce, collcomm::kind::reduce_scatter,
                   collcomm::kind::all_gather, collcomm::kind::broadcast, collcomm::kind::reduce,
                   collcomm::kind::all_to_all, collcomm::kind::gather, collcomm::kind::scatter,
                   collcomm::kind::send_recv) {
  bytes_kind<K>();
}

// The ring all_reduce figure the issue names, at a size where the rounding slack is negligible:
// 2(N-1)/N of the buffer, within 0.1 %.
TEST_CASE("symbolic bytes: ring all_reduce sends 2(N-1)/N of the buffer") {
  for (int n : {2, 3, 4, 7, 8, 16, 63, 64}) {
    config c;
    c.nranks = n;
    c.count = 1 << 20;
    c.channels = 2;
    c.slot_elems = 1 << 12;
    c.align_elems = 16;
    const report r = measure<collcomm::kind::all_reduce, collcomm::algo::ring>(c);
    const double ideal = 2.0 * (n - 1) / n * static_cast<double>(c.count);
    INFO("N=", n, " max ", r.max_sent(), " ideal ", ideal);
    CHECK(r.ok);
    CHECK(static_cast<double>(r.max_sent()) <= ideal * 1.001);
    CHECK(r.mean_sent() == doctest::Approx(ideal));
  }
}
