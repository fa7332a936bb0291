// The reducing kinds (all_reduce, reduce_scatter, reduce) x every algorithm on the host executor
// with ranks as forked processes: see test_host_matrix.hpp for what is run and checked.
#include "test_host_matrix.hpp"

using namespace collcomm_test;

TEST_CASE("host processes: reducing kinds x every algorithm, exact reference, in and out of place") {
  using elements = type_list<float, std::int32_t, __nv_bfloat16>;
  using ops = type_list<collcomm::op::sum, collcomm::op::max, collcomm::op::avg>;
  mp::run_jobs<mp::pick_reducing, elements, ops>({2, 3, 5, 8});
}
