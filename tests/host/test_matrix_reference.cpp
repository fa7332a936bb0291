// The matrix's reference checked against itself: reference.hpp's tolerances must hold for every
// reduction order an algorithm may use, and 0 must mean exact. Each floating-point element is
// reduced here in random orders over random binary trees, rounding every partial result to T (as
// messages do) and computing in the accumulation type (as the executors do), from the inputs the
// matrix draws; every result must satisfy the reference. A tolerance that is too tight fails here,
// not as a flaky matrix run.
#include "matrix_driver.hpp"

#include <doctest/doctest.h>

#include <random>
#include <vector>

namespace {

using namespace collcomm_test::host_matrix;

template <class T, class Op>
void simulate(op_id op, long& checked, long& exact) {
  const type_desc t = make_type_desc<T>();
  std::mt19937_64 rng(base_seed() ^ std::hash<std::string>{}(std::string(t.name) + op_id_name(op)));
  for (int n : {1, 2, 3, 5, 8, 16}) {
    for (int trial = 0; trial < 400; ++trial) {
      const std::uint64_t call_seed = rng();
      const double scalar = pick(rng, {0.5, -2, 0.25, 1.5, -0.75, 3});
      const Op o = make_op<Op>(scalar);
      std::vector<value> xs(static_cast<std::size_t>(n));
      std::vector<T> partial(static_cast<std::size_t>(n));
      for (int j = 0; j < n; ++j) {
        unsigned char raw[8];
        reduction_input(t, op, n, call_seed, j, static_cast<collcomm::index_t>(trial), rng, raw);
        xs[static_cast<std::size_t>(j)] = t.decode(raw);
        T x;
        std::memcpy(&x, raw, sizeof(T));
        // Loaded with the op's pre, and rounded to T: the first message of a schedule.
        partial[static_cast<std::size_t>(j)] = collcomm::from_accum<T>(collcomm::apply_pre(o, collcomm::to_accum(x)));
      }
      // A random binary tree: combine two random partials, round to T, until one is left.
      while (partial.size() > 1) {
        const std::size_t a = rng() % partial.size();
        std::size_t b = rng() % (partial.size() - 1);
        if (b >= a) ++b;
        const auto v = o(collcomm::to_accum(partial[a]), collcomm::to_accum(partial[b]));
        partial[std::min(a, b)] = collcomm::from_accum<T>(v);
        partial.erase(partial.begin() + static_cast<std::ptrdiff_t>(std::max(a, b)));
      }
      const T result = collcomm::from_accum<T>(collcomm::apply_post(o, collcomm::to_accum(partial[0]), n));
      const value got = t.decode(&result);
      const expectation e = reduce_reference(t, op, xs.data(), n, scalar);
      ++checked;
      if (e.tol == 0) ++exact;
      if (!satisfies(e, got)) {
        FAIL_CHECK(std::string(t.name) << " " << std::string(op_id_name(op)) << " N=" << n << " scalar=" << scalar
                                       << ": simulated " << show(t, got) << ", reference " << show(t, e) << " (seed "
                                       << base_seed() << ")");
        return;
      }
    }
  }
}

}  // namespace

TEST_CASE("host matrix reference: float tolerances hold for any reduction order") {
  long checked = 0, exact = 0;
  collcomm_test::for_each_type(float_elements{}, [&]<class T>(std::type_identity<T>) {
    simulate<T, collcomm::op::sum>(op_id::sum, checked, exact);
    simulate<T, collcomm::op::avg>(op_id::avg, checked, exact);
    simulate<T, collcomm::op::premul_sum<double>>(op_id::premul_sum, checked, exact);
    simulate<T, collcomm::op::prod>(op_id::prod, checked, exact);
  });
  MESSAGE(checked, " simulated reductions, ", exact, " of them held to tolerance 0; seed ", base_seed());
  CHECK(exact > checked / 2);  // most elements are drawn exact: the fp8 checks mean something
}
