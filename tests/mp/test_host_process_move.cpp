// The kinds that move data without reducing (all_gather, broadcast, all_to_all, gather, scatter,
// send_recv) x every algorithm on the host executor with ranks as forked processes: see
// test_host_matrix.hpp for what is run and checked.
#include "test_host_matrix.hpp"

using namespace collcomm_test;

TEST_CASE("host processes: moving kinds x every algorithm, random data, in and out of place") {
  using elements = type_list<float, std::int8_t, double>;
  mp::run_jobs<mp::pick_moving, elements, type_list<>>({1, 2, 4, 7, 8});
}
