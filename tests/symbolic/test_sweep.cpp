// The symbolic sweep: every (kind, algorithm) pair of tests/common/matrix.hpp through every
// configuration of sweep.hpp. Each kind is its own test case; the N range is split in two so
// that ctest can run the halves in parallel.
#include "sweep.hpp"

#include <common/matrix.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {

using namespace collcomm_symbolic;

template <class K>
void sweep_kind(int n_lo, int n_hi) {
  collcomm_test::for_each_type(collcomm_test::all_algorithms{}, [&]<class A>(std::type_identity<A>) {
    if constexpr (collcomm::algorithm_for<A, K>) {
      int runs = 0, failures = 0;
      for_each_config<K, A>(n_lo, n_hi, [&](const config& c) {
        ++runs;
        const report r = verify<K, A>(c);
        if (!r.ok) {
          ++failures;
          if (failures <= 3) FAIL_CHECK(r.message);
        }
      });
      INFO(std::string(A::name), " ", std::string(K::name), ": ", runs, " configurations, ", failures, " failed");
      CHECK(failures == 0);
      if constexpr (detail::has_in_place<K>() && !detail::in_place_safe<A>()) {
        // Declared unsafe in place (the host API refuses it): say whether the verifier agrees.
        config c;
        c.nranks = 4;
        c.count = 13;
        c.in_place = true;
        const report r = verify<K, A>(c);
        const std::string note = std::string(A::name) + " " + K::name + " declares in_place_safe = false; in place " +
                                 (r.ok ? "it verifies at N=4 count=13 (the flag may be stricter than needed)"
                                       : "the verifier confirms: " + r.message);
        MESSAGE(note);
      }
      const std::string summary = std::string(A::name) + " " + K::name + " N=" + std::to_string(n_lo) + ".." +
                                  std::to_string(n_hi) + ": " + std::to_string(runs) + " configurations verified, " +
                                  std::to_string(failures) + " failed";
      MESSAGE(summary);
    }
  });
}

}  // namespace

#define COLLCOMM_SWEEP(K)                                                              \
  TEST_CASE("symbolic sweep " #K " N=1..32") { sweep_kind<collcomm::kind::K>(1, 32); } \
  TEST_CASE("symbolic sweep " #K " N=33..64") { sweep_kind<collcomm::kind::K>(33, 64); }

COLLCOMM_SWEEP(all_reduce)
COLLCOMM_SWEEP(reduce_scatter)
COLLCOMM_SWEEP(all_gather)
COLLCOMM_SWEEP(broadcast)
COLLCOMM_SWEEP(reduce)
COLLCOMM_SWEEP(all_to_all)
COLLCOMM_SWEEP(gather)
COLLCOMM_SWEEP(scatter)
COLLCOMM_SWEEP(send_recv)
