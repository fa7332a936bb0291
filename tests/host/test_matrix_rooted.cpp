// Host correctness matrix: broadcast and reduce, the rooted kinds of the ring family (see
// matrix_driver.hpp for what is run and checked; the root changes from call to call).
#include "matrix_driver.hpp"

TEST_CASE("host matrix broadcast") { collcomm_test::host_matrix::run_kind<collcomm::kind::broadcast>(); }
TEST_CASE("host matrix reduce") { collcomm_test::host_matrix::run_kind<collcomm::kind::reduce>(); }
